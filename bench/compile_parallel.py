"""Where a cold compile's time goes, one at a time and sixteen at once (CUDA GPU).

The 16 configs of bench/regret.py's bf16 4096^3 matmul, compiled without
launching (``run(..., warmup=True)``), each mode in a fresh process with an
empty ``TRITON_CACHE_DIR``:

* ``seq``: one after another;
* ``threads``: sixteen threads of one process;
* ``fork``: sixteen processes forked from the one holding the CUDA context,
  one config each (what ``compile_pool = "processes"`` does);
* ``fork-primed``: the same after the parent compiled one other kernel, so
  that each child inherits a compiler that has run once.

Triton's compilation listener gives each compile's stages (IR set-up, then
each lowering: ttir, ttgir, llir, ptx, cubin, then storing); the table shows
the wall time of all 16 and the mean of each stage. With ``--profile`` it
also profiles, in another fresh process, the main thread of a cold
``contextual_autotune`` of the same matmul and prints where it spends its
time (the top functions by cumulative time); with ``--first``, a process's
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
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODES = ("seq", "threads", "fork", "fork-primed")


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
    if mode.startswith("fork"):
        from kerneltune.plugins.triton import compiler

        prepare = compiler.forked_compiles()
        assert prepare is not None
        work.kernel.device_caches[torch.cuda.current_device()]  # as COMPILE primes it
    started = time.perf_counter()
    if mode == "seq":
        for config in work.configs:
            compile_one(config)
    elif mode == "threads":
        with concurrent.futures.ThreadPoolExecutor(len(work.configs)) as pool:
            list(pool.map(compile_one, work.configs))
    else:
        pids = []
        for i, config in enumerate(work.configs):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    prepare()
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
        (out / "result.json").write_text(json.dumps({"wall": forked + load, "load": load, "rows": rows}))
        return
    (out / "result.json").write_text(json.dumps({"wall": time.perf_counter() - started, "rows": rows}))


def profile_child(out: Path) -> None:
    import cProfile
    import pstats

    import torch
    from regret import matmul

    from triton_dist.autotuner import contextual_autotune

    torch.cuda.init()
    work = matmul(4096, 4096, 4096)
    tuned = work.autotuned()

    @contextual_autotune()
    def outer() -> None:
        work.launch_autotuned(tuned)

    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    outer()
    torch.cuda.synchronize()
    profiler.disable()
    seconds = time.perf_counter() - started
    with (out / "profile.txt").open("w") as text:
        text.write(f"cold contextual_autotune, main thread profiled: {seconds:.2f} s\n")
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(45)


def first_child(out: Path) -> None:
    """Profile the first compile of a process (a one-block add), then time a second, other one."""
    import cProfile
    import pstats

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
    with (out / "profile.txt").open("w") as text:
        text.write(f"first compile of a process {first:.3f} s, the next one {second:.3f} s\n")
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(15)


def spawn(mode: str) -> Path:
    out = Path(tempfile.mkdtemp(prefix="kerneltune-compile-"))
    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="kerneltune-compile-triton-"))
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
    if args.child == "profile":
        profile_child(Path(args.out))
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
        extra = f"  (of which loading in the parent {result['load']:.2f} s)" if "load" in result else ""
        print(
            f"{mode:<12} {result['wall']:>7.2f} {len(rows):>8}  {'':>19}"
            + " ".join(f"{m:>6.0f}" for m in means)
            + extra,
            flush=True,
        )
    if args.first:
        print((spawn("first") / "profile.txt").read_text())
    if args.profile:
        print((spawn("profile") / "profile.txt").read_text())


if __name__ == "__main__":
    main()
