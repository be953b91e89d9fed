"""Search quality and cost of ``search_params`` against an exhaustive measurement of the same space.

Usage (needs a CUDA device)::

    python3 bench/search_params.py                      # matmul, softmax, elementwise
    python3 bench/search_params.py --kernels matmul     # one of them
    python3 bench/search_params.py --json out.json     # also write the numbers

For each kernel, in one run and with fresh Triton and kerneltune caches:

1. staged: the first launch of a ``triton.autotune(configs=[], hints=
   {"search_params": ...})`` kernel, timed on the wall clock (compilation,
   the three stages and the final launch); its summary says how many
   candidates it measured out of the space (every block shape times every
   profile of the family the classifier chose);
2. exhaustive: every candidate of that same space compiled (on a thread
   pool) and measured through the same engine, timer and settings;
3. the staged pick and the exhaustive table's five fastest are re-timed
   side by side with ``triton.testing.do_bench`` (median of its runs, L2
   flushed), interleaved over five rounds, the median round kept; the
   fastest of them is the "best" the do_bench ratio is taken against.

Printed per kernel: the space, the fraction measured (target at most 25%),
the staged pick's time over the exhaustive best (target at most 1.02, from
the exhaustive table and from do_bench), and both wall times.

Each kernel uses the whole family the classifier picks for it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from scratch import scratch

# Fresh caches, so the staged side pays for its own compilation and nothing is a hit;
# bench/search_quality.py's warm runs hand in a Triton cache that is already full.
os.environ["TRITON_CACHE_DIR"] = os.environ.get("BENCH_TRITON_CACHE_DIR") or str(
    scratch("kerneltune-bench-triton-")
)
os.environ["TRITON_DIST_AUTOTUNE_CACHE_DIR"] = str(scratch("kerneltune-bench-picks-"))

import torch
import triton
import triton.language as tl
from kerneltune.core.driving import Space, Tuner, current_session
from kerneltune.plugins.triton import adapter, compile_device

import triton_dist.autotune_hooks  # noqa: F401

FRACTION_TARGET = 0.25
RATIO_TARGET = 1.02


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % (GROUP_M * tiles_n)) % rows_in_group
    tile_n = (pid % (GROUP_M * tiles_n)) // rows_in_group
    rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    inner = tl.arange(0, BLOCK_K)
    a = a_ptr + rows[:, None] * K + inner[None, :]
    b = b_ptr + inner[:, None] * N + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        acc = tl.dot(
            tl.load(a, mask=inner[None, :] < K - start), tl.load(b, mask=inner[:, None] < K - start), acc
        )
        a += BLOCK_K
        b += BLOCK_K * N
    out_rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_ptr + out_rows[:, None] * N + out_cols[None, :], acc.to(tl.float16), mask=mask)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK_N: tl.constexpr):
    # One row per program; two passes over the row in BLOCK_N chunks (online max and sum, then write).
    row = tl.program_id(0).to(tl.int64) * n_cols
    best = tl.full([BLOCK_N], float("-inf"), tl.float32)
    total = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        new_best = tl.maximum(best, x)
        # A lane that has seen only padding keeps best = -inf; exp(-inf - -inf) would be NaN.
        rescale = tl.where(new_best > float("-inf"), tl.exp(best - new_best), 1.0)
        total = total * rescale + tl.where(cols < n_cols, tl.exp(x - new_best), 0.0)
        best = new_best
    peak = tl.max(best, 0)
    norm = tl.sum(total * tl.exp(best - peak), 0)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + row + cols, (tl.exp(x - peak) / norm).to(tl.float16), mask=cols < n_cols)


@triton.jit
def silu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n).to(tl.float32)
    tl.store(y_ptr + offsets, (x / (1.0 + tl.exp(-x))).to(tl.float16), mask=offsets < n)


def matmul_case(size: int):
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = torch.empty(size, size, device="cuda", dtype=torch.float16)
    hints = {"search_params": {"params": ["BLOCK_M", "BLOCK_N"], "values": [32, 64, 128, 256]}}
    kernel = triton.autotune(configs=[], key=["M", "N", "K"], hints=hints)(matmul_kernel)
    grid = lambda meta: (triton.cdiv(size, meta["BLOCK_M"]) * triton.cdiv(size, meta["BLOCK_N"]),)  # noqa: E731
    return kernel, grid, (a, b, c, size, size, size), {"BLOCK_K": 64, "GROUP_M": 8}, {}


def softmax_case(size: int):
    x = torch.randn(size, size, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    values = [128, 256, 512, 1024, 2048, 4096, 8192]
    kernel = triton.autotune(
        configs=[], key=["n_cols"], hints={"search_params": {"params": ["BLOCK_N"], "values": values}}
    )(softmax_kernel)
    return kernel, (size,), (x, y, size), {}, {}


def silu_case(size: int):
    x = torch.randn(size * size, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    values = [256, 512, 1024, 2048, 4096, 8192, 16384]
    kernel = triton.autotune(
        configs=[], key=["n"], hints={"search_params": {"params": ["BLOCK"], "values": values}}
    )(silu_kernel)
    grid = lambda meta: (triton.cdiv(size * size, meta["BLOCK"]),)  # noqa: E731
    return kernel, grid, (x, y, size * size), {}, {}


CASES = {"matmul": (matmul_case, 4096), "softmax": (softmax_case, 8192), "elementwise": (silu_case, 8192)}


def staged(kernel, grid, args, launch, fixed) -> float:
    """Seconds the first launch of a search_params kernel takes: compiling, searching, launching."""
    synchronize = torch.cuda.synchronize if torch.cuda.is_available() else lambda: None
    synchronize()
    started = time.perf_counter()
    kernel[grid](*args, **launch, **fixed)
    synchronize()
    return time.perf_counter() - started


def compile_space(kernel, grid, args, launch, configs) -> list[Exception | None]:
    """Compile every config for the launch's arguments on a thread pool; each one's error, or None."""
    bind = compile_device.device_binding()

    def build(config):
        bind()
        try:
            kernel.fn.warmup(*args, grid=grid, **launch, **config.all_kwargs())
        except Exception as exc:
            return exc
        return None

    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        return list(pool.map(build, configs))


def exhaustive(kernel, grid, args, launch, fixed) -> tuple[list[float], float]:
    """Every candidate of the kernel's space, compiled in parallel and measured through the engine."""
    started = time.perf_counter()
    candidates = kernel.search_space(**fixed).tuner.space.candidates
    problems = compile_space(kernel, grid, args, launch, [c.config for c in candidates])
    tuner = Tuner(Space.build(f"{kernel.__name__}-exhaustive", [c.config for c in candidates], "bench"))
    arguments = {**launch, "grid": grid, "warmup": False}
    with tuner.begin(current_session(), "exhaustive") as tuning:
        while (candidate := tuning.next_candidate()) is not None:
            problem = problems[candidate.index]
            if problem is not None:
                tuning.fail(candidate, problem)
                continue
            config = candidate.config
            tuning.measure(
                candidate, lambda config=config: adapter.launch_config(kernel, args, arguments, config)
            )
        times = tuning.times(list(candidates))
        tuning.finish()
    return times, time.perf_counter() - started


def interleaved_ms(
    kernel,
    grid,
    args,
    launch,
    configs: dict[str, Any],
    rounds: int = 5,
    warmup: int = 25,
    rep: int = 100,
    smoke: bool = False,
) -> dict[str, list[float]]:
    """Each config's time in each of ``rounds`` interleaved rounds, each round starting one config further.

    One do_bench per config in a row would put clock and thermal drift
    between configs; alternating them puts it inside every config alike, and
    rotating the start keeps any config from always following another. A
    time is do_bench's median (``warmup`` and ``rep`` are do_bench's, ms per
    config and round), or with ``smoke`` one launch on the host clock (the
    interpreter has no device timer).
    """
    arguments = {**launch, "grid": grid, "warmup": False}

    def timed(config: Any) -> float:
        run = lambda: adapter.launch_config(kernel, args, arguments, config)  # noqa: E731
        if not smoke:
            return triton.testing.do_bench(run, warmup=warmup, rep=rep, return_mode="median")
        started = time.perf_counter()
        run()
        return (time.perf_counter() - started) * 1000

    labels = list(configs)
    samples: dict[str, list[float]] = {label: [] for label in labels}
    for r in range(rounds):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            samples[label].append(timed(configs[label]))
    return samples


def alone_ms(
    kernel, grid, args, launch, configs: dict[str, Any], rounds: int = 5, warmup: int = 25, rep: int = 100
) -> dict[str, float]:
    """Each config's median over :func:`interleaved_ms`'s rounds."""
    samples = interleaved_ms(kernel, grid, args, launch, configs, rounds, warmup, rep)
    return {label: statistics.median(values) for label, values in samples.items()}


def run_case(name: str, size: int) -> dict:
    make, default_size = CASES[name]
    kernel, grid, args, launch, fixed = make(size or default_size)
    staged_s = staged(kernel, grid, args, launch, fixed)
    summary = kernel.last_search
    print(
        f"{name}: staged search {staged_s:.1f} s, {summary.measured} of {summary.space} measured; "
        "measuring the whole space...",
        flush=True,
    )
    times, exhaustive_s = exhaustive(kernel, grid, args, launch, fixed)
    candidates = kernel.search_space(**fixed).tuner.space.candidates
    pick = next(c for c in candidates if c.label == summary.pick)
    ranked = sorted((i for i in range(len(times)) if math.isfinite(times[i])), key=lambda i: (times[i], i))
    best = ranked[0]
    # The exhaustive table is ten event samples per candidate: too coarse to
    # settle a 2% question alone, so its five fastest and the staged pick are
    # re-timed side by side and the fastest of them by do_bench is the best.
    contenders = {candidates[i].label: candidates[i].config for i in ranked[:5]}
    contenders[pick.label] = pick.config
    alone = alone_ms(kernel, grid, args, launch, contenders)
    best_alone_label = min(alone, key=alone.get)
    return {
        "kernel": name,
        "space": summary.space,
        "measured": summary.measured,
        "dropped": summary.dropped,
        "fraction": summary.measured / summary.space,
        "staged_wall_s": staged_s,
        "exhaustive_wall_s": exhaustive_s,
        "pick": pick.label,
        "best": candidates[best].label,
        "pick_table_ms": times[pick.index],
        "best_table_ms": times[best],
        "ratio_table": times[pick.index] / times[best],
        "best_do_bench": best_alone_label,
        "pick_do_bench_ms": alone[pick.label],
        "best_do_bench_ms": alone[best_alone_label],
        "ratio_do_bench": alone[pick.label] / alone[best_alone_label],
        "do_bench_ms": alone,
        "table_ms": {
            c.label: (t if math.isfinite(t) else None) for c, t in zip(candidates, times, strict=True)
        },
        "failed_in_exhaustive": sum(1 for t in times if not math.isfinite(t)),
    }


def print_table(rows: list[dict]) -> None:
    print()
    print(
        "| kernel | space | measured | fraction | staged s | exhaustive s | pick/best (table) | "
        "pick/best (do_bench) | staged pick | exhaustive best |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for r in rows:
        fraction = f"{r['fraction']:.1%}{'' if r['fraction'] <= FRACTION_TARGET else ' (over target)'}"
        ratio = f"{r['ratio_do_bench']:.3f}{'' if r['ratio_do_bench'] <= RATIO_TARGET else ' (over target)'}"
        print(
            f"| {r['kernel']} | {r['space']} | {r['measured']} | {fraction} | {r['staged_wall_s']:.1f} | "
            f"{r['exhaustive_wall_s']:.1f} | {r['ratio_table']:.3f} | {ratio} | {r['pick']} | {r['best']} |"
        )
    print()
    for r in rows:
        print(
            f"{r['kernel']}: pick {r['pick_do_bench_ms']:.4f} ms, best {r['best_do_bench_ms']:.4f} ms "
            f"(do_bench); {r['dropped']} dropped by the search, "
            f"{r['failed_in_exhaustive']} failed in the exhaustive run"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kernels", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--size", type=int, default=0, help="problem size (default per kernel)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/search_params.py needs a CUDA device", file=sys.stderr)
        return 2
    print(
        f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}, "
        f"timer {current_session().settings.get('timer')}"
    )
    rows = []
    for name in options.kernels:
        rows.append(run_case(name, options.size))
        print(json.dumps(rows[-1]), flush=True)
    print_table(rows)
    if options.json:
        options.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
