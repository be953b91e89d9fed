"""Seed 003's examples (Ascend autotune usage), as a DLCompiler user would run them under kerneltune.

The seed writes ``import triton.backends.dicp_triton.ascend_autotune_hooks``
and leaves the attention kernel's body out (``...``). Here the import is the
one docs/ascend.md gives instead, and the body is a small attention written
for the interpreter; everything else is the seed's: the decorator and its
hints, the launch without ``BLOCK_M``/``BLOCK_N``, the grid, the reuse of the
pick for the same key, the ``values`` and ``shape_final_top_k`` hints, the
``debug`` hint and ``TRITON_PRINT_AUTOTUNING``, and the hand-written configs
that give every searched param. It runs under upstream Triton's interpreter
and, in ``make test-triton-ascend``, under triton-ascend 3.2.0 and 3.2.0rc4
with the NPU driver stood in.
"""

from __future__ import annotations

import ascend_stand_in
import pytest
import torch
import triton
import triton.language as tl

import triton_dist.autotune_hooks  # noqa: F401  (the seed: triton.backends.dicp_triton.ascend_autotune_hooks)

#: Small enough for the interpreter: one program per launch for the larger tiles.
N_CTX, HEAD_DIM = 32, 16


@pytest.fixture
def short(quick, tmp_path):
    """The seed's code as written, with kerneltune's settings file capping a search at 12 points.

    triton-ascend's Ascend families search many compile-option profiles,
    which its interpreter runs all alike: uncapped, the simplest example
    measured for a minute there.
    """
    with (tmp_path / "kerneltune.toml").open("a") as settings:
        settings.write("search_max_points = 12\n")


@triton.jit
def attention_body(
    Q, K, V, Out, N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    """softmax(Q K^T) V for one block of rows (the body the seed leaves out)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < N_CTX, other=0.0)
    best = tl.full([BLOCK_M], float("-inf"), tl.float32)
    total = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        inside = cols < N_CTX
        k = tl.load(K + cols[None, :] * HEAD_DIM + dims[:, None], mask=inside[None, :], other=0.0)
        scores = tl.where(inside[None, :], tl.dot(q, k), float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, 1))
        p = tl.exp(scores - new_best[:, None])
        shrink = tl.exp(best - new_best)
        total = total * shrink + tl.sum(p, 1)
        v = tl.load(V + cols[:, None] * HEAD_DIM + dims[None, :], mask=inside[:, None], other=0.0)
        acc = acc * shrink[:, None] + tl.dot(p, v)
        best = new_best
    tl.store(Out + rows[:, None] * HEAD_DIM + dims[None, :], acc / total[:, None], mask=rows[:, None] < N_CTX)


def make_attention_kernel(**autotune):
    """The seed's ``attention_kernel``, decorated as the seed decorates it."""

    @triton.autotune(**autotune)
    @triton.jit
    def attention_kernel(
        Q,
        K,
        V,
        Out,
        N_CTX: tl.constexpr,
        HEAD_DIM: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
    ):
        attention_body(Q, K, V, Out, N_CTX, HEAD_DIM, BLOCK_M, BLOCK_N)

    return attention_kernel


def inputs():
    torch.manual_seed(0)
    return [torch.randn(N_CTX, HEAD_DIM, dtype=torch.float32) for _ in range(3)] + [
        torch.zeros(N_CTX, HEAD_DIM, dtype=torch.float32)
    ]


def reference(q, k, v):
    return torch.softmax(q @ k.T, dim=-1) @ v


def call(attention_kernel, Q, K, V, Out):
    """The seed's section 2, as written there."""
    grid = lambda meta: (triton.cdiv(N_CTX, meta["BLOCK_M"]),)  # noqa: E731
    attention_kernel[grid](
        Q,
        K,
        V,
        Out,
        N_CTX,
        HEAD_DIM,
    )


def run_and_check(attention_kernel):
    Q, K, V, Out = inputs()
    call(attention_kernel, Q, K, V, Out)
    torch.testing.assert_close(Out, reference(Q, K, V), atol=1e-4, rtol=1e-4)
    return Q, K, V, Out


# The seed's sections 1 and 3: the simplest hints, a narrower range of values, and shape_final_top_k.
SEARCH_HINTS = {
    "simplest": {"search_params": {"params": ["BLOCK_M", "BLOCK_N"]}},
    "values": {"search_params": {"params": ["BLOCK_M", "BLOCK_N"], "values": [32, 64, 128, 256]}},
    "shape_final_top_k": {"search_params": {"params": ["BLOCK_M", "BLOCK_N"], "shape_final_top_k": 3}},
}
#: The default values reach 2048, and the search's start times a 1024 x 1024 tile: one such launch
#: took 47 s in triton-ascend 3.2.0's interpreter (its tl.dot), 0.1 s in 3.2.0rc4's and upstream's.
SLOW_DOT = pytest.mark.skipif(
    ascend_stand_in.release() == "3.2.0",
    reason="triton-ascend 3.2.0's interpreter takes about 50 s per 1024 x 1024 tl.dot, which the default "
    "values' search times; the 'values' example runs there",
)


@pytest.mark.parametrize(
    "hints",
    [
        pytest.param(hints, id=name, marks=() if name == "values" else SLOW_DOT)
        for name, hints in SEARCH_HINTS.items()
    ],
)
def test_the_seeds_search_params_examples_tune_and_reuse_the_pick(short, hints):
    attention_kernel = make_attention_kernel(configs=[], key=["N_CTX", "HEAD_DIM"], hints=hints)
    Q, K, V, Out = run_and_check(attention_kernel)
    summary = attention_kernel.last_search
    assert {"BLOCK_M", "BLOCK_N"} <= set(attention_kernel.best_config.kwargs)
    assert 0 < summary.measured <= summary.space
    values = hints["search_params"].get("values", [16, 32, 64, 128, 256, 512, 1024, 2048])
    assert attention_kernel.best_config.kwargs["BLOCK_M"] in values
    # "the same key in the same process reuses the best config": no second search.
    Out.zero_()
    call(attention_kernel, Q, K, V, Out)
    assert attention_kernel.last_search is summary
    torch.testing.assert_close(Out, reference(Q, K, V), atol=1e-4, rtol=1e-4)


def test_the_seeds_debug_hint_and_print_autotuning_say_what_was_chosen(short, monkeypatch, capsys):
    # The seed's section 4.
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING_TIMINGS", "1")
    hints = {"search_params": {"params": ["BLOCK_M", "BLOCK_N"], "values": [16, 32], "debug": True}}
    attention_kernel = make_attention_kernel(configs=[], key=["N_CTX", "HEAD_DIM"], hints=hints)
    run_and_check(attention_kernel)
    printed = capsys.readouterr()
    assert str(attention_kernel.best_config) in printed.out
    assert "attention_kernel" in printed.out + printed.err


def test_the_seeds_hand_written_configs_that_give_every_searched_param_are_measured_as_they_are(short):
    # The seed's section 5: with search_params, configs that each give every searched param win, and the
    # block search is skipped. (Its first form, hand-written configs without hints, is Triton's own
    # autotune, which benchmarks on the device's driver: under contextual_autotune kerneltune tunes it,
    # tests/test_contextual.py.)
    configs = [
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 16}),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}),
    ]
    attention_kernel = make_attention_kernel(
        configs=configs, key=["N_CTX", "HEAD_DIM"], hints=SEARCH_HINTS["simplest"]
    )
    run_and_check(attention_kernel)
    assert attention_kernel.best_config.kwargs in [c.kwargs for c in configs]
    assert attention_kernel.last_search.space == len(configs)
