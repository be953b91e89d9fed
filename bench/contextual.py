"""Tuning wall time and pick of ``contextual_autotune`` beside stock ``triton.autotune``.

Usage (needs a CUDA device)::

    python3 bench/contextual.py                 # 4096^3 fp16 matmul, 16 configs
    python3 bench/contextual.py --size 2048 --n-repeat 10 --n-warmup 3
    python3 bench/contextual.py --json out.json # also write the numbers

One run, two fresh ``triton.autotune`` kernels over the same 16 configs
(tests/contextual_matmul.py). Every config is compiled first, outside the
clocks, so both sides time tuning, not Triton's compiler. Then:

* contextual: the first call of a ``contextual_autotune(n_repeat, n_warmup)``
  function that launches the matmul once; wall time until it returns (it
  includes the final run with the pick);
* stock: the first ``kernel[grid](...)`` of ``triton.autotune``, which
  benchmarks every config with ``do_bench`` (Triton's defaults) and then
  launches the pick; wall time until the launch returns, synchronised.

Each side's pick is then measured alone with ``triton.testing.do_bench``
(median, L2 flushed), and the script prints both wall times, both picks with
their medians, the fastest config by that measurement, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from contextual_matmul import SIXTEEN_CONFIGS, launch_config, launch_matmul, make_matmul, median_ms

from triton_dist.autotuner import contextual_autotune


def compile_all(kernel, a: torch.Tensor, b: torch.Tensor) -> None:
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=torch.float16)
    for cfg in kernel.configs:
        launch_config(kernel, cfg, a, b, c)
    torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=4096, help="M = N = K")
    parser.add_argument("--n-repeat", type=int, default=5, help="contextual_autotune's n_repeat")
    parser.add_argument("--n-warmup", type=int, default=3, help="contextual_autotune's n_warmup")
    parser.add_argument("--json", type=Path, help="also write the results here")
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/contextual.py needs a CUDA device", file=sys.stderr)
        return 2

    size = options.size
    torch.manual_seed(0)
    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    ours = make_matmul(SIXTEEN_CONFIGS)
    stock = make_matmul(SIXTEEN_CONFIGS)
    compile_all(ours, a, b)
    compile_all(stock, a, b)

    @contextual_autotune(n_repeat=options.n_repeat, n_warmup=options.n_warmup)
    def product(a, b):
        return launch_matmul(ours, a, b)

    torch.cuda.synchronize()
    start = time.perf_counter()
    product(a, b)
    torch.cuda.synchronize()
    contextual_s = time.perf_counter() - start

    start = time.perf_counter()
    launch_matmul(stock, a, b)
    torch.cuda.synchronize()
    stock_s = time.perf_counter() - start

    medians = [median_ms(ours, cfg, a, b) for cfg in SIXTEEN_CONFIGS]
    fastest = min(range(len(medians)), key=medians.__getitem__)
    our_pick = SIXTEEN_CONFIGS.index(ours.best_config)
    stock_pick = SIXTEEN_CONFIGS.index(stock.best_config)
    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "size": size,
        "configs": len(SIXTEEN_CONFIGS),
        "n_repeat": options.n_repeat,
        "n_warmup": options.n_warmup,
        "contextual_tuning_s": contextual_s,
        "stock_tuning_s": stock_s,
        "stock_over_contextual_time": stock_s / contextual_s,
        "contextual_pick": {
            "index": our_pick,
            "config": str(SIXTEEN_CONFIGS[our_pick]),
            "median_ms": medians[our_pick],
        },
        "stock_pick": {
            "index": stock_pick,
            "config": str(SIXTEEN_CONFIGS[stock_pick]),
            "median_ms": medians[stock_pick],
        },
        "fastest": {"index": fastest, "config": str(SIXTEEN_CONFIGS[fastest]), "median_ms": medians[fastest]},
        "contextual_pick_over_fastest": medians[our_pick] / medians[fastest],
        "stock_pick_over_fastest": medians[stock_pick] / medians[fastest],
        "medians_ms": medians,
    }
    print(f"device {result['device']}, triton {result['triton']}, {size}^3 fp16 matmul, 16 configs")
    print(f"tuning wall time: contextual {contextual_s:.3f} s, stock triton.autotune {stock_s:.3f} s")
    print(f"  stock / contextual = {result['stock_over_contextual_time']:.2f}x")
    for label, key in (
        ("contextual pick", "contextual_pick"),
        ("stock pick", "stock_pick"),
        ("fastest", "fastest"),
    ):
        entry = result[key]
        print(f"{label:>16}: [{entry['index']:2d}] {entry['median_ms']:.4f} ms  {entry['config']}")
    print(
        f"pick / fastest (do_bench medians): contextual {result['contextual_pick_over_fastest']:.3f}, "
        f"stock {result['stock_pick_over_fastest']:.3f}"
    )
    if options.json:
        options.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
