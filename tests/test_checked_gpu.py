"""Checked outputs on a CUDA device: a config that is fastest because it is wrong is never picked.

Two ways a tile config goes wrong on real hardware, each made the fastest of
its space (a precondition the test measures with ``do_bench`` first):

* a row sum whose loop runs ``K // BLOCK_K`` times where ``K`` is not a
  multiple of ``BLOCK_K``: it drops the remainder, half of each row;
* a vector sum whose programs each store their partial sum into the same
  place, without an atomic: the last writer wins, a race.

The function-level tuner and ``contextual_autotune`` (through the inner
``triton.autotune`` kernel) tune each from scratch; neither may pick the
wrong config, and each call's output must equal torch's.
"""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
import triton
import triton.language as tl
from kerneltune.core.driving import WrongOutputWarning
from triton.testing import do_bench

from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune

pytestmark = pytest.mark.gpu

ROWS, K = 4096, 8191
N = 1 << 22


@triton.jit
def row_sum(x, out, K: tl.constexpr, BLOCK_K: tl.constexpr, DROP: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    steps = K // BLOCK_K if DROP else tl.cdiv(K, BLOCK_K)
    for step in range(steps):
        cols = step * BLOCK_K + tl.arange(0, BLOCK_K)
        acc += tl.load(x + row * K + cols, mask=cols < K, other=0.0)
    tl.store(out + row, tl.sum(acc))


@triton.jit
def vector_sum(x, out, n, BLOCK: tl.constexpr, RACY: tl.constexpr):
    if RACY:
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out, tl.sum(tl.load(x + offsets, mask=offsets < n, other=0.0)))
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            offsets = start + tl.arange(0, BLOCK)
            acc += tl.load(x + offsets, mask=offsets < n, other=0.0)
        tl.store(out, tl.sum(acc))


ROW_CONFIGS = [
    {"BLOCK_K": 4096, "DROP": False},
    {"BLOCK_K": 4096, "DROP": True},
    {"BLOCK_K": 1024, "DROP": False},
]
#: The racy config first: the reference, which the other two, agreeing, find the odd one out.
SUM_CONFIGS = [{"BLOCK": 1024, "RACY": True}, {"BLOCK": 1024, "RACY": False}, {"BLOCK": 4096, "RACY": False}]


def launch_rows(x, out, cfg):
    row_sum[(ROWS,)](x, out, K, **cfg)


def launch_sum(x, out, cfg):
    vector_sum[(triton.cdiv(N, cfg["BLOCK"]) if cfg["RACY"] else 1,)](x, out, N, **cfg)


CASES = {
    "dropped remainder": (ROW_CONFIGS, launch_rows, lambda: torch.rand(ROWS, K, device="cuda"), ROWS, "DROP"),
    "race": (SUM_CONFIGS, launch_sum, lambda: torch.rand(N, device="cuda"), 1, "RACY"),
    # Listed last, after a candidate that agrees with the reference: their verdict is read with their
    # samples (contextual_autotune), from copies of their first launch's writes.
    "dropped remainder, last": (
        [ROW_CONFIGS[0], ROW_CONFIGS[2], ROW_CONFIGS[1]],
        launch_rows,
        lambda: torch.rand(ROWS, K, device="cuda"),
        ROWS,
        "DROP",
    ),
    "race, last": (
        SUM_CONFIGS[1:] + SUM_CONFIGS[:1],
        launch_sum,
        lambda: torch.rand(N, device="cuda"),
        1,
        "RACY",
    ),
}


@pytest.fixture(params=sorted(CASES))
def case(request, monkeypatch):
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_ALWAYS_TUNE", "1")
    monkeypatch.setenv("KERNELTUNE_CACHE", "memory")
    configs, launch, make, size, wrong_flag = CASES[request.param]
    x = make()
    expected = x.sum(dim=-1) if size > 1 else x.sum().reshape(1)
    out = torch.empty(size, device="cuda")
    times = [do_bench(lambda cfg=cfg: launch(x, out, cfg)) for cfg in configs]
    wrong = [i for i, cfg in enumerate(configs) if cfg[wrong_flag]]
    assert max(times[i] for i in wrong) < 0.9 * min(t for i, t in enumerate(times) if i not in wrong), (
        "the wrong config must be the fastest, or the test proves nothing",
        times,
    )
    return configs, launch, x, out, expected, wrong_flag


def _tuned_then_served(call, x, out, expected):
    """Tune with ``call``, then call it again: both right; the warnings of the tuning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call(x, out)
    torch.testing.assert_close(result, expected, rtol=1e-4, atol=1e-2)
    out.zero_()
    torch.testing.assert_close(call(x, out), expected, rtol=1e-4, atol=1e-2)
    return [w for w in caught if issubclass(w.category, WrongOutputWarning)]


def test_the_function_level_tuner_never_picks_the_fast_wrong_config(case):
    configs, launch, x, out, expected, wrong_flag = case

    @autotune(config_space=[{"cfg": cfg} for cfg in configs], key_fn=lambda x, out: tuple(x.shape))
    def launcher(x, out, cfg):
        launch(x, out, cfg)
        return out

    assert len(_tuned_then_served(launcher, x, out, expected)) == 1
    ((_, best),) = launcher._picks.items()
    assert not best.config["cfg"][wrong_flag], best


def test_contextual_autotune_never_picks_the_fast_wrong_config(case):
    configs, launch, x, out, expected, wrong_flag = case
    rows = launch is launch_rows
    kernel = triton.autotune(configs=[triton.Config(cfg) for cfg in configs], key=[])(
        row_sum if rows else vector_sum
    )

    def grid(meta):
        return (ROWS,) if rows else (triton.cdiv(N, meta["BLOCK"]) if meta["RACY"] else 1,)

    @contextual_autotune(n_repeat=3, n_warmup=1)
    def outer(x, out):
        kernel[grid](x, out, K if rows else N)
        return out

    assert len(_tuned_then_served(outer, x, out, expected)) == 1
    assert not kernel.best_config.kwargs[wrong_flag], kernel.best_config


def test_the_checks_kernels_are_loaded_on_a_thread_once_per_device_and_dtype(monkeypatch):
    from kerneltune.core.machine import passes

    monkeypatch.setattr(passes, "_WARMED", set())  # as in a fresh process
    values = [torch.ones(3, device="cuda", dtype=torch.bfloat16), torch.ones(3, device="cuda"), 2.0]
    used: list[tuple[str, str]] = []

    def use(value):
        used.append((str(value.dtype), threading.current_thread().name))

    passes.warm(values, use)()
    assert sorted(used) == [
        ("torch.bfloat16", "kerneltune-check-warm-up"),
        ("torch.float32", "kerneltune-check-warm-up"),
    ]
    assert {dtype for _, dtype in passes._WARMED} == {torch.bfloat16, torch.float32}
    used.clear()
    passes.warm(values, use)()
    assert used == []
