"""contextual_autotune with real @triton.jit / @triton.autotune kernels.

On CPU the kernels run in Triton's interpreter (conftest sets
TRITON_INTERPRET=1) and the wallclock timer measures them; grids stay at one
or two programs so that a launch costs a few milliseconds. On a CUDA machine
the same tests run compiled on the GPU, timed by the cuda-event timer with
the L2 flush on. Each test makes its own kernels, so no test sees another's
picks in Triton's caches.
"""

from __future__ import annotations

import threading

import pytest
import torch
import triton
import triton.language as tl
from contextual_matmul import SIX_CONFIGS, launch_matmul, make_matmul
from kerneltune.core import TunerBusyError
from kerneltune.core.contextual import _Active
from triton.runtime.autotuner import Autotuner

from triton_dist.autotuner import ContextualAutoTuner, contextual_autotune

BLOCK = 64
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def randn(n):
    return torch.randn(n, device=DEVICE)


def make_scale_kernel(configs=None, **autotune_options):
    """The seed's scale kernel, autotuned over ``configs`` (default: two warp counts)."""
    if configs is None:
        configs = [triton.Config({"BLOCK": BLOCK}, num_warps=w) for w in (4, 8)]

    @triton.autotune(configs=configs, key=["n"], **autotune_options)
    @triton.jit
    def scale_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offsets = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        tl.store(y_ptr + offsets, alpha * x, mask=mask)

    return scale_kernel


def make_add_kernel():
    @triton.autotune(
        configs=[triton.Config({"BLOCK": b}, num_warps=4) for b in (64, 128)],
        key=["n"],
    )
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offsets = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
        tl.store(out_ptr + offsets, x + y, mask=mask)

    return add_kernel


def launch_scale(kernel, x, alpha):
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, alpha, x.numel())
    return y


def read_log(tmp_path, rank=0):
    return (tmp_path / ".autotune_logs" / f"rank-{rank}.log").read_text()


def test_seed_example_run_scale(tmp_path):
    scale_kernel = make_scale_kernel()
    executions = []

    @contextual_autotune(is_dist=False, n_repeat=3, n_warmup=2)
    def run_scale(x, alpha):
        """Scale x by alpha."""
        executions.append(1)
        return launch_scale(scale_kernel, x, alpha)

    x = randn(128)
    y = run_scale(x, 3.0)

    torch.testing.assert_close(y, 3.0 * x, atol=1e-5, rtol=1e-4)
    assert scale_kernel.best_config is not None
    assert isinstance(run_scale, ContextualAutoTuner)
    assert run_scale.__name__ == "run_scale" and run_scale.__doc__ == "Scale x by alpha."
    # Two candidates, 2 warm-up and 3 timed launches each, then the run with the pick.
    assert len(executions) == 2 * (2 + 3) + 1
    assert scale_kernel.best_config in scale_kernel.configs
    assert scale_kernel.cache[(128, "torch.float32", "torch.float32")] is scale_kernel.best_config

    # Later calls are Triton cache hits: one execution, no tuning.
    torch.testing.assert_close(run_scale(x, 2.0), 2.0 * x)
    assert len(executions) == 2 * (2 + 3) + 2
    # And so are plain launches outside the tuner, which would otherwise need a GPU benchmarker.
    torch.testing.assert_close(launch_scale(scale_kernel, x, 0.5), 0.5 * x)


def test_triton_is_patched_only_while_active():
    original = Autotuner.__dict__["run"]
    scale_kernel = make_scale_kernel()
    seen = []

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(x):
        seen.append(Autotuner.__dict__["run"] is original)
        return launch_scale(scale_kernel, x, 2.0)

    run(randn(64))
    assert seen and not any(seen)
    assert Autotuner.__dict__["run"] is original


def test_log_file_records_rounds_times_errors_and_pick(tmp_path):
    configs = [
        triton.Config({"BLOCK": BLOCK}, num_warps=4),
        triton.Config({"BLOCK": 48}, num_warps=4),  # tl.arange needs a power of two: fails
    ]
    scale_kernel = make_scale_kernel(configs)

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run_scale(x):
        return launch_scale(scale_kernel, x, 3.0)

    x = randn(64)
    torch.testing.assert_close(run_scale(x), 3.0 * x)
    assert scale_kernel.best_config is configs[0]
    log = read_log(tmp_path)
    key = "(64, 'torch.float32', 'torch.float32')"
    assert f"kernel scale_kernel key {key} config 0 warmup round 1/1: done" in log
    assert f"kernel scale_kernel key {key} config 0 timed round 1/2: " in log
    assert f"kernel scale_kernel key {key} config 0 timed round 2/2: " in log
    assert f"kernel scale_kernel key {key} config 1 warmup round 1/1: exception: " in log
    assert "config 1 mean invalid" in log
    assert f"kernel scale_kernel key {key}: best config 0 [BLOCK: 64" in log
    assert "config 0 mean " in log and " ms [BLOCK: 64" in log

    # Appended, not overwritten.
    other = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def again(x):
        return launch_scale(other, x, 1.0)

    again(x)
    log = read_log(tmp_path)
    assert log.count("best config") == 2


def test_two_kernels_are_tuned_one_after_another(tmp_path):
    scale_kernel = make_scale_kernel()
    add_kernel = make_add_kernel()

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def scale_then_add(x, y):
        scaled = launch_scale(scale_kernel, x, 2.0)
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 64),)](scaled, y, out, x.numel())
        return out

    x, y = randn(100), randn(100)
    torch.testing.assert_close(scale_then_add(x, y), 2.0 * x + y)
    assert scale_kernel.best_config is not None
    assert add_kernel.best_config is not None
    # The whole of scale_kernel's tuning comes before any of add_kernel's.
    lines = [line for line in read_log(tmp_path).splitlines() if " round " in line]
    kernels = [line.split(" kernel ")[1].split()[0] for line in lines]
    assert kernels == ["scale_kernel"] * 6 + ["add_kernel"] * 6


def test_each_execution_uses_its_own_arguments():
    scale_kernel = make_scale_kernel()
    outputs = []

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run_scale(x):
        y = launch_scale(scale_kernel, x, 3.0)  # a fresh output on every call
        outputs.append(y)
        return y

    x = randn(128)
    result = run_scale(x)
    torch.testing.assert_close(result, 3.0 * x)
    assert len(outputs) == 2 * 3 + 1
    # Every execution, tuning ones included, wrote its own output buffer.
    for y in outputs:
        torch.testing.assert_close(y, 3.0 * x)


def test_one_kernel_two_shapes_in_one_call_tunes_both_keys():
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def two_shapes(a, b):
        return launch_scale(scale_kernel, a, 2.0), launch_scale(scale_kernel, b, 5.0)

    a, b = randn(64), randn(100)
    ya, yb = two_shapes(a, b)
    torch.testing.assert_close(ya, 2.0 * a)
    torch.testing.assert_close(yb, 5.0 * b)
    assert set(scale_kernel.cache) == {
        (64, "torch.float32", "torch.float32"),
        (100, "torch.float32", "torch.float32"),
    }


def test_prune_configs_by_is_respected(tmp_path):
    configs = [triton.Config({"BLOCK": BLOCK}, num_warps=w) for w in (1, 2, 4)]

    def keep_wide(configs, named_args, **kwargs):
        return [c for c in configs if c.num_warps > 1]

    scale_kernel = make_scale_kernel(configs, prune_configs_by={"early_config_prune": keep_wide})

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(x):
        return launch_scale(scale_kernel, x, 1.5)

    x = randn(64)
    torch.testing.assert_close(run(x), 1.5 * x)
    assert scale_kernel.best_config in configs[1:]
    log = read_log(tmp_path)
    assert "config 0 timed" not in log
    assert "config 1 timed" in log and "config 2 timed" in log


def test_all_candidates_invalid_raises_and_leaves_no_state():
    bad = make_scale_kernel([triton.Config({"BLOCK": b}) for b in (48, 96)])

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x):
        return launch_scale(bad, x, 2.0)

    with pytest.raises(RuntimeError, match=r"^cannot find valid config") as info:
        run(randn(64))
    assert "[0]" in str(info.value) and "[1]" in str(info.value)
    assert not bad.cache
    assert not _Active.lock.locked()

    good = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run_good(x):
        return launch_scale(good, x, 2.0)

    x = randn(64)
    torch.testing.assert_close(run_good(x), 2.0 * x)


def test_exception_from_outer_function_propagates_unchanged():
    scale_kernel = make_scale_kernel()
    boom = ValueError("the outer function's own error")
    calls = []

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x):
        calls.append(1)
        y = launch_scale(scale_kernel, x, 2.0)
        if len(calls) == 3:
            raise boom
        return y

    x = randn(64)
    with pytest.raises(ValueError) as info:
        run(x)
    assert info.value is boom
    assert not _Active.lock.locked()
    assert "run" in Autotuner.__dict__ and not hasattr(Autotuner.__dict__["run"], "__wrapped__")
    # The next call starts over and succeeds.
    torch.testing.assert_close(run(x), 2.0 * x)
    assert scale_kernel.best_config is not None


def test_nested_tuner_is_a_clear_error_and_the_active_one_goes_on():
    outer_kernel = make_scale_kernel()
    inner_kernel = make_scale_kernel()
    errors = []

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def inner(x):
        return launch_scale(inner_kernel, x, 5.0)

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def outer(x):
        try:
            inner(x)
        except TunerBusyError as exc:
            errors.append(exc)
        return launch_scale(outer_kernel, x, 2.0)

    x = randn(64)
    torch.testing.assert_close(outer(x), 2.0 * x)
    assert errors and all(isinstance(e, RuntimeError) for e in errors)
    assert "only one ContextualAutoTuner may be active" in str(errors[0])
    assert "outer" in str(errors[0])
    assert outer_kernel.best_config is not None
    assert not inner_kernel.cache


def test_second_thread_is_refused_while_one_is_active():
    kernel = make_scale_kernel()
    other_kernel = make_scale_kernel()
    entered, release = threading.Event(), threading.Event()
    outcome = {}

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def slow(x):
        entered.set()
        release.wait(30)
        return launch_scale(kernel, x, 2.0)

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def other(x):
        return launch_scale(other_kernel, x, 3.0)

    x = randn(64)

    def first():
        outcome["first"] = slow(x)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert entered.wait(30)
        with pytest.raises(TunerBusyError, match="slow"):
            other(x)
    finally:
        release.set()
        thread.join(60)
    torch.testing.assert_close(outcome["first"], 2.0 * x)
    assert kernel.best_config is not None
    torch.testing.assert_close(other(x), 3.0 * x)


def test_bad_counts_are_rejected():
    with pytest.raises(ValueError, match="n_repeat"):
        contextual_autotune(n_repeat=0)(lambda: None)
    with pytest.raises(ValueError, match="n_warmup"):
        contextual_autotune(n_warmup=-1)(lambda: None)


def test_function_without_tunable_kernels_runs_once():
    calls = []

    @contextual_autotune()
    def plain(value):
        calls.append(value)
        return value * 2

    assert plain(21) == 42
    assert calls == [21]


def test_matmul_with_a_callable_grid():
    kernel = make_matmul(SIX_CONFIGS[:2])

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def product(a, b):
        return launch_matmul(kernel, a, b)

    a = torch.randn((32, 32), device=DEVICE, dtype=torch.float16)
    b = torch.randn((32, 32), device=DEVICE, dtype=torch.float16)
    torch.testing.assert_close(product(a, b), (a.float() @ b.float()).half(), atol=0.05, rtol=0.02)
    assert kernel.best_config in SIX_CONFIGS[:2]
