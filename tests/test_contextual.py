"""contextual_autotune with real @triton.jit / @triton.autotune kernels.

On CPU the kernels run in Triton's interpreter (conftest sets
TRITON_INTERPRET=1) and the wallclock timer measures them; grids stay at one
or two programs so that a launch costs a few milliseconds. On a CUDA machine
the same tests run compiled on the GPU, timed by the cuda-event timer with
the L2 flush on. Each test makes its own kernels, so no test sees another's
picks in Triton's caches.
"""

from __future__ import annotations

import gc
import inspect
import logging
import threading
import warnings

import kernels
import pytest
import torch
import triton
import triton.language as tl
from contextual_matmul import SIX_CONFIGS, launch_matmul, make_matmul
from kerneltune.core import (
    CandidateFailedWarning,
    KernelTuneError,
    NoStoredPickError,
    StalledTuningError,
    TunerBusyError,
    add_plugin,
    hookimpl,
    remove_plugin,
)
from kerneltune.core.drivers.contextual import _ACTIVE, STALL_LIMIT
from kerneltune.core.machine import timing
from kerneltune.core.machine.tuner import Tuning
from kerneltune.plugins.triton import adapter, interceptor
from triton.runtime.autotuner import Autotuner
from tuning_doubles import steps_plugin

from triton_dist.autotuner import ContextualAutoTuner, contextual_autotune

BLOCK = 64
DEVICE = kernels.DEVICE
INVALID = kernels.INVALID_BLOCKS[0]


def randn(n):
    return torch.randn(n, device=DEVICE)


def make_scale_kernel(configs=None, **autotune_options):
    """The seed's scale kernel, autotuned over ``configs`` (default: two warp counts)."""
    if configs is None:
        configs = [triton.Config({"BLOCK": BLOCK}, num_warps=w) for w in (4, 8)]

    # A fresh Autotuner (and so a fresh Triton cache) per test, over the one jit function.
    return triton.autotune(configs=configs, key=["n"], **autotune_options)(kernels.scale_kernel)


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


def routing():
    """The Triton interceptor routing launches now; one left installed after a call is dormant."""
    installed = interceptor.PATCH.installed
    return installed if installed is not None and installed.route is not None else None


def assert_no_tuner_state():
    """No launch routed and no tuner active: what every exception must leave."""
    assert not _ACTIVE.lock.locked()
    assert routing() is None


@pytest.fixture
def plugins():
    """Register plugin objects in every session for the length of one test."""
    added = []

    def add(plugin):
        add_plugin(plugin)
        added.append(plugin)

    yield add
    for plugin in added:
        remove_plugin(plugin)


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


def test_the_contextual_tuner_leaves_the_garbage_collector_alone():
    # It runs the whole outer function again and again: held off, its garbage would pile up.
    scale_kernel = make_scale_kernel()
    seen = []

    @contextual_autotune(is_dist=False, n_repeat=3, n_warmup=2)
    def run_scale(x, alpha):
        seen.append(gc.isenabled())
        return launch_scale(scale_kernel, x, alpha)

    assert gc.isenabled()
    run_scale(randn(128), 3.0)
    assert len(seen) == 2 * (2 + 3) + 1 and all(seen)


def test_is_dist_without_a_process_group_says_this_process_tunes_alone():
    scale_kernel = make_scale_kernel()

    @contextual_autotune(is_dist=True, n_repeat=1, n_warmup=0)
    def run(x):
        return launch_scale(scale_kernel, x, 2.0)

    assert not torch.distributed.is_initialized()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = randn(64)
        torch.testing.assert_close(run(x), 2.0 * x)
        run(randn(128))
    alone = [str(w.message) for w in caught if "no process group" in str(w.message)]
    assert alone == [
        "contextual_autotune(is_dist=True): run runs with no process group (torch.distributed is not "
        "initialized, or the reducer in force is 'local'): this process tunes alone, and other processes "
        "may pick other configs"
    ], "once"


def test_launches_are_routed_only_while_a_call_is_active():
    original = Autotuner.__dict__["run"]
    scale_kernel = make_scale_kernel()
    seen = []

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(x):
        seen.append(routing())
        return launch_scale(scale_kernel, x, 2.0)

    run(randn(64))
    assert seen and all(installed is not None for installed in seen)
    assert routing() is None
    # Triton's run keeps a pass-through to what it was (in the table, for later calls)...
    patched = Autotuner.__dict__["run"]
    assert patched is original or inspect.unwrap(patched) is inspect.unwrap(original)
    # ...which leaves a launch outside the call to Triton: its own cache hit, nothing routed.
    x = randn(64)
    torch.testing.assert_close(launch_scale(scale_kernel, x, 2.0), 2.0 * x)
    assert len(seen) == 3


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_log_file_records_rounds_times_errors_and_pick(tmp_path):
    configs = [triton.Config({"BLOCK": BLOCK}), triton.Config({"BLOCK": INVALID})]
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
    # Under the interpreter config 1 fails at its first launch; on a GPU, compiling ahead.
    assert f"kernel scale_kernel key {key}: config 1 mean invalid [BLOCK={INVALID}] failed: " in log
    assert f"kernel scale_kernel key {key}: best config 0 [BLOCK=64]" in log
    assert "config 0 mean " in log and " ms [BLOCK=64]" in log

    # Appended, not overwritten.
    other = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def again(x):
        return launch_scale(other, x, 1.0)

    again(x)
    log = read_log(tmp_path)
    assert log.count("best config") == 2


def test_an_invalid_config_gives_one_warning_and_its_traceback_in_the_log(tmp_path):
    configs = [triton.Config({"BLOCK": BLOCK}), triton.Config({"BLOCK": INVALID})]
    scale_kernel = make_scale_kernel(configs)

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run_scale(x):
        return launch_scale(scale_kernel, x, 3.0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_scale(randn(64))

    (warning,) = [w for w in caught if issubclass(w.category, CandidateFailedWarning)]
    message = str(warning.message)
    key = "(64, 'torch.float32', 'torch.float32')"
    expected = f"kerneltune: scale_kernel: candidate [1] BLOCK={INVALID} failed for key {key} with "
    assert message.startswith(expected)
    assert warning.filename == __file__, "it points at the user's launch, past Triton and kerneltune"
    if DEVICE == "cpu":  # under the interpreter it fails at its first launch, which the log shows
        log = read_log(tmp_path)
        assert "config 1 warmup round 1/1: exception: " in log
        assert "    Traceback (most recent call last):" in log


@pytest.mark.parametrize("how", ["option", "setting"])
def test_verbose_shows_each_candidate_and_the_pick(monkeypatch, capsys, how):
    scale_kernel = make_scale_kernel()
    if how == "setting":
        monkeypatch.setenv("KERNELTUNE_VERBOSE", "1")

    @contextual_autotune(n_repeat=2, n_warmup=1, verbose=how == "option")
    def run_scale(x):
        return launch_scale(scale_kernel, x, 3.0)

    run_scale(randn(64))
    out = capsys.readouterr().out.splitlines()
    key = "(64, 'torch.float32', 'torch.float32')"
    assert out[0] == f"[kerneltune] scale_kernel: tuning key {key}: 2 candidates (rank 0 of 1)"
    assert out[1].startswith("[kerneltune] scale_kernel: [0] BLOCK=64") and ": trimmed mean " in out[1]
    assert f"scale_kernel: key {key}: picked [" in out[-1]


def test_print_autotuning_prints_tritons_lines_for_each_kernel_tuned(monkeypatch, capsys):
    scale_kernel = make_scale_kernel()
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run_scale(x):
        return launch_scale(scale_kernel, x, 3.0)

    run_scale(randn(64))
    out = capsys.readouterr().out
    # The running Triton's own message, word for word (3.4 on names the key; triton-ascend 3.2.0
    # prints one line); kerneltune's detail is in the verbose lines only.
    seconds, best = f"{scale_kernel.bench_time:.2f}", scale_kernel.best_config
    if adapter.layout_of(scale_kernel).prints_key:
        assert out == (
            "Triton autotuning for function scale_kernel,\n"
            "with key as (64, 'torch.float32', 'torch.float32'),\n"
            f"finished after {seconds}s,\nbest config selected: {best};\n"
        )
    else:
        assert out == (
            f"Triton autotuning for function scale_kernel finished after {seconds}s; "
            f"best config selected: {best};\n"
        )
    run_scale(randn(64))
    assert capsys.readouterr().out == "", "a kernel's cached pick prints nothing"


def test_tune_never_launches_the_first_config_unmeasured(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_TUNE", "never")
    configs = [triton.Config({"BLOCK": BLOCK}, num_warps=w) for w in (8, 4)]
    scale_kernel = make_scale_kernel(configs)
    executions = []

    @contextual_autotune(n_repeat=3, n_warmup=2)
    def run_scale(x):
        executions.append(1)
        return launch_scale(scale_kernel, x, 3.0)

    x = randn(64)
    torch.testing.assert_close(run_scale(x), 3.0 * x)
    assert len(executions) == 1, "nothing measured"
    assert scale_kernel.best_config is configs[0]


def test_tune_fail_raises_naming_the_kernel_and_key_unless_the_kernel_holds_a_pick(monkeypatch):
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run_scale(x, alpha):
        return launch_scale(scale_kernel, x, alpha)

    monkeypatch.setenv("KERNELTUNE_TUNE", "fail")
    with pytest.raises(NoStoredPickError) as info:
        run_scale(randn(64), 2.0)
    assert str(info.value).startswith(
        "scale_kernel: no stored pick for key (64, 'torch.float32', 'torch.float32'), and tune = 'fail'"
    )
    assert_no_tuner_state()

    monkeypatch.delenv("KERNELTUNE_TUNE")
    run_scale(randn(64), 2.0)
    monkeypatch.setenv("KERNELTUNE_TUNE", "fail")
    x = randn(64)
    torch.testing.assert_close(run_scale(x, 2.0), 2.0 * x)


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


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_all_candidates_invalid_raises_and_leaves_no_state(tmp_path):
    bad = make_scale_kernel([triton.Config({"BLOCK": b}) for b in kernels.INVALID_BLOCKS])

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x):
        return launch_scale(bad, x, 2.0)

    with pytest.raises(RuntimeError, match=r"^cannot find valid config") as info:
        run(randn(64))
    assert "[0]" in str(info.value) and "[1]" in str(info.value)
    assert "kernel scale_kernel key (64, 'torch.float32', 'torch.float32'): cannot find valid config" in (
        read_log(tmp_path)
    )
    assert not bad.cache
    assert not _ACTIVE.lock.locked()

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
    assert_no_tuner_state()
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


def test_keyboard_interrupt_in_the_outer_function_restores_triton():
    scale_kernel = make_scale_kernel()
    calls = []

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x):
        calls.append(1)
        y = launch_scale(scale_kernel, x, 2.0)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return y

    x = randn(64)
    with pytest.raises(KeyboardInterrupt):
        run(x)
    assert_no_tuner_state()
    assert not scale_kernel.cache
    torch.testing.assert_close(run(x), 2.0 * x)
    assert scale_kernel.best_config is not None


def make_stepped_kernel():
    """A kernel whose key holds ``step``, an argument the kernel does not even read."""

    @triton.autotune(
        configs=[triton.Config({"BLOCK": BLOCK}, num_warps=w) for w in (4, 8)], key=["n", "step"]
    )
    @triton.jit
    def stepped_kernel(x_ptr, y_ptr, n, step, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, 2.0 * tl.load(x_ptr + offsets, mask=mask), mask=mask)

    return stepped_kernel


def test_key_that_changes_on_every_execution_is_a_clear_error():
    stepped_kernel = make_stepped_kernel()
    executions = []
    steady = []

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x):
        step = 7 if steady else len(executions)  # a counter, as a step number or a pointer would be
        executions.append(step)
        if len(executions) > 3 * STALL_LIMIT:
            raise AssertionError("the tuner did not give up")
        y = torch.empty_like(x)
        stepped_kernel[(1,)](x, y, x.numel(), step)
        return y

    x = randn(64)
    with pytest.raises(StalledTuningError) as info:
        run(x)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, KernelTuneError)
    message = str(info.value)
    assert "kernel stepped_kernel with key (64, 0, 'torch.float32', 'torch.float32')" in message
    assert "stepped_kernel (64, 1, 'torch.float32', 'torch.float32')" in message
    assert f"stepped_kernel (64, {STALL_LIMIT}, 'torch.float32', 'torch.float32')" in message
    assert "a counter, a pointer" in message
    # The first execution measured a launch; then STALL_LIMIT executions measured nothing.
    assert len(executions) == 1 + STALL_LIMIT
    assert not stepped_kernel.cache
    assert_no_tuner_state()

    steady.append(True)
    torch.testing.assert_close(run(x), 2.0 * x)
    assert set(stepped_kernel.cache) == {(64, 7, "torch.float32", "torch.float32")}


def test_kernel_not_launched_again_is_a_clear_error():
    once = make_scale_kernel()
    always = make_add_kernel()
    executions = []

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(x):
        executions.append(1)
        if len(executions) == 1:
            launch_scale(once, x, 2.0)  # say, a set-up step done on the first call only
        elif len(executions) > 3 * STALL_LIMIT:
            raise AssertionError("the tuner did not give up")
        out = torch.empty_like(x)
        always[(1,)](x, x, out, x.numel())
        return out

    with pytest.raises(StalledTuningError) as info:
        run(randn(64))
    message = str(info.value)
    assert "did not launch kernel scale_kernel with key (64, 'torch.float32', 'torch.float32')" in message
    assert "kernels that wait for their turn" in message
    assert "not seen before" not in message
    assert len(executions) == 1 + STALL_LIMIT
    assert not once.cache and not always.cache
    assert_no_tuner_state()


def test_kernel_launched_every_few_executions_is_still_tuned():
    sometimes = make_scale_kernel()
    always = make_add_kernel()
    executions = []

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(x):
        executions.append(1)
        if len(executions) % STALL_LIMIT == 1:
            launch_scale(sometimes, x, 2.0)
        out = torch.empty_like(x)
        always[(1,)](x, x, out, x.numel())
        return out

    x = randn(64)
    torch.testing.assert_close(run(x), 2.0 * x)
    # sometimes is measured in executions 1 and 1 + STALL_LIMIT, with
    # STALL_LIMIT - 1 executions between them that measure nothing; always
    # follows in that execution and the next, and one more returns.
    assert len(executions) == STALL_LIMIT + 3
    assert sometimes.best_config is not None and always.best_config is not None


def test_a_prune_function_that_raised_is_asked_again():
    calls = []

    def prune(configs, named_args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("not ready yet")
        return configs

    scale_kernel = make_scale_kernel(prune_configs_by={"early_config_prune": prune})

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(x):
        try:
            return launch_scale(scale_kernel, x, 2.0)
        except ValueError:
            return launch_scale(scale_kernel, x, 2.0)

    x = randn(64)
    torch.testing.assert_close(run(x), 2.0 * x)
    assert scale_kernel.best_config is not None


def make_add_kernel_with_alpha():
    @triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (64, 128)], key=["n"])
    @triton.jit
    def scaled_add_kernel(x_ptr, y_ptr, out_ptr, n, ALPHA: tl.constexpr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, ALPHA * (x + y) / 2.0, mask=mask)

    return scaled_add_kernel


def test_launches_the_tuner_leaves_alone():
    """A plain jit kernel, a single-config autotune, a key already cached, and heuristics around autotune."""

    @triton.jit
    def plain_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1.0, mask=mask)

    single = make_scale_kernel([triton.Config({"BLOCK": BLOCK})])
    cached = make_scale_kernel()
    pinned = cached.configs[1]
    cached.cache[(64, "torch.float32", "torch.float32")] = pinned
    tuned = triton.heuristics({"ALPHA": lambda args: 5.0})(make_add_kernel_with_alpha())
    executions = []

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x):
        executions.append(1)
        a = torch.empty_like(x)
        plain_kernel[(1,)](x, a, x.numel(), BLOCK=BLOCK)
        b = launch_scale(single, a, 2.0)
        c = launch_scale(cached, b, 3.0)
        out = torch.empty_like(x)
        tuned[(1,)](c, c, out, x.numel())
        return out

    x = randn(64)
    torch.testing.assert_close(run(x), 30.0 * (x + 1.0))
    # Only the heuristics-wrapped kernel was measured: 2 configs x 2 launches, then the run.
    assert len(executions) == 2 * 2 + 1
    assert tuned.fn.best_config in tuned.fn.configs
    assert not single.cache
    assert cached.cache == {(64, "torch.float32", "torch.float32"): pinned}


def test_an_unwritable_log_warns_and_tuning_goes_on(tmp_path):
    (tmp_path / ".autotune_logs").write_text("a file where the log folder should be")
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x):
        return launch_scale(scale_kernel, x, 2.0)

    x = randn(64)
    with pytest.warns(RuntimeWarning, match="cannot write the contextual tuning log"):
        torch.testing.assert_close(run(x), 2.0 * x)
    assert scale_kernel.best_config is not None


class FailingObserver:
    @hookimpl
    def kerneltune_launch_measured(self, event):
        raise ValueError("an observer's own bug")

    @hookimpl
    def kerneltune_kernel_tuned(self, event):
        raise ValueError("an observer's own bug")


def test_a_failing_observer_does_not_fail_the_tuning(plugins, caplog):
    plugins(FailingObserver())
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x):
        return launch_scale(scale_kernel, x, 2.0)

    x = randn(64)
    with caplog.at_level(logging.ERROR, logger="kerneltune"):
        torch.testing.assert_close(run(x), 2.0 * x)
    assert scale_kernel.best_config is not None
    assert "an observer of kerneltune_launch_measured failed" in caplog.text
    assert "an observer of kerneltune_kernel_tuned failed" in caplog.text


class FaultAtCollectTimer:
    """Times nothing; the first candidate's collect fails, as an asynchronous device fault surfaces."""

    name = "fault-at-collect"
    made = 0

    @classmethod
    def is_available(cls):
        return True

    def __init__(self):
        type(self).made += 1
        self.first = type(self).made == 1
        self.count = 0

    def sample(self, fn, *, before=None):
        if before is not None:
            before()
        fn()
        self.count += 1

    def collect(self):
        if self.first:
            raise RuntimeError("device fault reported at synchronisation")
        return [1.0] * self.count


class FaultAtCollectPlugin:
    @hookimpl
    def kerneltune_register_timers(self, register):
        register(FaultAtCollectTimer)


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_failure_when_collecting_times_is_logged(tmp_path, plugins, monkeypatch):
    plugins(FaultAtCollectPlugin())
    monkeypatch.setattr(FaultAtCollectTimer, "made", 0)
    monkeypatch.setenv("KERNELTUNE_TIMER", "fault-at-collect")
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=2, n_warmup=0)
    def run(x):
        return launch_scale(scale_kernel, x, 2.0)

    x = randn(64)
    torch.testing.assert_close(run(x), 2.0 * x)
    assert scale_kernel.best_config is scale_kernel.configs[1]
    log = read_log(tmp_path)
    key = "(64, 'torch.float32', 'torch.float32')"
    assert (
        f"kernel scale_kernel key {key} config 0 timed round 2/2: exception: "
        "RuntimeError: device fault reported at synchronisation"
    ) in log
    assert f"kernel scale_kernel key {key}: best config 1 " in log


class UninstallFails:
    name = "uninstall-fails"

    @classmethod
    def is_available(cls):
        return True

    def install(self, route):
        pass

    def uninstall(self):
        raise RuntimeError("this interceptor cannot uninstall")


class UninstallFailsPlugin:
    @hookimpl
    def kerneltune_register_interceptors(self, register):
        register(UninstallFails)


def test_an_interceptor_failing_to_uninstall_still_leaves_triton_restored(plugins):
    # Installed after Triton's, so uninstalled before it.
    plugins(UninstallFailsPlugin())
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(x):
        return launch_scale(scale_kernel, x, 2.0)

    with pytest.raises(RuntimeError, match="cannot uninstall"):
        run(randn(64))
    assert_no_tuner_state()
    assert scale_kernel.best_config is not None


def test_a_tuning_cut_short_is_not_logged_as_invalid(tmp_path, monkeypatch):
    def cut_short(self, among=None):
        raise RuntimeError("the all-reduce timed out")

    monkeypatch.setattr(Tuning, "finish", cut_short)
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(x):
        return launch_scale(scale_kernel, x, 2.0)

    with pytest.raises(RuntimeError, match="all-reduce timed out"):
        run(randn(64))
    log = read_log(tmp_path)
    assert "config 1 timed round 1/1: " in log
    assert "cannot find valid config" not in log and "best config" not in log
    assert not scale_kernel.cache
    assert_no_tuner_state()


def test_a_key_holding_a_triton_dtype_is_tuned():
    @triton.autotune(
        configs=[triton.Config({"BLOCK": BLOCK}, num_warps=w) for w in (4, 8)], key=["n", "OUT_DTYPE"]
    )
    @triton.jit
    def cast_kernel(x_ptr, y_ptr, n, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, (2.0 * tl.load(x_ptr + offsets, mask=mask)).to(OUT_DTYPE), mask=mask)

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(x):
        y = torch.empty_like(x)
        cast_kernel[(1,)](x, y, x.numel(), tl.float32)
        return y

    x = randn(64)
    torch.testing.assert_close(run(x), 2.0 * x)
    assert list(cast_kernel.cache) == [(64, tl.float32, "torch.float32", "torch.float32")]


@pytest.mark.parametrize("flush_cache", [True, False])
@pytest.mark.parametrize("n_warmup", [0, 2])
@pytest.mark.expected_warning(RuntimeWarning, match="runs on the host")
def test_every_timed_launch_is_flushed_then_held_inside_the_timers_set_up(
    plugins, monkeypatch, flush_cache, n_warmup
):
    steps = []
    plugins(steps_plugin(steps))
    monkeypatch.setenv("KERNELTUNE_TIMER", "steps")
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=3, n_warmup=n_warmup, flush_cache=flush_cache)
    def run(x):
        return launch_scale(scale_kernel, x, 2.0)

    x = randn(64)
    torch.testing.assert_close(run(x), 2.0 * x)

    # Every timed launch, and after the first config the empty runs of timing.IdleDevice.
    timed = 3 * len(scale_kernel.configs) + timing.IDLE_PROBES
    expected = ["hold", "flush", "start"] if flush_cache else ["hold", "start"]
    assert [name for name, _ in steps] == expected * timed
    holds = [us for name, us in steps if name == "hold"]
    assert all(0.0 < us <= timing.HOLD_CAP_US for us in holds)
    # Before any launch of the kernel has been timed on the host, the default;
    # after, twice the median host time of its recent launches.
    assert (holds[0] == timing.HOLD_DEFAULT_US) == (n_warmup == 0)


def test_kernel_objects_of_one_source_are_tuned_each_in_its_own_right(plugins):
    measured = []

    class Watch:
        @hookimpl
        def kerneltune_kernel_tuned(self, event):
            measured.append(event.kernel)

    plugins(Watch())
    first, second = make_scale_kernel(), make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run(kernel, x):
        return launch_scale(kernel, x, 2.0)

    x = randn(64)
    run(first, x)
    run(second, x)
    assert len(measured) == 2, "the second kernel object shares nothing with the first"
    run(first, x)
    assert len(measured) == 2, "a kernel object keeps its pick in its own cache"
    key = next(iter(first.cache))
    assert first.cache[key] is first.best_config and second.cache[key] is second.best_config

    # A kernel made after one was freed, perhaps at its address, starts with nothing.
    del first
    gc.collect()
    run(make_scale_kernel(), x)
    assert len(measured) == 3


def test_an_autotuner_class_kerneltune_does_not_know_tunes_itself_with_one_warning():
    from triton.runtime.autotuner import Autotuner

    class FirstConfigTuner(Autotuner):
        """A home-made tuner: its own run() picks the first config."""

        def run(self, *args, **kwargs):
            self.best_config = self.configs[0]
            return self.fn.run(*args, **kwargs, **self.configs[0].all_kwargs())

    configs = [triton.Config({"BLOCK": BLOCK}), triton.Config({"BLOCK": 2 * BLOCK})]
    tuner = FirstConfigTuner(kernels.scale_kernel, kernels.scale_kernel.arg_names, configs, ["n"], None, None)

    @contextual_autotune()
    def outer(x):
        return launch_scale(tuner, x, 2.0)

    x = randn(64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(outer(x), 2.0 * x)
        torch.testing.assert_close(outer(x), 2.0 * x)
    (warning,) = [w for w in caught if "tunes itself" in str(w.message)]
    assert "FirstConfigTuner has a run() of its own" in str(warning.message)
    assert tuner.best_config is configs[0] and not tuner.cache, "its own run, not kerneltune's"
