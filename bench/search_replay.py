"""Replay bench/search_quality.py's oracle tables through the search strategies, on the CPU.

Usage::

    python3 bench/search_replay.py tests/data/h200_search_quality_landscapes.json
    python3 bench/search_replay.py q.json --strategies pattern staged --seeds 40 --effort quick
    python3 bench/search_replay.py q.json --kernels reduction --noise 0.005

bench/search_quality.py needs a GPU and runs each strategy 5 times. This
script takes the oracle table such a run recorded (``--out``: every point's
time, by the label the kernel gives it) and hands each strategy the same
space, built from the table's parameters and values and the H200's
profile family, answering every measurement from the table with Gaussian
noise (``--noise``, relative). The finalists are then told apart as stage 3
would, with a third of that noise (``--final-noise``), and the fastest is
the pick. So a change to a strategy can be judged in seconds, over many
noise seeds, before a GPU run confirms it; the GPU run stays the evidence
(BENCHMARKS.md).

Printed per kernel and strategy: the share of the space measured (mean and
most), and the worst and mean regret of the picks against the table's
fastest point.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import statistics
from pathlib import Path
from typing import Any

from kerneltune.core import Session, load_settings
from kerneltune.core.plugin_system.registry import Registry
from kerneltune.core.search.families import family_probes, family_profiles
from kerneltune.core.values.geometry import Point, SearchBudget, SearchGeometry
from kerneltune.core.values.profiles import CompileTarget
from kerneltune.plugins.profiles.nvidia import NvidiaMatrixProfiles, NvidiaVectorProfiles

#: What bench/search_quality.py compiled for: an H200 under triton 3.6.
H200 = CompileTarget(
    backend="cuda",
    arch=90,
    warp_size=32,
    options=frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"}),
)
FAMILIES = {"nvidia-matrix": NvidiaMatrixProfiles, "nvidia-vector": NvidiaVectorProfiles}


def geometry_of(kernel: dict[str, Any]) -> SearchGeometry:
    """The space a recorded kernel searched.

    As the oracle recorded it (``geometry``), or, in tables recorded before
    it did, from the parameters, values and family name, with the
    family's profiles and probes for an H200.

    :raises ValueError: when the table's labels are not that space's points.
    """
    recorded = kernel.get("geometry")
    if recorded is not None:
        geometry = SearchGeometry(
            tuple(recorded["params"]),
            tuple(tuple(values) for values in recorded["values"]),
            tuple(recorded["profiles"]),
            tuple(recorded["probes"]),
            tuple(tuple(seed) for seed in recorded["seeds"]),
            recorded["family"],
        )
    else:
        family = FAMILIES[kernel["family"]]()
        profiles = family_profiles(family, H200)
        probes = tuple(profiles.index(p) for p in family_probes(family, H200, profiles))
        axes = tuple(tuple(values) for values in kernel["values"])
        geometry = SearchGeometry(tuple(kernel["params"]), axes, tuple(profiles), probes)
    labels = {geometry.label(point) for point in geometry.points()}
    if labels != set(kernel["table_ms"]):
        raise ValueError("the table's labels are not the points of its space (another family or target?)")
    return geometry


def replay(
    kernel: dict[str, Any], strategy: str, *, noise: float, final_noise: float, seed: int, effort: str
) -> dict[str, float]:
    """One search of a recorded kernel: its share of the space measured and its pick's regret.

    :param kernel: one kernel of the table's ``kernels``, as bench/search_quality.py
        wrote it (its ``oracle`` holds the table) or as tests/data keeps it (the table alone).
    """
    kernel = {**kernel, **kernel.get("oracle", {})}
    geometry = geometry_of(kernel)
    table = kernel["table_ms"]
    fastest = min(t for t in table.values() if t is not None)
    rng = random.Random(seed)

    def time_of(point: Point) -> float:
        value = table[geometry.label(point)]
        return math.inf if value is None else value

    asked: set[Point] = set()

    def measure(points: list[Point]) -> dict[Point, float]:
        asked.update(points)
        return {p: time_of(p) * (1 + rng.gauss(0, noise)) for p in points}

    found = (
        installed_strategies()
        .select(strategy)()
        .search(geometry, measure, SearchBudget(effort=effort), lambda line: None)
    )
    pick = min(found, key=lambda p: time_of(p) * (1 + rng.gauss(0, final_noise)))
    return {"share": len(asked) / geometry.space_size, "regret": time_of(pick) / fastest - 1}


@functools.cache
def installed_strategies() -> Registry[Any]:
    """The strategies installed here (built-ins and plugins), as ``kerneltune plugins`` lists them."""
    return Session.create(load_settings()).registries.search_strategies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("table", type=Path, help="bench/search_quality.py's --out file")
    parser.add_argument("--kernels", nargs="+", help="kernel kinds of the table (default: all)")
    parser.add_argument("--strategies", nargs="+", default=["pattern", "staged"])
    parser.add_argument("--seeds", type=int, default=20, help="noise seeds per strategy (default 20)")
    parser.add_argument(
        "--noise", type=float, default=0.01, help="relative noise of a measurement (default 0.01)"
    )
    parser.add_argument(
        "--final-noise", type=float, help="relative noise of stage 3's re-timing (default: --noise / 3)"
    )
    parser.add_argument("--effort", default="default", choices=["quick", "default", "full"])
    args = parser.parse_args(argv)
    final_noise = args.noise / 3 if args.final_noise is None else args.final_noise
    recorded = json.loads(args.table.read_text())
    kernels = recorded["kernels"]
    for name in args.kernels or list(kernels):
        for strategy in args.strategies:
            noises = {"noise": args.noise, "final_noise": final_noise}
            runs = [
                replay(kernels[name], strategy, **noises, seed=seed, effort=args.effort)
                for seed in range(args.seeds)
            ]
            shares = [r["share"] for r in runs]
            regrets = [r["regret"] for r in runs]
            share, regret = statistics.mean(shares), statistics.mean(regrets)
            print(
                f"{name:>10} {strategy:>10}: share {share:.1%} (at most {max(shares):.1%}), "
                f"regret worst {max(regrets):.2%}, mean {regret:.2%}"
            )


if __name__ == "__main__":
    main()
