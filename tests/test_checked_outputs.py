"""Checked outputs: a fast wrong config is never picked by the function-level tuner (docs/guide.md)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from kerneltune.core.errors import (
    CandidateFailedWarning,
    NoValidConfigError,
    UncheckedOutputsError,
    WrongOutputWarning,
)
from kerneltune.core.machine.outputs import Skipped, Tolerance, compare, snapshot
from kerneltune.core.machine.passes import settled, unchanged, untouched, verdicts
from tuning_doubles import FakeClock, clock_plugin, install_session, stored_records

from triton_dist.tune import autotune


@pytest.fixture
def clock(monkeypatch):
    """Deterministic timings: a candidate's time is what it adds to the clock."""
    fake = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(fake),), timer="scripted")
    return fake


def caught_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, caught


def of(caught, category):
    return [str(w.message) for w in caught if issubclass(w.category, category)]


# -- the comparison ----------------------------------------------------------------


def test_each_dtype_has_its_tolerance_and_exact_ones_are_bit_for_bit():
    tolerance = Tolerance()
    assert tolerance.of("torch.float32") == (1e-5, 1e-4)
    assert tolerance.of("bfloat16") == tolerance.of("torch.float16") == (1e-2, 1e-2)
    assert tolerance.of("torch.int64") is None and tolerance.of("bool") is None
    assert tolerance.of("torch.float8_e4m3fn") is None
    assert Tolerance(rtol=0.5).of("float64") == (0.5, 1e-4)


def test_a_mismatch_names_its_path_and_largest_errors():
    reference = snapshot((torch.ones(4), {"y": torch.tensor([1.0, 2.0, 4.0])}))
    found = compare((torch.ones(4), {"y": torch.tensor([1.0, 2.0, 3.0])}), reference, Tolerance())
    assert found is not None
    assert str(found) == (
        "result[1]['y']: 1 of 3 values off, largest absolute error 1, largest relative error 0.25"
    )
    shape = compare((torch.ones(3), {"y": torch.ones(3)}), reference, Tolerance())
    assert str(shape).startswith("result[0]: Tensor (3,) torch.float32, the reference's Tensor (4,)")
    assert compare([1, 2], snapshot((1, 2)), Tolerance()) is None  # a list for a tuple: alike


def test_nan_where_the_reference_has_nan_passes_and_nowhere_else():
    reference = snapshot(torch.tensor([math.nan, 1.0]))
    assert compare(torch.tensor([math.nan, 1.0]), reference, Tolerance()) is None
    assert compare(torch.tensor([0.0, math.nan]), reference, Tolerance()) is not None
    assert compare(torch.tensor([math.inf, 1.0]), snapshot(torch.tensor([1.0, 1.0])), Tolerance()) is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_tensor_passes_exactly_where_the_documented_bound_holds_at_every_value(dtype):
    """The quick pass (the reference's side of the bound kept) and the full verdict agree with
    ``|c - r| <= atol * scale + rtol * |r|``, equal values and NaN beside NaN, at every value."""
    gen = torch.Generator().manual_seed(1)
    specials = torch.tensor([math.inf, -math.inf, math.nan, 1.0, -2.0]).double()
    seen = set()
    for odd in ([3.0, 4.0], [math.inf, -3.0], [math.nan, -math.inf]):  # each reference's own bound kept
        held = torch.randn(48, generator=gen) * 10
        held[[7, 11]] = torch.tensor(odd)
        held = held.to(dtype)
        reference, r = snapshot(held), held.double()
        finite = torch.isfinite(r)
        scale = r.abs()[finite].max()
        for trial in range(200):
            for tolerance in (Tolerance(), Tolerance(rtol=0.1, atol=0.0)):  # and its bound by tolerance
                rtol, atol = tolerance.of(str(dtype))
                spread = 10.0 ** (6 * float(torch.rand(1, generator=gen)) - 6) * scale
                value = r + torch.randn(48, generator=gen).double() * spread
                if trial % 2:  # each odd place keeps the reference's value or takes a special one
                    chosen = specials[torch.randint(5, (2,), generator=gen)]
                    value[[7, 11]] = torch.where(torch.rand(2, generator=gen) < 0.5, r[[7, 11]], chosen)
                value = value.to(dtype)
                c = value.double()
                within = finite & ((c - r).abs() <= atol * scale + rtol * r.abs())
                ok = within | (c == r) | (c.isnan() & r.isnan())
                passed = compare(value, reference, tolerance) is None
                assert passed == bool(ok.all()), (odd, trial, tolerance)
                flags: list = []
                verdicts(value, reference, tolerance, flags)
                # The quick flag never passes what the verdict fails; it may leave a pass to it.
                assert settled(flags) <= passed, (odd, trial, tolerance)
                seen.add((odd[0], passed))
    assert len(seen) == 6  # each reference passes some values and fails others


def test_one_settling_of_many_outputs_fails_where_any_one_differs_or_is_written():
    a, b, n = torch.linspace(-1, 1, 64), torch.arange(8), torch.ones(4, dtype=torch.complex64)
    reference = snapshot({"a": (a, 2.0), "b": [b, n], "none": None})
    tolerance = Tolerance()

    def settles(value: object, *written: tuple[torch.Tensor, torch.Tensor]) -> bool:
        flags: list = []
        verdicts(value, reference, tolerance, flags)
        flags += [untouched(now, before) for now, before in written]
        return settled(flags)

    assert settles({"a": (a + 1e-7, 2.0), "b": [b.clone(), n.clone()], "none": None}, (b, snapshot(b)))
    wrong = a.clone()
    wrong[-1] = 0.0  # a dropped remainder
    assert not settles({"a": (wrong, 2.0), "b": [b, n], "none": None})
    assert not settles({"a": (a, 2.5), "b": [b, n], "none": None})
    assert not settles({"a": (a, 2.0), "b": [b + 1, n], "none": None})
    assert not settles({"a": (a, 2.0), "b": [b, n * 2], "none": None})
    assert not settles({"a": (a, 2.0), "b": [b], "none": None})
    assert not settles({"a": (a, 2.0), "b": [b, n], "none": None}, (b + 1, snapshot(b)))
    assert not settles({"a": (a, 2.0), "b": [b, n], "none": None}, (b[:4], snapshot(b)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_quick_flag_passes_small_errors_and_leaves_the_rest_to_the_verdict(dtype):
    """Within ``atol * scale`` everywhere (what adding in another order gives) settles at once; an
    error the bound passes only through ``rtol * |r|`` falls to the full verdict, which passes it."""
    held = torch.linspace(-3.0, 4.0, 999).to(dtype)
    reference, tolerance = snapshot(held), Tolerance()
    rtol, atol = tolerance.of(str(dtype))
    largest = int(held.float().abs().argmax())
    for error, quick in ((0.5 * atol, True), ((atol + 0.5 * rtol), False)):
        value = held.to(torch.float32, copy=True)
        value[largest] += error * 4.0 * (1 if value[largest] > 0 else -1)  # 4.0: the scale
        value = value.to(dtype)
        flags: list = []
        verdicts(value, reference, tolerance, flags)
        assert settled(flags) is quick, error
        assert compare(value, reference, tolerance) is None


def test_a_reference_written_after_its_first_comparison_is_judged_as_it_holds_now():
    reference = torch.tensor([1e6, 2.0, 3.0])  # its scale makes a loose bound
    assert compare(torch.tensor([1e6, 2.5, 3.0]), reference, Tolerance()) is None
    reference[0] = 1.0
    assert compare(torch.tensor([1.0, 2.5, 3.0]), reference, Tolerance()) is not None
    assert compare(torch.tensor([1.0, 2.0, 3.0]), reference, Tolerance()) is None


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float64, torch.complex64, torch.complex128]
)
def test_an_argument_is_unchanged_only_where_its_bits_are(dtype):
    held = torch.tensor([math.nan, 1.0, 0.0, 2.0], dtype=dtype)[::2]  # strided: compared as it is
    assert unchanged(held, snapshot(held))
    written = held.clone()
    written[1] = -0.0  # equal to 0.0, but written by someone
    assert not unchanged(written, snapshot(held))
    written = held.clone()
    written[0] = 1.0
    assert not unchanged(written, snapshot(held))


def test_integers_and_fp8_must_match_bit_for_bit():
    assert compare(torch.tensor([3]), snapshot(torch.tensor([2])), Tolerance(rtol=1.0, atol=1.0)) is not None
    if hasattr(torch, "float8_e4m3fn"):
        a = torch.tensor([1.0, 2.0]).to(torch.float8_e4m3fn)
        b = torch.tensor([1.0, 2.25]).to(torch.float8_e4m3fn)
        assert compare(a, snapshot(a), Tolerance()) is None
        assert compare(b, snapshot(a), Tolerance()) is not None


def test_values_of_other_kinds_are_skipped_and_listed():
    skipped: list[str] = []
    kept = snapshot({"a": torch.ones(1), "b": object()}, skipped=skipped)
    assert skipped == ["result['b'] (object)"]
    assert compare({"a": torch.ones(1), "b": "anything"}, kept, Tolerance()) is None


def test_numpy_arrays_are_compared_by_their_dtype():
    numpy = pytest.importorskip("numpy")
    x = numpy.random.default_rng(0).standard_normal(1000).astype(numpy.float32)
    assert (
        compare(x.sum(dtype=numpy.float32), snapshot(x[::-1].sum(dtype=numpy.float32)), Tolerance()) is None
    )
    assert compare(x[:-3].sum(), snapshot(x.sum()), Tolerance()) is not None


# -- the function-level tuner ----------------------------------------------------------


def truncating_sum(clock):
    """A tuned row sum whose fastest config drops the remainder of its last block."""

    @autotune(config_space=[{"block": 4}, {"block": 3}, {"block": 5}], key_fn=lambda x: x.numel())
    def row_sum(x, block):
        clock.advance({4: 3.0, 3: 1.0, 5: 2.0}[block])
        blocks = x.numel() // block if block == 3 else -(-x.numel() // block)
        return torch.stack([x[i * block : (i + 1) * block].sum() for i in range(blocks)]).sum()

    return row_sum


def test_a_fast_wrong_config_is_never_picked_is_recorded_and_warned_about_once(clock, isolated):
    row_sum = truncating_sum(clock)
    x = torch.arange(1.0, 11.0)  # 10 values: blocks of 3 drop the tenth

    result, caught = caught_warnings(lambda: row_sum(x))

    assert result == 55.0
    (record,) = stored_records(isolated, "row_sum")
    assert record["best"]["index"] == 2
    error = record["candidates"][1]["error"]
    assert error.startswith(
        "WrongOutput: differs from the reference [0] block=<4>: result: 1 of 1 values off"
    )
    assert "largest absolute error 10" in error
    (message,) = of(caught, WrongOutputWarning)
    assert "1 candidate(s) for key 10 differ from the reference [0] block=<4>" in message
    assert "[1] block=<3>: result: 1 of 1 values off" in message
    assert not of(caught, CandidateFailedWarning), "one warning per tuning, not one per candidate"
    _, again = caught_warnings(lambda: row_sum(x))
    assert not again, "a hit checks nothing"


def test_the_check_is_off_by_the_setting(isolated, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CHECK_OUTPUTS", "off")
    clock = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted")
    assert truncating_sum(clock)(torch.arange(1.0, 11.0)) == 45.0, "unchecked, the fast wrong one wins"


def test_configs_adding_in_another_order_all_pass(clock, isolated):
    x = torch.randn(4099, generator=torch.Generator().manual_seed(0))

    @autotune(config_space=[{"chunks": c} for c in (1, 3, 7, 64, 1000)], key_fn=lambda x: x.numel())
    def chunked(x, chunks):
        clock.advance(chunks)
        return torch.stack([part.sum() for part in x.chunk(chunks)]).sum()

    a = torch.randn(64, 1000, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    b = torch.randn(1000, 48, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)

    @autotune(config_space=[{"splits": s} for s in (1, 2, 5, 8)], key_fn=lambda a, b: a.shape)
    def matmul(a, b, splits):
        clock.advance(splits)
        parts = [
            pa.float() @ pb.float() for pa, pb in zip(a.chunk(splits, 1), b.chunk(splits, 0), strict=True)
        ]
        return torch.stack(parts).sum(0).to(torch.bfloat16)

    (_, caught) = caught_warnings(lambda: (chunked(x), matmul(a, b)))
    assert not of(caught, WrongOutputWarning)
    for name in ("chunked", "matmul"):
        (record,) = stored_records(isolated, name)
        assert all(c["error"] is None for c in record["candidates"]), name


def test_an_undeclared_in_place_argument_is_found_restored_and_ends_as_after_an_untuned_call(clock, isolated):
    @autotune(config_space=[{"scale": 1}, {"scale": 2}], key_fn=lambda out, x: out.shape)
    def accumulate(out, x, scale):
        clock.advance(3 - scale)
        out += x * 2 / scale * scale  # the same sum, however it is scaled
        return None

    x = torch.arange(4.0)
    untuned = torch.ones(4)
    accumulate(untuned, x, autotune=False)
    tuned = torch.ones(4)

    _, caught = caught_warnings(lambda: accumulate(tuned, x))

    assert torch.equal(tuned, untuned), "the caller's tensor took one run, as an untuned call's"
    (notice,) = [m for m in (str(w.message) for w in caught) if "in place" in m]
    assert "changes its argument(s) out in place" in notice and "restore_value" in notice
    assert not of(caught, WrongOutputWarning), "each candidate started from the caller's contents"
    (record,) = stored_records(isolated, "accumulate")
    assert record["best"]["index"] == 1


def test_a_candidate_writing_into_an_input_is_caught(clock, isolated):
    @autotune(config_space=[{"mode": "clean"}, {"mode": "scribbles"}], key_fn=lambda x: x.numel())
    def scale(x, mode):
        clock.advance(2.0 if mode == "clean" else 1.0)
        result = x * 2
        if mode == "scribbles":
            x[0] = -1.0  # uses its input as scratch
        return result

    x = torch.arange(1.0, 5.0)
    result, caught = caught_warnings(lambda: scale(x))

    assert torch.equal(result, torch.arange(2.0, 10.0, 2.0)) and torch.equal(x, torch.arange(1.0, 5.0))
    (message,) = of(caught, WrongOutputWarning)
    assert "[1] mode=<scribbles>: argument x: changed, which the reference leaves alone" in message


def test_a_reference_fn_gives_the_reference_and_all_wrong_is_an_error_saying_so(clock, isolated):
    @autotune(
        config_space=[{"off": 1}, {"off": 2}],
        key_fn=lambda x: x.numel(),
        reference_fn=lambda x: x.sum(),
    )
    def total(x, off):
        clock.advance(off)
        return x.sum() + off

    with pytest.raises(NoValidConfigError) as raised:
        caught_warnings(lambda: total(torch.ones(3)))
    text = str(raised.value)
    assert "[0] off=<1>: WrongOutput: differs from reference_fn: result: 1 of 1 values off" in text
    assert "2 candidate(s) for key 3 differ from reference_fn and were dropped" in text


def test_strict_fails_a_tuning_whose_outputs_cannot_be_compared(clock, isolated):
    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x, check_outputs="strict")
    def opaque(x, n):
        clock.advance(n)
        return object()

    with pytest.raises(UncheckedOutputsError, match=r"result \(object\) cannot be compared"):
        opaque(1)


def test_outputs_that_cannot_be_compared_get_one_notice(clock, isolated):
    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def opaque(x, n):
        clock.advance(n)
        return object()

    _, caught = caught_warnings(lambda: (opaque(1), opaque(2)))
    (notice,) = [str(w.message) for w in caught]
    assert "opaque: result (object) cannot be compared; those outputs are not checked" in notice


def test_numpy_outputs_are_checked(clock, isolated):
    numpy = pytest.importorskip("numpy")

    @autotune(config_space=[{"block": 4}, {"block": 3}], key_fn=lambda x: x.size)
    def head(x, block):
        clock.advance(block)
        return {"sum": x[: (x.size // block) * block].sum()}

    _, caught = caught_warnings(lambda: head(numpy.arange(10.0)))
    (message,) = of(caught, WrongOutputWarning)
    assert "[1] block=<3>: result['sum']" in message


@pytest.mark.parametrize("value", [True, False, None, "strict", "on", 0])
def test_the_decorator_refuses_a_check_outputs_it_does_not_know(value):
    def fn(x, n):
        return x

    if value in (True, False, None, "strict") and type(value) is not int:
        autotune([{"n": 1}], key_fn=lambda x: x, check_outputs=value)(fn)
    else:
        with pytest.raises(ValueError, match="check_outputs takes True, False, 'strict' or None"):
            autotune([{"n": 1}], key_fn=lambda x: x, check_outputs=value)(fn)


def test_outputs_over_the_budget_are_not_checked_and_a_notice_says_so(monkeypatch, isolated):
    clock = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted", check_outputs_budget=1)
    big = torch.zeros(1 << 19)  # 2 MiB of float32, over a budget of 1 MiB

    @autotune(config_space=[{"mode": "clean"}, {"mode": "scribbles"}], key_fn=lambda x: x.numel())
    def scale(x, mode):
        clock.advance(2.0 if mode == "clean" else 1.0)
        if mode == "scribbles":
            x[0] = -1.0
        return x.sum() if mode == "clean" else x.sum() + 1

    _, caught = caught_warnings(lambda: scale(big))

    (record,) = stored_records(isolated, "scale")
    assert record["best"]["index"] == 1, "neither the argument nor the result was compared"
    notices = [str(w.message) for w in caught]
    assert not of(caught, WrongOutputWarning)
    assert any("its arguments hold 2 MiB, over check_outputs_budget (1 MiB)" in n for n in notices)


def test_a_return_value_over_the_budget_is_checked_on_a_sample_that_ends_with_its_last_value(
    monkeypatch, isolated
):
    clock = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted", check_outputs_budget=1)
    x = torch.rand(1 << 18, generator=torch.Generator().manual_seed(0))  # 1 MiB of float32: within

    @autotune(
        config_space=[{"mode": m} for m in ("plain", "drops_last", "halves")], key_fn=lambda x: x.numel()
    )
    def doubled(x, mode):
        clock.advance({"plain": 3.0, "drops_last": 1.0, "halves": 2.0}[mode])
        if mode == "halves":  # the same values, computed in two parts
            return torch.cat([x * 2, x * 2])
        out = torch.cat([x, x]) * 2  # 2 MiB: over
        if mode == "drops_last":
            out[-1] = 0.0
        return out

    result, caught = caught_warnings(lambda: doubled(x))

    assert torch.equal(result, torch.cat([x, x]) * 2)
    (record,) = stored_records(isolated, "doubled")
    assert record["best"]["index"] == 2
    assert record["candidates"][1]["error"].startswith(
        "WrongOutput: differs from the reference [0] mode=<plain>: result (sampled): 1 of 262144 values off"
    )
    (notice,) = [str(w.message) for w in caught if "check_outputs_budget" in str(w.message)]
    assert (
        "its return value holds 2 MiB, over check_outputs_budget (1 MiB): it is checked on a sample, "
        in notice
    )
    assert "one value in 2 of each tensor and array, the last included" in notice


def test_a_sample_keeps_every_step_th_value_ending_with_the_last_and_the_whole_shape():
    kept = snapshot({"y": torch.arange(10.0).reshape(2, 5)}, step=4)
    assert kept["y"].shape == (2, 5) and kept["y"].dtype == "torch.float32"
    assert torch.equal(kept["y"].values, torch.tensor([1.0, 5.0, 9.0]))
    assert compare({"y": torch.arange(10.0).reshape(2, 5)}, kept, Tolerance()) is None
    changed = torch.arange(10.0).reshape(2, 5)
    changed[0, 0] = -1.0  # between two sampled values: not seen
    assert compare({"y": changed}, kept, Tolerance()) is None
    changed[1, 4] = -1.0
    assert str(compare({"y": changed}, kept, Tolerance())).startswith(
        "result['y'] (sampled): 1 of 3 values off"
    )
    found = compare({"y": torch.arange(10.0)}, kept, Tolerance())
    assert str(found) == "result['y']: Tensor (10,) torch.float32, the reference's (2, 5) torch.float32"
    skipped: list[str] = []
    assert isinstance(snapshot(torch.ones(4, 4).t(), skipped=skipped, step=2), Skipped)
    assert skipped == ["result (not contiguous, so not sampled)"]


# -- a reference that is the odd one out --------------------------------------------------


def off_by_config(clock, wrong, **options):
    """Tuned sums in place; each config in ``wrong`` adds a wrong term of its own; the last is fastest."""
    configs = [{"c": c} for c in range(4)]

    @autotune(config_space=configs, key_fn=lambda out, x: out.numel(), **options)
    def scaled(out, x, c):
        clock.advance(4 - c)
        out += 2 * x + (c + 1 if c in wrong else 0)
        return out.sum()

    return scaled


def test_a_first_candidate_that_the_others_agree_against_is_dropped_and_named(clock, isolated):
    scaled = off_by_config(clock, wrong={0})
    untuned, tuned, x = torch.ones(3), torch.ones(3), torch.arange(3.0)
    scaled(untuned, x, autotune=False)  # config 0: the wrong one

    result, caught = caught_warnings(lambda: scaled(tuned, x))

    assert torch.equal(tuned, torch.ones(3) + 2 * x), "one run of the pick on the caller's contents"
    assert float(result) == float(tuned.sum())
    (record,) = stored_records(isolated, "scaled")
    assert record["best"]["index"] == 3
    assert [c["error"] is None for c in record["candidates"]] == [False, True, True, True]
    assert record["candidates"][0]["error"].startswith(
        "WrongOutput: differs from the 3 other candidates, which agree among themselves: result: "
    )
    (message,) = of(caught, WrongOutputWarning)
    assert message.startswith(
        "kerneltune: scaled: the reference [0] c=<0> looks wrong for key 3: the 3 other candidates that "
        "ran differ from it and agree among themselves, so it was dropped and they were kept:\n  [0] c=<0>: "
    )
    assert not torch.equal(untuned, tuned), "config 0 really is wrong"


def test_a_reference_that_one_other_candidate_agrees_with_stands(clock, isolated):
    scaled = off_by_config(clock, wrong={1, 3})

    _, caught = caught_warnings(lambda: scaled(torch.ones(3), torch.arange(3.0)))

    (record,) = stored_records(isolated, "scaled")
    assert record["best"]["index"] == 2, "[1] and [3], fast and wrong, are dropped: [2] agrees with [0]"
    assert [c["error"] is None for c in record["candidates"]] == [True, False, True, False]
    (message,) = of(caught, WrongOutputWarning)
    assert "2 candidate(s) for key 3 differ from the reference [0] c=<0> and were dropped" in message


def test_a_reference_the_others_disagree_about_among_themselves_stands(clock, isolated):
    scaled = off_by_config(clock, wrong={1, 2, 3})

    _, caught = caught_warnings(lambda: scaled(torch.ones(3), torch.arange(3.0)))

    (record,) = stored_records(isolated, "scaled")
    assert record["best"]["index"] == 0
    assert [c["error"] is None for c in record["candidates"]] == [True, False, False, False]
    (message,) = of(caught, WrongOutputWarning)
    assert "every candidate that ran but the reference [0] c=<0> differs from it" in message


def test_reference_fn_stands_however_many_candidates_agree_against_it(clock, isolated):
    scaled = off_by_config(clock, wrong={0}, reference_fn=lambda out, x: out.add_(2 * x).sum())
    _, caught = caught_warnings(lambda: scaled(torch.ones(3), torch.arange(3.0)))
    (record,) = stored_records(isolated, "scaled")
    assert record["best"]["index"] == 3
    assert record["candidates"][0]["error"].startswith("WrongOutput: differs from reference_fn: result")

    # A reference_fn that does config 0's work: the three agreeing against it are wrong all the same.
    like_zero = off_by_config(clock, wrong={0}, reference_fn=lambda out, x: out.add_(2 * x + 1).sum())
    _, caught = caught_warnings(lambda: like_zero(torch.ones(4), torch.arange(4.0)))
    (message,) = of(caught, WrongOutputWarning)
    assert "3 candidate(s) for key 4 differ from reference_fn and were dropped" in message
    (record,) = [r for r in stored_records(isolated, "scaled") if r["key"] == 4]
    assert record["best"]["index"] == 0


# -- tensors inside list, tuple and dict arguments---------------------------------------------


def test_tensors_in_a_list_argument_are_found_restored_and_checked(clock, isolated):
    @autotune(config_space=[{"block": 4}, {"block": 3}, {"block": 5}], key_fn=lambda x, outs: x.numel())
    def split_sums(x, outs, block):
        clock.advance({4: 3.0, 3: 1.0, 5: 2.0}[block])
        kept = x[: (x.numel() // block) * block] if block == 3 else x
        outs[0] += kept.sum()  # accumulates: a candidate after an unrestored one would see its sums
        outs[1] += x.max()

    x = torch.arange(1.0, 11.0)
    untuned = [torch.zeros(1), torch.zeros(1)]
    split_sums(x, untuned, autotune=False)
    tuned = [torch.zeros(1), torch.zeros(1)]

    _, caught = caught_warnings(lambda: split_sums(x, tuned))

    assert all(torch.equal(t, u) for t, u in zip(tuned, untuned, strict=True))
    (notice,) = [str(w.message) for w in caught if "in place" in str(w.message)]
    assert "changes its argument(s) outs[0], outs[1] in place" in notice
    (message,) = of(caught, WrongOutputWarning)
    assert "[1] block=<3>: argument outs[0]: 1 of 1 values off, largest absolute error 10" in message
    (record,) = stored_records(isolated, "split_sums")
    assert record["best"]["index"] == 2


def test_tensors_in_a_dict_argument_are_found_restored_and_checked(clock, isolated):
    @autotune(config_space=[{"block": 4}, {"block": 3}], key_fn=lambda x, bufs: x.numel())
    def into(x, bufs, block):
        clock.advance(2.0 if block == 4 else 1.0)
        bufs["sum"] += (x[: (x.numel() // block) * block] if block == 3 else x).sum()

    x = torch.arange(1.0, 11.0)
    bufs = {"sum": torch.zeros(1)}

    _, caught = caught_warnings(lambda: into(x, bufs))

    assert torch.equal(bufs["sum"], torch.tensor([55.0])), "the pick ran once on the caller's contents"
    (message,) = of(caught, WrongOutputWarning)
    assert "[1] block=<3>: argument bufs['sum']: 1 of 1 values off" in message


def test_arrays_in_a_tuple_argument_are_found_restored_and_checked(clock, isolated):
    numpy = pytest.importorskip("numpy")

    @autotune(config_space=[{"mode": "clean"}, {"mode": "scribbles"}], key_fn=lambda pair: pair[0].size)
    def add_into(pair, mode):
        clock.advance(2.0 if mode == "clean" else 1.0)
        pair[1][:] += pair[0]
        if mode == "scribbles":
            pair[0][0] = -1.0  # uses its input as scratch

    pair = (numpy.arange(3.0), numpy.ones(3))

    _, caught = caught_warnings(lambda: add_into(pair))

    assert numpy.array_equal(pair[0], numpy.arange(3.0))
    assert numpy.array_equal(pair[1], numpy.arange(1.0, 4.0)), "one run of the pick on the caller's contents"
    (message,) = of(caught, WrongOutputWarning)
    assert "[1] mode=<scribbles>: argument pair[0]: changed, which the reference leaves alone" in message
