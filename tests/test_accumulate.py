"""The call that tunes returns what an untuned call returns, for kernels that work in place.

A tuner runs the kernel many times on the caller's own buffers. Triton's
``reset_to_zero`` and ``restore_value`` (and the hooks behind them) say how
to keep those runs from showing: zero before every run and once more after
the pick, before the run whose result counts (``pre_hook(args,
reset_only=True)``); copy, and put back after every run. Each tuner is held
to that with an accumulating kernel (``tl.atomic_add`` into an output the
caller hands in) and an in-place increment, on the CPU interpreter, every
Triton release ``make test-tritons`` runs, triton-ascend and, on a GPU
machine, compiled on the GPU.
"""

from __future__ import annotations

import warnings

import kernels
import pytest
import torch
import triton
import triton.language as tl

import triton_dist.autotune_hooks  # noqa: F401  (search_params, before decorating)
from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune

DEVICE = kernels.DEVICE
N = 64
BLOCKS = (16, 32)


def configs():
    return [triton.Config({"BLOCK": block}) for block in BLOCKS]


def grid(n):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


@triton.jit
def accumulate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """``out += x``, by atomics: run twice, it counts twice."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.atomic_add(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def increment(y_ptr, n, BLOCK: tl.constexpr):
    """``y += 1`` in place."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(y_ptr + offsets, mask=mask) + 1, mask=mask)


def make_accumulate(**options):
    options.setdefault("reset_to_zero", ["out_ptr"])
    return triton.autotune(configs=configs(), key=["n"], **options)(accumulate)


def make_increment():
    return triton.autotune(configs=configs(), key=["n"], restore_value=["y_ptr"])(increment)


def ones(n=N):
    return torch.ones(n, device=DEVICE)


def zeros(n=N):
    return torch.zeros(n, device=DEVICE)


def values(tensor):
    return torch.unique(tensor).tolist()


def contextual(fn):
    return contextual_autotune(is_dist=False, n_repeat=2, n_warmup=1)(fn)


# -- contextual_autotune -------------------------------------------------------------


def test_contextual_the_accumulating_kernel_counts_once_on_the_call_that_tunes():
    acc = make_accumulate()

    @contextual
    def host(x, out):
        acc[grid(x.numel())](x, out, x.numel())
        return out

    assert values(host(ones(), zeros())) == [1.0]
    assert acc.cache, "the call tuned"
    assert values(host(ones(), zeros())) == [1.0]


def test_contextual_a_user_pre_hook_is_told_reset_only_once_after_the_pick():
    calls = []

    def zero_out(args, reset_only=False):
        calls.append(reset_only)
        args["out_ptr"].zero_()

    acc = make_accumulate(reset_to_zero=None, pre_hook=zero_out)

    @contextual
    def host(x, out):
        acc[grid(x.numel())](x, out, x.numel())
        return out

    assert values(host(ones(), zeros())) == [1.0]
    # Before each of the 2 x (1 + 2) measured launches, and the output check's launch of the reference
    # on garbage in out (to see that it writes all of out: so the second candidate's check needs no new
    # reference run, though out then holds the first execution's sum, not the zeros it ran on); then
    # once with reset_only before the run that counts.
    assert calls == [False] * 7 + [True]


def test_contextual_kernels_launched_twice_and_in_place_keep_their_untuned_result():
    acc, inc = make_accumulate(), make_increment()

    @contextual
    def host(x, out, y):
        acc[grid(x.numel())](x, out, x.numel())
        inc[grid(y.numel())](y, y.numel())
        acc[grid(x.numel())](x, out, x.numel())
        return out, y

    for n in (N, N, 2 * N):  # tuning, served, tuning a new key
        out, y = host(ones(n), zeros(n), torch.full((n,), 5.0, device=DEVICE))
        assert values(out) == [2.0] and values(y) == [6.0]


def test_contextual_a_kernel_picked_in_an_earlier_call_is_reset_when_the_function_runs_again():
    acc, scale = make_accumulate(), triton.autotune(configs=configs(), key=["n"])(kernels.scale_kernel)

    @contextual
    def host(x, out, m):
        acc[grid(x.numel())](x, out, x.numel())  # same key every call
        y = torch.empty_like(m)
        scale[grid(m.numel())](m, y, 2.0, m.numel())  # a new key per call
        return out, y

    host(ones(), zeros(), ones(8))
    out, y = host(ones(), zeros(), ones(16))  # acc is a cache hit, then scale tunes
    assert values(out) == [1.0] and values(y) == [2.0]


def test_contextual_a_waiting_kernel_not_launched_again_leaves_an_execution_whose_result_counts():
    inc = make_increment()
    scale = triton.autotune(configs=configs(), key=["n"])(kernels.scale_kernel)
    executions = []

    @contextual
    def host(y):
        executions.append(1)
        if len(executions) == 1:  # a kernel launched in the first execution only
            m = ones(8)
            scale[grid(8)](m, torch.empty_like(m), 2.0, 8)
        inc[grid(y.numel())](y, y.numel())
        return y

    @contextual
    def warm(y):
        inc[grid(y.numel())](y, y.numel())
        return y

    warm(zeros())  # inc has its pick before host runs
    y = host(zeros())
    # The second execution, a rehearsal for scale, undid inc; a third ran for the result.
    assert values(y) == [1.0] and len(executions) == 3


def test_contextual_an_in_place_cache_hit_before_a_kernel_to_tune_is_warned_about():
    inc, acc = make_increment(), make_accumulate()

    @contextual
    def host(y, x, out):
        inc[grid(y.numel())](y, y.numel())
        acc[grid(x.numel())](x, out, x.numel())
        return y, out

    host(zeros(), ones(8), zeros(8))  # both tuned: no warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y, out = host(zeros(), ones(16), zeros(16))
    (warning,) = [w for w in caught if "changed arguments in place" in str(w.message)]
    assert "kernel increment" in str(warning.message) and "in host" in str(warning.message)
    assert values(out) == [1.0]
    assert values(y) == [2.0], "what the warning says: the change is made twice"


# -- the function-level tuner and search_params ------------------------------------


def test_function_level_reset_to_zero_counts_once_on_the_call_that_tunes():
    @autotune(
        config_space=[{"BLOCK": block} for block in BLOCKS],
        key_fn=lambda x, out: x.numel(),
        reset_to_zero=["out"],
    )
    def host(x, out, BLOCK):
        accumulate[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
        return out

    assert values(host(ones(), zeros())) == [1.0]
    assert values(host(ones(), zeros())) == [1.0]


def test_search_params_reset_to_zero_counts_once_on_the_launch_that_tunes():
    hints = {"search_params": {"params": ["BLOCK"], "values": list(BLOCKS)}}

    @triton.autotune(configs=[], key=["n"], reset_to_zero=["out_ptr"], hints=hints)
    @triton.jit
    def searched(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.atomic_add(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)

    for _ in range(2):
        out = zeros()
        searched[grid(N)](ones(), out, N)
        assert values(out) == [1.0]


# -- arguments named to be zeroed or restored that cannot be ---------------------------------------


def test_contextual_a_reset_to_zero_argument_that_is_no_tensor_is_named_before_any_candidate_runs():
    acc = make_accumulate(reset_to_zero=["n"])

    @contextual
    def host(x, out):
        acc[grid(x.numel())](x, out, x.numel())
        return out

    with pytest.raises(TypeError, match=r"kernel accumulate: reset_to_zero names 'n', whose value is a int"):
        host(ones(), zeros())


def test_search_params_a_restore_value_tensor_that_requires_grad_is_named():
    hints = {"search_params": {"params": ["BLOCK"], "values": list(BLOCKS)}}
    searched = triton.autotune(configs=[], key=["n"], restore_value=["y_ptr"], hints=hints)(increment)
    y = zeros().requires_grad_()
    with pytest.raises(TypeError, match=r"restore_value names 'y_ptr', a tensor that requires grad"):
        searched[grid(N)](y, N)


def test_function_level_a_read_only_array_to_reset_is_named():
    import numpy

    @autotune(config_space=[{"BLOCK": b} for b in BLOCKS], key_fn=lambda out: out.size, reset_to_zero=["out"])
    def host(out, BLOCK):
        return out

    out = numpy.zeros(4)
    out.setflags(write=False)
    with pytest.raises(TypeError, match="reset_to_zero names 'out', a read-only array"):
        host(out)
