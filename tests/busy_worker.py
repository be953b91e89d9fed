"""Fresh tunings of host work whose two configs are 12 % apart; prints one JSON line.

Each config spins on the thread's CPU clock for its time (3.36 or 3.0 ms),
so its true cost is exact and only time off the CPU can stretch a sample.
Every tuning is a new key, so each measures afresh; the line lists each
stored record's pick and confidence. Run by tests/test_busy_host.py beside
processes that keep every core busy, and alone, with
``TRITON_DIST_AUTOTUNE_CACHE_DIR`` set to a folder of its own.

    python tests/busy_worker.py TUNINGS
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from triton_dist.tune import autotune

#: Each config's CPU time in milliseconds; the fastest is listed second.
COSTS_MS = (3.36, 3.0)
FASTEST = 1


def spin(milliseconds: float) -> None:
    end = time.thread_time() + milliseconds / 1e3
    while time.thread_time() < end:
        pass


@autotune(config_space=[{"cost": cost} for cost in COSTS_MS], key_fn=lambda tuning: tuning)
def busy_work(tuning: int, cost: float) -> None:
    spin(cost)


if __name__ == "__main__":
    for tuning in range(int(sys.argv[1])):
        busy_work(tuning)
    folder = Path(os.environ["TRITON_DIST_AUTOTUNE_CACHE_DIR"], "busy_work")
    records = [json.loads(path.read_text()) for path in sorted(folder.glob("[0-9a-f]*.json"))]
    print(json.dumps([[r["best"]["index"], r["confidence"], r["rivals"]] for r in records]))
