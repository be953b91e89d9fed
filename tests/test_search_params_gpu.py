"""search_params on a real GPU: the seed's attention-style example (BLOCK_M, BLOCK_N).

Runs on the GPU machine only (``-m gpu``); the conftest skips it elsewhere.
"""

from __future__ import annotations

import math
import threading

import pytest
import torch
import triton
import triton.language as tl
from kerneltune.core import add_plugin, hookimpl, remove_plugin

import triton_dist.autotune_hooks  # noqa: F401

pytestmark = pytest.mark.gpu

ATTENTION_SEARCH_HINTS = {
    "search_params": {
        "params": ["BLOCK_M", "BLOCK_N"],
        "values": [16, 32, 64, 128],
    },
}


def make_attention(hints):
    @triton.autotune(configs=[], key=["N_CTX", "HEAD_DIM"], hints=hints)
    @triton.jit
    def attention_kernel(
        Q,
        K,
        V,
        Out,
        sm_scale,
        N_CTX: tl.constexpr,
        HEAD_DIM: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
    ):
        head = tl.program_id(1)
        base = head * N_CTX * HEAD_DIM
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        dims = tl.arange(0, HEAD_DIM)
        q = tl.load(
            Q + base + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < N_CTX, other=0.0
        )
        best = tl.full([BLOCK_M], float("-inf"), tl.float32)
        total = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        scale = sm_scale * 1.4426950408889634  # exp2 instead of exp
        for start in range(0, N_CTX, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            inside = cols < N_CTX
            k = tl.load(K + base + cols[None, :] * HEAD_DIM + dims[:, None], mask=inside[None, :], other=0.0)
            scores = tl.where(inside[None, :], tl.dot(q, k) * scale, float("-inf"))
            new_best = tl.maximum(best, tl.max(scores, 1))
            p = tl.math.exp2(scores - new_best[:, None])
            shrink = tl.math.exp2(best - new_best)
            total = total * shrink + tl.sum(p, 1)
            v = tl.load(V + base + cols[:, None] * HEAD_DIM + dims[None, :], mask=inside[:, None], other=0.0)
            acc = acc * shrink[:, None] + tl.dot(p.to(v.dtype), v)
            best = new_best
        out = acc / total[:, None]
        tl.store(
            Out + base + rows[:, None] * HEAD_DIM + dims[None, :],
            out.to(Out.dtype.element_ty),
            mask=rows[:, None] < N_CTX,
        )

    return attention_kernel


def inputs(heads=4, n_ctx=384, head_dim=64):
    torch.manual_seed(0)
    q, k, v = (torch.randn(heads, n_ctx, head_dim, device="cuda", dtype=torch.float16) for _ in range(3))
    return q, k, v, torch.empty_like(q)


def reference(q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    weights = torch.softmax((q.float() @ k.float().transpose(1, 2)) * scale, dim=-1)
    return (weights @ v.float()).to(q.dtype)


def launch(kernel, q, k, v, out):
    heads, n_ctx, head_dim = q.shape
    grid = lambda meta: (triton.cdiv(n_ctx, meta["BLOCK_M"]), heads)  # noqa: E731
    kernel[grid](q, k, v, out, 1.0 / math.sqrt(head_dim), n_ctx, head_dim)


def test_attention_example_returns_correct_results_and_a_pick(monkeypatch, capsys):
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    kernel = make_attention(ATTENTION_SEARCH_HINTS)
    q, k, v, out = inputs()
    launch(kernel, q, k, v, out)
    torch.testing.assert_close(out, reference(q, k, v), atol=2e-2, rtol=2e-2)
    assert {"BLOCK_M", "BLOCK_N"} <= set(kernel.best_config.kwargs)
    summary = kernel.last_search
    assert 0 < summary.measured < summary.space
    assert f"best config selected: {kernel.best_config};" in capsys.readouterr().out

    out.zero_()
    launch(kernel, q, k, v, out)
    assert kernel.last_search is summary, "the same key must reuse the in-process pick"
    torch.testing.assert_close(out, reference(q, k, v), atol=2e-2, rtol=2e-2)


def test_attention_with_a_correctness_gate_and_a_fixed_option():
    checked = []

    def check(q, k, v, out, sm_scale, n_ctx, head_dim):
        checked.append(True)
        torch.testing.assert_close(out, reference(q, k, v), atol=2e-2, rtol=2e-2)

    hints = {"search_params": {**ATTENTION_SEARCH_HINTS["search_params"], "reference_fn": check}}
    kernel = make_attention(hints)
    q, k, v, out = inputs(n_ctx=200)
    heads, n_ctx, head_dim = q.shape
    grid = lambda meta: (triton.cdiv(n_ctx, meta["BLOCK_M"]), heads)  # noqa: E731
    kernel[grid](q, k, v, out, 1.0 / math.sqrt(head_dim), n_ctx, head_dim, num_stages=2)
    assert checked
    assert kernel.best_config.num_stages == 2
    torch.testing.assert_close(out, reference(q, k, v), atol=2e-2, rtol=2e-2)


class CompileEvents:
    """Each compile started, with whether it was handed over ahead of the round that asks for it."""

    def __init__(self) -> None:
        self.started: list[tuple[int, bool]] = []
        self.lock = threading.Lock()

    @hookimpl
    def kerneltune_compile_started(self, event):
        with self.lock:
            self.started.append((event.candidate.index, event.ahead))


def test_the_walk_compiles_its_next_poll_ahead_and_each_point_once(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_COMPILE_AHEAD", "1")
    events = CompileEvents()
    add_plugin(events)
    try:
        kernel = make_attention(ATTENTION_SEARCH_HINTS)
        q, k, v, out = inputs(n_ctx=320)
        launch(kernel, q, k, v, out)
    finally:
        remove_plugin(events)
    torch.testing.assert_close(out, reference(q, k, v), atol=2e-2, rtol=2e-2)
    indexes = [index for index, _ in events.started]
    assert len(indexes) == len(set(indexes)), "no point compiled twice"
    assert any(ahead for _, ahead in events.started), "the walk's next poll compiled ahead"
    assert kernel.last_search.measured <= len(indexes)
