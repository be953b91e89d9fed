"""Tune a distributed operator on every rank at once; the slowest rank decides.

Run it with torchrun, on CPUs (gloo) or one GPU per rank (NCCL)::

    torchrun --nproc_per_node 2 examples/multirank_torchrun.py

The operator all-reduces a tensor in chunks of ``chunk`` elements: fewer,
larger all-reduces cost less per element, so every rank should pick the
largest chunk. Each rank prints the pick it agreed on; a second run finds
it in the cache and measures nothing.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from triton_dist.tune import autotune

CHUNKS = [1 << 12, 1 << 14, 1 << 16]
#: the chunk of the last call: after a tuned call, the pick's.
ran_with: list[int] = []


@autotune(
    config_space=[{"chunk": chunk} for chunk in CHUNKS],
    key_fn=lambda x, **_: (tuple(x.shape), str(x.dtype), dist.get_world_size()),
)
def chunked_all_reduce(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """Sum ``x`` over the ranks, ``chunk`` elements per collective."""
    ran_with[:] = [chunk]
    flat = x.reshape(-1)
    for start in range(0, flat.numel(), chunk):
        dist.all_reduce(flat[start : start + chunk])
    return x


def main() -> None:
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # NCCL exchanges data on the current device
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.ones(1 << 16, device="cuda" if cuda else "cpu")
    chunked_all_reduce(x, autotune_verbose=rank == 0)  # tunes on a miss, then runs the pick
    print(f"rank {rank} of {world}: picked chunk={ran_with[0]}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
