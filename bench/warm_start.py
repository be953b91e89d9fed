"""Warm start against full tuning on a bf16 matmul swept over M: configs measured, tuning time, regret.

Usage (needs a CUDA device; about 3-5 minutes on one H200)::

    python3 bench/warm_start.py --out warm_start.json
    python3 bench/warm_start.py --smoke          # a tiny CPU version under TRITON_INTERPRET=1

A function-level tuner (``triton_dist.tune.autotune``) around a launcher of
the Triton matmul of tests/contextual_matmul.py (bf16 inputs, N = K = 4096,
its sixteen configs plus eight for small M), keyed by (M, N, K, dtype), is
tuned for 30 values of M from 1 to 16384, in increasing order, twice, each
sweep with a cache directory of its own:

* ``full``: every config measured for every M (``warm_start="off"``);
* ``warm``: ``warm_start="nearest"`` (``--mode screen``: ``"screen"``) with
  ``--budget`` configs (default 5); the first M has no stored neighbour and
  is tuned in full. ``--shuffles K`` warm starts M again in K shuffled
  orders, each with a cache of its own, judged by the same oracle.

The sweeps run side by side: each step tunes every sweep's next M in turn
(starting one sweep further on each step), so that a warm key and its full
tuning are timed moments apart. The same sweep run early or late in one
process can read a warm key at quite different shares of full tuning's
time, as the host's launches get quicker or slower
(docs/benchmark-history.md, 2026-12-03, `f56ab8d`): one sweep after another
put that drift into the ratio.

Every config is compiled first (one full tuning per kind of M Triton
specialises on: 1, a multiple of 16, any other), in a throwaway cache
directory, so both sweeps time tuning, not Triton's compiler. Per M, each
sweep's distinct configs measured and tuning wall time (the first call,
synchronised) are recorded; afterwards an oracle times every config at every
M with ``triton.testing.do_bench`` (median, L2 flushed) in ``--oracle-rounds``
interleaved rounds (each round over all configs, starting one further on)
and takes each config's median over the rounds. Then, per M, the
``--refine-top`` fastest configs and both sweeps' picks are timed again
with a longer ``do_bench`` (``--refine-rep-ms``, default 50 ms) in
``--refine-rounds`` rotated rounds: short calls ranked this matmul's near
ties at large M differently from longer ones and from the tuners' timer
(BENCHMARKS.md). A pick's regret is its refined time over the fastest
refined time, minus one (over the first pass's times with
``--refine-top 0``).

Printed: a row per M, then the share of M whose warm pick is within 2 % and
5 % of the oracle's best (full's beside it), the most configs a warm start
measured, the total tuning time of warm over full (with what a measured
candidate costs on average in each: where a warm start's few runs per
candidate leave that near full tuning's, its time goes per candidate, not
per run), and the worst M. Two
figures separate what warm start loses from what the oracle cannot settle:
the warm pick's time over full tuning's pick's (``vs full``: full tuning
measured every config with the same timer, so this is the price of
measuring five), and per M how far the oracle's two passes disagree
(``passes``: the spread of refined over first-pass times among the configs
both timed). A miss smaller than that spread is listed as undecided: the
oracle ranks those configs differently depending on how long it times them.
``--out`` writes every number as JSON. ``--screen-warmup``,
``--screen-repeat`` and ``--finalist-repeat`` try a screen and finalists with
other run counts (an experiment: the engine has no setting for them);
``--beside-finalist-repeat N`` runs every warm sweep a second time, side by
side with the first, its finalists at most N timed runs a round, judged by the
same oracle (rows ``increasing-fN``, ``shuffled-K-fN``); ``--beside-screen-warmup
N`` does the same with N untimed screen runs per config (rows ``increasing-wN``,
``shuffled-K-wN``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kerneltune.core import add_plugin, hookimpl
from scratch import scratch

TESTS = Path(__file__).resolve().parent.parent / "tests"

M_VALUES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 80, 96, 128, 192, 256, 384, 512, 640, 768, 1024)
M_VALUES += (1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
#: (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages) added to SIXTEEN_CONFIGS, whose BLOCK_M starts at 32.
SMALL_M_CONFIGS = (
    (16, 64, 64, 4, 4),
    (16, 128, 64, 4, 4),
    (16, 256, 64, 4, 3),
    (16, 128, 128, 4, 3),
    (32, 64, 64, 4, 4),
    (32, 128, 64, 4, 4),
    (32, 256, 64, 8, 3),
    (32, 128, 128, 4, 3),
)
#: The CPU smoke run: a few M, a 32 x 32 weight, six configs, float16 (the interpreter has no bf16).
SMOKE_M = (1, 2, 4, 8, 16, 32)
SMOKE_CONFIGS = (
    (16, 16, 16, 1, 2),
    (16, 32, 32, 2, 2),
    (32, 16, 32, 2, 2),
    (32, 32, 16, 4, 2),
    (32, 32, 32, 4, 3),
    (16, 16, 32, 1, 3),
)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=int, help="warm_start_budget (default 5; 2 with --smoke)")
    parser.add_argument(
        "--mode", default="nearest", choices=("nearest", "screen"), help="warm_start (default nearest)"
    )
    parser.add_argument(
        "--shuffles",
        type=int,
        default=0,
        help="also warm start M in this many shuffled orders (seeds 1, 2, ...), each its own cache",
    )
    parser.add_argument("--oracle-rounds", type=int, default=3, help="interleaved oracle rounds (default 3)")
    parser.add_argument(
        "--oracle-rep-ms", type=float, default=5.0, help="do_bench's rep per call (default 5)"
    )
    parser.add_argument(
        "--refine-top",
        type=int,
        default=4,
        help="per M, the oracle's fastest configs timed again, with both tunings' picks (default 4; 0: none)",
    )
    parser.add_argument(
        "--refine-rep-ms", type=float, default=50.0, help="do_bench's rep per call when refining (default 50)"
    )
    parser.add_argument(
        "--refine-rounds", type=int, default=5, help="interleaved rounds when refining (default 5)"
    )
    parser.add_argument(
        "--screen-warmup",
        type=int,
        help="a screen's untimed runs per config, for trying another value (default: the engine's, 1)",
    )
    parser.add_argument(
        "--screen-repeat",
        type=int,
        help="a screen's timed runs per config, for trying another value (default: the engine's, 2)",
    )
    parser.add_argument(
        "--finalist-repeat",
        type=int,
        help="a finalist's timed runs per round at most, to try another value (default: half of repeat)",
    )
    parser.add_argument(
        "--beside-finalist-repeat",
        type=int,
        help="also run every warm sweep with this many finalist runs per round, side by side, same oracle",
    )
    parser.add_argument(
        "--beside-screen-warmup",
        type=int,
        help="also run every warm sweep with this many untimed screen runs per config, side by side",
    )
    parser.add_argument("--nk", type=int, default=4096, help="N = K (default 4096)")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"), help="inputs' dtype")
    parser.add_argument(
        "--cache-root",
        type=Path,
        help="an empty folder for the sweeps' cache directories (default: a temp dir)",
    )
    parser.add_argument("--out", type=Path, help="write every number here as JSON")
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny version on the CPU, in Triton's interpreter"
    )
    return parser.parse_args()


class Tunings:
    """Observer: per tuning of the launcher, the distinct configs measured, the measurements, the pick."""

    def __init__(self, function: str) -> None:
        self.function = function
        self.measured: set[int] = set()
        #: measurements reported (a candidate re-timed in rounds reports each round's).
        self.measurements = 0
        self.pick: int | None = None

    def reset(self) -> None:
        self.measured, self.measurements, self.pick = set(), 0, None

    @hookimpl
    def kerneltune_candidate_measured(self, event: Any) -> None:
        if event.function == self.function:
            self.measured.add(event.candidate.index)
            self.measurements += 1

    @hookimpl
    def kerneltune_tuning_finished(self, event: Any) -> None:
        if event.function == self.function and event.best is not None:
            self.pick = event.best.index

    @hookimpl
    def kerneltune_pick_loaded(self, event: Any) -> None:
        """A pick found without measuring: served by ``tune = "nearest"``, say."""
        if event.function == self.function:
            self.pick = event.best.index


class Workload:
    """The matmul's operands at the largest M, its configs, and how to launch and time it."""

    def __init__(self, smoke: bool, nk: int, dtype_name: str = "bfloat16") -> None:
        import torch
        from contextual_matmul import SIXTEEN_CONFIGS, config, launch_config, make_matmul

        self.torch = torch
        self.smoke = smoke
        self.device = "cpu" if smoke else "cuda"
        self.m_values = SMOKE_M if smoke else M_VALUES
        shapes = SMOKE_CONFIGS if smoke else SMALL_M_CONFIGS
        self.configs = ([] if smoke else list(SIXTEEN_CONFIGS)) + [config(*shape) for shape in shapes]
        self.kernel = make_matmul(self.configs)
        self._launch_config = launch_config
        dtype = torch.float16 if smoke else getattr(torch, dtype_name)
        nk = 32 if smoke else nk
        biggest = max(self.m_values)
        self.a = torch.randn((biggest, nk), device=self.device, dtype=dtype)
        self.b = torch.randn((nk, nk), device=self.device, dtype=dtype)
        self.c = torch.empty((biggest, nk), device=self.device, dtype=torch.float16)

    def operands(self, m: int) -> tuple[Any, Any, Any]:
        return self.a[:m], self.b, self.c[:m]

    def launch(self, m: int, cfg: Any) -> None:
        self._launch_config(self.kernel, cfg, *self.operands(m))

    def synchronize(self) -> None:
        if not self.smoke:
            self.torch.cuda.synchronize()

    def time_ms(self, m: int, cfg: Any, rep_ms: float) -> float:
        """One oracle measurement: do_bench's median on the GPU, a median of wall times in the interpreter."""
        if self.smoke:
            samples = []
            for _ in range(3):
                started = time.perf_counter()
                self.launch(m, cfg)
                samples.append((time.perf_counter() - started) * 1000)
            return statistics.median(samples)
        import triton

        return float(
            triton.testing.do_bench(lambda: self.launch(m, cfg), warmup=1, rep=rep_ms, return_mode="median")
        )

    def check(self, m: int, cfg: Any) -> None:
        a, b, c = self.operands(m)
        self.launch(m, cfg)
        self.synchronize()
        self.torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.5, rtol=0.05)


def tuned_launcher(work: Workload, **options: Any) -> Callable[..., None]:
    """A new function-level tuner around the matmul launcher, keyed by (M, N, K, dtype)."""
    from triton_dist.tune import autotune

    def matmul_launch(a: Any, b: Any, c: Any, cfg: Any) -> None:
        work._launch_config(work.kernel, cfg, a, b, c)

    space = [{"cfg": cfg} for cfg in work.configs]
    return autotune(
        config_space=space, key_fn=lambda a, b, c: (a.shape[0], b.shape[1], a.shape[1], a.dtype), **options
    )(matmul_launch)


@dataclasses.dataclass
class Sweep:
    """One sweep: a tuner over a cache directory of its own, tuning M in ``order``."""

    name: str
    cache: Path
    order: list[int]
    options: dict[str, Any]
    launcher: Callable[..., None] | None = None
    #: the schedule's ``finalist_repeat`` while this sweep tunes (``None``: as it is).
    finalist_repeat: int | None = None
    #: the schedule's ``screen_warmup`` while this sweep tunes (``None``: as it is).
    screen_warmup: int | None = None
    #: environment variables set while this sweep tunes (``KERNELTUNE_TUNE``, say).
    environment: dict[str, str] = dataclasses.field(default_factory=dict)
    rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def sweeps(work: Workload, tunings: Tunings, plans: list[Sweep]) -> None:
    """Run the sweeps side by side: step i tunes each sweep's i-th M in turn, starting one sweep
    further on each step, so that the host's drift during the run lands on every sweep alike.

    A sweep tunes each M with a new key of its own tuner over its own cache
    directory; per M its configs measured, seconds, pick and ``turn`` (the
    how-manieth tuning of the run) go to ``rows``, in increasing M once every
    step is done.
    """
    for plan in plans:
        os.environ["TRITON_DIST_AUTOTUNE_CACHE_DIR"] = str(plan.cache)
        plan.launcher = tuned_launcher(work, **plan.options)
    steps = max(len(plan.order) for plan in plans)
    turn = 0
    for step in range(steps):
        shift = step % len(plans)
        for plan in [*plans[shift:], *plans[:shift]]:
            if step < len(plan.order):
                plan.rows.append({**tune_one(work, tunings, plan, plan.order[step]), "turn": turn})
                turn += 1
    for plan in plans:
        starts = {}
        for path in (plan.cache / "matmul_launch").glob("[0-9a-f]*.json"):
            record = json.loads(path.read_text())
            if "key" in record:  # not the portfolio kerneltune portfolio --store keeps beside the records
                starts[record["key"][0]] = record.get("warm_start")
        for row in plan.rows:
            row["warm_start"] = starts.get(row["m"])
        plan.rows.sort(key=lambda row: row["m"])


def tune_one(work: Workload, tunings: Tunings, plan: Sweep, m: int) -> dict[str, Any]:
    """Tune M with ``plan``'s tuner (a key it has not seen): configs measured, seconds, pick."""
    assert plan.launcher is not None
    from kerneltune.core.machine import tuner

    os.environ["TRITON_DIST_AUTOTUNE_CACHE_DIR"] = str(plan.cache)
    before = {name: os.environ.get(name) for name in plan.environment}
    os.environ.update(plan.environment)
    tunings.reset()
    kept = tuner.Schedule
    counts = {"finalist_repeat": plan.finalist_repeat, "screen_warmup": plan.screen_warmup}
    tuner.Schedule = functools.partial(kept, **{k: v for k, v in counts.items() if v is not None})
    try:
        work.synchronize()
        started = time.perf_counter()
        plan.launcher(*work.operands(m))
        work.synchronize()
        seconds = time.perf_counter() - started
    finally:
        tuner.Schedule = kept
        for name, value in before.items():
            os.environ.pop(name) if value is None else os.environ.update({name: value})
    assert tunings.pick is not None, f"M={m}: no tuning happened (a stale cache in {plan.cache}?)"
    print(
        f"  {plan.name:<12} M={m:<6} {len(tunings.measured):>3} configs {seconds:8.3f} s  "
        f"pick [{tunings.pick}]",
        flush=True,
    )
    return {
        "m": m,
        "measured": len(tunings.measured),
        "measurements": tunings.measurements,
        "seconds": seconds,
        "pick": tunings.pick,
    }


def shuffled_summary(
    name: str, rows: list[dict[str, Any]], full: list[dict[str, Any]], judges: dict[int, dict[int, float]]
) -> dict[str, Any]:
    """One order's warm sweep against the oracle and against full tuning's time, key by key."""
    regrets = {row["m"]: regret(judges[row["m"]], row["pick"]) for row in rows}
    full_s = {row["m"]: row["seconds"] for row in full}
    ratios = [row["seconds"] / full_s[row["m"]] for row in rows if row["warm_start"] is not None]
    worst = max(regrets, key=regrets.__getitem__)
    return {
        "order": name,
        "within_2pct": sum(r <= 0.02 for r in regrets.values()) / len(regrets),
        "worst_m": worst,
        "worst_regret": regrets[worst],
        "warm_keys": len(ratios),
        "key_time_ratio_median": statistics.median(ratios) if ratios else None,
        "key_time_ratio_max": max(ratios) if ratios else None,
        "picks": {str(row["m"]): row["pick"] for row in rows},
    }


def interleaved_ms(
    work: Workload, m: int, indices: list[int], rounds: int, rep_ms: float
) -> dict[int, float]:
    """At ``m``, each config's median over ``rounds`` interleaved rounds, each starting one config further."""
    samples: dict[int, list[float]] = {i: [] for i in indices}
    for round_ in range(rounds):
        for i in indices[round_ % len(indices) :] + indices[: round_ % len(indices)]:
            samples[i].append(work.time_ms(m, work.configs[i], rep_ms))
    return {i: statistics.median(values) for i, values in samples.items()}


def oracle(work: Workload, rounds: int, rep_ms: float) -> dict[int, list[float]]:
    """Per M, each config's median over interleaved rounds of single-config measurements."""
    times = {}
    everyone = list(range(len(work.configs)))
    for m in work.m_values:
        medians = interleaved_ms(work, m, everyone, rounds, rep_ms)
        times[m] = [medians[i] for i in everyone]
        print(f"  M={m:<6} fastest {min(times[m]):.4f} ms", flush=True)
    return times


def refine(
    work: Workload,
    times: dict[int, list[float]],
    picks: dict[int, set[int]],
    top: int,
    rounds: int,
    rep_ms: float,
) -> dict[int, dict[int, float]]:
    """Per M, the ``top`` fastest configs and ``picks[m]`` timed again with a longer rep; their medians.

    Short do_bench calls rank near ties differently from longer ones and
    from the tuners' timer on this matmul at large M (BENCHMARKS.md,
    ``bench/timing_regimes.py``); every pick judged is in the refined set, so
    a regret compares times taken the same way.
    """
    refined = {}
    for m, row in times.items():
        chosen = sorted(set(sorted(range(len(row)), key=row.__getitem__)[:top]) | picks[m])
        refined[m] = interleaved_ms(work, m, chosen, rounds, rep_ms)
        print(f"  M={m:<6} refined fastest {min(refined[m].values()):.4f} ms", flush=True)
    return refined


def regret(times: dict[int, float], pick: int) -> float:
    """The pick's time over the fastest of ``times``, minus one."""
    return times[pick] / min(times.values()) - 1


def disagreement(first: list[float], refined: dict[int, float]) -> float:
    """How far the oracle's two passes disagree at one M: the spread of refined over first-pass time.

    Over the configs both passes timed: the largest ratio of a config's
    refined time to its first-pass time over the smallest, minus one. A
    pass that ran every config slower by the same factor gives 0; 0.2 means
    one config lost 20% against another between the passes. A regret
    smaller than this is within what the oracle cannot tell apart.
    """
    ratios = [ms / first[i] for i, ms in refined.items()]
    return max(ratios) / min(ratios) - 1 if len(ratios) > 1 else 0.0


def summary(rows: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    def share(kind: str, limit: float, figure: str = "regret") -> float:
        return sum(1 for row in rows if row[kind][figure] <= limit) / len(rows)

    worst = max(rows, key=lambda row: row["warm"]["regret"])
    worst_vs_full = max(rows, key=lambda row: row["warm"]["against_full"])
    full_s = sum(row["full"]["seconds"] for row in rows)
    warm_s = sum(row["warm"]["seconds"] for row in rows)
    later = rows[1:]  # the first M warm starts from nothing

    def per_measurement(kind: str) -> float:
        count = sum(row[kind]["measurements"] for row in later)
        return 1e3 * sum(row[kind]["seconds"] for row in later) / count if count else math.nan

    return {
        "warm_within_2pct": share("warm", 0.02),
        "warm_within_5pct": share("warm", 0.05),
        "full_within_2pct": share("full", 0.02),
        "full_within_5pct": share("full", 0.05),
        "warm_max_measured": max(row["warm"]["measured"] for row in rows),
        "warm_max_measured_after_first": max((row["warm"]["measured"] for row in rows[1:]), default=0),
        "budget": budget,
        "full_seconds": full_s,
        "warm_seconds": warm_s,
        "time_ratio": warm_s / full_s,
        # What a measured candidate costs on average, runs and all: where a warm start's fewer runs
        # per candidate leave this near full tuning's, the cost is per candidate, not per run.
        "full_ms_per_measurement": per_measurement("full"),
        "warm_ms_per_measurement": per_measurement("warm"),
        "measurements_ratio": sum(r["warm"]["measurements"] for r in later)
        / max(1, sum(r["full"]["measurements"] for r in later)),
        "worst_m": worst["m"],
        "worst_regret": worst["warm"]["regret"],
        "warm_vs_full_within_2pct": share("warm", 0.02, "against_full"),
        "warm_vs_full_within_5pct": share("warm", 0.05, "against_full"),
        "worst_vs_full_m": worst_vs_full["m"],
        "worst_vs_full": worst_vs_full["warm"]["against_full"],
        # Keys where a pick missed by more than 2% but by less than the oracle's passes disagree.
        "undecided_m": [
            row["m"]
            for row in rows
            if 0.02 < max(row["warm"]["regret"], row["full"]["regret"]) <= row["oracle_disagreement"]
        ],
    }


def finalist_runs(most: int | None) -> str:
    return "half of repeat" if most is None else f"at most {most}"


def screen_runs(warmup: int | None, repeat: int | None, finalist: int | None = None) -> dict[str, int | None]:
    """Give a screen ``warmup`` untimed and ``repeat`` timed runs per config, and a finalist at most
    ``finalist`` timed runs per round (``None``: the engine's); the counts in force.

    An experiment, not a setting: every tuner of this process makes its
    schedule with these counts, so that a lease can weigh fewer runs against the picks.
    """
    from kerneltune.core.machine import tuner
    from kerneltune.core.machine.schedule import Schedule

    asked = {"screen_warmup": warmup, "screen_repeat": repeat, "finalist_repeat": finalist}
    tuner.Schedule = functools.partial(Schedule, **{k: v for k, v in asked.items() if v is not None})
    schedule = tuner.Schedule(warmup=0, repeat=1)
    return {
        "warmup": schedule.screen_warmup,
        "repeat": schedule.screen_repeat,
        "finalist": schedule.finalist_repeat,
    }


def main() -> int:
    options = arguments()
    if options.smoke:
        # Before Triton is imported: its interpreter runs the kernels on the CPU.
        os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, str(TESTS))
    os.environ.setdefault("KERNELTUNE_PROGRESS", "0")
    os.environ["KERNELTUNE_CACHE"] = "json"
    for name in ("TRITON_DIST_AUTOTUNE_ALWAYS_TUNE", "KERNELTUNE_WARM_START", "KERNELTUNE_WARM_START_BUDGET"):
        os.environ.pop(name, None)
    import torch
    import triton

    if not options.smoke and not torch.cuda.is_available():
        print("bench/warm_start.py needs a CUDA device (or --smoke)", file=sys.stderr)
        return 1
    if options.budget is None:
        options.budget = 2 if options.smoke else 5
    runs = screen_runs(options.screen_warmup, options.screen_repeat, options.finalist_repeat)
    print(
        f"screen: {runs['warmup']} untimed and {runs['repeat']} timed runs per config; "
        f"finalists: {finalist_runs(runs['finalist'])} timed runs per round"
    )
    root = scratch("warm-start-") if options.cache_root is None else options.cache_root
    if any((root / kind).exists() for kind in ("compile", "full", "warm")):
        print(
            f"{root} holds the cache directories of an earlier run; give an empty --cache-root",
            file=sys.stderr,
        )
        return 1
    if options.smoke:
        # A few runs per candidate: the interpreter takes milliseconds per launch.
        settings = root / "kerneltune.toml"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text("warmup = 1\nrepeat = 2\ntie_rounds = 1\n")
        os.environ["KERNELTUNE_CONFIG"] = str(settings)
    torch.manual_seed(0)
    work = Workload(options.smoke, options.nk, options.dtype)
    tunings = Tunings("matmul_launch")
    add_plugin(tunings)
    device = "cpu (interpreter)" if options.smoke else torch.cuda.get_device_name(0)
    print(
        f"device {device}, torch {torch.__version__}, triton {triton.__version__}; "
        f"{len(work.configs)} configs, {len(work.m_values)} values of M, N = K = {work.b.shape[0]}, "
        f"{work.a.dtype}; cache dirs under {root}",
        flush=True,
    )
    started = time.perf_counter()
    if not options.smoke:
        print("compiling every config (one full tuning per kind of M Triton specialises on)", flush=True)
        os.environ["TRITON_DIST_AUTOTUNE_CACHE_DIR"] = str(root / "compile")
        compiling = tuned_launcher(work, warm_start="off")
        for m in (1, 16, 24):
            compiling(*work.operands(m))
        work.synchronize()
    warm_options = {"warm_start": options.mode, "warm_start_budget": options.budget}
    increasing = list(work.m_values)
    plans = [
        Sweep("full", root / "full", increasing, {"warm_start": "off"}),
        Sweep("warm", root / "warm", increasing, warm_options),
    ]
    for seed in range(1, options.shuffles + 1):
        order = list(work.m_values)
        random.Random(seed).shuffle(order)
        plans.append(Sweep(f"shuffled-{seed}", root / f"warm-{seed}", order, warm_options))
    warm_plans = plans[1:]
    for tag, field, beside in (
        ("f", "finalist_repeat", options.beside_finalist_repeat),
        ("w", "screen_warmup", options.beside_screen_warmup),
    ):
        if beside is None:
            continue
        plans += [
            Sweep(
                f"{'increasing' if plan.name == 'warm' else plan.name}-{tag}{beside}",
                plan.cache.with_name(f"{plan.cache.name}-{tag}{beside}"),
                plan.order,
                warm_options,
                **{field: beside},
            )
            for plan in warm_plans
        ]
    print(
        f"full tuning and warm start {options.mode} (budget {options.budget}), M in order, and "
        f"{options.shuffles} shuffled orders, side by side:",
        flush=True,
    )
    sweeps(work, tunings, plans)
    full, warm = plans[0].rows, plans[1].rows
    shuffles = {plan.name: plan.rows for plan in plans[2:]}
    print(f"oracle ({options.oracle_rounds} interleaved rounds per M):", flush=True)
    times = oracle(work, options.oracle_rounds, options.oracle_rep_ms)
    refined: dict[int, dict[int, float]] = {}
    if options.refine_top > 0:
        print(
            f"refining ({options.refine_top} fastest and both picks per M, {options.refine_rounds} rounds, "
            f"rep {options.refine_rep_ms:g} ms):",
            flush=True,
        )
        picks = {f["m"]: {f["pick"], w["pick"]} for f, w in zip(full, warm, strict=True)}
        for rows_of_order in shuffles.values():
            for row in rows_of_order:
                picks[row["m"]].add(row["pick"])
        refined = refine(work, times, picks, options.refine_top, options.refine_rounds, options.refine_rep_ms)
    for m, picked in ((work.m_values[0], warm[0]), (work.m_values[-1], warm[-1])):
        work.check(m, work.configs[picked["pick"]])
    rows = []
    for f, w in zip(full, warm, strict=True):
        m = f["m"]
        # Picks are judged by the refined times where there are some, else by the first pass's.
        judge = refined.get(m) or dict(enumerate(times[m]))
        rows.append(
            {
                "m": m,
                "oracle_ms": times[m],
                "refined_ms": {str(i): ms for i, ms in refined.get(m, {}).items()},
                "oracle_disagreement": disagreement(times[m], refined.get(m, {})),
                "best": min(judge, key=judge.__getitem__),
                "full": {**f, "regret": regret(judge, f["pick"])},
                "warm": {
                    **w,
                    "regret": regret(judge, w["pick"]),
                    "against_full": judge[w["pick"]] / judge[f["pick"]] - 1,
                },
            }
        )
    totals = summary(rows, options.budget)
    judges = {m: refined.get(m) or dict(enumerate(times[m])) for m in work.m_values}
    orders = [shuffled_summary("increasing", warm, full, judges)]
    orders += [shuffled_summary(name, rows_of, full, judges) for name, rows_of in shuffles.items()]
    totals["orders"] = orders
    columns = f"{'n':>6} {'s':>7} {'regret':>7}"
    print(f"\n{'M':>6} {'best ms':>9} {'passes':>7} | full {columns} | warm {columns} {'vs full':>7}  from")
    for row in rows:
        f, w = row["full"], row["warm"]
        start = "" if w["warm_start"] is None else f"M={w['warm_start']['from'][0]}"
        best_ms = min(row["refined_ms"].values(), default=min(row["oracle_ms"]))
        print(
            f"{row['m']:>6} {best_ms:>9.4f} {row['oracle_disagreement']:>7.1%} |      {f['measured']:>6} "
            f"{f['seconds']:>7.3f} {f['regret']:>7.2%} |      {w['measured']:>6} {w['seconds']:>7.3f} "
            f"{w['regret']:>7.2%} {w['against_full']:>+7.2%}  {start}"
        )
    print(
        f"\nwarm start within 2 %: {totals['warm_within_2pct']:.0%} of M, within 5 %: "
        f"{totals['warm_within_5pct']:.0%} (full tuning: {totals['full_within_2pct']:.0%}, "
        f"{totals['full_within_5pct']:.0%})\n"
        f"configs measured by a warm start: at most {totals['warm_max_measured_after_first']} after the "
        f"first M (budget {options.budget}; the first M, with nothing stored, measured "
        f"{warm[0]['measured']})\n"
        f"tuning time: warm {totals['warm_seconds']:.2f} s, full {totals['full_seconds']:.2f} s, "
        f"ratio {totals['time_ratio']:.3f}; per measured candidate: warm "
        f"{totals['warm_ms_per_measurement']:.2f} ms, full {totals['full_ms_per_measurement']:.2f} ms "
        f"(measurements: warm / full {totals['measurements_ratio']:.2f})\n"
        f"worst M: {totals['worst_m']} (warm regret {totals['worst_regret']:.2%})\n"
        f"warm pick against full tuning's pick: within 2 % at {totals['warm_vs_full_within_2pct']:.0%} of M, "
        f"within 5 % at {totals['warm_vs_full_within_5pct']:.0%} (worst M={totals['worst_vs_full_m']}, "
        f"{totals['worst_vs_full']:+.2%})\n"
        f"M where a pick missed by more than 2 % but less than the oracle's passes disagree: "
        f"{', '.join(f'M={m}' for m in totals['undecided_m']) or 'none'}\n"
        f"bench wall time {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    print(
        f"\nper order (warm_start = {options.mode!r}); a key's time over its full tuning's, warm keys only:"
    )
    for entry in orders:
        print(
            f"  {entry['order']:<12} within 2 %: {entry['within_2pct']:.0%}, "
            f"worst {entry['worst_regret']:.2%} "
            f"(M={entry['worst_m']}), key time / full: median {entry['key_time_ratio_median']:.2f}, "
            f"max {entry['key_time_ratio_max']:.2f} over {entry['warm_keys']} keys",
            flush=True,
        )
    if options.out is not None:
        result = {
            "device": device,
            "torch": torch.__version__,
            "triton": triton.__version__,
            "nk": work.b.shape[0],
            "dtype": str(work.a.dtype),
            "configs": [str(cfg) for cfg in work.configs],
            "budget": options.budget,
            "mode": options.mode,
            "screen_runs": screen_runs(options.screen_warmup, options.screen_repeat, options.finalist_repeat),
            "oracle_rounds": options.oracle_rounds,
            "refine": {
                "top": options.refine_top,
                "rounds": options.refine_rounds,
                "rep_ms": options.refine_rep_ms,
            },
            "rows": rows,
            "summary": totals,
        }
        options.out.write_text(json.dumps(result, indent=2))
        print(f"wrote {options.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
