"""Replay a recorded M sweep through the engine's warm start, on the CPU, in any order.

Usage::

    python3 bench/warm_start_replay.py w.json                 # w.json: bench/warm_start.py --out
    python3 bench/warm_start_replay.py w.json --seeds 20 --noise 0.01 --orders up down shuffled

bench/warm_start.py needs a GPU and judges one order (M increasing) once.
This script takes the oracle table such a run recorded (every config's time
at every M) and tunes the sweep again through kerneltune's own engine
(``Tuner.begin`` with ``warm_start="nearest"`` or ``"screen"``, the json cache, the
head-to-head rounds), handing it the table's times with Gaussian noise
instead of running kernels. So a change to the warm-start choice can be
judged in seconds, over many noise seeds and key orders, before a GPU run
confirms it; the GPU run stays the evidence (BENCHMARKS.md).

Printed per order: the share of M whose pick is within 2% and 5% of the
table's best, the worst regret and where, the configs measured and runs
against a full tuning's, and a warm-started key's cost over its full
tuning's (median and max over keys): each run costs the table's time plus
``--run-us`` (on an H200 a timed run's flush and launch, about 45 us), a
model of device time that leaves the host's fixed cost per key out.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path
from typing import Any

from kerneltune.core import Session, Settings
from kerneltune.core.driving import Space, Tuner
from scratch import scratch


def parse_config(text: str) -> dict[str, int]:
    """A config as bench/warm_start.py printed it (``BLOCK_M: 64, ..., maxnreg: None``)."""
    parts = (part.split(": ") for part in text.split(", "))
    return {name: int(value) for name, value in parts if value != "None"}


def replay(
    table: dict[str, Any],
    order: list[int],
    noise: float,
    seed: int,
    budget: int,
    mode: str = "nearest",
    tie_rounds: int = 4,
    run_ms: float = 0.045,
) -> list[dict[str, Any]]:
    """Tune every M of ``table`` in ``order`` with warm start (``mode``); each M's pick, regret, configs
    measured and runs (untimed and timed, as the engine asked for them).

    Each measurement is one sample: the table's time with Gaussian noise of ``noise`` over the
    square root of the timed runs asked for (a mean of that many runs).
    """
    rng = random.Random(seed)
    configs = [parse_config(text) for text in table["configs"]]
    space = Space.build("replayed", configs, source="def replayed(m, config): ...")
    settings = Settings(
        reducer="local",
        cache="json",
        timer="wallclock",
        cache_dir=scratch("kerneltune-replay-"),
        tie_rounds=tie_rounds,
    )
    session = Session.create(settings)
    tuner = Tuner(space)
    results = []
    for index in order:
        row = table["rows"][index]
        times = row["oracle_ms"]
        measured = set()
        spent = 0
        cost = 0.0
        with tuner.begin(session, row["m"], warm_start=mode, warm_start_budget=budget) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                measured.add(candidate.index)
                runs = tuning.runs(candidate)
                spent += runs.warmup + runs.repeat
                cost += (runs.warmup + runs.repeat) * (times[candidate.index] + run_ms)
                sigma = noise / max(1, runs.repeat) ** 0.5
                tuning.record(candidate, [times[candidate.index] * (1 + rng.gauss(0, sigma))])
            pick = tuning.finish().index
        results.append(
            {
                "m": row["m"],
                "regret": times[pick] / min(times) - 1,
                "measured": len(measured),
                "runs": spent,
                "cost_ms": cost,
            }
        )
    started = {}
    for path in settings.get("cache_dir").glob("*/[0-9a-f]*.json"):
        record = json.loads(path.read_text())
        started[record["key"]] = record.get("warm_start") is not None
    for result in results:
        result["warm"] = started.get(result["m"], False)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("table", type=Path, help="bench/warm_start.py's --out file")
    parser.add_argument("--seeds", type=int, default=10, help="noise seeds per order (default 10)")
    parser.add_argument(
        "--noise", type=float, default=0.01, help="relative noise of a measurement (default 0.01)"
    )
    parser.add_argument("--budget", type=int, default=5, help="warm_start_budget (default 5)")
    parser.add_argument("--mode", default="nearest", choices=["nearest", "screen"], help="warm_start mode")
    parser.add_argument("--tie-rounds", type=int, default=4, help="tie_rounds, for every tuning (default 4)")
    parser.add_argument(
        "--run-us", type=float, default=45.0, help="what a run costs besides the kernel (default 45 us)"
    )
    parser.add_argument(
        "--orders", nargs="+", default=["up", "down", "shuffled"], choices=["up", "down", "shuffled"]
    )
    args = parser.parse_args()
    table = json.loads(args.table.read_text())
    count = len(table["rows"])
    configs_times_keys = len(table["configs"]) * count
    print(f"{args.table}: {count} values of M, {len(table['configs'])} configs, {table.get('device', '?')}")
    # What a full tuning of each M costs in runs, the engine's own schedule (one seed: it does not vary).
    run_ms = args.run_us / 1000
    full = replay(table, list(range(count)), args.noise, 0, args.budget, "off", args.tie_rounds, run_ms)
    full_runs = sum(r["runs"] for r in full)
    full_cost = {r["m"]: r["cost_ms"] for r in full}
    for name in args.orders:
        runs = []
        for seed in range(args.seeds):
            order = list(range(count))
            if name == "down":
                order.reverse()
            elif name == "shuffled":
                random.Random(seed).shuffle(order)
            runs.append(
                replay(table, order, args.noise, seed, args.budget, args.mode, args.tie_rounds, run_ms)
            )
        regrets = [r["regret"] for run in runs for r in run]
        worst = max((r for run in runs for r in run), key=lambda r: r["regret"])
        measured = statistics.mean(sum(r["measured"] for r in run) for run in runs)
        spent = statistics.mean(sum(r["runs"] for r in run) for run in runs)
        keys = [r["cost_ms"] / full_cost[r["m"]] for run in runs for r in run if r["warm"]]
        median_key = statistics.median(keys) if keys else float("nan")
        max_key = max(keys, default=float("nan"))
        print(
            f"{name:>8}: within 2% {sum(x <= 0.02 for x in regrets) / len(regrets):.0%}, "
            f"within 5% {sum(x <= 0.05 for x in regrets) / len(regrets):.0%}, "
            f"worst {worst['regret']:.1%} (M={worst['m']}), "
            f"configs measured {measured / configs_times_keys:.2f} of full tuning's, "
            f"runs {spent / full_runs:.2f}, a warm key's cost median {median_key:.2f} max {max_key:.2f}"
        )


if __name__ == "__main__":
    main()
