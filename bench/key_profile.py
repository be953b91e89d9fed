"""Where a tuning's time goes on a GPU: device time by kernel against the wall, under torch.profiler.

Usage (needs a CUDA device; about a minute on one H200)::

    python3 bench/key_profile.py
    python3 bench/key_profile.py --nk 2048 --dtype float16
    python3 bench/key_profile.py --smoke   # the host's side only, under TRITON_INTERPRET=1 on the CPU

Three tunings, every program already compiled and loaded, so that only
measuring is left:

* the function-level tuner of ``bench/warm_start.py`` (the bf16 matmul,
  N = K = ``--nk``, 24 configs) tuning one small M and one large M in full;
* the same tuner with ``warm_start = "screen"``, a new M after two stored ones;
* ``contextual_autotune`` around the 16-config 4096^3 matmul of
  tests/contextual_matmul.py (a new kernel object each time, so each tunes).

Each is timed once unprofiled, then once under the profiler, which prints
the kernels with the most device time (the L2 flush is ``fill_``, the hold
is the ``spin`` kernel), the host calls with the most time (a synchronise
is where the host waits for the device), and the device's busy time against
the wall. What the wall holds beyond the device's time is the host's work
between a candidate's synchronise and its next launch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratch import scratch

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests")]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nk", type=int, default=4096, help="the warm start matmul's N = K (default 4096)")
    parser.add_argument(
        "--dtype", default="bfloat16", choices=("bfloat16", "float16"), help="the warm start matmul's inputs"
    )
    parser.add_argument("--small-m", type=int, default=32, help="the small M tuned in full (default 32)")
    parser.add_argument("--large-m", type=int, default=4096, help="the large M tuned in full (default 4096)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="bench/warm_start.py's CPU workload, host activity only, no contextual",
    )
    return parser.parse_args()


def profiled(
    label: str, tune: Callable[[], object], synchronize: Callable[[], object], device: bool = True
) -> None:
    """Tune once under torch.profiler; print the top kernels and host calls and the device's busy time."""
    from torch.profiler import ProfilerActivity, profile

    synchronize()
    started = time.perf_counter()
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device else [])]
    with profile(activities=activities) as run:
        tune()
        synchronize()
    wall = time.perf_counter() - started
    rows = run.key_averages()
    busy_ms = sum(row.self_device_time_total for row in rows) / 1000
    print(f"== {label}, profiled: wall {wall * 1000:.1f} ms, device busy {busy_ms:.1f} ms", flush=True)
    print(rows.table(sort_by="self_device_time_total", row_limit=6, max_name_column_width=40))
    print(rows.table(sort_by="self_cpu_time_total", row_limit=6, max_name_column_width=40), flush=True)


def timed(label: str, tune: Callable[[], object], synchronize: Callable[[], object]) -> None:
    synchronize()
    started = time.perf_counter()
    tune()
    synchronize()
    print(f"== {label}: wall {(time.perf_counter() - started) * 1000:.1f} ms", flush=True)


def main() -> int:
    args = arguments()
    import torch
    import warm_start
    from contextual_matmul import SIXTEEN_CONFIGS, launch_matmul, make_matmul

    from triton_dist.autotuner import contextual_autotune

    if not args.smoke and not torch.cuda.is_available():
        print("bench/key_profile.py needs a CUDA device (or --smoke)", file=sys.stderr)
        return 2
    device = not args.smoke
    work = warm_start.Workload(args.smoke, args.nk, args.dtype)
    sync = work.synchronize
    small, large = (8, 32) if args.smoke else (args.small_m, args.large_m)
    folder = scratch("key_profile_")

    def tuner(name: str, **options: Any) -> Callable[..., None]:
        os.environ["TRITON_DIST_AUTOTUNE_CACHE_DIR"] = str(folder / name)
        return warm_start.tuned_launcher(work, **options)

    tuner("compile")(*work.operands(16))  # compiles and loads every config
    sync()
    for m in (small, large):
        timed(f"full tuning, M={m}", lambda m=m: tuner(f"full{m}")(*work.operands(m)), sync)
        profiled(f"full tuning, M={m}", lambda m=m: tuner(f"full{m}p")(*work.operands(m)), sync, device)
    screened = tuner("screen", warm_start="screen")
    for m in (small // 2, small):
        screened(*work.operands(m))
    new = small + small // 2
    profiled(f"screened warm start, M={new}", lambda: screened(*work.operands(new)), sync, device)
    if args.smoke:
        return 0

    a = torch.randn((4096, 4096), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((4096, 4096), device="cuda", dtype=torch.bfloat16)

    def contextual() -> None:
        kernel = make_matmul(SIXTEEN_CONFIGS)

        @contextual_autotune()
        def outer() -> None:
            launch_matmul(kernel, a, b)

        outer()

    timed("contextual tuning, first kernel object", contextual, sync)
    timed("contextual tuning", contextual, sync)
    profiled("contextual tuning", contextual, sync)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
