"""isolate = "subprocess" on a CUDA device: a config that faults is screened out, and this process lives on.

``guarded_double`` (tests/isolation_kernels.py) stores ``2 * x``, except
under the block size a launch names as ``CRASH``, where it stores ``2**40``
elements past the output: an illegal address, which leaves a CUDA context
unusable. The first test shows that on a throwaway process. The others tune
the kernel with that config among the candidates, through contextual_autotune,
search_params and the function-level tuner; each passes only if the config
was recorded as screened out (``ScreenedOut: crashed the isolation
worker ...``), never launched here, a correct result came back, and this
process's CUDA context still works afterwards.

Skipped without CUDA; the same paths run on the CPU, under Triton's
interpreter, in tests/test_isolation_kernels.py and tests/test_isolation.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import isolation_kernels as kernels
import pytest
import torch
from tuning_doubles import stored_records

import triton_dist.autotune_hooks  # noqa: F401  (before isolation_search decorates its kernels)
from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune

import isolation_search as searches  # isort: skip

pytestmark = pytest.mark.gpu

HERE = os.getpid()
N = 1 << 16
SCREENED_OUT = "ScreenedOut: crashed the isolation worker ("


@pytest.fixture
def isolate(monkeypatch):
    """Isolation on (the default 60 s per candidate: the worker compiles each), launches noted afresh."""
    monkeypatch.setenv("KERNELTUNE_ISOLATE", "subprocess")
    with kernels.observed() as outcomes:
        yield outcomes


def ran_here(n: int) -> set[int]:
    return {block for pid, block in kernels.launches(n) if pid == HERE}


def assert_cuda_still_works() -> None:
    """This process's context survived: new work runs, synchronises and gives the right answer."""
    z = torch.full((1 << 20,), 3.0, device="cuda")
    z.mul_(2)
    torch.cuda.synchronize()
    assert z.sum().item() == 6.0 * (1 << 20)
    x = torch.arange(N, device="cuda", dtype=torch.float32)
    y = torch.zeros_like(x)
    kernels.guarded_double[(N // 64,)](x, y, N, BLOCK=64)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)


def test_the_crashing_config_really_breaks_a_cuda_context(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import torch
        import isolation_kernels as kernels
        x = torch.arange({N}, device="cuda", dtype=torch.float32)
        y = torch.zeros_like(x)
        kernels.guarded_double[({N} // 64,)](x, y, {N}, BLOCK=64, CRASH=64)
        try:
            torch.cuda.synchronize()
            torch.ones(1, device="cuda").add_(1).item()
        except Exception as exc:
            print("broken:", exc)
        else:
            print("survived")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "survived" not in done.stdout, done.stdout + done.stderr
    assert done.returncode != 0 or "broken:" in done.stdout, done.stdout + done.stderr


def test_contextual_the_faulting_config_is_screened_out_and_the_process_lives_on(isolate):
    x = torch.arange(N, device="cuda", dtype=torch.float32)

    @contextual_autotune(n_repeat=3, n_warmup=1)
    def outer():
        return kernels.launch(kernels.doubled, x, CRASH=64)

    y = outer()
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)
    errors = isolate.of("guarded_double", N)
    assert errors[16] is None and errors[32] is None, errors
    assert errors[64] is not None and errors[64].startswith(SCREENED_OUT), errors
    assert kernels.doubled.best_config.kwargs["BLOCK"] in (16, 32)
    assert ran_here(N) == {16, 32}
    assert 64 in [block for pid, block in kernels.launches(N) if pid != HERE], "screened in the worker"
    assert_cuda_still_works()


def test_search_params_the_faulting_config_is_screened_out_and_the_process_lives_on(isolate):
    n = N + 64
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = kernels.launch(searches.searched, x, CRASH=32)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)
    errors = isolate.of("guarded_double", n)
    assert errors[32] is not None and errors[32].startswith(SCREENED_OUT), errors
    assert errors[16] is None and errors[64] is None, errors
    assert searches.searched.best_config.kwargs["BLOCK"] in (16, 64)
    assert ran_here(n) == {16, 64}
    assert_cuda_still_works()


def test_function_level_the_faulting_config_is_screened_out_and_the_process_lives_on(isolate, isolated):
    space = [{"block": 32, "crash": False}, {"block": 64, "crash": False}, {"block": 128, "crash": True}]
    double = autotune(config_space=space, key_fn=lambda x: x.numel())(kernels.double_on_host)
    x = torch.arange(N, device="cuda", dtype=torch.float32)
    y = double(x)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)
    (record,) = stored_records(isolated, "double_on_host")
    errors = [candidate["error"] for candidate in record["candidates"]]
    assert errors[:2] == [None, None], errors
    assert errors[2] is not None and errors[2].startswith(SCREENED_OUT), errors
    assert record["best"]["index"] in (0, 1)
    assert_cuda_still_works()
