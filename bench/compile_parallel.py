"""Where a cold compile's time goes, one at a time and sixteen at once (CUDA GPU).

The 16 configs of bench/regret.py's bf16 4096^3 matmul, compiled without
launching (``run(..., warmup=True)``), each mode in a fresh process with an
empty ``TRITON_CACHE_DIR``:

* ``seq``: one after another;
* ``threads``: sixteen threads of one process;
* ``fork``: sixteen processes forked from the one holding the CUDA context,
  one config each (what ``compile_pool = "processes"`` does);
* ``fork-hashed``: the same after the parent hashed Triton and imported
  its code generators (the warm-up without its empty kernel's compile);
* ``fork-primed``: the same after the parent compiled one other kernel, so
  that each child inherits a compiler that has run once.

Triton's compilation listener gives each compile's stages (IR set-up, then
each lowering: ttir, ttgir, llir, ptx, cubin, then storing); the table shows
the wall time of all 16 and the mean of each stage. With ``--profile`` it
also profiles, in other fresh processes, the main thread of a cold
``contextual_autotune`` and of a cold function-level tuning of the same
matmul and prints where each spends its time (the top functions by
cumulative time, then by own time); with ``--first``, a process's
first compile (of a one-block add), against its second.

    python3 bench/compile_parallel.py [--modes seq,threads,fork,fork-primed] [--profile]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scratch import scratch

HERE = Path(__file__).resolve().parent
MODES = ("seq", "threads", "fork", "fork-hashed", "fork-primed")


def listen(into: list[dict[str, Any]]) -> None:
    from triton import knobs

    def listener(**event: Any) -> None:
        times = event["times"]
        row = {"ir": times.ir_initialization / 1e3, "store": times.store_results / 1e3}
        row.update({name: us / 1e3 for name, us in times.lowering_stages})
        row["hit"] = bool(event.get("cache_hit"))
        into.append(row)

    knobs.compilation.listener = listener


def child(mode: str, out: Path) -> None:
    import torch
    from regret import matmul

    torch.cuda.init()
    work = matmul(4096, 4096, 4096)
    rows: list[dict[str, Any]] = []
    listen(rows)

    def compile_one(config: Any) -> None:
        work.kernel.run(*work.args, grid=(1,), warmup=True, **config.all_kwargs())

    if mode == "fork-primed":
        from regret import add

        small = add(4096, [work.configs[0]])
        small.kernel.run(*small.args, grid=(1,), warmup=True, BLOCK=1024)
        rows.clear()
    if mode == "fork-hashed":
        import importlib

        from kerneltune.plugins.triton import warming

        warming._hash_triton()
        for name in warming.FIRST_IMPORTS:
            importlib.import_module(name)
    if mode.startswith("fork"):
        from kerneltune.plugins.triton import compiler
        from triton.runtime import driver

        active = driver.active  # no warm-up here: "fork" is not primed, the others were above
        device, target = active.get_current_device(), active.get_current_target()
        process = compiler.TritonCompileProcess(active, device, target)
        work.kernel.device_caches[torch.cuda.current_device()]  # as COMPILE primes it
    started = time.perf_counter()
    if mode == "seq":
        for config in work.configs:
            compile_one(config)
    elif mode == "threads":
        with concurrent.futures.ThreadPoolExecutor(len(work.configs)) as pool:
            list(pool.map(compile_one, work.configs))
    else:
        pids, forks = [], []
        for i, config in enumerate(work.configs):
            fork_started = time.perf_counter()
            pid = os.fork()
            if pid:
                forks.append(time.perf_counter() - fork_started)
            if pid == 0:
                code = 1
                try:
                    process.prepare()
                    compile_one(config)
                    (out / f"stages{i}.json").write_text(json.dumps(rows))
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            assert status == 0, status
        forked = time.perf_counter() - started
        for i in range(len(work.configs)):
            rows.extend(json.loads((out / f"stages{i}.json").read_text()))
        loaded: list[dict[str, Any]] = []
        listen(loaded)
        load_started = time.perf_counter()
        for config in work.configs:
            compile_one(config)
        load = time.perf_counter() - load_started
        assert all(row["hit"] for row in loaded), "the parent compiled instead of loading"
        result = {"wall": forked + load, "load": load, "rows": rows, "fork": max(forks), "forks": sum(forks)}
        (out / "result.json").write_text(json.dumps(result))
        return
    (out / "result.json").write_text(json.dumps({"wall": time.perf_counter() - started, "rows": rows}))


def profile_child(out: Path, tuner: str) -> None:
    import cProfile

    import torch
    from kerneltune.core import add_plugin
    from regret import Picks, matmul, tune_function

    from triton_dist.autotuner import contextual_autotune

    torch.cuda.init()
    work = matmul(4096, 4096, 4096)
    tuned = work.autotuned()

    @contextual_autotune()
    def outer() -> None:
        work.launch_autotuned(tuned)

    picks = Picks()
    add_plugin(picks)
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    if tuner == "function":
        tune_function(work, picks)
    else:
        outer()
    torch.cuda.synchronize()
    profiler.disable()
    seconds = time.perf_counter() - started
    write_profile(out, f"cold {tuner} tuning, main thread profiled: {seconds:.2f} s", profiler, 60, 20)


def first_child(out: Path) -> None:
    """Profile the first compile of a process (a one-block add), then time a second, other one."""
    import cProfile

    import torch
    from regret import ADD_CONFIGS, add

    torch.cuda.init()
    work = add(4096, ADD_CONFIGS)
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    work.kernel.run(*work.args, grid=(1,), warmup=True, BLOCK=1024)
    profiler.disable()
    first = time.perf_counter() - started
    started = time.perf_counter()
    work.kernel.run(*work.args, grid=(1,), warmup=True, BLOCK=2048)
    second = time.perf_counter() - started
    write_profile(
        out, f"first compile of a process {first:.3f} s, the next one {second:.3f} s", profiler, 40, 15
    )


def write_profile(out: Path, heading: str, profiler: Any, cumulative: int, own: int) -> None:
    """``profile.txt``: the heading, the top functions by cumulative time, then by own time."""
    import pstats

    with (out / "profile.txt").open("w") as text:
        text.write(heading + "\n")
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("cumulative").print_stats(cumulative)
        stats.sort_stats("tottime").print_stats(own)


def spawn(mode: str) -> Path:
    out = scratch("kerneltune-compile-")
    env = dict(os.environ, TRITON_CACHE_DIR=str(scratch("kerneltune-compile-triton-")))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    subprocess.run([sys.executable, __file__, "--child", mode, "--out", str(out)], env=env, check=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--first", action="store_true", help="profile a process's first compile")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child in ("profile-contextual", "profile-function"):
        profile_child(Path(args.out), args.child.split("-")[1])
        return
    if args.child == "first":
        first_child(Path(args.out))
        return
    if args.child:
        child(args.child, Path(args.out))
        return
    import torch
    import triton

    print(f"device {torch.cuda.get_device_name(0)}, {os.cpu_count()} host cores, triton {triton.__version__}")
    stages = ("ir", "ttir", "ttgir", "llir", "ptx", "cubin", "store")
    heading = " ".join(f"{s:>6}" for s in stages)
    print(f"{'mode':<12} {'wall s':>7} {'compiles':>8}  mean ms per stage: {heading}")
    for mode in filter(None, args.modes.split(",")):
        result = json.loads((spawn(mode) / "result.json").read_text())
        rows = [row for row in result["rows"] if not row["hit"]]
        means = [sum(row.get(s, 0.0) for row in rows) / max(1, len(rows)) for s in stages]
        extra = ""
        if "load" in result:
            extra = f"  (loading in the parent {result['load']:.2f} s; forking {result['forks']:.3f} s,"
            extra += f" the slowest fork {result['fork'] * 1000:.0f} ms)"
        print(
            f"{mode:<12} {result['wall']:>7.2f} {len(rows):>8}  {'':>19}"
            + " ".join(f"{m:>6.0f}" for m in means)
            + extra,
            flush=True,
        )
    if args.first:
        print((spawn("first") / "profile.txt").read_text())
    if args.profile:
        for tuner in ("contextual", "function"):
            print((spawn(f"profile-{tuner}") / "profile.txt").read_text())


if __name__ == "__main__":
    main()
