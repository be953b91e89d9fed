"""MAX over ranks through torch.distributed, on any backend (gloo, NCCL, HCCL).

One ``all_gather_object`` carries the agreement votes, one ``all_gather``
carries every rank's whole timing vector (the engine takes the maximum, and
keeps each rank's times); barriers align the start of each candidate.
``all_reduce(MAX)`` serves what needs the maximum alone (near ties, the
rounds of an adaptive tuning).
All three run on the given process group (``autotune_pg``) or on WORLD, never
on another group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from kerneltune.core import PluginError, hookimpl

# Backends whose all-reduce needs the vector on their device, and the dtype
# they reduce it in: HCCL has no float64 all-reduce on Atlas A2/A3.
_DEVICE_VECTORS = {"nccl": ("cuda", "float64"), "hccl": ("npu", "float32")}


def _distributed() -> Any:
    import torch.distributed as dist

    return dist


def _is_group(dist: Any, group: Any) -> bool:
    # new_group() hands processes outside the group a marker, not a ProcessGroup.
    return group is None or isinstance(group, dist.ProcessGroup) or group is dist.GroupMember.NON_GROUP_MEMBER


class WorldMaxReducer:
    """Slowest rank decides: ``time(config) = max over ranks``."""

    name: ClassVar[str] = "world-max"
    auto_priority = 10
    #: No process group exists before torch.distributed is imported: ``auto`` does not ask.
    auto_requires_import: ClassVar[str] = "torch.distributed"

    @classmethod
    def is_available(cls, group: Any = None) -> bool:
        """When torch.distributed is initialised and ``group`` (default WORLD) has several ranks."""
        try:
            dist = _distributed()
        except ImportError:
            return False
        if not (dist.is_available() and dist.is_initialized()) or not _is_group(dist, group):
            return False
        return dist.get_world_size(group) > 1

    def __init__(self, group: Any = None) -> None:
        dist = _distributed()
        if not (dist.is_available() and dist.is_initialized()):
            raise PluginError(
                "reducer 'world-max' needs torch.distributed to be initialised first "
                "(torch.distributed.init_process_group)"
            )
        if not _is_group(dist, group):
            raise PluginError(
                f"reducer 'world-max' takes a torch.distributed ProcessGroup as autotune_pg (or None for "
                f"WORLD), got {type(group).__name__}"
            )
        self._dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.global_rank = dist.get_rank()

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in group-rank order."""
        out: list[Any] = [None] * self.world_size
        self._dist.all_gather_object(out, obj, group=self.group)
        return out

    def _tensor(self, values: Sequence[float]) -> Any:
        # The vector on the backend's device, in the dtype it can reduce.
        import torch

        backend = str(self._dist.get_backend(self.group)).lower()
        device_type, dtype = _DEVICE_VECTORS.get(backend, ("cpu", "float64"))
        device = (
            torch.device("cpu")
            if device_type == "cpu"
            else torch.device(device_type, getattr(torch, device_type).current_device())
        )
        return torch.tensor(list(values), dtype=getattr(torch, dtype), device=device)

    def max(self, values: Sequence[float]) -> list[float]:
        """Element-wise maximum over ranks, in one all-reduce on the backend's device."""
        tensor = self._tensor(values)
        self._dist.all_reduce(tensor, op=self._dist.ReduceOp.MAX, group=self.group)
        return [float(v) for v in tensor.cpu().tolist()]

    def gather_vector(self, values: Sequence[float]) -> list[list[float]]:
        """Every rank's vector, in group-rank order, in one all-gather on the backend's device."""
        tensor = self._tensor(values)
        rows = [tensor.new_empty(tensor.shape) for _ in range(self.world_size)]
        self._dist.all_gather(rows, tensor, group=self.group)
        return [[float(v) for v in row.cpu().tolist()] for row in rows]

    def barrier(self) -> None:
        """Wait for every rank of the group."""
        self._dist.barrier(group=self.group)


@hookimpl
def kerneltune_register_reducers(register):
    register(WorldMaxReducer)
