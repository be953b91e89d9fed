"""On a CUDA device: configs that need more shared memory than a block may hold, over an M sweep.

Each is tried for the first key only, not once per key, under
``contextual_autotune`` and the function-level tuner, and drops without a
``CandidateFailedWarning``. The counter is Triton's own: every attempt to
load such a kernel raises ``OutOfResources`` (Triton 3.6 makes two per
attempt). Stock ``triton.autotune``, which has no such memory, shows that the
counter counts every key's tries.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import triton
from contextual_matmul import config, launch_config, launch_matmul, make_matmul
from kerneltune.core import CandidateFailedWarning

from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune

pytestmark = pytest.mark.gpu

FITTING = [config(64, 64, 32, 4, 3), config(128, 64, 32, 4, 3)]
# fp16 tiles of (256 x 64 + 64 x 256) x 2 bytes x 4 stages = 256 KiB, and of (256 x 128 + 128 x 128)
# x 2 x 3 = 288 KiB: over the 227 KiB a block may hold on an H100 or H200.
TOO_BIG = [config(256, 256, 64, 8, 4), config(256, 128, 128, 8, 3)]
SIZES = (64, 128, 192, 256, 320)
N = K = 256


@pytest.fixture
def attempts(monkeypatch):
    """How many ``OutOfResources`` Triton raised since the test began."""
    count = [0]
    real = triton.runtime.errors.OutOfResources.__init__

    def counting(self, *args, **kwargs):
        count[0] += 1
        real(self, *args, **kwargs)

    monkeypatch.setattr(triton.runtime.errors.OutOfResources, "__init__", counting)
    return count


def operands(m: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device="cuda").manual_seed(m)
    a = torch.randn((m, K), device="cuda", dtype=torch.float16, generator=generator)
    b = torch.randn((K, N), device="cuda", dtype=torch.float16, generator=generator)
    return a, b


def expected(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).half()


def sweep(matmul, attempts: list[int]) -> list[int]:
    """``matmul`` over :data:`SIZES`, each product checked, no candidate failing aloud; the
    ``attempts`` after each size."""
    counts = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", CandidateFailedWarning)
        for m in SIZES:
            a, b = operands(m)
            torch.testing.assert_close(matmul(a, b), expected(a, b), atol=0.5, rtol=0.02)
            counts.append(attempts[0])
    return counts


def test_stock_triton_autotune_tries_a_config_too_big_for_every_key(attempts):
    kernel = make_matmul(FITTING + TOO_BIG)
    counts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in SIZES:
            launch_matmul(kernel, *operands(m))
            counts.append(attempts[0])
    assert all(later > earlier for earlier, later in zip([0, *counts], counts, strict=False)), counts


def test_contextual_autotune_launches_each_config_too_big_once_over_the_sweep(attempts):
    kernel = make_matmul(FITTING + TOO_BIG)

    @contextual_autotune(n_repeat=2)
    def outer(a, b):
        return launch_matmul(kernel, a, b)

    counts = sweep(outer, attempts)
    # Where COMPILE loads a program in a child process, the parent may see no try at all.
    assert counts[-1] == counts[0], f"tried again after the first key: {counts}"


def test_the_function_level_tuner_launches_each_config_too_big_once_over_the_sweep(attempts):
    @autotune(
        config_space=[{"config": c} for c in FITTING + TOO_BIG],
        key_fn=lambda a, b, config=None: a.shape[0],
    )
    def matmul(a, b, config):
        c = torch.empty((a.shape[0], N), device="cuda", dtype=torch.float16)
        launch_config(kernel, config, a, b, c)
        return c

    kernel = make_matmul(FITTING)  # its jitted function, launched with each config
    counts = sweep(matmul, attempts)
    assert counts[0] > 0 and counts[-1] == counts[0], f"tried for the first key only: {counts}"
