"""search_params checks every candidate's written arguments before it can be picked (docs/search_params.md).

Interpreted kernels on CPU; the ``scripted`` timer (tests/search_doubles.py)
makes the config the test names the fastest, so that a fast wrong one is
there to be dropped.
"""

from __future__ import annotations

import os

import kernels
import pytest
import torch
import triton
import triton.language as tl
from kerneltune.core import CandidateFailedWarning, NoValidConfigError
from kerneltune.core.driving import UncheckedOutputsError, WrongOutputWarning
from kerneltune.core.machine.outputs import Tolerance, compare, snapshot
from search_doubles import Script, by_block, timer_plugin, use_session
from test_checked_outputs import caught_warnings, of
from test_search_params import make_row_sum, search, sums_right
from tuning_doubles import stored_records

import triton_dist.autotune_hooks  # noqa: F401

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="interpreter tests; CUDA is covered by test_search_params_gpu.py",
)


def make_floor_double(hints, **autotune):
    """y = 2 x over ``n // BLOCK`` programs: a BLOCK that does not divide n drops the remainder."""

    @triton.autotune(configs=[], key=["n"], hints=hints, **autotune)
    @triton.jit
    def floor_double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets) * 2)

    return floor_double


def launch_floor_double(kernel, n=48):
    x = torch.arange(float(n))
    y = torch.zeros_like(x)
    kernel[lambda meta: (n // meta["BLOCK"],)](x, y, n)
    return x, y


def test_a_fast_wrong_block_is_never_picked_is_recorded_and_warned_about_once(monkeypatch, isolated):
    script = Script(by_block({8: 3.0, 16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), cache="json", cache_dir=isolated)
    kernel = make_floor_double(search(params=["BLOCK"], values=[8, 16, 32]), pre_hook=script.hook)

    (x, y), caught = caught_warnings(lambda: launch_floor_double(kernel))

    assert kernel.best_config.kwargs == {"BLOCK": 16}
    assert torch.equal(y, 2 * x)
    (record,) = stored_records(isolated, "floor_double")
    (error,) = [c["error"] for c in record["candidates"] if c.get("error")]
    assert error.startswith("WrongOutput: differs from the reference [")
    # 32 // 48: one program, the last 16 values (up to 2 * 47) never written.
    assert "BLOCK=32: WrongOutput" not in error and "argument y_ptr: 16 of 48 values off" in error
    assert "largest absolute error 94, largest relative error 1" in error
    (message,) = of(caught, WrongOutputWarning)
    assert "floor_double: 1 candidate(s) for key" in message
    assert "BLOCK=32: argument y_ptr: 16 of 48 values off" in message
    assert not of(caught, CandidateFailedWarning), "one warning per tuning, not one per candidate"
    assert not of(caught, RuntimeWarning), "a kernel writing its output argument needs no notice"
    # BLOCK=32 ran once, as the check dropped it: never re-timed as a finalist. The search measured 16
    # and 32 alone; 8, untried, was measured to tell which of the two is wrong.
    assert script.seen("BLOCK").count((32,)) == 1
    assert script.seen("BLOCK")[:3] == [(16,), (32,), (8,)]

    (x, y), again = caught_warnings(lambda: launch_floor_double(kernel))
    assert torch.equal(y, 2 * x) and not of(again, WrongOutputWarning), "a cache hit checks nothing"


def test_only_the_reference_left_is_an_error_naming_the_others_and_stores_nothing(monkeypatch, isolated):
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), cache="json", cache_dir=isolated)
    kernel = make_floor_double(search(params=["BLOCK"], values=[16, 32]), pre_hook=script.hook)

    with pytest.raises(NoValidConfigError) as raised:
        caught_warnings(lambda: launch_floor_double(kernel))

    text = str(raised.value)
    assert text.startswith("floor_double: no candidate left but the reference: 1 candidate(s) for key")
    assert "differ from the reference [0] BLOCK=16" in text
    assert "BLOCK=32: argument y_ptr: 16 of 48 values off" in text
    assert "the reference may be the wrong one" in text
    assert stored_records(isolated, "floor_double") == []


@pytest.mark.parametrize("how", ["setting", "hint"])
def test_check_outputs_off_turns_the_check_off(monkeypatch, how):
    if how == "setting":
        monkeypatch.setenv("KERNELTUNE_CHECK_OUTPUTS", "off")
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    hints = search(params=["BLOCK"], values=[16, 32], **({"check_outputs": False} if how == "hint" else {}))
    kernel = make_floor_double(hints, pre_hook=script.hook)

    (x, y), caught = caught_warnings(lambda: launch_floor_double(kernel))

    assert kernel.best_config.kwargs == {"BLOCK": 32}, "unchecked, the fast wrong block wins"
    assert not of(caught, WrongOutputWarning)
    x, y = launch_floor_double(kernel)
    assert torch.equal(y[:32], 2 * x[:32]) and not y[32:].any()


def make_chunked_sum(hints, **autotune):
    """out = sum(x) added up BLOCK values at a time: each BLOCK adds in another order."""

    @triton.autotune(configs=[], key=["n"], hints=hints, **autotune)
    @triton.jit
    def chunked_sum(x_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        total = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n, BLOCK):
            total += tl.load(x_ptr + start + tl.arange(0, BLOCK))
        tl.store(out_ptr, tl.sum(total))

    return chunked_sum


def make_tiled_matmul(hints, **autotune):
    """c = a @ b, the inner dimension taken BLOCK_K at a time, under search_params ``hints``."""
    return triton.autotune(configs=[], key=["S"], hints=hints, **autotune)(kernels.tiled_matmul)


def test_configs_adding_in_another_order_all_pass(monkeypatch):
    generator = torch.Generator().manual_seed(0)
    script = Script(by_block({16: 4.0, 32: 3.0, 64: 2.0, 128: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    summed = make_chunked_sum(search(params=["BLOCK"], values=[16, 32, 64, 128]), pre_hook=script.hook)
    x = torch.randn(256, generator=generator) * 100
    out = torch.zeros(1)

    _, caught = caught_warnings(lambda: summed[(1,)](x, out, 256))

    assert summed.best_config.kwargs == {"BLOCK": 128}
    assert all(t < float("inf") for t in summed.last_search.times.values())
    assert not of(caught, WrongOutputWarning)

    tiles = Script(by_block({8: 3.0, 16: 2.0, 32: 1.0}, "BLOCK_K"))
    use_session(monkeypatch, timer_plugin(tiles))
    matmul = make_tiled_matmul(search(params=["BLOCK_K"], values=[8, 16, 32]), pre_hook=tiles.hook)
    a, b = (torch.randn(32, 32, generator=generator).half() for _ in range(2))
    c = torch.zeros(32, 32, dtype=torch.float16)

    _, caught = caught_warnings(lambda: matmul[(1,)](a, b, c, 32))

    assert matmul.best_config.kwargs == {"BLOCK_K": 32}
    assert all(t < float("inf") for t in matmul.last_search.times.values())
    assert not of(caught, WrongOutputWarning)


def test_with_reference_fn_each_candidate_it_rejects_is_dropped_before_stage_3(monkeypatch):
    script = Script(by_block({16: 1.0, 32: 2.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    kernel = make_row_sum(
        search(params=["BLOCK"], values=[16, 32], reference_fn=sums_right), pre_hook=script.hook
    )
    x, out = torch.arange(32.0), torch.zeros(1)

    _, caught = caught_warnings(lambda: kernel[(1,)](x, out, 32))

    assert kernel.best_config.kwargs == {"BLOCK": 32} and out[0] == x.sum()
    (message,) = of(caught, WrongOutputWarning)
    assert "1 candidate(s) for key" in message and "differ from reference_fn" in message
    assert "[0] BLOCK=16: arguments: reference_fn returned False" in message
    assert "may be the wrong one" not in message, "reference_fn is the reference, not a config"
    assert script.seen("BLOCK").count((16,)) == 1, "rejected at its first run, so never a finalist"


def test_with_reference_fn_rejecting_every_candidate_the_error_names_them(monkeypatch):
    script = Script(by_block({16: 1.0, 32: 2.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))

    def check(x, out, n):
        torch.testing.assert_close(out[0], x.sum() + 1)

    kernel = make_row_sum(search(params=["BLOCK"], values=[16, 32], reference_fn=check), pre_hook=script.hook)
    with pytest.raises(NoValidConfigError) as raised:
        caught_warnings(lambda: kernel[(1,)](torch.arange(32.0), torch.zeros(1), 32))

    text = str(raised.value)
    assert "2 candidate(s) for key" in text and "differ from reference_fn and were dropped" in text
    assert "[0] BLOCK=16: arguments: reference_fn raised AssertionError" in text
    assert "[1] BLOCK=32: arguments: reference_fn raised AssertionError" in text


def make_increment(hints, **autotune):
    """x += 1 in place; the BLOCK ``SCRIBBLE`` also zeroes the first value of ``y``, an input."""

    @triton.autotune(configs=[], key=["n"], hints=hints, **autotune)
    @triton.jit
    def increment(x_ptr, y_ptr, n, SCRIBBLE: tl.constexpr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) + 1, mask=offsets < n)
        if BLOCK == SCRIBBLE:
            tl.store(y_ptr, 0.0)

    return increment


def test_an_undeclared_in_place_argument_is_put_back_and_ends_as_after_one_launch(monkeypatch):
    script = Script(by_block({16: 2.0, 32: 1.0, 64: 3.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), repeat=3)
    kernel = make_increment(search(params=["BLOCK"], values=[16, 32, 64]), pre_hook=script.hook)
    x, y = torch.arange(32.0), torch.ones(1)

    _, caught = caught_warnings(lambda: kernel[lambda meta: (triton.cdiv(32, meta["BLOCK"]),)](x, y, 32, 0))

    assert torch.equal(x, torch.arange(32.0) + 1), "put back before each candidate and before the pick"
    assert not of(caught, WrongOutputWarning) and kernel.best_config.kwargs == {"BLOCK": 32}


def test_a_candidate_writing_into_an_input_is_caught(monkeypatch):
    script = Script(by_block({16: 2.0, 32: 3.0, 64: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    kernel = make_increment(search(params=["BLOCK"], values=[16, 32, 64]), pre_hook=script.hook)
    x, y = torch.arange(32.0), torch.ones(1)

    _, caught = caught_warnings(lambda: kernel[lambda meta: (triton.cdiv(32, meta["BLOCK"]),)](x, y, 32, 64))
    assert kernel.best_config.kwargs == {"BLOCK": 16}
    (message,) = of(caught, WrongOutputWarning)
    assert "BLOCK=64: argument y_ptr: changed, which the reference leaves alone" in message
    assert torch.equal(y, torch.ones(1)) and torch.equal(x, torch.arange(32.0) + 1)


def make_atomic_sum(script, **autotune):
    """out += sum(x), one atomic add per program; each config's own pre-hook tells the script its block
    (a kernel's pre_hook would replace the reset or restore that ``autotune`` declares)."""
    configs = [triton.Config({"BLOCK": b}, pre_hook=script.hook) for b in (16, 32, 64)]

    @triton.autotune(configs=configs, key=["n"], hints=search(params=["BLOCK"]), **autotune)
    @triton.jit
    def atomic_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)))

    return atomic_sum


@pytest.mark.parametrize("declared", ["reset_to_zero", "restore_value"])
def test_declared_arguments_are_reset_or_restored_around_the_checked_run(monkeypatch, declared):
    script = Script(by_block({16: 2.0, 32: 1.0, 64: 3.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), repeat=3)
    kernel = make_atomic_sum(script, **{declared: ["out_ptr"]})
    x, out = torch.arange(64.0), torch.zeros(1)

    _, caught = caught_warnings(lambda: kernel[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, out, 64))

    # Each first run adds into zeros (reset before it, or restored after the previous run): all agree.
    assert not of(caught, WrongOutputWarning) and not of(caught, RuntimeWarning)
    assert all(t < float("inf") for t in kernel.last_search.times.values())
    assert out[0] == x.sum()


def test_strict_fails_a_search_whose_kernel_writes_nothing(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CHECK_OUTPUTS", "strict")
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))

    @triton.autotune(
        configs=[], key=["n"], hints=search(params=["BLOCK"], values=[16, 32]), pre_hook=script.hook
    )
    @triton.jit
    def reads_only(x_ptr, n, BLOCK: tl.constexpr):
        tl.load(x_ptr + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n)

    with pytest.raises(UncheckedOutputsError, match="reads_only: check_outputs is strict"):
        reads_only[(1,)](torch.ones(32), 32)


@pytest.mark.parametrize("kind", ["float", "int", "numpy float", "numpy int"])
def test_a_zero_the_candidate_matches_counts_as_no_relative_error(kind):
    # A kernel's output holds zeros beside the values a wrong block leaves out: their 0 / 0 is no error.
    dtype = torch.float32 if kind.endswith("float") else torch.int32
    reference, value = torch.tensor([0, 4], dtype=dtype), torch.tensor([0, 3], dtype=dtype)
    if kind.startswith("numpy"):
        reference, value = reference.numpy(), value.numpy()
    found = compare(value, snapshot(reference), Tolerance(), "argument y_ptr")
    assert str(found).endswith("1 of 2 values off, largest absolute error 1, largest relative error 0.25")


def make_odd_double(hints, **autotune):
    """y = 2 x, but 3 x where BLOCK is 16: the search measures 16 first, so the reference is wrong."""

    @triton.autotune(configs=[], key=["n"], hints=hints, **autotune)
    @triton.jit
    def odd_double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        factor = 3.0 if BLOCK == 16 else 2.0
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)

    return odd_double


def test_a_wrong_first_candidate_is_found_the_odd_one_out_and_dropped(monkeypatch, isolated):
    script = Script(by_block({16: 1.0, 32: 2.0, 8: 3.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), cache="json", cache_dir=isolated)
    kernel = make_odd_double(search(params=["BLOCK"], values=[8, 16, 32]), pre_hook=script.hook)
    x, y = torch.arange(48.0), torch.zeros(48)

    _, caught = caught_warnings(lambda: kernel[lambda meta: (triton.cdiv(48, meta["BLOCK"]),)](x, y, 48))

    assert script.seen("BLOCK")[0] == (16,), "the first candidate measured is the reference"
    assert kernel.best_config.kwargs == {"BLOCK": 32}, "the fastest of those that agree"
    assert torch.equal(y, 2 * x)
    (message,) = of(caught, WrongOutputWarning)
    assert "the reference [1] BLOCK=16 looks wrong for key" in message
    assert "differ from it and agree among themselves, so it was dropped" in message
    (record,) = stored_records(isolated, "odd_double")
    (error,) = [c["error"] for c in record["candidates"] if c.get("error")]
    assert "differs from the 2 other candidates, which agree among themselves" in error
