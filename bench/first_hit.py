"""The first call of a process that finds its pick on disk: its time, and the modules it imports.

CPU, from the repository root::

    python3 bench/first_hit.py [--runs 10] [--json FILE]

A host function under ``triton_dist.tune.autotune`` (two configs 5 ms
apart, so the stored pick is confident) is tuned once in a fresh process,
with a cache folder of its own; then ``--runs`` fresh processes each time
their first call, which finds the pick on disk. Each reports the call's
time, the kerneltune plugin modules it imported and the third-party
packages it imported. The figure is the median over the runs, the modules
those of the last run. tests/test_hotpath.py runs :func:`first_hit` with
entry-point plugins off and holds the plugin modules to what a hit needs.
Without ``--autoload`` entry-point plugins stay off, as in that test: an
installed plugin may register in a family that a hit otherwise leaves
unimported (docs/measuring.md, "The first call of a process").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = """
import json, sys, time
from triton_dist.tune import autotune

calls = []

@autotune(config_space=[{"pause": 0.005}, {"pause": 0.0}], key_fn=lambda n: n)
def work(n, pause):
    calls.append(pause)
    time.sleep(pause)
    return n

before = set(sys.modules)
start = time.perf_counter()
work(3)
seconds = time.perf_counter() - start
new = set(sys.modules) - before
print(json.dumps({
    "seconds": seconds,
    "hit": len(calls) == 1,
    "plugins": sorted(m for m in new if m.startswith("kerneltune.plugins")),
    "kerneltune": sorted(m for m in new if m.startswith("kerneltune")),
    "third_party": sorted({m.split(".")[0] for m in new if not m.startswith("kerneltune")}),
}))
"""


def first_hit(cache_dir: Path, autoload: bool = False) -> dict[str, Any]:
    """Run the child in a fresh interpreter with picks in ``cache_dir``: what its first call reported."""
    env = {**os.environ, "TRITON_DIST_AUTOTUNE_CACHE_DIR": str(cache_dir)}
    if not autoload:
        env["KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    ran = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", CHILD], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--autoload", action="store_true", help="load entry-point plugins too")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tuned = first_hit(Path(folder), args.autoload)
        assert not tuned["hit"], "the cache folder was not empty"
        runs = [first_hit(Path(folder), args.autoload) for _ in range(args.runs)]
    if not all(run["hit"] for run in runs):
        sys.exit("a run did not find its pick on disk (an uncertain pick, re-checked?)")
    last = runs[-1]
    figures = {
        "first_hit_ms": round(1000 * statistics.median(run["seconds"] for run in runs), 1),
        "plugin_modules": len(last["plugins"]),
        "kerneltune_modules": len(last["kerneltune"]),
        "third_party": last["third_party"],
        "plugins": last["plugins"],
    }
    print(f"first hit: {figures['first_hit_ms']} ms (median of {args.runs} processes)")
    print(f"kerneltune plugin modules imported: {figures['plugin_modules']}")
    print("  " + "\n  ".join(last["plugins"]))
    print(f"third-party packages imported: {', '.join(last['third_party']) or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
