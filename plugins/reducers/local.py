"""The single-process reducer: one rank, nothing to exchange."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kerneltune.core import PluginError, hookimpl


class LocalReducer:
    """Rank 0 of a world of one."""

    name = "local"
    auto_priority = 0
    rank = 0
    world_size = 1

    @classmethod
    def is_available(cls, group: Any = None) -> bool:
        """Always: one process can always agree with itself."""
        return True

    def __init__(self, group: Any = None) -> None:
        if group is not None:
            import torch.distributed as dist

            size = dist.get_world_size(group)
            if size > 1:
                raise PluginError(
                    f"reducer 'local' cannot combine timings of the {size} ranks of autotune_pg; "
                    "select reducer 'world-max' or 'auto'"
                )

    def gather(self, obj: Any) -> list[Any]:
        """``[obj]``."""
        return [obj]

    def max(self, values: Sequence[float]) -> list[float]:
        """The values unchanged."""
        return list(values)

    def barrier(self) -> None:
        """Nothing to wait for."""


@hookimpl
def kerneltune_register_reducers(register):
    register(LocalReducer)
