"""The calls after tuning: what each tuner adds to a call once its picks are made, side by side.

GPU run, from the repository root (the real Triton-distributed's autotuner is
fetched into the ignored folder .peer/ first, as for bench/restart.py)::

    python3 bench/restart.py --fetch-peer /tmp/tdw/triton_dist-0.0.0-py3-none-any.whl
    python3 bench/hotpath.py [--procs 2] [--batches 60] [--number 200] [--json FILE]

Each side runs in fresh processes (``--procs`` each, the sides taking turns),
one workload at a time: a 16K-element scale kernel (``scale``) and a 1024^3
bf16 matmul (``matmul``), both ``triton.autotune`` kernels over the same
configs, launched by an outer function:

* ``stock``: ``triton.autotune``'s own cache hit;
* ``stock-after``: the same, timed before and after a kerneltune contextual
  tuner's first call in the process, which leaves kerneltune's pass-through
  on Triton's ``run``;
* ``contextual``: kerneltune's ``contextual_autotune`` around the outer function;
* ``triton-dist``: the real Triton-distributed's ``contextual_autotune`` (its
  ``autotuner.py``, loaded by path from .peer/);
* ``search-params`` (scale only): the kernel under
  ``hints={"search_params": ...}``, over the same block sizes;
* ``function``: a host launcher calling the plain kernel with a config,
  through kerneltune's function-level ``autotune``;
* ``SIDE@before``: any side with kerneltune imported from ``--before``, an
  earlier tree installed with ``pip install --target``.

In its process a side is timed beside its baselines, batch for batch in
turns: ``plain`` (the outer function launching the ``@triton.jit`` kernel
with the side's pick spelled out), for ``search-params`` also ``stock``, for
``function`` the ``launcher`` called directly with the side's pick. A batch is
``--number`` calls on the host clock, the device synchronised before each
batch and never inside one (a batch stays well inside the launch queue, so a
call never waits for the device). A side's figure over a baseline is the
median over the batches of its per-call time less the baseline's beside it,
then the median over its processes: process-to-process differences of a
launch's host cost (several us on an H100's host) would otherwise swamp
what is measured. Each process first calls every side once (``first``: with
picks on disk from an earlier process for ``contextual``, which runs with
``contextual_cache = "disk"``, and ``function``; a restart's figure, beside
the plain kernel's first call). A first pass of every side fills the Triton
cache and the picks on disk and is not reported.

CPU (``--parts``, under ``TRITON_INTERPRET=1``, which it sets): where a contextual hit's
host time goes, the kernel's own ``run`` stubbed out (:func:`parts`); ``--parts --device
cuda`` times the same parts with every launch real.

CPU (``--count``, under ``TRITON_INTERPRET=1``, which it sets): for each kerneltune tuner,
what one cache hit reads and looks up, counted over many hits: environment
reads, file operations (stat, lstat, open, scandir), Session and settings
lookups and modules imported. Kernel launches themselves (Triton's own
``run`` of the jitted function) are not counted. tests/test_hotpath.py holds
the counts at zero. ``--smoke`` runs the timing path on the CPU, small, without the filling pass.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import triton
import triton.language as tl
from scratch import scratch

HERE = Path(__file__).resolve().parent
SIDES = ("stock", "stock-after", "contextual", "triton-dist", "search-params", "function")
#: What each side is timed beside, in its own process (``plain`` where not named).
COMPANIONS = {"function": ("launcher",), "search-params": ("plain", "stock")}
WORKLOADS = ("scale", "matmul")


# -- the kernels ------------------------------------------------------------------


@triton.jit
def scale_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, alpha * tl.load(x_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a_tile = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        b_tile = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a_tile, b_tile)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty))


def workload_of(name: str, device: str) -> tuple[Any, list[Any], list[str], tuple[Any, ...], Any]:
    """The plain kernel, its configs, key, arguments and grid; small on the CPU."""
    import torch

    small = device == "cpu"
    if name == "scale":
        n = 256 if small else 1 << 14
        blocks = BLOCKS_CPU if small else BLOCKS
        configs = [triton.Config({"BLOCK": b}, num_warps=4) for b in blocks]
        x = torch.randn(n, device=device)

        def scale_grid(meta: dict[str, Any]) -> tuple[int, ...]:
            return (triton.cdiv(n, meta["BLOCK"]),)

        return scale_kernel, configs, ["n"], (x, torch.empty_like(x), 2.0, n), scale_grid
    size = 32 if small else 1024
    tiles = (
        [(16, 16, 16, 4), (16, 16, 16, 2)]
        if small
        else [(128, 128, 64, 8), (128, 64, 64, 4), (64, 128, 64, 4)]
    )
    configs = [triton.Config({"BM": m, "BN": n, "BK": k}, num_warps=w, num_stages=3) for m, n, k, w in tiles]
    dtype = torch.float32 if small else torch.bfloat16
    a, b, c = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(3))

    def matmul_grid(meta: dict[str, Any]) -> tuple[int, ...]:
        return (triton.cdiv(size, meta["BM"]), triton.cdiv(size, meta["BN"]))

    return matmul_kernel, configs, ["M", "N", "K"], (a, b, c, size, size, size), matmul_grid


#: The scale kernel's block sizes, on a GPU and under the interpreter.
BLOCKS = (256, 512, 1024, 2048)
BLOCKS_CPU = (64, 128)


def build(
    workload: str, side: str, device: str, pick: Any = None
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The outer call of ``side`` on ``workload``, its inputs made (the first call tunes), and what
    gives the config it picked (``None`` for a baseline).

    :param pick: for ``plain`` and ``launcher``, the config spelled out (default: the first).
    """
    import torch

    if side == "search-params":
        import triton_dist.autotune_hooks  # noqa: F401  (before decorating)
    plain, configs, key, args, grid = workload_of(workload, device)
    if side in ("plain", "launcher"):
        # A JIT function of its own, so that its first call loads its program as the side's did.
        plain = triton.jit(plain.fn)
    if side in ("plain", "launcher", "function"):
        chosen = pick or configs[0]
        meta = chosen.all_kwargs()
        if side == "plain":
            return (lambda: plain[grid](*args, **meta)), (lambda: None)
        launched = [chosen]

        def launch(*arguments: Any, cfg: Any) -> None:
            launched[0] = cfg
            plain[grid](*arguments, **cfg.all_kwargs())

        if side == "launcher":
            return (lambda: launch(*args, cfg=chosen)), (lambda: None)
        from triton_dist.tune import autotune

        tuned = autotune(config_space=[{"cfg": c} for c in configs], key_fn=lambda *arguments: arguments[3])(
            launch
        )
        return (lambda: tuned(*args)), (lambda: launched[0])
    if side == "search-params":
        values = list(BLOCKS_CPU if device == "cpu" else BLOCKS)
        hints = {"search_params": {"params": ["BLOCK"], "values": values}}
        searched = triton.autotune(configs=[], key=key, hints=hints)(plain)
        return (lambda: searched[grid](*args)), (lambda: searched.best_config)
    kernel = triton.autotune(configs=configs, key=key)(plain)

    def outer() -> None:
        kernel[grid](*args)

    def picked() -> Any:
        return kernel.best_config

    if side == "contextual":
        from triton_dist.autotuner import contextual_autotune

        return contextual_autotune(n_repeat=2, n_warmup=1)(outer), picked
    if side == "triton-dist":
        sys.path.insert(0, str(HERE))
        from restart import load_peer

        peer = load_peer()
        if not torch.distributed.is_initialized():  # it logs under the process's rank
            torch.distributed.init_process_group(
                "gloo", init_method="tcp://127.0.0.1:29517", rank=0, world_size=1
            )
        return peer.contextual_autotune(n_repeat=2, n_warmup=1)(outer), picked
    if side == "stock-after":
        from triton_dist.autotuner import contextual_autotune

        contextual_autotune(n_repeat=1, n_warmup=0)(lambda: None)()
    return outer, picked


# -- one process: timing ------------------------------------------------------------


def child(workload: str, side: str, batches: int, number: int) -> dict[str, Any]:
    """Tune ``side`` on ``workload`` in this process, then time its calls beside its baselines.

    The side and each baseline (:data:`COMPANIONS`) take turns batch by
    batch, so that what drifts in the process drifts alike for all; the
    figure is the median over the batches of the side's per-call time less
    the baseline's in the batch beside it. ``stock-after`` is ``stock``
    timed before and after a kerneltune contextual tuner's first call.
    """
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    kind = "stock" if side == "stock-after" else side
    names = [kind, *COMPANIONS.get(kind, ("plain",))]
    calls: dict[str, Callable[[], Any]] = {}
    first = {}
    pick = None
    for name in names:
        # The baselines spell out the side's pick: built once the side has tuned.
        call, picked = build(workload, name, device, pick)
        calls[name] = call
        sync()
        start = time.perf_counter()
        call()
        sync()
        first[name] = time.perf_counter() - start
        for _ in range(3):
            call()
        if name == kind:
            pick = picked()
    result = {"side": side, "workload": workload, "first_s": first[kind], "first_s_plain": first[names[1]]}
    phases = [("", calls)]
    if side == "stock-after":
        phases = [("before_", calls), ("", calls)]
    for prefix, _ in phases:
        if side == "stock-after" and not prefix:
            from triton_dist.autotuner import contextual_autotune

            contextual_autotune(n_repeat=1, n_warmup=0)(lambda: None)()
        times: dict[str, list[float]] = {name: [] for name in names}
        for b in range(batches):
            for name in names[b % len(names) :] + names[: b % len(names)]:
                call = calls[name]
                sync()
                start = time.perf_counter()
                for _ in range(number):
                    call()
                times[name].append((time.perf_counter() - start) / number * 1e6)
        sync()
        result[prefix + "per_call_us"] = statistics.median(times[kind])
        for other in names[1:]:
            paired = [a - b for a, b in zip(times[kind], times[other], strict=True)]
            result[f"{prefix}over_{other}_us"] = statistics.median(paired)
    return result


def spawn(
    workload: str, side: str, batches: int, number: int, env: dict[str, str], before: Path | None
) -> dict[str, Any]:
    """One process of ``side``; ``side@before`` runs with kerneltune imported from ``before``."""
    kind, _, tree = side.partition("@")
    if tree:
        if before is None:
            raise SystemExit(f"{side}: name the earlier tree's install with --before")
        env = {**env, "PYTHONPATH": str(before)}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--workload", workload]
    command += ["--batches", str(batches), "--number", str(number)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{side} on {workload} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(options: argparse.Namespace) -> dict[str, Any]:
    """Every side's processes, in turns, and the table of what each adds over its baselines."""
    sides = [s for s in options.sides.split(",") if s]
    folder = scratch("hotpath-")
    env = {
        **os.environ,
        "TRITON_CACHE_DIR": str(folder / "triton"),
        "TRITON_DIST_AUTOTUNE_CACHE_DIR": str(folder / "picks"),
        "KERNELTUNE_CONTEXTUAL_CACHE": "disk",
        "PYTHONUNBUFFERED": "1",
    }
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for workload in options.workloads.split(","):
        present = [s for s in sides if not (s.startswith("search-params") and workload != "scale")]
        for side in present if not options.smoke else ():  # fills the Triton cache and the picks on disk
            spawn(workload, side, 1, 10, env, options.before)
        for _ in range(options.procs):
            for side in present:
                rows.setdefault((workload, side), []).append(
                    spawn(workload, side, options.batches, options.number, env, options.before)
                )
    table = []
    for (workload, side), results in rows.items():
        row: dict[str, Any] = {"workload": workload, "side": side}
        for field in sorted({f for r in results for f in r if f.endswith("_us")}):
            row[field] = statistics.median(r[field] for r in results)
            row[field + "_each"] = [round(r[field], 3) for r in results]
        row["first_s"] = [round(r["first_s"], 4) for r in results]
        row["first_s_baseline"] = [round(r["first_s_plain"], 4) for r in results]
        table.append(row)
    print(
        f"\n{'workload':8} {'side':22} {'us/call':>8}  {'over baselines (paired, us)':36} "
        "first call (s): side / baseline"
    )
    for row in table:
        overs = ", ".join(
            f"{k.removesuffix('_us').replace('over_', '')} {row[k]:+.2f}"
            for k in row
            if "over_" in k and k.endswith("_us")
        )
        first = ", ".join(
            f"{a:.3f}/{b:.3f}" for a, b in zip(row["first_s"], row["first_s_baseline"], strict=True)
        )
        print(f"{row['workload']:8} {row['side']:22} {row['per_call_us']:8.2f}  {overs:36} {first}")
    return {"rows": table, "environment": environment()}


def environment() -> dict[str, str]:
    import platform

    import torch
    import triton

    facts = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__}
    if torch.cuda.is_available():
        facts["device"] = torch.cuda.get_device_name()
    return facts


# -- CPU: what a hit looks up ------------------------------------------------------------


class Lookups:
    """Counts, while active, what the code outside Triton's kernel launches reads and looks up.

    A profile hook sees every Python call and every call of a builtin:
    environment reads are calls of ``os.environ``'s ``__getitem__`` and
    ``__iter__``; file operations calls of ``stat``, ``lstat``, ``open`` and
    ``scandir``; lookups calls of ``current_session``, ``load_settings`` and
    ``Session.create``. What runs inside a jitted function's ``run`` (the
    kernel's launch, Triton's business) is skipped.
    """

    ENVIRONMENT = frozenset({"__getitem__", "__iter__", "__contains__"})
    FILES = frozenset({"stat", "lstat", "open", "scandir", "listdir"})
    SESSIONS = frozenset({"current_session", "load_settings", "create"})

    def __init__(self) -> None:
        self.counts = {"environment": 0, "files": 0, "sessions": 0, "imports": 0}
        self._launch: Any = None

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if self._launch is not None:
            if event == "return" and frame is self._launch:
                self._launch = None
            return
        if event == "call":
            code = frame.f_code
            launching = (
                code.co_name == "run" and "triton" in code.co_filename and "runtime" in code.co_filename
            )
            if launching and frame.f_locals.get("grid") is not None:  # a jitted function's launch
                self._launch = frame
                return
            if code.co_filename == "<frozen os>" and code.co_name in self.ENVIRONMENT:
                self.counts["environment"] += 1
            elif code.co_name in self.SESSIONS and "kerneltune" in code.co_filename:
                self.counts["sessions"] += 1
        elif event == "c_call" and getattr(arg, "__name__", "") in self.FILES:
            self.counts["files"] += 1

    def __enter__(self) -> Lookups:
        self._modules = len(sys.modules)
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        self.counts["imports"] = len(sys.modules) - self._modules


def count(side: str, workload: str = "scale", hits: int = 20) -> dict[str, int]:
    """What ``hits`` cache hits of ``side`` read and look up, once its first call has tuned (CPU)."""
    call, _ = build(workload, side, "cpu")
    call()
    call()
    with Lookups() as lookups:
        for _ in range(hits):
            call()
    return lookups.counts


def parts(device: str = "cpu", repeat: int = 31, number: int = 5000) -> dict[str, float]:
    """Where a contextual hit's host time goes: on the CPU, under the interpreter, the kernels' run
    stubbed; on ``cuda``, every launch real (the device synchronised before each timing).

    On the CPU the interpreter's ``run`` of the jitted kernel is replaced by one that
    returns at once, so that what is left of a call is the Python around the
    launch. Each figure is the fastest of ``repeat`` timings of ``number``
    calls, in microseconds per call (those compared, timed in turn): the
    plain outer function (the contextual one's pick spelled out), the
    contextual one, a contextual function that launches nothing (the tuner's
    wrapper alone), the kernel's launch inside a tuned call (the interceptor
    installed and serving: its pass-through and direct launch around the
    kernel's ``run``), that ``run`` called with the pick, Triton's key of the
    scale launch (``tuning_key``) and the key the interceptor's direct launch
    takes instead (``DirectKernel.key``); then the function-level tuner's hit
    (``function``) and its launcher called directly with the same pick
    (``launcher``).
    """
    import timeit

    import torch
    from kerneltune.plugins.triton import adapter

    from triton_dist.autotuner import contextual_autotune

    contextual, chosen = build("scale", "contextual", device)
    contextual()  # tunes
    plain, _ = build("scale", "plain", device, pick=chosen())  # its pick spelled out
    empty = contextual_autotune(n_repeat=1, n_warmup=0)(lambda: None)
    empty()
    kernel = triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])(scale_kernel)
    _, _, _, args, grid = workload_of("scale", device)
    contextual()  # served by the route once, filed for the interceptor
    contextual()  # the interceptor's direct launch, which plans its key
    interceptor = contextual._interceptors[0]
    ((tuned, served),) = interceptor.served.items()
    direct_key = served.key
    (pick,) = (entry[2] for entry in served.entries.values())
    function, picked = build("scale", "function", device)
    with warnings.catch_warnings():  # its notice that the launcher writes into y, which it does
        warnings.simplefilter("ignore")
        function()  # tunes
    launcher, _ = build("scale", "launcher", device, pick=picked())
    synchronize: Callable[[], object] = lambda: None  # noqa: E731
    if device == "cpu":
        from triton.runtime.interpreter import InterpretedFunction

        InterpretedFunction.run = lambda self, *a, **k: None  # type: ignore[method-assign]
    else:
        synchronize = torch.cuda.synchronize
        for call in (plain, contextual, empty, function, launcher):  # every program loaded
            call()

    def per_call(call: Callable[[], Any]) -> float:
        timings = timeit.repeat(call, setup=synchronize, number=number, repeat=repeat)
        return min(timings) / number * 1e6

    def paired(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[float, float]:
        """The two calls timed in turn, so that neither gets the process's warmer (or colder) end."""
        timings: tuple[list[float], list[float]] = ([], [])
        for _ in range(repeat):
            for call, kept in zip((first, second), timings, strict=True):
                kept.append(timeit.timeit(call, setup=synchronize, number=number))
        return min(timings[0]) / number * 1e6, min(timings[1]) / number * 1e6

    result: dict[str, float] = {}
    result["plain"], result["contextual"] = paired(plain, contextual)
    result["wrapper alone"] = per_call(empty)
    interceptor.install(contextual._route_launch)  # as in a tuned call, on this thread
    contextual._direct.serving = True
    try:
        result["launch in call"] = per_call(lambda: tuned[grid](*args))
    finally:
        contextual._direct.serving = False
        interceptor.uninstall()
    result["kernel's run"] = per_call(lambda: tuned.fn.run(*args, grid=grid, warmup=False, **pick))
    result["Triton's key"] = per_call(lambda: adapter.tuning_key(kernel, args, {}))
    result["direct key"] = per_call(lambda: direct_key(args, {"grid": None, "warmup": False}))
    result["function"], result["launcher"] = paired(function, launcher)
    return result


# -- the command ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--procs", type=int, default=2, help="timed processes per side and workload")
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--number", type=int, default=200, help="calls per batch")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument(
        "--before", type=Path, help="an earlier tree's install (pip --target), for SIDE@before"
    )
    parser.add_argument("--count", action="store_true", help="CPU: count what a hit looks up, per tuner")
    parser.add_argument(
        "--parts",
        action="store_true",
        help="time a contextual hit's parts: on the CPU launches stubbed, with --device cuda real",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="for --parts")
    parser.add_argument("--smoke", action="store_true", help="CPU: the timing path, small and quick")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workload", default="scale", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        print(json.dumps(child(options.workload, options.child, options.batches, options.number)))
        return 0
    interpreted = options.count or (options.parts and options.device == "cpu")
    if interpreted and os.environ.get("TRITON_INTERPRET") != "1":
        # The kernels were made at import: again, under the interpreter these modes time.
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "TRITON_INTERPRET": "1"})
    os.environ.setdefault("KERNELTUNE_CACHE", "memory")
    if options.parts:
        import torch

        if options.device == "cuda" and not torch.cuda.is_available():
            raise SystemExit("bench/hotpath.py --parts --device cuda needs a CUDA device")
        result = parts(options.device)
        for name, micros in result.items():
            print(f"{name:14} {micros:7.3f} us per call")
        print(f"contextual over plain: {result['contextual'] - result['plain']:+.3f} us")
        print(f"function over launcher: {result['function'] - result['launcher']:+.3f} us")
    elif options.count:
        result: dict[str, Any] = {side: count(side) for side in ("contextual", "function", "search-params")}
        for side, counts in result.items():
            print(f"{side:14} per {20} hits: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    else:
        if options.smoke:
            options.sides = "contextual,function"  # stock (a search-params baseline) cannot tune on a CPU
            options.procs, options.batches, options.number = 1, 2, 3
        result = compare(options)
    if options.json:
        options.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
