"""Do two configs rank the same under different ways of timing them? The search_quality matmul's near ties.

Usage (needs a CUDA device)::

    python3 bench/timing_regimes.py --out regimes.json
    python3 bench/timing_regimes.py --warm-start-m 8192 --warm-start-configs 12 10
    python3 bench/timing_regimes.py --labels "BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=3" \\
        "BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=4"

bench/search_quality.py judges a pick by ``triton.testing.do_bench``'s median
(20 ms of runs per point and round, an L2 clear before each run); the tuners
pick by the ``cuda-event`` timer's trimmed mean (an L2 flush and a device
spin before each run, 40 runs per stage-3 finalist in 4 rounds). On the
H200 the two disagreed on the bf16 4096^3 matmul's best pair of configs
(the same tile at 3 and 4 stages): equal to 0.05% for the timer, 2.2%
apart for do_bench. This script times the given configs of that kernel
under several regimes, interleaved in ``--rounds`` rounds, and prints each
config's time relative to the first one under each regime:

* ``do_bench``: the oracle's own call (warmup 5 ms, rep 20 ms, median);
* ``do_bench-long``: the same with rep 200 ms, so the device runs at its
  sustained clock and power for longer;
* ``engine``: the tuners' timer as stage 3 uses it (bench/launch_gap.py's
  ``flush+hold`` set-up: 5 untimed runs, then 40 samples, each after a
  flush and a hold; the 20% trimmed mean);
* ``cudagraph``: ``triton.testing.do_bench_cudagraph`` (launches replayed
  from a CUDA graph: no host time, no L2 clear);
* ``stream``: one event pair around 50 back-to-back launches, no flush:
  a kernel inside a busy stream, as in a model.

``--warm-start-m`` times bench/warm_start.py's matmul at one M instead: at
M >= 6144 its full tunings picked config 12 (128x256x64) where its oracle
(do_bench, 5 ms per call) put config 10 (128x128x64) 4-7% ahead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

DEFAULT_LABELS = (
    "BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=3",
    "BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=4",
    "BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3",
)
REGIMES = ("do_bench", "do_bench-long", "engine", "cudagraph", "stream")


def timers(launch: Any) -> dict[str, Any]:
    """Each regime as a function of nothing that returns one time in ms."""
    import torch
    import triton
    from kerneltune.core.values.records import trimmed
    from kerneltune.plugins.devices.accelerators import CudaDevice
    from kerneltune.plugins.timers.events import CudaEventTimer
    from launch_gap import timed_launches

    flush = CudaEventTimer(CudaDevice()).flush

    def engine() -> float:
        samples_us, _ = timed_launches("flush+hold", launch, flush, warmup=5, repeat=40)
        return statistics.mean(trimmed(samples_us)) / 1000

    def stream() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(5):
            launch()
        start.record()
        for _ in range(50):
            launch()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 50

    return {
        "do_bench": lambda: triton.testing.do_bench(launch, warmup=5, rep=20, return_mode="median"),
        "do_bench-long": lambda: triton.testing.do_bench(launch, warmup=5, rep=200, return_mode="median"),
        "engine": engine,
        "cudagraph": lambda: triton.testing.do_bench_cudagraph(launch, rep=20, return_mode="median"),
        "stream": stream,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--labels", nargs="+", default=list(DEFAULT_LABELS), help="configs, as the space labels them"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--warm-start-m",
        type=int,
        help="time bench/warm_start.py's matmul at this M instead (N = K = 4096), configs by index",
    )
    parser.add_argument(
        "--warm-start-configs",
        type=int,
        nargs="+",
        default=[12, 10],
        help="its config indices (default 12 10)",
    )
    parser.add_argument("--out", type=Path, help="write every sample here (JSON)")
    options = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("bench/timing_regimes.py needs a CUDA device", file=sys.stderr)
        return 2
    import triton
    from kerneltune.plugins.triton import adapter
    from search_quality import build

    if options.warm_start_m:
        sys.path.insert(0, str(HERE.parent / "tests"))
        from warm_start import Workload

        work = Workload(smoke=False, nk=4096)
        m = options.warm_start_m
        launches = {
            f"M={m}, config {index} ({work.configs[index]})": (
                lambda cfg=work.configs[index]: work.launch(m, cfg)
            )
            for index in options.warm_start_configs
        }
    else:
        kernel, grid, args, launch, _ = build("matmul", smoke=False)
        candidates = {c.label: c.config for c in kernel.search_space().tuner.space.candidates}
        unknown = [label for label in options.labels if label not in candidates]
        if unknown:
            raise SystemExit(f"not in the matmul's space: {unknown}")
        arguments = {**launch, "grid": grid, "warmup": False}
        launches = {
            label: (lambda config=candidates[label]: adapter.launch_config(kernel, args, arguments, config))
            for label in options.labels
        }
    for run in launches.values():
        run()
    torch.cuda.synchronize()
    regimes = {label: timers(run) for label, run in launches.items()}
    samples: dict[str, dict[str, list[float]]] = {r: {label: [] for label in launches} for r in REGIMES}
    labels = list(launches)
    for number in range(options.rounds):
        for regime in REGIMES:
            # Each round starts one config further, so no config always follows another.
            for label in labels[number % len(labels) :] + labels[: number % len(labels)]:
                samples[regime][label].append(regimes[label][regime]())
    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}")
    print(
        f"{options.rounds} interleaved rounds; per regime, each config's median over the rounds, "
        "and against the first config's"
    )
    for regime in REGIMES:
        first = statistics.median(samples[regime][labels[0]])
        print(f"{regime}:")
        for label in labels:
            values = samples[regime][label]
            median = statistics.median(values)
            print(
                f"  {label}: {median * 1000:8.2f} us ({median / first - 1:+.2%}); "
                f"rounds {min(values) * 1000:.2f}-{max(values) * 1000:.2f} us"
            )
    if options.out:
        options.out.write_text(json.dumps({"labels": labels, "samples_ms": samples}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
