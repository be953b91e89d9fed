"""The tuning machine's own host cost per tuning, on the CPU, side by side with an earlier tree.

Usage (no accelerator needed; about a minute)::

    python3 bench/overhead.py
    python3 bench/overhead.py --before /tmp/before --reps 5   # an earlier tree, pip-installed --target there
    python3 bench/overhead.py --before /tmp/before --after /tmp/after   # both installed alike

What a tuning costs beyond its runs: making a timer per measurement,
summarising samples, the observers and logs, reading stored records, and
whatever else the machine does between two runs of the work. On an
accelerator that cost lands between launches and in a restart's fixed
cost; here the work is made nearly free, so that little else is left.
Three workloads, each in a fresh process per side and rep, the sides
alternating:

* ``function``: ``triton_dist.tune.autotune`` over 16 configs of a
  function that does nothing, ``warmup=3, repeat=5`` (the contextual
  tuner's defaults), tuned for ``--keys`` new keys in turn;
* ``screen``: the same with ``warm_start="screen"``, keys 1, 2, 4, ... so
  every key after the first warm starts from the records of those before;
* ``contextual``: ``contextual_autotune(n_repeat=5, n_warmup=3)`` around a
  one-program ``triton.autotune`` kernel of 16 configs under
  ``TRITON_INTERPRET=1``, one tuning per new key.

A tuning's overhead is its wall time less what its runs spent in the work:
for the function, the runs times one plain call's cost; for the kernel, the
time spent inside its ``JITFunction``'s ``run`` (Triton's launch, and here
the interpreter's run of the program), timed around each call. Printed per
workload and side: the overhead per tuning in milliseconds of the best
process (the median of its tunings; on a shared host, processes of one side
spread by up to 2x, and the best one is what the code costs), the median
over every tuning, per run in microseconds, and after over before (best
processes). Each side caches into a fresh
folder, with the ``wallclock`` timer and ``twins = false`` (the interpreter
ignores ``num_warps``, which would make half the configs twins).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scratch import scratch

WORKLOADS = ("function", "screen", "contextual")
CONFIGS = 16


def plain_seconds(call: Any, times: int = 30) -> float:
    """The median wall time of one call of ``call``."""
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        spent.append(time.perf_counter() - started)
    return statistics.median(spent)


def function_child(keys: int, warm_start: str) -> dict[str, Any]:
    from triton_dist.tune import autotune

    runs = [0]

    def work(n: int, c: int) -> None:
        runs[0] += 1

    tuned = autotune(
        config_space=[{"c": c} for c in range(CONFIGS)],
        key_fn=lambda n: n,
        warmup=3,
        repeat=5,
        warm_start=warm_start,
    )(work)
    plain = plain_seconds(lambda: work(0, 0))
    overheads, per_run = [], []
    for i in range(keys):
        runs[0] = 0
        started = time.perf_counter()
        tuned(2**i)
        spent = time.perf_counter() - started
        overheads.append(spent - runs[0] * plain)
        per_run.append(overheads[-1] / max(1, runs[0]))
    return {"overhead_s": overheads, "per_run_s": per_run}


def contextual_child(keys: int) -> dict[str, Any]:
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import triton
    import triton.language as tl

    from triton_dist.autotuner import contextual_autotune

    configs = [
        triton.Config({"B": 16 * (1 + i % 4)}, num_warps=1 + i % 4, num_stages=1 + i // 4)
        for i in range(CONFIGS)
    ]

    @triton.autotune(configs=configs, key=["n"])
    @triton.jit
    def add_one(x, y, n, B: tl.constexpr):
        offsets = tl.arange(0, B)
        tl.store(y + offsets, tl.load(x + offsets, mask=offsets < n) + 1, mask=offsets < n)

    x, y = torch.zeros(64), torch.zeros(64)
    launches, size, in_kernel = [0], [1], [0.0]
    jit_run = add_one.fn.run

    def timed_run(*args: Any, **kwargs: Any) -> Any:
        # The JIT function's own launch (and here, the interpreter's run of it): not the tuner's cost.
        started = time.perf_counter()
        try:
            return jit_run(*args, **kwargs)
        finally:
            in_kernel[0] += time.perf_counter() - started

    add_one.fn.run = timed_run

    @contextual_autotune(n_repeat=5, n_warmup=3)
    def outer() -> None:
        launches[0] += 1
        add_one[(1,)](x, y, size[0])

    overheads, per_run = [], []
    for i in range(keys):
        size[0] = 1 + i
        launches[0], in_kernel[0] = 0, 0.0
        started = time.perf_counter()
        outer()
        overheads.append(time.perf_counter() - started - in_kernel[0])
        per_run.append(overheads[-1] / max(1, launches[0]))
    return {"overhead_s": overheads, "per_run_s": per_run}


def child(workload: str, keys: int) -> dict[str, Any]:
    if workload == "contextual":
        return contextual_child(keys)
    return function_child(keys, "screen" if workload == "screen" else "off")


def spawn(workload: str, keys: int, before: str | None) -> dict[str, Any]:
    """Run ``workload`` in a fresh process, importing kerneltune from ``before`` where given."""
    folder = scratch("kerneltune-overhead-")
    env = dict(os.environ)
    env.update(
        TRITON_DIST_AUTOTUNE_CACHE_DIR=str(Path(folder, "picks")),
        KERNELTUNE_TIMER="wallclock",
        KERNELTUNE_TWINS="false",
        PYTHONWARNINGS="ignore",
        PYTHONHASHSEED="0",  # one dict and set layout for every process: less noise between them
    )
    if before:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (before, env.get("PYTHONPATH"))))
    out = Path(folder, "result.json")
    command = [sys.executable, str(Path(__file__).resolve()), "--child", workload, "--keys", str(keys)]
    done = subprocess.run([*command, "--store", str(out)], cwd=folder, env=env, timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{workload}: the child failed with exit status {done.returncode}")
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=12, help="tunings per process (default 12)")
    parser.add_argument("--reps", type=int, default=3, help="fresh processes per side and workload")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--before", help="a folder an earlier tree is installed in (pip install --target)")
    parser.add_argument(
        "--after", help="the same for this tree (default: kerneltune as this Python imports it)"
    )
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        Path(args.store).write_text(json.dumps(child(args.child, args.keys)))
        return 0
    sides = {"after": args.after} | ({"before": args.before} if args.before else {})
    results: dict[str, dict[str, list[float]]] = {}
    for workload in args.workloads.split(","):
        for rep in range(args.reps):
            for side, tree in reversed(sides.items()) if rep % 2 else sides.items():
                found = spawn(workload, args.keys, tree)
                row = results.setdefault(
                    f"{workload} {side}", {"overhead_s": [], "per_run_s": [], "process_ms": []}
                )
                kept = found["overhead_s"][1:]  # the first tuning of a process pays imports
                row["overhead_s"].extend(kept)
                row["per_run_s"].extend(found["per_run_s"][1:])
                row["process_ms"].append(1e3 * statistics.median(kept))
    print(
        f"{'workload':<12} {'side':<7} {'best process ms':>16} {'median ms':>10} {'us per run':>11} "
        f"{'after / before (best)':>22}"
    )
    best = {name: min(row["process_ms"]) for name, row in results.items()}
    for name, row in results.items():
        workload, side = name.split()
        before = best.get(f"{workload} before")
        ratio = f"{best[name] / before:.2f}" if side == "after" and before else ""
        median = 1e3 * statistics.median(row["overhead_s"])
        per_run = 1e6 * statistics.median(row["per_run_s"])
        print(f"{workload:<12} {side:<7} {best[name]:16.2f} {median:10.2f} {per_run:11.1f} {ratio:>22}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
