"""Cold tuning on a CUDA GPU: fresh processes, fresh Triton caches, every tuner
side by side.

What users wait for is the first call in a new process with an empty Triton
cache, and that is mostly compiling. Each measurement here is a fresh
process with its own empty ``TRITON_CACHE_DIR``; it times the first call of
the tuned work, from the call until its result is on the device: compiling,
measuring and the final run included; imports, CUDA start-up and the check
of the result against a reference are not, alike for every tuner. The
tuners, on the 16-config bf16 4096^3 matmul of bench/regret.py:

* ``stock``: ``triton.autotune``;
* ``contextual``: ``contextual_autotune()`` around the same launch;
* ``function``: ``triton_dist.tune.autotune`` around a host launcher;
* ``search``: bench/search_params.py's ``search_params`` matmul (fp16 4096^3,
  its own generated space);

each with its compiles in forked processes (the default), and as
``<tuner>-threads`` with ``KERNELTUNE_COMPILE_POOL=threads`` (compiles on
threads of the tuning process); ``function-seq`` is the function-level
tuner with ``KERNELTUNE_PRECOMPILE=0`` (each config compiles at its first
warm-up, one after another, as before COMPILE existed), ``search-seq``
the search compiling one candidate at a time on one thread,
``<tuner>-serial`` the compiler's warm-up hashing Triton after building the
driver instead of beside it (``BENCH_WARMUP=serial``),
``search-tight`` the search under a compile deadline of 3 times the
median of a compile's siblings and over 2 s (``BENCH_DEADLINE_MIN_S`` sets
the floor; the engine's default since ``4fef775``, kept for older trees),
``<tuner>-largest`` handing the configs over largest first (tile volume
times stages, ``BENCH_ORDER=largest``; since ``1cf6fc6`` the engine forks
the longest compiles first by itself, and this changes the order of
measuring too), and ``<tuner>-threads-race`` compiling on threads that do not wait for the
warm-up's hash of Triton (``BENCH_HASH_WAIT=off``: each computes it again
while it runs). ``BENCH_LOAD_BESIDE=off`` (for bench/restart.py's
``kerneltune-settled`` side) has measuring wait for every load again. The timeline
(``--timeline``) notes when the warm-up ended (``warm``), each probe of
Triton's cache (``probe+``/``probe-``) and compile process forked
(``fork``), when each compiled
kernel was loaded onto the device (``load+``/``load-``), each C stub
Triton builds with the host compiler (``cc+``/``cc-``) and each full
collection of Python's garbage collector ran (``gc+``/``gc-``); with
``session+``/``session-`` when kerneltune made its session (plugins, settings,
device) and ``tuning`` when a tuning started; with
``BENCH_PROFILE=<folder>`` each tuning child writes its main thread's
profile there. A search's compiles handed over ahead of the round that asks
for them (``compile_ahead``) show as ``ahead+``/``ahead-``.

``--configs 48`` gives the matmul 48 candidates: each of the 16 also at
twice its warps and at one stage more (picks are indexes into that list).

A separate warm process (the oracle), run after the tunings, times every one
of the configs in five interleaved ``do_bench`` rounds, then its eight
fastest and every pick again in fifteen more, every other one reversed; a
pick's regret is its refined oracle time over the fastest refined time,
minus one (the search's generated configs have no oracle row: its pick's
do_bench time is printed instead).

With two or more GPUs, ``--ranks 2`` also runs the function-level tuner on
one rank and on two (one per GPU, gloo, one shared Triton cache), each
unsharded and sharded (``KERNELTUNE_SHARD=1``: each rank measures half the
candidates): cold (an empty Triton cache; compiling included) and warm (a
Triton cache filled by an earlier run; compiling excluded, the tuning itself
still from scratch), and prints the ratios.

    python3 bench/cold.py [--reps 2] [--ranks 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kerneltune.core import add_plugin, hookimpl
from scratch import scratch

HERE = Path(__file__).resolve().parent
THREADS = {"KERNELTUNE_COMPILE_POOL": "threads"}
#: tuner name -> (what the child runs, extra environment)
TUNERS: dict[str, tuple[str, dict[str, str]]] = {
    "stock": ("stock", {}),
    "contextual": ("contextual", {}),
    "contextual-threads": ("contextual", {"KERNELTUNE_COMPILE_POOL": "threads"}),
    "function": ("function", {}),
    "function-threads": ("function", {"KERNELTUNE_COMPILE_POOL": "threads"}),
    "function-seq": ("function", {"KERNELTUNE_PRECOMPILE": "0"}),
    "function-serial": ("function", {"BENCH_WARMUP": "serial"}),
    "contextual-serial": ("contextual", {"BENCH_WARMUP": "serial"}),
    "function-threads-race": ("function", {**THREADS, "BENCH_HASH_WAIT": "off"}),
    "contextual-threads-race": ("contextual", {**THREADS, "BENCH_HASH_WAIT": "off"}),
    "contextual-largest": ("contextual", {"BENCH_ORDER": "largest"}),
    "function-largest": ("function", {"BENCH_ORDER": "largest"}),
    "search": ("search", {}),
    "search-threads": ("search", {"KERNELTUNE_COMPILE_POOL": "threads"}),
    "search-seq": ("search", {"KERNELTUNE_COMPILE_POOL": "threads", "KERNELTUNE_COMPILE_WORKERS": "1"}),
    "search-tight": ("search", {"KERNELTUNE_COMPILE_DEADLINE": "3", "BENCH_DEADLINE_MIN_S": "2"}),
}


def apply_deadline_floor() -> None:
    """``BENCH_DEADLINE_MIN_S``: the compile deadline's floor (seconds) for this process's tunings."""
    floor = os.environ.get("BENCH_DEADLINE_MIN_S")
    if floor:
        from kerneltune.core.compiling import siblings

        siblings.DEADLINE_MIN_S = float(floor)


def matmul_configs(count: int) -> list[Any]:
    """The matmul's candidates: regret.py's 16 (``count`` 16), or 48: each of those at its warps and
    stages, at twice its warps, and at one stage more (``--configs 48``)."""
    from regret import MATMUL_CONFIGS, cfg

    if count == len(MATMUL_CONFIGS):
        return list(MATMUL_CONFIGS)
    if count != 3 * len(MATMUL_CONFIGS):
        raise SystemExit(f"--configs must be {len(MATMUL_CONFIGS)} or {3 * len(MATMUL_CONFIGS)}, got {count}")
    wider = []
    for config in MATMUL_CONFIGS:
        meta, warps, stages = config.kwargs, config.num_warps, config.num_stages
        wider += [cfg(warps, stages, **meta), cfg(2 * warps, stages, **meta), cfg(warps, stages + 1, **meta)]
    return wider


#: The oracle's interleaved ``do_bench`` rounds over every config...
ORACLE_ROUNDS = 5
#: ...then its fastest configs and every pick, timed again in this many rounds, alternately reversed.
REFINE_TOP = 8
REFINE_ROUNDS = 15


def contenders_of(coarse: list[float], picks: list[int]) -> list[int]:
    """The configs the oracle times again: the ``REFINE_TOP`` fastest of its first rounds and every pick."""
    fastest = sorted(range(len(coarse)), key=coarse.__getitem__)[:REFINE_TOP]
    return sorted(set(fastest) | {pick for pick in picks if 0 <= pick < len(coarse)})


def refine(work: Any, contenders: list[int], rounds: int) -> dict[str, float]:
    """Each contender's median ``do_bench`` over ``rounds`` interleaved rounds, every other one reversed.

    At 48 configs, five rounds over all of them can judge a pick several
    percent slow that more rounds over the contenders alone put within the
    oracle's noise (docs/benchmark-history.md, 2026-12-03, `eaf70ad`).
    """
    import triton

    times: dict[int, list[float]] = {index: [] for index in contenders}
    for round_ in range(rounds):
        for index in contenders if round_ % 2 == 0 else contenders[::-1]:
            run = functools.partial(work.launch, work.configs[index])
            times[index].append(triton.testing.do_bench(run, warmup=10, rep=40, return_mode="median"))
    return {str(index): statistics.median(samples) for index, samples in times.items()}


def judged(oracle: dict[str, Any]) -> list[float]:
    """Every config's oracle time: the refined one where there is one, else the first rounds'."""
    times = list(oracle["oracle_ms"])
    for index, milliseconds in oracle.get("refined_ms", {}).items():
        times[int(index)] = milliseconds
    return times


def child(mode: str, rank: int, world: int, store: str) -> dict[str, Any]:
    """One fresh process's measurement (the environment already holds its caches and settings)."""
    apply_deadline_floor()
    if world > 1 or mode == "function-dist":
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("BENCH_PORT", "29533"))
    import torch
    import torch.distributed as dist
    from regret import matmul

    if mode == "function-dist":
        torch.cuda.set_device(rank)
        dist.init_process_group("gloo", rank=rank, world_size=world, store=None)
    torch.manual_seed(0)
    torch.cuda.init()
    if mode == "search":
        return search_child()
    work = matmul(4096, 4096, 4096)
    work.configs = listed = matmul_configs(int(os.environ.get("BENCH_CONFIGS", "16")))
    if os.environ.get("BENCH_ORDER") == "largest":
        from kerneltune.plugins.triton.configs import compile_effort  # the engine's own guess

        work.configs = sorted(work.configs, key=compile_effort, reverse=True)
    if mode == "oracle":
        from regret import oracle

        for config in work.configs:
            work.launch(config)
        coarse = oracle(work, ORACLE_ROUNDS)
        picks = [int(word) for word in os.environ.get("BENCH_PICKS", "").split(",") if word]
        contenders = contenders_of(coarse, picks)
        return {"oracle_ms": coarse, "refined_ms": refine(work, contenders, REFINE_ROUNDS)}
    timeline = Timeline()
    add_plugin(timeline)
    timeline.watch_warm_up()
    torch.cuda.synchronize()
    profile = start_profile()
    started = timeline.started = time.perf_counter()
    if mode == "stock":
        tuned = work.autotuned()
        work.launch_autotuned(tuned)
        pick = listed.index(tuned.best_config)
    elif mode == "contextual":
        from triton_dist.autotuner import contextual_autotune

        tuned = work.autotuned()

        @contextual_autotune()
        def outer() -> None:
            work.launch_autotuned(tuned)

        outer()
        pick = listed.index(tuned.best_config)
    else:
        from regret import Picks, tune_function

        picks = Picks()
        add_plugin(picks)
        pick = listed.index(work.configs[tune_function(work, picks)])
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    write_profile(profile, mode)
    work.check()  # after the clock: a reference product is no part of the tuning
    if mode == "function-dist":
        dist.destroy_process_group()
    return {"seconds": seconds, "pick": pick, "configs": len(listed), "timeline": timeline.events}


def start_profile() -> Any:
    """A running profile of this thread where ``BENCH_PROFILE`` names a folder, else ``None``."""
    if not os.environ.get("BENCH_PROFILE"):
        return None
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    return profile


def write_profile(profile: Any, mode: str) -> None:
    """Stop ``profile`` (from :func:`start_profile`) and write it to BENCH_PROFILE/<mode>-<pid>.txt."""
    if profile is None:
        return
    import pstats

    profile.disable()
    with open(Path(os.environ["BENCH_PROFILE"], f"{mode}-{os.getpid()}.txt"), "w") as out:
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats("cumulative").print_stats(60)
        stats.sort_stats("tottime").print_stats(30)


class Timeline:
    """Observer: when each compile started and finished and each candidate was measured."""

    def __init__(self) -> None:
        self.started = 0.0
        self.events: list[tuple[float, str, int]] = []

    def note(self, what: str, index: int) -> None:
        self.events.append((round(time.perf_counter() - self.started, 3), what, index))

    def watch_warm_up(self) -> None:
        """Note when the compiler's warm-up ends (``warm``); apply the ``BENCH_*`` variants."""
        from kerneltune.plugins.triton import warming

        if os.environ.get("BENCH_WARMUP") == "serial":
            warming._start_hashing = lambda: None  # type: ignore[assignment]
        if os.environ.get("BENCH_HASH_WAIT") == "off":
            warming.hashed = lambda: None  # type: ignore[assignment]
        if os.environ.get("BENCH_LOAD_BESIDE") == "off":
            # Measuring waits for every load again, as before `91066d9`.
            from kerneltune.core.machine import readiness

            readiness_init = readiness.Readiness.__init__

            def no_beside(self: Any, *args: Any, **kwargs: Any) -> None:
                readiness_init(self, *args, **{**kwargs, "beside": False})

            readiness.Readiness.__init__ = no_beside  # type: ignore[method-assign]
        compile_empty = warming._compile_empty

        def noted(*args: Any) -> None:
            compile_empty(*args)
            self.note("warm", 0)

        warming._compile_empty = noted  # type: ignore[assignment]
        self.watch_loads()
        self.watch_session()
        self.watch_forks()

    def watch_forks(self) -> None:
        """Note each probe of Triton's cache (``probe+``/``probe-``) and compile process forked (``fork``)."""
        from kerneltune.plugins.triton import compiler

        probing = compiler.TritonCompileProcess.probing
        probes = iter(range(10**6))

        @contextlib.contextmanager
        def noted_probing(process: Any) -> Iterator[None]:
            n = next(probes)
            self.note("probe+", n)
            try:
                with probing(process):
                    yield
            finally:
                self.note("probe-", n)

        compiler.TritonCompileProcess.probing = noted_probing  # type: ignore[method-assign, assignment]
        fork = os.fork
        forks = iter(range(10**6))

        def noted_fork() -> int:
            n = next(forks)
            pid = fork()
            if pid:
                self.note("fork", n)
            return pid

        os.fork = noted_fork  # type: ignore[assignment]

    def watch_session(self) -> None:
        """Note when kerneltune's session (its plugins, settings and device) was made (``session+``/``-``)."""
        from kerneltune.core.plugin_system import session

        create = session.Session.create.__func__  # type: ignore[attr-defined]

        def noted(cls: Any, *args: Any, **kwargs: Any) -> Any:
            self.note("session+", 0)
            try:
                return create(cls, *args, **kwargs)
            finally:
                self.note("session-", 0)

        session.Session.create = classmethod(noted)  # type: ignore[method-assign, assignment]

    def watch_gc(self) -> None:
        """Note each full collection of Python's cyclic garbage collector (``gc+2``/``gc-2``).

        With torch and Triton loaded, one pass over every object took 120 ms
        on this project's CPU host: where one falls inside a timed call, it
        is part of that call's time.
        """
        import gc

        def noted(phase: str, info: dict[str, Any]) -> None:
            if info.get("generation") == 2:
                self.note("gc+" if phase == "start" else "gc-", 2)

        gc.callbacks.append(noted)

    def watch_loads(self) -> None:
        """Note when a compiled kernel is loaded (``load+``/``load-``) and a C stub built (``cc``);
        and each full garbage collection (:meth:`watch_gc`)."""
        self.watch_gc()
        from triton.compiler import compiler as triton_compiler
        from triton.runtime import build

        init_handles = triton_compiler.CompiledKernel._init_handles
        loads = iter(range(10**6))

        def noted_init(kernel: Any) -> None:
            if kernel.module is not None:
                return init_handles(kernel)
            n = next(loads)
            self.note("load+", n)
            try:
                return init_handles(kernel)
            finally:
                self.note("load-", n)

        triton_compiler.CompiledKernel._init_handles = noted_init  # type: ignore[method-assign]
        if hasattr(build, "_build"):
            real_build = build._build
            builds = iter(range(10**6))

            def noted_build(*args: Any, **kwargs: Any) -> Any:
                n = next(builds)
                self.note("cc+", n)
                try:
                    return real_build(*args, **kwargs)
                finally:
                    self.note("cc-", n)

            build._build = noted_build

    @hookimpl
    def kerneltune_compile_started(self, event: Any) -> None:
        self.note("ahead+" if getattr(event, "ahead", False) else "compile+", event.candidate.index)

    @hookimpl
    def kerneltune_compile_finished(self, event: Any) -> None:
        self.note("ahead-" if getattr(event, "ahead", False) else "compile-", event.candidate.index)

    @hookimpl
    def kerneltune_candidate_measured(self, event: Any) -> None:
        self.note("measured", event.candidate.index)

    @hookimpl
    def kerneltune_tuning_started(self, event: Any) -> None:
        self.note("tuning", 0)


def search_child() -> dict[str, Any]:
    import torch
    import triton
    from search_params import matmul_case

    kernel, grid, args, launch, fixed = matmul_case(4096)
    timeline = Timeline()
    add_plugin(timeline)
    timeline.watch_warm_up()
    torch.cuda.synchronize()
    started = timeline.started = time.perf_counter()
    kernel[grid](*args, **launch, **fixed)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    a, b, c = args[:3]
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=1.0, rtol=0.05)
    summary = kernel.last_search
    best = kernel.best_config
    pick_ms = triton.testing.do_bench(
        lambda: kernel.fn[grid](*args, **launch, **best.all_kwargs()), warmup=10, rep=50, return_mode="median"
    )
    return {
        "seconds": seconds,
        "pick": summary.pick,
        "pick_ms": pick_ms,
        "measured": summary.measured,
        "space": summary.space,
        "timeline": timeline.events,
    }


def spawn(
    mode: str, world: int = 1, extra: dict[str, str] | None = None, triton_cache: str | None = None
) -> list[dict[str, Any]]:
    """Run ``mode`` in ``world`` fresh processes sharing one Triton cache; each one's result.

    :param extra: environment for the children (settings).
    :param triton_cache: the Triton cache to use (default: a fresh, empty one).
    """
    env = dict(os.environ, **(extra or {}))
    env["TRITON_CACHE_DIR"] = triton_cache or str(scratch("kerneltune-cold-triton-"))
    env["TRITON_DIST_AUTOTUNE_CACHE_DIR"] = str(scratch("kerneltune-cold-picks-"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    out = scratch("kerneltune-cold-out-")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                mode,
                "--rank",
                str(r),
                "--world",
                str(world),
                "--store",
                str(out),
            ],
            env=env,
        )
        for r in range(world)
    ]
    for proc in procs:
        if proc.wait(timeout=300) != 0:
            raise SystemExit(f"{mode}: a child failed with exit status {proc.returncode}")
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    for result in results:
        result["triton_cache"] = env["TRITON_CACHE_DIR"]
    return results


def compare_ranks(ranks: int, reps: int) -> dict[str, Any]:
    """The function-level tuner on 1 and ``ranks`` ranks, unsharded and sharded, cold and warm.

    Each row ``reps`` times, each time in fresh processes (the warm rows
    with a Triton cache the cold one-rank run of that round filled); a
    row's figure is the median of its slowest rank's times.
    """
    shard = {"KERNELTUNE_SHARD": "1"}
    rows: dict[str, list[list[dict[str, Any]]]] = {}
    for _ in range(reps):
        cold_one = spawn("function-dist", 1)
        warm = cold_one[0]["triton_cache"]
        runs = {
            "cold, 1 rank": cold_one,
            f"cold, {ranks} ranks": spawn("function-dist", ranks),
            f"cold, {ranks} ranks sharded": spawn("function-dist", ranks, shard),
            "warm, 1 rank": spawn("function-dist", 1, triton_cache=warm),
            f"warm, {ranks} ranks": spawn("function-dist", ranks, triton_cache=warm),
            f"warm, {ranks} ranks sharded": spawn("function-dist", ranks, shard, triton_cache=warm),
        }
        for name, results in runs.items():
            rows.setdefault(name, []).append(results)

    def slowest(name: str) -> float:
        return statistics.median(max(r["seconds"] for r in results) for results in rows[name])

    print(f"\nfunction-level on several ranks (one per GPU, gloo; slowest rank's time, median of {reps}):")
    base = {"cold": slowest("cold, 1 rank"), "warm": slowest("warm, 1 rank")}
    for name, rounds in rows.items():
        ratio = slowest(name) / base[name.split(",")[0]]
        each = ", ".join(f"{max(r['seconds'] for r in results):.2f}" for results in rounds)
        picks = sorted({r["pick"] for results in rounds for r in results})
        line = f"  {name:<24} {slowest(name):6.2f} s  {ratio:6.3f}x of 1 rank  ({each})  picks {picks}"
        print(line, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument(
        "--ranks", type=int, default=0, help="also compare the function-level tuner on this many ranks"
    )
    parser.add_argument("--tuners", default=",".join(TUNERS), help=f"of {', '.join(TUNERS)}")
    parser.add_argument("--timeline", action="store_true", help="print when each compile ran, per tuning")
    parser.add_argument(
        "--configs",
        type=int,
        default=16,
        help="the matmul's candidates: 16, or 48 (each also at 2x warps, +1 stage)",
    )
    parser.add_argument("--json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = child(args.child, args.rank, args.world, args.store)
        Path(args.store, f"rank{args.rank}.json").write_text(json.dumps(result))
        return
    matmul_configs(args.configs)  # a wrong count fails here, before any child
    os.environ["BENCH_CONFIGS"] = str(args.configs)  # the children's candidates, the oracle's included
    import torch
    import triton

    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}")
    print(
        "cold: each figure is a fresh process with an empty Triton cache; compiling is included", flush=True
    )
    results: dict[str, list[dict[str, Any]]] = {}
    tuners = args.tuners.split(",")
    unknown = sorted(set(tuners) - set(TUNERS))
    if unknown:
        raise SystemExit(f"unknown tuners {unknown}: choose from {', '.join(TUNERS)}")
    for _ in range(args.reps):
        for mode in tuners:
            kind, extra = TUNERS[mode]
            result = spawn(kind, extra=extra)[0]
            results.setdefault(mode, []).append(result)
            print(f"  {mode:<15} {result['seconds']:7.2f} s  pick {result['pick']}", flush=True)
            if args.timeline and result.get("timeline"):
                print(
                    "    " + " ".join(f"{s:.2f}:{what}{i}" for s, what, i in result["timeline"]), flush=True
                )
    # The oracle after the tunings, so that it times every pick again with its fastest configs.
    picks = sorted({r["pick"] for runs in results.values() for r in runs if "pick_ms" not in r})
    judge = spawn("oracle", extra={"BENCH_PICKS": ",".join(map(str, picks))})[0]
    oracle = judged(judge)
    fastest = min(judge["refined_ms"].values(), default=min(oracle))  # the first rounds' fastest are refined
    for runs in results.values():
        for r in runs:
            if "pick_ms" not in r:
                r["regret"] = oracle[r["pick"]] / fastest - 1
    stock = statistics.median(r["seconds"] for r in results.get("stock", [{"seconds": float("nan")}]))
    print(f"\n{'tuner':<15} {'cold s (median)':>15} {'/ stock':>8}  picks, regret")
    for mode, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        if "pick_ms" in runs[0]:
            detail = "; ".join(
                f"{r['pick']} at {r['pick_ms'] * 1000:.1f} us ({r['measured']} of {r['space']} measured)"
                for r in runs
            )
        else:
            detail = ", ".join(f"[{r['pick']}] {r['regret']:.2%}" for r in runs)
        print(f"{mode:<15} {seconds:>15.2f} {seconds / stock:>8.3f}  {detail}")
    print(
        f"(oracle's fastest of the {len(oracle)} configs: {fastest * 1000:.1f} us; "
        f"{len(judge['refined_ms'])} of them, every pick among them, timed in {REFINE_ROUNDS} more rounds)"
    )
    if args.ranks > 1:
        results["ranks"] = [compare_ranks(args.ranks, args.reps)]
    if args.json:
        Path(args.json).write_text(json.dumps({"oracle": judge, "results": results}, indent=2))


if __name__ == "__main__":
    main()
