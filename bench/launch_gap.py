"""How much host time lands in a per-launch event timing, with and without the hold.

Usage (needs a CUDA device)::

    python3 bench/launch_gap.py                  # configs 3 and 4 of the six-config 2048^3 matmul
    python3 bench/launch_gap.py --rounds 5 --json out.json

The contextual tuner times single launches inside the caller's own code, so
nothing queues ahead of a timed launch the way ``do_bench``'s batch does. This
script times the same launches through the shipped ``cuda-event`` timer the way
the tuner does (5 untimed launches, then 20 timed, each sample its own event
pair), under three set-ups run in turn in every round:

* ``none``: no set-up; the device idles until the host has launched the kernel;
* ``flush``: the L2 flush as ``before`` (a timer that cannot hold);
* ``flush+hold``: the flush, then the timer's ``hold`` sized as the
  MEASURE step sizes it (``hold_microseconds`` of the host launch times seen so far).

It prints, per config and set-up, the first timed sample, the median, the
mean (the tuner's statistic), the largest, and mean / ``do_bench`` median; also
the host's launch time and the flush's device time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from contextual_matmul import SIX_CONFIGS, launch_config, make_matmul, median_ms
from kerneltune.core.machine.timing import hold_microseconds
from kerneltune.plugins.devices.accelerators import CudaDevice
from kerneltune.plugins.timers.events import CudaEventTimer

SET_UPS = ("none", "flush", "flush+hold")


def timed_launches(set_up: str, launch, flush, warmup: int, repeat: int) -> tuple[list[float], list[float]]:
    """Per-launch samples (µs) under one set-up, and the host's time per launch (µs)."""
    timer = CudaEventTimer(CudaDevice())
    host_us: list[float] = []
    for _ in range(warmup):
        started = time.perf_counter()
        launch()
        host_us.append((time.perf_counter() - started) * 1e6)
    for _ in range(repeat):
        if set_up == "none":
            before = None
        elif set_up == "flush":
            before = flush
        else:
            hold = hold_microseconds(host_us[-8:])

            def before(hold: float = hold) -> None:
                flush()
                timer.hold(hold)

        started = time.perf_counter()
        timer.sample(launch, before=before)
        host_us.append((time.perf_counter() - started) * 1e6)
    return [ms * 1000.0 for ms in timer.collect()], host_us[warmup:]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", type=int, nargs="+", default=[3, 4], help="indices into SIX_CONFIGS")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every set-up, interleaved")
    parser.add_argument("--json", type=Path, help="also write the results here")
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/launch_gap.py needs a CUDA device", file=sys.stderr)
        return 2

    torch.manual_seed(0)
    a = torch.randn((2048, 2048), device="cuda", dtype=torch.float16)
    b = torch.randn((2048, 2048), device="cuda", dtype=torch.float16)
    c = torch.empty((2048, 2048), device="cuda", dtype=torch.float16)
    kernel = make_matmul(SIX_CONFIGS)
    # The timer's own flush, as the tuners' MEASURE step runs it.
    flush = CudaEventTimer(CudaDevice()).flush
    for cfg in SIX_CONFIGS:
        launch_config(kernel, cfg, a, b, c)
    torch.cuda.synchronize()

    flushes = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        flush()
        end.record()
        flushes.append((start, end))
    torch.cuda.synchronize()
    flush_us = statistics.median(start.elapsed_time(end) * 1000.0 for start, end in flushes)

    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "flush_us": flush_us,
        "configs": {},
    }
    print(f"device {result['device']}, torch {result['torch']}, triton {result['triton']}")
    print(f"one L2 flush: {flush_us:.1f} us of device time (median of 20)")
    for index in options.configs:
        cfg = SIX_CONFIGS[index]
        reference = median_ms(kernel, cfg, a, b) * 1000.0
        print(f"config {index} ({cfg}): do_bench median {reference:.1f} us")
        rows = result["configs"][str(index)] = {"do_bench_median_us": reference, "rounds": []}
        for _ in range(options.rounds):
            round_ = {}
            for set_up in SET_UPS:
                samples, host = timed_launches(
                    set_up, lambda cfg=cfg: launch_config(kernel, cfg, a, b, c), flush, 5, 20
                )
                mean = statistics.mean(samples)
                round_[set_up] = {"samples_us": samples, "host_us": host}
                print(
                    f"  {set_up:10s} first {samples[0]:6.1f}  median {statistics.median(samples):6.1f}  "
                    f"mean {mean:6.1f}  max {max(samples):6.1f} us  mean/do_bench {mean / reference:5.2f}"
                    f"  | host per timed launch: median {statistics.median(host):5.1f} us"
                )
            rows["rounds"].append(round_)
    if options.json:
        options.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
