"""Configs the device cannot run, over an M sweep: how often each tuner tries them, and what a key costs.

From the repository root, on a CUDA machine::

    python3 bench/dropped.py [--sizes 8] [--json FILE]

bench/regret.py's 16 bf16 matmul configs and 4 that need more shared memory
than an H100 or H200 block may hold, tuned for M = 64, 128, ... (N = K =
4096), each M a new key, by stock ``triton.autotune``,
``contextual_autotune`` and the function-level tuner, in a fresh cache
folder, every program compiled first. Printed per tuner: how many
``OutOfResources`` Triton raised in this process (Triton 3.6 makes two per
attempt to load a config that does not fit; kerneltune's tuners may load
programs in child processes), kerneltune's dropped candidates by kind for the
first key and the later ones (a config remembered as failing is dropped
without a try: ``RememberedFailure``), the first key's tuning time and the
later keys' mean, each over stock's.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import triton
from kerneltune.core import add_plugin, hookimpl
from regret import MATMUL_CONFIGS, cfg, matmul
from scratch import scratch

os.environ["TRITON_DIST_AUTOTUNE_CACHE_DIR"] = str(scratch("kerneltune-dropped-"))
from triton_dist.autotuner import contextual_autotune  # the cache folder set first
from triton_dist.tune import autotune

#: (256 x 64 + 64 x 256) x 2 bytes x 4 stages = 256 KiB; (256 x 128 + 128 x 128) x 2 x 3 = 288 KiB;
#: (128 x 128 + 128 x 256) x 2 x 4 = 384 KiB; (256 x 256 + 256 x 64) x 2 x 3 = 480 KiB: over 227 KiB.
TOO_BIG = [
    cfg(8, 4, BLOCK_M=256, BLOCK_N=256, BLOCK_K=64, GROUP_M=8),
    cfg(8, 3, BLOCK_M=256, BLOCK_N=128, BLOCK_K=128, GROUP_M=8),
    cfg(8, 4, BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8),
    cfg(8, 3, BLOCK_M=256, BLOCK_N=64, BLOCK_K=256, GROUP_M=8),
]
CONFIGS = MATMUL_CONFIGS + TOO_BIG


class Drops:
    """Observer: the candidates kerneltune's tuners dropped, by the error's kind, for the key being tuned."""

    def __init__(self) -> None:
        self.dropped: dict[int, str] = {}

    @hookimpl
    def kerneltune_candidate_measured(self, event: Any) -> None:
        if event.measurement.error:
            self.dropped[event.candidate.index] = event.measurement.error.split(":")[0]

    def take(self) -> dict[str, int]:
        kinds = dict(collections.Counter(self.dropped.values()))
        self.dropped = {}
        return kinds


class Attempts:
    """Counts ``OutOfResources`` as Triton raises them."""

    def __init__(self) -> None:
        self.count = 0
        real = triton.runtime.errors.OutOfResources.__init__

        def counting(error: Any, *args: Any, **kwargs: Any) -> None:
            self.count += 1
            real(error, *args, **kwargs)

        triton.runtime.errors.OutOfResources.__init__ = counting  # type: ignore[method-assign]


def sweep(name: str, sizes: list[int], attempts: Attempts, drops: Drops) -> dict[str, Any]:
    """Tune every M with tuner ``name``; its attempts, drops and per-key seconds."""
    tune = make_tuner(name)
    before, seconds, dropped = attempts.count, [], []
    for m in sizes:
        work = matmul(m, 4096, 4096)
        work.configs = CONFIGS
        torch.cuda.synchronize()
        start = time.perf_counter()
        tune(work)
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
        dropped.append(drops.take())
        work.check()
    later = sum((collections.Counter(d) for d in dropped[1:]), collections.Counter())
    return {
        "attempts": attempts.count - before,
        "first_key_drops": dropped[0],
        "later_keys_drops": dict(later),
        "first_s": seconds[0],
        "later_s": statistics.mean(seconds[1:]),
    }


def make_tuner(name: str) -> Callable[[Any], None]:
    """One tuner over the whole sweep: the same kernel or function for every key, as a user has it."""
    state: dict[str, Any] = {}
    if name == "stock":
        return lambda work: work.launch_autotuned(state.setdefault("kernel", work.autotuned()))
    if name == "contextual":

        def contextual(work: Any) -> None:
            kernel = state.setdefault("kernel", work.autotuned())

            @contextual_autotune(n_repeat=5)
            def outer() -> None:
                work.launch_autotuned(kernel)

            outer()

        return contextual

    @autotune(config_space=[{"config": c} for c in CONFIGS], key_fn=lambda work, config=None: work.name)
    def launcher(work: Any, config: triton.Config) -> None:
        work.launch(config)

    return launcher


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, default=8, help="how many values of M (64, 128, ...)")
    parser.add_argument("--json", help="write every number here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/dropped.py needs a CUDA device")
    if args.sizes < 2:
        sys.exit("--sizes: at least 2 (the first key and the later ones)")
    sizes = [64 * (i + 1) for i in range(args.sizes)]
    warmup = matmul(64, 4096, 4096)
    for config in CONFIGS:  # every program compiled first; those too big fail at each load
        with contextlib.suppress(triton.runtime.errors.OutOfResources):
            warmup.launch(config)
    attempts, drops = Attempts(), Drops()
    add_plugin(drops)
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("stock", "contextual", "function"):
            results[name] = sweep(name, sizes, attempts, drops)
    stock = results["stock"]
    print(f"M sweep of {len(sizes)} keys, {len(CONFIGS)} configs of which {len(TOO_BIG)} do not fit")
    print(f"  {'tuner':12s} {'OutOfResources':>14s} {'first key s':>12s} {'later keys s':>13s}  over stock's")
    for name, r in results.items():
        over = f"{r['first_s'] / stock['first_s']:.3f} / {r['later_s'] / stock['later_s']:.3f}"
        print(f"  {name:12s} {r['attempts']:14d} {r['first_s']:12.3f} {r['later_s']:13.3f}  {over}")
    for name in ("contextual", "function"):
        r = results[name]
        print(f"  {name} dropped: first key {r['first_key_drops']}, the later keys {r['later_keys_drops']}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"sizes": sizes, "results": results}, handle, indent=2)


if __name__ == "__main__":
    main()
