"""One rank of the torch.distributed tests (test_distributed.py starts one process per rank).

Usage::

    python multirank_worker.py RANK WORLD RUN_DIR BACKEND SCENARIO[,SCENARIO...]

Each scenario runs on every rank, in order, with a WORLD barrier between
scenarios and a cache directory of its own; its outcome (a dict of facts, or the exception it raised and how
long that took) goes to ``RUN_DIR/rank<RANK>.json`` as soon as it is known, so
a hang still leaves the earlier outcomes behind. The tuned functions live in
this file, so their fingerprints are the same on every rank.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from kerneltune.plugins.caches import files

from triton_dist.tune import autotune

# Collectives hang for at most this long before gloo raises; test_distributed.py
# waits longer for the processes, so a hang surfaces as an error in the outcomes.
GROUP_TIMEOUT_S = 30
SLOW_MS = 40.0
FAST_MS = 5.0
MIDDLE_MS = 20.0


class Collectives:
    """Counts the torch.distributed calls made through the module, by kind and group."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        for name in ("all_gather_object", "all_gather", "all_reduce", "barrier"):
            self._wrap(name)

    def _wrap(self, name: str) -> None:
        original = getattr(dist, name)

        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            group = kwargs.get("group")
            self.calls.append((name, "world" if group is None else dist.get_process_group_ranks(group)))
            return original(*args, **kwargs)

        setattr(dist, name, counted)

    def take(self) -> dict[str, Any]:
        """The calls since the last take: counts by kind, and the groups they ran on."""
        calls, self.calls = self.calls, []
        counts: dict[str, int] = {}
        for name, _ in calls:
            counts[name] = counts.get(name, 0) + 1
        return {"counts": counts, "groups": sorted({json.dumps(group) for _, group in calls})}


class Stores:
    """Counts cache writes made by this rank."""

    def __init__(self) -> None:
        self.count = 0
        original = files.FileCache.store

        def counted(cache: files.FileCache, *args: Any) -> None:
            self.count += 1
            original(cache, *args)

        files.FileCache.store = counted

    def take(self) -> int:
        count, self.count = self.count, 0
        return count


class Rank:
    """What a scenario may use: this rank's identity, the run's folders and the counters."""

    def __init__(self, rank: int, world: int, run_dir: Path, backend: str) -> None:
        self.rank = rank
        self.world = world
        self.run_dir = run_dir
        self.device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        self.collectives = Collectives()
        self.stores = Stores()

    def cache_dir(self) -> Path:
        return Path(os.environ["TRITON_DIST_AUTOTUNE_CACHE_DIR"])

    def records(self, function: str, cache_dir: Path | None = None) -> list[dict[str, Any]]:
        folder = (cache_dir or self.cache_dir()) / function
        return [json.loads(p.read_text()) for p in sorted(folder.glob("[0-9a-f]*.json"))]

    def log_files(self, function: str) -> list[str]:
        return sorted(p.name for p in (self.cache_dir() / function).glob("tune-rank*.log"))


def outcome(step: Callable[[], Any]) -> dict[str, Any]:
    """Run one step: its value, or the exception it raised; and how long it took."""
    start = time.monotonic()
    try:
        result: dict[str, Any] = {"value": step()}
    except Exception as exc:
        result = {"error": type(exc).__name__, "message": str(exc)}
    result["seconds"] = time.monotonic() - start
    return result


def with_env(name: str, value: str | None, step: Callable[[], Any]) -> Any:
    previous = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        return step()
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


# -- the tuned host functions ------------------------------------------------------
#
# ``delays`` (per rank) say how long each config takes, in milliseconds, and
# ``calls`` records every run; neither belongs in the key.


def by_size(x: int, *rest: Any) -> int:
    return x


def sleepy(x: int, delays: dict[int, float], calls: list[int], *rest: Any, cfg: int) -> int:
    calls.append(cfg)
    time.sleep(delays[cfg] / 1000)
    return cfg


def flaky(x: int, delays: dict[int, float], calls: list[int], bad_rank: int, *, cfg: int) -> int:
    calls.append(cfg)
    if cfg == 0 and dist.get_rank() == bad_rank:
        raise RuntimeError(f"config 0 ran out of memory on rank {bad_rank}")
    time.sleep(delays[cfg] / 1000)
    return cfg


def wrong_on(x: torch.Tensor, delays: dict[int, float], bad_rank: int, *, cfg: int) -> torch.Tensor:
    time.sleep(delays[cfg] / 1000)
    if cfg == 1 and dist.get_rank() == bad_rank:
        return x[:-1].sum()  # drops the remainder, on one rank only
    return x.sum()


def summed(x: torch.Tensor, chunks: int) -> torch.Tensor:
    total = x.clone()
    for part in total.chunk(chunks):
        dist.all_reduce(part)
    return total


def no_key_on(x: int, bad_rank: int) -> Any:
    if dist.get_rank() == bad_rank and x > 1:
        raise ValueError(f"key_fn cannot read x on rank {bad_rank}")
    return x


def odd_key_on(x: int, bad_rank: int, bad_key: str) -> Any:
    if dist.get_rank() != bad_rank:
        return x
    return [x] if bad_key == "unhashable" else frozenset({x})


def light(x: int, *rest: Any, cfg: int) -> int:
    return x + cfg


class VerboseLines(list[str]):
    """The verbose lines shown while it is entered (INFO records of the ``kerneltune`` loggers)."""

    def __enter__(self) -> VerboseLines:
        self._handler = logging.Handler(logging.INFO)
        self._handler.emit = lambda record: self.append(record.getMessage())  # type: ignore[method-assign]
        logger = logging.getLogger("kerneltune")
        self._level = logger.level
        logger.setLevel(logging.INFO)
        logger.addHandler(self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("kerneltune")
        logger.removeHandler(self._handler)
        logger.setLevel(self._level)


def report_of(function: str) -> str:
    """What ``kerneltune report FUNCTION`` prints for the scenario's cache directory."""
    from click.testing import CliRunner
    from kerneltune import cli

    shown = CliRunner().invoke(cli.main, ["report", function], catch_exceptions=False)
    return shown.stdout if shown.exit_code == 0 else f"exit {shown.exit_code}: {shown.output}"


def tuned(fn: Callable[..., Any], configs: int, key_fn: Callable[..., Any] = by_size, **kw: Any) -> Any:
    """A fresh AutoTuner: every call of this makes one with its own in-process picks."""
    return autotune([{"cfg": i} for i in range(configs)], key_fn=key_fn, **kw)(fn)


# -- scenarios ------------------------------------------------------------------------


def slowest_rank_decides(ctx: Rank) -> dict[str, Any]:
    # Config r is fast on rank r only; config `world` is middling everywhere, so it
    # minimises the slowest rank's time while each rank alone would pick its own.
    configs = ctx.world + 1
    delays = {c: FAST_MS if c == ctx.rank else SLOW_MS for c in range(ctx.world)} | {ctx.world: MIDDLE_MS}
    calls: list[int] = []
    ctx.collectives.take()
    ctx.stores.take()
    pick = tuned(sleepy, configs)(1, delays, calls)
    collectives, stores = ctx.collectives.take(), ctx.stores.take()
    dist.barrier()
    (record,) = ctx.records("sleepy")
    return {
        "pick": pick,
        "own_argmin": min(delays, key=delays.__getitem__),
        "measured": sorted(set(calls)),
        "times": [c["time_ms"] for c in record["candidates"]],
        "rank_times": [c["rank_times_ms"] for c in record["candidates"]],
        "collectives": collectives,
        "stores": stores,
        "logs": ctx.log_files("sleepy"),
    }


def sharded(ctx: Rank) -> dict[str, Any]:
    # Config 3 is the fastest on every rank; each rank measures every world-th config, so
    # rank 3 % world (never rank 0, which writes the record) measures the pick.
    configs = 2 * ctx.world + 1
    delays = {c: 1.0 if c == 3 else 4.0 + c for c in range(configs)}
    calls: list[int] = []
    ctx.collectives.take()
    with VerboseLines() as shown:
        pick = with_env(
            "KERNELTUNE_SHARD", "1", lambda: tuned(sleepy, configs)(1, delays, calls, autotune_verbose=True)
        )
    collectives = ctx.collectives.take()
    dist.barrier()
    (record,) = ctx.records("sleepy")
    # A new process's tuner: the stored pick serves it, on every rank, with nothing measured.
    again: list[int] = []
    with_env("KERNELTUNE_SHARD", "1", lambda: tuned(sleepy, configs)(1, delays, again))
    dist.barrier()
    return {
        "pick": pick,
        "calls": calls,
        "again": again,
        "collectives": collectives,
        "shards": record["measured_with"]["shards"],
        "finite": sum(1 for c in record["candidates"] if c["time_ms"] is not None),
        "rows": [
            {"error": c["error"], "samples": len(c["samples_ms"]), "measured_on": c.get("measured_on")}
            for c in record["candidates"]
        ],
        "verbose": shown,
        "report": report_of("sleepy") if ctx.rank == 0 else "",
    }


def verbose_under_max(ctx: Rank) -> dict[str, Any]:
    # As in slowest_rank_decides: config r is fast on rank r alone, config `world` middling.
    configs = ctx.world + 1
    delays = {c: FAST_MS if c == ctx.rank else SLOW_MS for c in range(ctx.world)} | {ctx.world: MIDDLE_MS}
    with VerboseLines() as shown:
        pick = tuned(sleepy, configs)(1, delays, [], autotune_verbose=True)
    dist.barrier()
    (record,) = ctx.records("sleepy")
    return {
        "pick": pick,
        "verbose": shown,
        "times": [c["time_ms"] for c in record["candidates"]],
        "rank_times": [c["rank_times_ms"] for c in record["candidates"]],
    }


def counts_per_tuning(ctx: Rank) -> dict[str, Any]:
    counts = {}
    for n in (1, 3, 6):
        fn = tuned(light, n)
        ctx.collectives.take()
        fn(n)
        counts[f"tune {n}"] = ctx.collectives.take()
        fn(n)
        counts[f"hit {n}"] = ctx.collectives.take()
        tuned(light, n)(n)
        counts[f"disk {n}"] = ctx.collectives.take()
    # Asked for on rank 0 only, the check still runs on every rank.
    verify = "1" if ctx.rank == 0 else None
    with_env("KERNELTUNE_VERIFY_PICK", verify, lambda: tuned(light, 4)(40))
    counts["verify 4"] = ctx.collectives.take()
    return counts


def disk_hit_on_one_rank(ctx: Rank) -> dict[str, Any]:
    alone = dist.new_group([0])
    own_dir = str(ctx.run_dir / f"cache-rank{ctx.rank}")

    def run() -> dict[str, Any]:
        seeded = None
        if ctx.rank == 0:
            # Rank 0 tunes alone, so only its cache holds a record (picking config 1).
            seeded = tuned(sleepy, 3)(5, {0: SLOW_MS, 1: FAST_MS, 2: SLOW_MS}, [], autotune_pg=alone)
        calls: list[int] = []
        ctx.collectives.take()
        # Measured, config 0 would win here: a pick of 1 shows the record was shared.
        pick = tuned(sleepy, 3)(5, {0: FAST_MS, 1: SLOW_MS, 2: SLOW_MS}, calls)
        collectives = ctx.collectives.take()
        again_calls: list[int] = []
        again = tuned(sleepy, 3)(5, {0: FAST_MS, 1: SLOW_MS, 2: SLOW_MS}, again_calls)
        return {
            "seeded": seeded,
            "pick": pick,
            "calls": calls,
            "collectives": collectives,
            "stored": [r["best"]["index"] for r in ctx.records("sleepy")],
            "next_run": {"pick": again, "calls": again_calls, "collectives": ctx.collectives.take()},
        }

    return with_env("TRITON_DIST_AUTOTUNE_CACHE_DIR", own_dir, run)


def tune_switches(ctx: Rank) -> dict[str, Any]:
    alone = dist.new_group([0])
    own_dir = str(ctx.run_dir / f"cache-rank{ctx.rank}")

    def run() -> dict[str, Any]:
        # No rank holds a pick for key 7: every rank raises, and the group still works.
        failing = outcome(lambda: with_env("KERNELTUNE_TUNE", "fail", lambda: tuned(light, 3)(7)))
        if ctx.rank == 0:
            # Rank 0 tunes alone, so only its cache holds a record (picking config 1).
            tuned(sleepy, 3)(5, {0: SLOW_MS, 1: FAST_MS, 2: SLOW_MS}, [], autotune_pg=alone)
        calls: list[int] = []
        delays = {0: FAST_MS, 1: SLOW_MS, 2: SLOW_MS}
        served = with_env("KERNELTUNE_TUNE", "fail", lambda: tuned(sleepy, 3)(5, delays, calls))
        never_calls: list[int] = []
        ctx.collectives.take()
        never = with_env("KERNELTUNE_TUNE", "never", lambda: tuned(sleepy, 3)(6, delays, never_calls))
        return {
            "failing": failing,
            "served": served,
            "calls": calls,
            "never": never,
            "never_calls": never_calls,
            "never_collectives": ctx.collectives.take(),
        }

    return with_env("TRITON_DIST_AUTOTUNE_CACHE_DIR", own_dir, run)


def prune_differs(ctx: Rank) -> int:
    return tuned(light, ctx.world + 1, prune_fn=lambda config, x: config["cfg"] != ctx.rank)(3)


def key_fails_on_one_rank(ctx: Rank) -> dict[str, Any]:
    fn = tuned(light, 3, key_fn=no_key_on)
    bad = ctx.world - 1
    first = outcome(lambda: fn(1, bad))
    failing = outcome(lambda: fn(2, bad))
    # Every rank stopped at the same point, so the group still works.
    after = outcome(lambda: tuned(light, 3)(3))
    return {"first": first, "failing": failing, "after": after}


def key_unusable_on_one_rank(ctx: Rank) -> dict[str, Any]:
    bad = ctx.world - 1
    return {
        kind: outcome(lambda kind=kind: tuned(light, 3, key_fn=odd_key_on)(1, bad, kind))
        for kind in ("unhashable", "unencodable")
    }


def candidate_fails_on_one_rank(ctx: Rank) -> dict[str, Any]:
    bad = ctx.world - 1
    calls: list[int] = []
    pick = tuned(flaky, 3)(1, {0: 1.0, 1: MIDDLE_MS, 2: SLOW_MS}, calls, bad)
    dist.barrier()
    (record,) = ctx.records("flaky")
    return {"pick": pick, "calls": calls, "candidates": record["candidates"]}


def wrong_on_one_rank(ctx: Rank) -> dict[str, Any]:
    # Config 1 is the fastest everywhere and wrong on the last rank alone: no rank may pick it.
    delays = {0: SLOW_MS, 1: 1.0, 2: MIDDLE_MS}
    fn = tuned(wrong_on, 3, key_fn=lambda x, *rest: x.numel())
    x = torch.arange(8.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = with_env("KERNELTUNE_CHECK_OUTPUTS", "on", lambda: fn(x, delays, ctx.world - 1))
    dist.barrier()
    (record,) = ctx.records("wrong_on")
    return {
        "result": float(result),
        "pick": record["best"]["index"],
        "times": [c["time_ms"] for c in record["candidates"]],
        "warnings": [str(w.message) for w in caught if type(w.message).__name__ == "WrongOutputWarning"],
    }


def host_function_with_all_reduce(ctx: Rank) -> dict[str, Any]:
    fn = autotune([{"chunks": 1}, {"chunks": 2}, {"chunks": 4}], key_fn=lambda x: tuple(x.shape))(summed)
    x = torch.full((8,), float(ctx.rank + 1), device=ctx.device)
    first = fn(x)
    second = fn(x)
    return {"first": first.cpu().tolist(), "second": second.cpu().tolist()}


def wrong_group(ctx: Rank) -> int:
    alone = dist.new_group([0])
    fn = tuned(light, 2)
    if ctx.rank == 0:
        # Every rank of WORLD, handed to a reducer that can only serve one.
        return with_env("KERNELTUNE_REDUCER", "local", lambda: fn(1, autotune_pg=dist.group.WORLD))
    return fn(1, autotune_pg=alone)


def subgroups_tune_apart(ctx: Rank) -> dict[str, Any]:
    # Ranks 0-1 tune in group A while 2-3 wait outside any collective; then 2-3 tune in B.
    groups = {"A": dist.new_group([0, 1]), "B": dist.new_group([2, 3])}
    role = "A" if ctx.rank < 2 else "B"
    done = ctx.run_dir / "subgroup-A-tuned"
    # Config 0 is best for A's slowest rank, config 1 for B's.
    fast = 0 if role == "A" else 1
    delays = {c: (FAST_MS if c == fast else SLOW_MS) for c in range(3)}
    fn = tuned(sleepy, 3, key_fn=lambda x, delays, calls, role: (x, role))
    if role == "B":
        deadline = time.monotonic() + GROUP_TIMEOUT_S
        while not done.exists():
            if time.monotonic() > deadline:
                raise TimeoutError("group A never finished tuning without ranks 2 and 3")
            time.sleep(0.05)
    ctx.collectives.take()
    ctx.stores.take()
    try:
        pick = fn(1, delays, [], role, autotune_pg=groups[role])
    finally:
        if ctx.rank == 0:
            done.touch()
    collectives, stores = ctx.collectives.take(), ctx.stores.take()
    dist.barrier()
    return {
        "role": role,
        "pick": pick,
        "collectives": collectives,
        "stores": stores,
        "logs": ctx.log_files("sleepy"),
    }


SCENARIOS: dict[str, Callable[[Rank], Any]] = {
    fn.__name__: fn
    for fn in (
        slowest_rank_decides,
        sharded,
        verbose_under_max,
        counts_per_tuning,
        disk_hit_on_one_rank,
        tune_switches,
        prune_differs,
        key_fails_on_one_rank,
        key_unusable_on_one_rank,
        candidate_fails_on_one_rank,
        wrong_on_one_rank,
        host_function_with_all_reduce,
        wrong_group,
        subgroups_tune_apart,
    )
}


def main(argv: list[str]) -> None:
    rank, world, run_dir, backend, names = int(argv[1]), int(argv[2]), Path(argv[3]), argv[4], argv[5]
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend,
        init_method=f"file://{run_dir / 'store'}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
    )
    ctx = Rank(rank, world, run_dir, backend)
    results: dict[str, Any] = {}
    out = run_dir / f"rank{rank}.json"
    for name in names.split(","):
        # Each scenario shares one cache directory between its ranks, apart from the others'.
        scenario = functools.partial(SCENARIOS[name], ctx)
        step = functools.partial(
            with_env, "TRITON_DIST_AUTOTUNE_CACHE_DIR", str(run_dir / "cache" / name), scenario
        )
        results[name] = outcome(step)
        out.with_suffix(".tmp").write_text(json.dumps(results, default=repr))
        out.with_suffix(".tmp").replace(out)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv)
