"""The single-process reducer: one rank, nothing to exchange."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, ClassVar

from kerneltune.core import PluginError, hookimpl


class LocalReducer:
    """Rank 0 of a world of one (or of a process group of one)."""

    name: ClassVar[str] = "local"
    auto_priority = 0

    @classmethod
    def is_available(cls, group: Any = None) -> bool:
        """Always: one process can always agree with itself."""
        return True

    def __init__(self, group: Any = None) -> None:
        self.rank = 0
        self.world_size = 1
        # torch.distributed cannot be initialised unless something imported it already.
        dist = sys.modules.get("torch.distributed")
        if dist is not None and not (dist.is_available() and dist.is_initialized()):
            dist = None  # imported, but there is no process group to ask
        self.global_rank = dist.get_rank() if dist is not None else 0
        if group is not None:
            if dist is None:
                raise PluginError("autotune_pg was given but torch.distributed is not initialised")
            self.rank = dist.get_rank(group)
            self.world_size = dist.get_world_size(group)
            if self.world_size > 1:
                raise PluginError(
                    f"reducer 'local' cannot combine timings of the {self.world_size} ranks of "
                    "autotune_pg; select reducer 'world-max' or 'auto'"
                )

    def gather(self, obj: Any) -> list[Any]:
        """``[obj]``."""
        return [obj]

    def max(self, values: Sequence[float]) -> list[float]:
        """The values unchanged."""
        return list(values)

    def gather_vector(self, values: Sequence[float]) -> list[list[float]]:
        """``[values]``."""
        return [list(values)]

    def barrier(self) -> None:
        """Nothing to wait for."""


@hookimpl
def kerneltune_register_reducers(register):
    register(LocalReducer)
