"""One rank of the torch.distributed tests of checked outputs (test_checked_ranks.py).

Usage as tests/multirank_worker.py's, whose machinery runs these scenarios:
each tuned function gives a wrong output on one rank only, and every rank
must drop the same candidate and pick the same config.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any

import multirank_worker
import torch
import torch.distributed as dist
from multirank_worker import MIDDLE_MS, SLOW_MS, Rank, with_env

from triton_dist.tune import autotune

CONFIGS = [{"cfg": c} for c in range(4)]


def off_on(x: torch.Tensor, delays: dict[int, float], bad: tuple[int, int], *, cfg: int) -> torch.Tensor:
    """``x``'s sum, but config ``bad[0]`` drops the last value on rank ``bad[1]``."""
    time.sleep(delays[cfg] / 1000)
    if (cfg, dist.get_rank()) == bad:
        return x[:-1].sum()
    return x.sum()


def tune_with_one_wrong(ctx: Rank, bad: tuple[int, int]) -> dict[str, Any]:
    # The wrong config is the fastest; of the others, config 2.
    delays = {c: SLOW_MS for c in range(4)} | {bad[0]: 1.0, 2: MIDDLE_MS}
    fn = autotune(CONFIGS, key_fn=lambda x, *rest: x.numel())(off_on)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = with_env("KERNELTUNE_CHECK_OUTPUTS", "on", lambda: fn(torch.arange(8.0), delays, bad))
    dist.barrier()
    (record,) = ctx.records("off_on")
    wrong = [str(w.message) for w in caught if type(w.message).__name__ == "WrongOutputWarning"]
    rows = [{"time_ms": c["time_ms"], "error": c["error"]} for c in record["candidates"]]
    return {"result": float(result), "pick": record["best"]["index"], "rows": rows, "warnings": wrong}


def reference_wrong_on_last_rank(ctx: Rank) -> dict[str, Any]:
    # There the others agree against the reference, config 0: it is dropped there, so everywhere.
    return tune_with_one_wrong(ctx, (0, ctx.world - 1))


def candidate_wrong_on_first_rank(ctx: Rank) -> dict[str, Any]:
    # Config 3, after config 1 agreed with the reference, is wrong on rank 0, the one that stores.
    return tune_with_one_wrong(ctx, (3, 0))


multirank_worker.SCENARIOS.update(
    {fn.__name__: fn for fn in (reference_wrong_on_last_rank, candidate_wrong_on_first_rank)}
)

if __name__ == "__main__":
    multirank_worker.main(sys.argv)
