"""MAX over ranks through torch.distributed, on any backend (gloo, NCCL, HCCL).

One ``all_gather_object`` carries the agreement votes, one ``all_reduce(MAX)``
carries the whole timing vector; barriers align the start of each candidate.
All three run on the given process group (``autotune_pg``) or on WORLD.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kerneltune.core import PluginError, hookimpl


def _distributed() -> Any:
    import torch.distributed as dist

    return dist


class WorldMaxReducer:
    """Slowest rank decides: ``time(config) = max over ranks``."""

    name = "world-max"
    auto_priority = 10

    @classmethod
    def is_available(cls, group: Any = None) -> bool:
        """When torch.distributed is initialised and the group has several ranks."""
        try:
            dist = _distributed()
        except ImportError:
            return False
        return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1

    def __init__(self, group: Any = None) -> None:
        dist = _distributed()
        if not (dist.is_available() and dist.is_initialized()):
            raise PluginError("reducer 'world-max' needs torch.distributed to be initialised first")
        self._dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        if self.rank < 0:
            raise PluginError(
                f"this process (global rank {dist.get_rank()}) is not a member of autotune_pg; "
                "every rank that tunes must be in the group, and only those"
            )
        self.world_size = dist.get_world_size(group)
        self._device = self._reduction_device()

    def _reduction_device(self) -> Any:
        import torch

        backend = str(self._dist.get_backend(self.group)).lower()
        if backend == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        if backend == "hccl":
            return torch.device("npu", torch.npu.current_device())
        return torch.device("cpu")

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in group-rank order."""
        out: list[Any] = [None] * self.world_size
        self._dist.all_gather_object(out, obj, group=self.group)
        return out

    def max(self, values: Sequence[float]) -> list[float]:
        """Element-wise maximum over ranks, in one all-reduce."""
        import torch

        tensor = torch.tensor(list(values), dtype=torch.float64, device=self._device)
        self._dist.all_reduce(tensor, op=self._dist.ReduceOp.MAX, group=self.group)
        return tensor.cpu().tolist()

    def barrier(self) -> None:
        """Wait for every rank of the group."""
        self._dist.barrier(group=self.group)


@hookimpl
def kerneltune_register_reducers(register):
    register(WorldMaxReducer)
