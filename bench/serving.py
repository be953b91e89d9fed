"""Serving unseen shapes: what a key served by ``tune = "nearest"`` costs beside a cache hit.

From the repository root, on any machine (the work is a host function, so the
figures are the tuner's own host cost)::

    python3 bench/serving.py [--keys 1000] [--procs 3] [--new 20] [--json FILE]

A first process tunes ``--keys`` keys of a function-level ``autotune``
(``work(m)``, 4 configs, ``m`` = 8, 16, ...) into a fresh cache folder. Then
``--procs`` rounds of three fresh processes, with ``KERNELTUNE_TUNE=nearest``,
each time on the host clock: a cache hit of a stored key (the median of 2,000
calls), the first key of the process that nobody stored (one call: served by
the nearest stored key's pick, marked pending), and ``--new`` more such keys,
their median, twice: 10 ms apart (as requests come; the pending marks are
written by a thread in between) and back to back (the mark writer's work
competes with the calls). In each process the session is made first (as any
earlier tuner's call makes it), then the function's first call is timed: a
stored key 50 ms before the hits, a stored key right before them (either
reads the key index ahead, in that call), or the first new key itself, which
reads the index. A
function's first call also hashes its source and builds its tuner, whichever
key it meets. The figures are each process's call times less its hit's, then
the median over the processes: what ``nearest`` adds to a call over a hit;
apart, the first process's first new key (it meets the cache as the tunings
left it), and the fill's time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

STEP = 8
#: The first new key's figure, by what came before it: a stored key's call (the function's first)
#: 50 ms before the hits or right before them, or nothing (the new key is the function's first call).
FIRST_NEW = {
    "apart": "first new key, a stored key's call 50 ms before, over hit",
    "tight": "first new key, a stored key's call right before, over hit",
    "new": "first new key as first call, over hit",
}
STORED_FIRST = "stored key as first call, over hit"


def make_work() -> Any:
    from triton_dist.tune import autotune

    @autotune(config_space=[{"b": b} for b in (1, 2, 4, 8)], key_fn=lambda m, b=None: m)
    def work(m: int, b: int) -> int:
        return m

    return work


def fill(keys: int) -> None:
    """Tune ``keys`` keys into the cache folder the environment names."""
    work = make_work()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(1, keys + 1):
            work(i * STEP)


def serve(keys: int, new: int, first: str) -> dict[str, float]:
    """In a process of its own: a hit's time, the first new key's and the median of ``new`` more (us).

    :param first: what the function's first call is (:data:`FIRST_NEW`): ``"apart"``, a stored key
        50 ms before the hits; ``"tight"``, a stored key right before them (either reads the key
        index ahead); ``"new"``, a new key, which reads the index.
    """
    from kerneltune.core.driving import current_session

    work = make_work()
    stored = STEP * (keys // 2)
    warnings.simplefilter("ignore")
    current_session()  # what any earlier call of a tuner made: the session, not this function's tuner
    time.sleep(0.01)
    start = time.perf_counter()
    work(STEP * (keys // 3) + 3 if first == "new" else stored)
    first_call = time.perf_counter() - start
    if first == "new":
        work(stored)
    elif first == "apart":
        time.sleep(0.05)
    start = time.perf_counter()
    for _ in range(2000):
        work(stored)
    hit = (time.perf_counter() - start) / 2000
    served = []
    for i in range(2 * new + 1):
        m = STEP * (1 + (i * 37) % keys) + 1 + i % 7  # between two stored keys, never stored itself
        if 0 < i <= new:
            time.sleep(0.01)
        start = time.perf_counter()
        work(m)
        served.append(time.perf_counter() - start)
    if first == "new":
        served[0] = first_call
    figures = {"hit": hit * 1e6, FIRST_NEW[first]: (served[0] - hit) * 1e6}
    if first == "apart":
        figures[STORED_FIRST] = (first_call - hit) * 1e6
    return {
        **figures,
        "new keys 10 ms apart, over hit": (statistics.median(served[1 : new + 1]) - hit) * 1e6,
        "new keys back to back, over hit": (statistics.median(served[new + 1 :]) - hit) * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--procs", type=int, default=3)
    parser.add_argument("--new", type=int, default=20)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=("fill", *FIRST_NEW), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child == "fill":
        fill(options.keys)
        return 0
    if options.child:
        print(json.dumps(serve(options.keys, options.new, options.child)))
        return 0
    runs: dict[str, list[dict[str, float]]] = {first: [] for first in FIRST_NEW}
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "TRITON_DIST_AUTOTUNE_CACHE_DIR": folder}
        env.pop("KERNELTUNE_TUNE", None)
        command = [sys.executable, __file__, "--keys", str(options.keys), "--new", str(options.new)]
        start = time.perf_counter()
        subprocess.run([*command, "--child", "fill"], env=env, check=True)
        filled = time.perf_counter() - start
        print(f"{options.keys} keys tuned in {filled:.1f} s")
        for _ in range(options.procs):
            for first, found in runs.items():  # in turns
                out = subprocess.run(
                    [*command, "--child", first],
                    env={**env, "KERNELTUNE_TUNE": "nearest"},
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                found.append(json.loads(out.splitlines()[-1]))
    # The later keys' figures are the median over every process.
    every = [run for found in runs.values() for run in found]
    result = {name: statistics.median(run[name] for run in every) for name in every[0] if "first" not in name}
    for found in runs.values():
        result.update(
            {name: statistics.median(run[name] for run in found) for name in found[0] if "first" in name}
        )
    # The first process after the fill meets the cache as tunings left it (an index to build, or not).
    result["first process's first new key over hit"] = runs["apart"][0][FIRST_NEW["apart"]]
    for name, micros in result.items():
        print(f"{name:58} {micros / 1000:9.3f} ms" if "over" in name else f"{name:58} {micros:9.2f} us")
    if options.json:
        figures = {"runs": runs, "median": result, "fill_s": filled}
        options.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
