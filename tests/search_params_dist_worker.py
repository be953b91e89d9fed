"""One rank of test_search_params_dist.py: a search_params kernel tuned by two gloo ranks.

Usage::

    python search_params_dist_worker.py RANK WORLD PORT OUT_JSON

Each rank's scripted timer gives the candidates different times, so a rank
alone would pick differently; the reducer's MAX must make both ranks search
the same points and pick the same config. A second kernel's reference_fn
rejects the fastest finalist on rank 1 only, in stage 3 (the output check
off); both ranks must fall to the same next one. A third's rejects the same
config on rank 1 with the check on, at its first run: both ranks must drop it.
"""

from __future__ import annotations

import datetime
import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import torch
import torch.distributed as dist
import triton
import triton.language as tl
from search_doubles import Script, by_block, timer_plugin, use_session

import triton_dist.autotune_hooks  # noqa: F401

COSTS = [{16: 1.0, 32: 2.0, 64: 9.0}, {16: 9.0, 32: 2.0, 64: 1.0}]


class Patch:
    """The few monkeypatch calls use_session makes, outside pytest."""

    def setattr(self, owner, name, value):
        setattr(owner, name, value)


def make_kernel(hints, hook):
    @triton.autotune(configs=[], key=["n"], hints=hints, pre_hook=hook)
    @triton.jit
    def ranked_double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)

    return ranked_double


def tune(kernel, script):
    x = torch.arange(64, dtype=torch.float32)
    y = torch.zeros_like(x)
    kernel[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, y, 64)
    return {
        "pick": kernel.best_config.kwargs["BLOCK"],
        "launched": sorted({block for (block,) in script.seen("BLOCK")}),
        "runs": [block for (block,) in script.seen("BLOCK")],
        "correct": bool(torch.equal(y, 2 * x)),
    }


def main() -> None:
    rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=30),
    )
    script = Script(by_block(COSTS[rank], "BLOCK"))
    use_session(Patch(), timer_plugin(script))
    outcome = {
        "plain": tune(
            make_kernel({"search_params": {"params": ["BLOCK"], "values": [16, 32, 64]}}, script.hook), script
        )
    }

    for name, checked in (("gated", False), ("checked", True)):
        gated_script = Script(by_block(COSTS[rank], "BLOCK"))

        def reject_32_on_rank_1(x, y, n, script=gated_script):
            # The candidate just launched is the last launch the script saw.
            return not (rank == 1 and script.launches[-1]["BLOCK"] == 32)

        use_session(Patch(), timer_plugin(gated_script))
        options = {"params": ["BLOCK"], "values": [16, 32, 64], "reference_fn": reject_32_on_rank_1}
        hints = {"search_params": {**options, "check_outputs": checked}}
        outcome[name] = tune(make_kernel(hints, gated_script.hook), gated_script)
    with open(out, "w") as handle:
        json.dump(outcome, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
