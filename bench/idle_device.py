"""What the device objective reads for work that leaves the device idle, beside the smallest device work.

Usage (needs a CUDA device; a few seconds)::

    python3 bench/idle_device.py

Tunes, through ``triton_dist.tune.autotune`` with the default settings
(the ``cuda-event`` timer, the ``device`` objective, a memory cache), four
function-level launchers and prints each candidate's first-pass samples
(min, median, max, in microseconds):

* ``numpy_work``: NumPy sums over 100k doubles, 0 to 32 times (host work);
* ``spin_on_host``: a host busy-loop of 0 to 0.8 ms (host work);
* ``tiny_launches``: 0 to 4 one-element ``add_`` kernels;
* ``adds``: one ``add_`` over 1 to 16M floats.

Host work reads what an empty timed run reads whatever it costs, which is
what ``core/machine/timing.py``'s ``IdleDevice`` looks for; any kernel reads
more. Last, a bare pair of events with nothing between and no hold, for
comparison. Whether the tuner warned that a function runs on the host is
printed per function.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings

import numpy as np
import torch
from kerneltune.core import add_plugin, hookimpl

from triton_dist.tune import autotune


class FirstPasses:
    """Observer: each candidate's first-pass samples, in microseconds."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, list[float]]] = []

    @hookimpl
    def kerneltune_candidate_measured(self, event: object) -> None:
        measurement = event.measurement  # type: ignore[attr-defined]
        if measurement.samples and event.stage is None:  # type: ignore[attr-defined]
            samples = sorted(1000 * s for s in measurement.samples)
            self.rows.append((event.function, event.candidate.label, samples))  # type: ignore[attr-defined]


def main() -> int:
    if not torch.cuda.is_available():
        print("bench/idle_device.py needs a CUDA device", file=sys.stderr)
        return 2
    # Settings are read at each tuning: nothing stored, no progress lines.
    os.environ.setdefault("KERNELTUNE_CACHE", "memory")
    os.environ.setdefault("KERNELTUNE_PROGRESS", "0")
    seen = FirstPasses()
    add_plugin(seen)
    data = np.random.default_rng(0).random(100_000)
    one = torch.ones(1, device="cuda")
    big = torch.ones(1 << 24, device="cuda")

    # Its configs sum different numbers of times on purpose: no output check.
    @autotune(
        config_space=[{"work": w} for w in (0, 1, 8, 32)], key_fn=lambda x: x.shape[0], check_outputs=False
    )
    def numpy_work(x: np.ndarray, work: int) -> float:
        return float(sum(np.sum(x) for _ in range(work)))

    @autotune(config_space=[{"work": w} for w in (0, 1, 8)], key_fn=lambda: 0)
    def spin_on_host(work: int) -> None:
        end = time.perf_counter() + work * 1e-4
        while time.perf_counter() < end:
            pass

    @autotune(config_space=[{"k": k} for k in (0, 1, 2, 4)], key_fn=lambda: 0)
    def tiny_launches(k: int) -> None:
        for _ in range(k):
            one.add_(1)

    @autotune(config_space=[{"n": n} for n in (1, 1 << 12, 1 << 16, 1 << 20, 1 << 24)], key_fn=lambda: 0)
    def adds(n: int) -> None:
        big[:n].add_(1)

    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    for tuned, args in ((numpy_work, (data,)), (spin_on_host, ()), (tiny_launches, ()), (adds, ())):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tuned(*args)
        warned = any("runs on the host" in str(w.message) for w in caught)
        print(f"{tuned.__name__}: {'warned: runs on the host' if warned else 'no warning'}")
        for function, label, us in seen.rows:
            if function == tuned.__name__:
                median = statistics.median(us)
                print(f"  {label:>14}: min {us[0]:7.2f} us  median {median:7.2f} us  max {us[-1]:7.2f} us")
    pairs = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    bare = sorted(1000 * s.elapsed_time(e) for s, e in pairs)
    print(f"a bare pair, no hold: min {bare[0]:.2f} us, median {statistics.median(bare):.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
