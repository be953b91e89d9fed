"""A Triton matmul whose block shapes really differ in speed, shared by the GPU test and bench.

:func:`make_matmul` returns a fresh ``triton.autotune`` kernel over the given
configs (fresh, so that no earlier pick sits in its cache);
:func:`launch_matmul` launches it through the autotuner, as user code does;
:func:`median_ms` measures one config alone with ``triton.testing.do_bench``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def config(m: int, n: int, k: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, num_warps=warps, num_stages=stages)


# Spread from far too small to well suited for a 2048^3 fp16 product on an H100/H200.
SIX_CONFIGS = [
    config(16, 16, 16, 1, 2),
    config(32, 32, 32, 2, 2),
    config(64, 64, 32, 4, 3),
    config(128, 128, 32, 4, 3),
    config(128, 256, 64, 8, 3),
    config(64, 128, 64, 4, 4),
]

SIXTEEN_CONFIGS = [
    config(m, n, k, warps, stages)
    for (m, n, k, warps, stages) in (
        (32, 32, 32, 2, 2),
        (32, 64, 32, 2, 3),
        (64, 32, 32, 2, 3),
        (64, 64, 32, 4, 3),
        (64, 64, 64, 4, 4),
        (64, 128, 32, 4, 3),
        (64, 128, 64, 4, 4),
        (128, 64, 32, 4, 3),
        (128, 64, 64, 4, 4),
        (128, 128, 32, 4, 3),
        (128, 128, 64, 8, 3),
        (128, 256, 32, 8, 3),
        (128, 256, 64, 8, 3),
        (256, 128, 32, 8, 3),
        (256, 128, 64, 8, 3),
        (64, 256, 32, 4, 4),
    )
]


def make_matmul(configs: list[triton.Config]):
    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(
        a_ptr,
        b_ptr,
        c_ptr,
        M,
        N,
        # constexpr: Triton 3.6's interpreter cannot loop over a runtime scalar (numpy 2).
        K: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        pid = tl.program_id(0)
        tiles_n = tl.cdiv(N, BLOCK_N)
        row = pid // tiles_n
        col = pid % tiles_n
        rm = row * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = col * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            ks = k + rk
            a = tl.load(
                a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0
            )
            b = tl.load(
                b_ptr + ks[:, None] * N + rn[None, :], mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0
            )
            acc += tl.dot(a, b)
        c = acc.to(tl.float16)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))

    return matmul_kernel


def grid(M: int, N: int):
    return lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)


def launch_matmul(kernel, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    kernel[grid(M, N)](a, b, c, M, N, K)
    return c


def launch_config(kernel, cfg: triton.Config, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    """Launch the jitted kernel under the autotuner directly with one config."""
    M, K = a.shape
    N = b.shape[1]
    kernel.fn[grid(M, N)](a, b, c, M, N, K, **cfg.all_kwargs())


def median_ms(kernel, cfg: triton.Config, a: torch.Tensor, b: torch.Tensor) -> float:
    """``do_bench``'s median for one config (L2 flushed before each run, as do_bench does)."""
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=torch.float16)
    return float(
        triton.testing.do_bench(
            lambda: launch_config(kernel, cfg, a, b, c), warmup=50, rep=300, return_mode="median"
        )
    )
