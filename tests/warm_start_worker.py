"""One rank of the torch.distributed tests of reuse and warm start (test_warm_start_dist.py).

Usage as tests/multirank_worker.py's, whose machinery runs these scenarios:
each rank keeps its own cache directory, and some ranks tune alone first,
so the ranks meet holding different records.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import multirank_worker
import torch.distributed as dist
from multirank_worker import Rank, with_env

from triton_dist.tune import autotune

#: Configs ``n`` in 1..6; key ``m`` is fastest with ``n = log2(m) - 3``, each step away 5 ms slower
#: (far more than a loaded host adds to a sleep, so the stored order of configs is the landscape's).
NS = list(range(1, 7))


def drifting(m: int, calls: list[int], *, n: int) -> int:
    calls.append(n)
    time.sleep((1.0 + 5.0 * abs(math.log2(m) - 3 - n)) / 1000)
    return n


def swept(ns: list[int], **options: Any) -> Any:
    """A fresh tuner of ``drifting`` over ``ns``, keyed by ``m``."""
    return autotune([{"n": n} for n in ns], key_fn=lambda m, calls: m, **options)(drifting)


def own_cache(ctx: Rank) -> str:
    """A cache directory of this rank's own, inside the scenario's."""
    return str(ctx.cache_dir() / f"rank{ctx.rank}")


def warm_start_agrees(ctx: Rank) -> dict[str, Any]:
    # Rank 0 alone holds key 64, the last rank alone key 512, the others nothing.
    alone = {r: dist.new_group([r]) for r in (0, ctx.world - 1)}

    mine = own_cache(ctx)

    def run() -> dict[str, Any]:
        for r, m in ((0, 64), (ctx.world - 1, 512)):
            if ctx.rank == r:
                swept(NS)(m, [], autotune_pg=alone[r])
        calls: list[int] = []
        ctx.collectives.take()
        pick = swept(NS, warm_start="nearest", warm_start_budget=3)(128, calls)
        collectives = ctx.collectives.take()
        (record,) = [r for r in ctx.records("drifting", Path(mine)) if r["key"] == 128]
        return {
            "pick": pick,
            "measured": sorted(set(calls[:-1])),
            "calls": len(calls),
            "collectives": collectives,
            "warm_start": record["warm_start"],
        }

    return with_env("TRITON_DIST_AUTOTUNE_CACHE_DIR", mine, run)


def grown_list_reuses_one_ranks_record(ctx: Rank) -> dict[str, Any]:
    alone = dist.new_group([0])
    mine = own_cache(ctx)

    def run() -> dict[str, Any]:
        seeded = swept(NS[:4])(64, [], autotune_pg=alone) if ctx.rank == 0 else None
        calls: list[int] = []
        ctx.collectives.take()
        pick = swept([*NS[:4], 6])(64, calls)
        collectives = ctx.collectives.take()
        (record,) = ctx.records("drifting", Path(mine))
        return {
            "seeded": seeded,
            "pick": pick,
            "measured": sorted(set(calls[:-1])),
            "collectives": collectives,
            "carried": record["carried"],
            "labels": [row["label"] for row in record["candidates"]],
        }

    return with_env("TRITON_DIST_AUTOTUNE_CACHE_DIR", mine, run)


multirank_worker.SCENARIOS.update(
    {fn.__name__: fn for fn in (warm_start_agrees, grown_list_reuses_one_ranks_record)}
)

if __name__ == "__main__":
    multirank_worker.main(sys.argv)
