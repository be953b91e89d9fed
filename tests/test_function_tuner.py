"""triton_dist.tune.autotune, point by point as the API reference (seed 000) documents it."""

from __future__ import annotations

import inspect
import logging
import re
import threading
import traceback
import warnings

import pytest
import torch
from kerneltune.core import CandidateFailedWarning, ConfigError, NoStoredPickError, NoValidConfigError
from kerneltune.core.drivers import function_tuner as function_tuner_module
from kerneltune.plugins.timers.wallclock import WallclockTimer
from tuning_doubles import FakeClock, clock_plugin, install_session, only_record_file, stored_records

from triton_dist.tune import AutoTuner, autotune

WARMUP, REPEAT = 5, 10

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked
# (tests/test_checked_outputs.py is about the check).
pytestmark = pytest.mark.usefixtures("unchecked")


def counting(config_space, key_fn=lambda x, *args, **kwargs: x, prune_fn=None):
    """A tuned ``work(x, n)`` and the list of ``n`` it was called with."""
    calls: list[int] = []

    @autotune(config_space=config_space, key_fn=key_fn, prune_fn=prune_fn)
    def work(x, n):
        calls.append(n)
        return x * n

    return work, calls


@pytest.fixture
def clock(monkeypatch):
    """Deterministic timings: a candidate's time is what it adds to the clock."""
    fake = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(fake),), timer="scripted")
    return fake


# -- decoration ---------------------------------------------------------------


def test_keeps_name_doc_and_signature():
    def scale(x, alpha, cfg=None, *, flag=False):
        """Scale x by alpha."""
        return x * alpha

    tuned = autotune(config_space=[{"cfg": 1}], key_fn=lambda x, alpha: x)(scale)

    assert isinstance(tuned, AutoTuner)
    assert tuned.__name__ == "scale"
    assert tuned.__qualname__ == scale.__qualname__
    assert tuned.__module__ == __name__
    assert tuned.__doc__ == "Scale x by alpha."
    assert inspect.signature(tuned) == inspect.signature(scale)
    assert tuned.__wrapped__ is scale


def _target(x, n=1):
    return x * n


@pytest.mark.parametrize(
    ("config_space", "error", "match"),
    [
        ([], ValueError, "empty"),
        ({"n": 1}, TypeError, "list of dicts"),
        ("n", TypeError, "list of dicts"),
        (None, TypeError, "list of dicts"),
        ([{"n": 1}, 2], TypeError, r"config_space\[1\]"),
        ([{"n": 1}, {"m": 2}], ValueError, "'m' is not a keyword parameter"),
        ([{1: 2}], ValueError, "not a name"),
        ([{"autotune": True}], ValueError, "reserved"),
        ([{"autotune_pg": None}], ValueError, "reserved"),
    ],
)
def test_bad_config_space_fails_at_decoration(config_space, error, match):
    with pytest.raises(error, match=match) as info:
        autotune(config_space=config_space, key_fn=lambda x: x)(_target)
    assert "_target" in str(info.value)


def test_bad_key_fn_or_prune_fn_fails_at_decoration():
    with pytest.raises(TypeError, match="key_fn"):
        autotune(config_space=[{"n": 1}], key_fn=None)(_target)
    with pytest.raises(TypeError, match="prune_fn"):
        autotune(config_space=[{"n": 1}], key_fn=lambda x: x, prune_fn=3)(_target)


def test_fields_may_go_to_var_keyword():
    @autotune(config_space=[{"anything": 3}], key_fn=lambda x: x)
    def loose(x, **options):
        return x * options["anything"]

    assert loose(2, autotune=False) == 6


def test_a_hit_serves_the_pick_by_position_by_keyword_and_beside_a_control(isolated):
    work, calls = counting([{"n": 3}, {"n": 1}])
    picked = work(5)
    tuned = len(calls)

    assert (work(5), work(x=5), work(5, autotune_verbose=True)) == (picked,) * 3
    assert work(5, autotune=False) == 15  # the first config
    assert len(calls) == tuned + 4, "each call runs once: nothing is measured again"
    with pytest.raises(TypeError, match="autotune_verbos=True; did you mean autotune_verbose"):
        work(5, autotune_verbos=True)


# -- autotune=False -------------------------------------------------------------


def test_autotune_false_uses_first_config_and_nothing_else(monkeypatch, isolated):
    seen = []
    monkeypatch.setattr(WallclockTimer, "sample", lambda self, fn: seen.append("timer"))

    def key_fn(x):
        seen.append("key_fn")
        return x

    def prune_fn(config, x):
        seen.append("prune_fn")
        return True

    work, calls = counting([{"n": 3}, {"n": 1}, {"n": 2}], key_fn=key_fn, prune_fn=prune_fn)

    assert work(5, autotune=False) == 15
    assert work(5, autotune=False) == 15
    assert calls == [3, 3]
    assert seen == []
    assert not isolated.exists()


# -- conflicts between business arguments and config fields -------------------


CLASHING_CALLS = {
    "keyword": lambda work, **controls: work(2, n=7, **controls),
    "position": lambda work, **controls: work(2, 7, **controls),
}


@pytest.mark.parametrize("how", sorted(CLASHING_CALLS))
@pytest.mark.parametrize("autotune_on", [True, False])
def test_conflict_is_a_value_error(how, autotune_on):
    work, calls = counting([{"n": 1}, {"n": 2}])

    with pytest.raises(ValueError, match=r"\bn\b.*autotune_allow_arg_overwrite"):
        CLASHING_CALLS[how](work, autotune=autotune_on)
    assert calls == []


@pytest.mark.parametrize("how", sorted(CLASHING_CALLS))
def test_conflict_is_still_an_error_once_the_key_is_tuned(how):
    work, calls = counting([{"n": 1}, {"n": 2}])
    work(2)
    before = len(calls)

    with pytest.raises(ValueError, match=r"\bn\b"):
        CLASHING_CALLS[how](work)
    assert len(calls) == before


@pytest.mark.parametrize("how", sorted(CLASHING_CALLS))
@pytest.mark.parametrize("autotune_on", [True, False])
def test_allowed_conflict_lets_the_business_value_win_with_a_warning(how, autotune_on):
    work, calls = counting([{"n": 1}, {"n": 2}])

    with pytest.warns(UserWarning, match=r"\bn\b.*override"):
        result = CLASHING_CALLS[how](work, autotune=autotune_on, autotune_allow_arg_overwrite=True)

    assert result == 14
    assert calls and set(calls) == {7}


# -- prune_fn -------------------------------------------------------------------


def test_prune_fn_filters_before_measuring(isolated):
    seen = []

    def prune_fn(config, x, *, limit):
        seen.append((config["n"], x, limit))
        return config["n"] <= limit

    calls: list[int] = []

    @autotune(
        config_space=[{"n": 1}, {"n": 5}, {"n": 2}, {"n": 9}], key_fn=lambda x, limit: x, prune_fn=prune_fn
    )
    def work(x, n, *, limit):
        calls.append(n)
        return x * n

    assert work(3, limit=2) in (3, 6)

    assert sorted(seen) == [(1, 3, 2), (2, 3, 2), (5, 3, 2), (9, 3, 2)]
    assert set(calls) == {1, 2}
    (record,) = stored_records(isolated, "work")
    errors = [row["error"] for row in record["candidates"]]
    assert errors == [None, "pruned", None, "pruned"]
    assert record["best"]["index"] in (0, 2)


def test_prune_fn_removing_everything_is_a_clear_error(isolated):
    work, calls = counting([{"n": 1}, {"n": 2}], prune_fn=lambda config, x: False)

    with pytest.raises(ValueError, match="prune_fn removed every candidate of work"):
        work(3)
    assert calls == []
    assert stored_records(isolated, "work") == []


# -- measuring ------------------------------------------------------------------


def test_each_candidate_gets_5_warmups_and_10_timed_runs(isolated):
    work, calls = counting([{"n": 1}, {"n": 2}, {"n": 3}])

    work(4)

    final = calls.pop()
    assert {n: calls.count(n) for n in (1, 2, 3)} == {
        1: WARMUP + REPEAT,
        2: WARMUP + REPEAT,
        3: WARMUP + REPEAT,
    }
    (record,) = stored_records(isolated, "work")
    assert [len(row["samples_ms"]) for row in record["candidates"]] == [REPEAT] * 3
    assert final == [1, 2, 3][record["best"]["index"]]


def test_warmup_and_repeat_come_from_the_config_file(isolated, tmp_path):
    (tmp_path / "kerneltune.toml").write_text("warmup = 2\nrepeat = 3\n")
    work, calls = counting([{"n": 1}, {"n": 2}])

    work(4)

    assert len(calls) == 2 * (2 + 3) + 1
    (record,) = stored_records(isolated, "work")
    assert [len(row["samples_ms"]) for row in record["candidates"]] == [3, 3]


def test_warmup_and_repeat_of_the_decorator_beat_the_config_file(isolated, tmp_path):
    (tmp_path / "kerneltune.toml").write_text("warmup = 2\nrepeat = 3\n")
    calls: list[int] = []

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x, warmup=0, repeat=4)
    def work(x, n):
        calls.append(n)

    work(4)

    assert len(calls) == 2 * (0 + 4) + 1
    (record,) = stored_records(isolated, "work")
    assert [len(row["samples_ms"]) for row in record["candidates"]] == [4, 4]
    assert (record["measured_with"]["warmup"], record["measured_with"]["repeat"]) == (0, 4)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"warmup": -1}, "warmup must be an integer >= 0"),
        ({"repeat": 0}, "repeat must be an integer >= 1"),
        ({"repeat": 2.5}, "repeat must be an integer >= 1"),
        ({"warmup": True}, "warmup must be an integer >= 0"),
    ],
)
def test_bad_warmup_or_repeat_fails_at_decoration(options, match):
    with pytest.raises(ValueError, match=f"_target: {match}"):
        autotune(config_space=[{"n": 1}], key_fn=lambda x: x, **options)(_target)


def test_time_is_the_mean_and_the_fastest_wins(clock, isolated):
    @autotune(config_space=[{"cost": 3.0}, {"cost": 1.0}, {"cost": 2.0}], key_fn=lambda x: x)
    def work(x, cost):
        clock.advance(cost)
        return cost

    assert work(1) == 1.0

    (record,) = stored_records(isolated, "work")
    assert record["best"]["index"] == 1
    assert [row["time_ms"] for row in record["candidates"]] == [3.0, 1.0, 2.0]
    assert record["candidates"][0]["samples_ms"] == [3.0] * REPEAT


def test_ties_go_to_the_lower_index(clock, isolated):
    @autotune(config_space=[{"cost": 2.0}, {"cost": 1.0}, {"cost": 1.0}], key_fn=lambda x: x)
    def work(x, cost):
        clock.advance(cost)
        return cost

    work(1)
    (record,) = stored_records(isolated, "work")
    assert record["best"]["index"] == 1


@pytest.mark.parametrize("failing_call", [1, WARMUP + 3], ids=["in-warmup", "in-timed-runs"])
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_failing_candidate_is_infinitely_slow_and_tuning_goes_on(clock, isolated, failing_call):
    counts = {"bad": 0}

    @autotune(config_space=[{"mode": "bad"}, {"mode": "slow"}, {"mode": "fast"}], key_fn=lambda x: x)
    def work(x, mode):
        if mode == "bad":
            counts["bad"] += 1
            if counts["bad"] >= failing_call:
                raise MemoryError("out of on-chip memory")
        clock.advance({"bad": 0.5, "slow": 5.0, "fast": 2.0}[mode])
        return mode

    assert work(1) == "fast"

    (record,) = stored_records(isolated, "work")
    bad, slow, fast = record["candidates"]
    assert bad["time_ms"] is None
    assert bad["samples_ms"] == []
    assert bad["error"] == "MemoryError: out of on-chip memory"
    assert slow["time_ms"] == 5.0 and slow["error"] is None
    assert fast["time_ms"] == 2.0 and fast["error"] is None
    assert record["best"]["index"] == 2


def test_all_candidates_failing_lists_each_failure_and_persists_nothing(isolated):
    calls = []

    @autotune(config_space=[{"block": 128}, {"block": 256}], key_fn=lambda x: x)
    def work(x, block):
        calls.append(block)
        raise RuntimeError(f"block {block} needs too much memory\nsecond line")

    with pytest.raises(NoValidConfigError) as info, pytest.warns(CandidateFailedWarning) as warned:
        work(1)

    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert len(warned) == 2
    first = info.value.__cause__
    assert isinstance(first, RuntimeError) and str(first).startswith("block 128 needs too much memory")
    assert "raise RuntimeError" in "".join(traceback.format_exception(info.value)), "the cause's frames show"
    assert "cannot find valid config" in message
    assert "[0] block=<128>: RuntimeError: block 128 needs too much memory" in message
    assert "[1] block=<256>: RuntimeError: block 256 needs too much memory" in message
    assert stored_records(isolated, "work") == []
    assert calls == [128, 256]

    with pytest.raises(NoValidConfigError), pytest.warns(CandidateFailedWarning):
        work(1)
    assert calls == [128, 256, 128, 256], "a failed tuning must not be remembered in-process either"


def failure_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, CandidateFailedWarning)]


def test_a_failing_candidate_gives_one_warning_naming_it_and_its_exception(clock, isolated):
    @autotune(config_space=[{"mode": "fast"}, {"mode": "buggy"}, {"mode": "slow"}], key_fn=lambda x: x)
    def work(x, mode):
        if mode == "buggy":
            raise IndexError("index 7 is out of bounds")
        clock.advance(1.0 if mode == "fast" else 2.0)
        return mode

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert work(3) == "fast"
        assert work(3) == "fast"

    (message,) = failure_warnings(caught)
    assert message.startswith("kerneltune: work: candidate [1] mode=<buggy> failed for key 3 with ")
    assert "IndexError: index 7 is out of bounds" in message
    assert [w.filename for w in caught] == [__file__], "the warning points at the tuned call"


def test_a_candidate_failing_in_every_re_timing_round_is_still_one_warning(monkeypatch, isolated):
    clock = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted", tie_rounds=3)
    runs = {"steady": 0, "flaky": 0}

    @autotune(config_space=[{"mode": "steady"}, {"mode": "flaky"}], key_fn=lambda x: x)
    def work(x, mode):
        runs[mode] += 1
        if mode == "flaky" and runs["flaky"] > WARMUP + REPEAT:
            raise RuntimeError("fails once re-timed")
        clock.advance(1.0 + 0.1 * (runs[mode] % 2))  # alike, and noisy: a near tie
        return mode

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert work(1) == "steady"

    log = (isolated / "work" / "tune-rank0.log").read_text()
    failed = re.findall(r"\[1\] mode=<flaky> \(near-tie re-timing, round \d of \d\): RuntimeError", log)
    assert len(failed) >= 2, "failed in several rounds"
    (message,) = failure_warnings(caught)
    assert message.startswith("kerneltune: work: candidate [1] mode=<flaky> failed for key 1")
    assert log.count("Traceback") == 1

    runs["flaky"] = WARMUP + REPEAT
    with pytest.warns(CandidateFailedWarning, match="for key 2"):
        work(2)  # another tuning, another warning


def test_pruned_candidates_are_no_failures(isolated):
    work, _ = counting([{"n": 1}, {"n": 2}, {"n": 3}], prune_fn=lambda config, x: config["n"] != 2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        work(4)

    assert failure_warnings(caught) == []


def test_the_tuning_log_keeps_the_traceback_of_a_failure(isolated):
    @autotune(config_space=[{"n": 1}, {"n": 0}], key_fn=lambda x: x)
    def work(x, n):
        return divide(x, n)

    with pytest.warns(CandidateFailedWarning, match=r"\[1\] n=<0> failed for key 6 with ZeroDivisionError"):
        work(6)

    log = (isolated / "work" / "tune-rank0.log").read_text()
    failure = log[log.index("[1] n=<0>: ZeroDivisionError") :]
    assert "    Traceback (most recent call last):" in failure
    assert "in divide\n" in failure and "    ZeroDivisionError: integer division or modulo by zero" in failure
    assert log.count("Traceback") == 1


def divide(x, n):
    return x // n


def test_returns_the_result_of_a_fresh_run_with_the_best_config(clock):
    calls = []

    @autotune(config_space=[{"cost": 4.0}, {"cost": 1.0}], key_fn=lambda x: x)
    def work(x, cost):
        clock.advance(cost)
        calls.append(cost)
        return (x, cost, len(calls))

    result = work(7)

    assert result == (7, 1.0, len(calls))
    assert len(calls) == 2 * (WARMUP + REPEAT) + 1
    assert calls[-1] == 1.0


# -- in-place arguments: reset_to_zero and restore_value -----------------------------


def accumulating(**options):
    """A tuned ``add_one(acc, n)`` that adds 1 to ``acc[0]`` in place, and what each run saw there."""
    seen: list[float] = []

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda acc: len(acc), **options)
    def add_one(acc, n):
        seen.append(float(acc[0]))
        acc[0] += 1

    return add_one, seen


def test_an_in_place_function_sees_every_run_without_the_options_and_the_check():
    add_one, _ = accumulating(check_outputs=False)
    acc = torch.zeros(1)

    add_one(acc)

    assert acc[0] == 2 * (WARMUP + REPEAT) + 1, "the caller's tensor took every run"


@pytest.mark.parametrize("option", ["reset_to_zero", "restore_value"])
def test_the_callers_tensor_ends_as_after_one_call_with_the_pick(option):
    add_one, seen = accumulating(**{option: ["acc"]})
    acc = torch.zeros(1)

    add_one(acc)

    assert acc[0] == 1.0
    assert seen == [0.0] * len(seen) and len(seen) == 2 * (WARMUP + REPEAT) + 1
    add_one(acc)
    assert acc[0] == 2.0, "a hit runs the function as it is: nothing reset, nothing copied"


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_restore_value_gives_every_run_the_callers_contents_even_after_a_run_that_raised():
    seen = []

    @autotune(
        config_space=[{"mode": "raises"}, {"mode": "doubles"}],
        key_fn=lambda x, *, scale: x.numel(),
        restore_value=["x"],
    )
    def double(x, mode, *, scale):
        seen.append(x.tolist())
        x.mul_(scale)
        if mode == "raises":
            raise RuntimeError("wrote, then failed")
        return mode

    x = torch.tensor([3.0, 4.0])
    assert double(x, scale=2.0) == "doubles"

    assert x.tolist() == [6.0, 8.0]
    assert seen == [[3.0, 4.0]] * len(seen)


def test_reset_to_zero_zeroes_before_each_run_and_before_the_pick():
    @autotune(
        config_space=[{"n": 1}, {"n": 2}],
        key_fn=lambda out, x, total=None: total is None,
        reset_to_zero=["out", "total"],
    )
    def add(out, x, n, total=None):
        assert out.abs().sum() == 0 and (total is None or total.sum() == 0)
        out += x * n
        if total is not None:
            total += 1
        return n

    out, x = torch.full((2,), 7.0), torch.ones(2)
    n = add(out, x)
    assert out.tolist() == [float(n)] * 2
    total = torch.full((1,), 5.0)
    n = add(out, x + 1, total=total)  # a new key, and one named argument given by keyword
    assert out.tolist() == [2.0 * n] * 2 and total.tolist() == [1.0]


def test_in_place_arguments_may_be_numpy_arrays():
    numpy = pytest.importorskip("numpy")

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda acc: acc.shape, restore_value=["acc"])
    def add_one(acc, n):
        acc[0] += 1

    acc = numpy.zeros(1)
    add_one(acc)
    assert acc[0] == 1.0


def test_resetting_and_restoring_stay_outside_the_timed_region(clock, isolated):
    class Buffer:
        """A tensor stand-in whose resets and copies cost clock time."""

        def __init__(self):
            self.value = 0.0

        def zero_(self):
            clock.advance(100.0)
            self.value = 0.0

        def clone(self):
            clock.advance(100.0)
            return self.value

        def copy_(self, saved):
            clock.advance(100.0)
            self.value = saved

    @autotune(
        config_space=[{"cost": 3.0}, {"cost": 1.0}],
        key_fn=lambda buffer: 0,
        reset_to_zero=["buffer"],
        restore_value=["buffer"],
    )
    def work(buffer, cost):
        clock.advance(cost)
        buffer.value += 1

    work(Buffer())

    (record,) = stored_records(isolated, "work")
    assert [row["time_ms"] for row in record["candidates"]] == [3.0, 1.0]


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        (
            {"reset_to_zero": ["nope"]},
            ValueError,
            r"reset_to_zero names 'nope', which is not a parameter of add_one\(acc, n\)",
        ),
        ({"restore_value": ["acc", "nope"]}, ValueError, "restore_value names 'nope'"),
        ({"restore_value": ["n"]}, ValueError, "restore_value names 'n', a config field"),
        ({"reset_to_zero": "acc"}, TypeError, "reset_to_zero must be a list of argument names, got 'acc'"),
        ({"restore_value": [0]}, TypeError, "restore_value must be a list of argument names"),
    ],
)
def test_names_that_are_not_arguments_fail_at_decoration(options, error, match):
    with pytest.raises(error, match=match):
        accumulating(**options)


def test_a_named_argument_that_is_no_tensor_fails_the_first_call(isolated):
    add_one, seen = accumulating(reset_to_zero=["acc"])

    with pytest.raises(TypeError, match="reset_to_zero names 'acc', whose value is a list"):
        add_one([0.0])
    assert seen == []
    assert stored_records(isolated, "add_one") == []


# -- in-process dispatch -----------------------------------------------------------


def test_same_key_dispatches_straight_to_the_pick(monkeypatch, clock):
    keys = []

    def key_fn(x, *, tag):
        keys.append(x)
        return (x, tag)

    calls = []

    @autotune(config_space=[{"cost": 4.0}, {"cost": 1.0}], key_fn=key_fn)
    def work(x, cost, *, tag):
        clock.advance(cost)
        calls.append(cost)
        return cost

    work(1, tag="a")
    tuned = len(calls)

    def no_engine():
        raise AssertionError("a cache hit must not reach the engine")

    monkeypatch.setattr(function_tuner_module, "current_session", no_engine)
    keys.clear()
    assert [work(1, tag="a") for _ in range(3)] == [1.0, 1.0, 1.0]
    assert calls[tuned:] == [1.0, 1.0, 1.0]
    assert keys == [1, 1, 1], "one key_fn call per hit"

    with pytest.raises(AssertionError, match="must not reach the engine"):
        work(2, tag="a")


def test_distinct_keys_tune_independently(clock, isolated):
    @autotune(config_space=[{"cost": 1.0}, {"cost": 2.0}], key_fn=lambda x: x)
    def work(x, cost):
        clock.advance(cost if x == "a" else 3.0 - cost)
        return cost

    assert work("a") == 1.0
    assert work("b") == 2.0
    assert work("a") == 1.0
    records = stored_records(isolated, "work")
    assert len(records) == 2
    assert sorted(r["best"]["index"] for r in records) == [0, 1]


def test_autotune_pg_reaches_the_reducer(monkeypatch):
    groups = []

    class RecordingReducer:
        name = "recording"
        rank = 0
        world_size = 1

        @classmethod
        def is_available(cls, group=None):
            return True

        def __init__(self, group=None):
            groups.append(group)

    import types

    from kerneltune.core import hookimpl

    plugin = types.ModuleType("tests_recording_reducer")
    plugin.kerneltune_register_reducers = hookimpl(lambda register: register(RecordingReducer))
    install_session(monkeypatch, extra=(plugin,), reducer="recording")
    group = object()
    work, _ = counting([{"n": 1}, {"n": 2}])

    assert work(3, autotune_pg=group) in (3, 6)
    assert groups == [group]


# -- verbose output and log files ---------------------------------------------------


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_verbose_prints_info_lines_and_tuning_writes_a_log_file(capsys, isolated):
    @autotune(config_space=[{"n": 1}, {"n": 0}], key_fn=lambda x: x)
    def work(x, n):
        return x // n

    work(6, autotune_verbose=True)

    out = capsys.readouterr().out.splitlines()
    assert all(line.startswith("[kerneltune] work: ") for line in out), out
    assert "tuning key 6: 2 candidates" in out[0]
    assert "[0] n=<1>: trimmed mean " in out[1]
    assert "[1] n=<0>: ZeroDivisionError" in out[2]
    assert "picked [0] n=<1>" in out[3]
    assert len(out) == 4

    log = (isolated / "work" / "tune-rank0.log").read_text()
    assert "tuning key 6" in log
    assert "[0] n=<1>: trimmed mean" in log
    assert "ZeroDivisionError" in log
    assert log.count("    sample ") == REPEAT
    assert "picked [0]" in log

    work(6, autotune_verbose=True)
    assert capsys.readouterr().out == "", "a hit prints nothing"


@pytest.mark.parametrize("how", ["variable", "config file"])
def test_the_verbose_setting_turns_the_lines_on_for_every_call(monkeypatch, tmp_path, capsys, how):
    if how == "variable":
        monkeypatch.setenv("KERNELTUNE_VERBOSE", "1")
    else:
        (tmp_path / "kerneltune.toml").write_text("verbose = true\n")
    work, _ = counting([{"n": 1}, {"n": 2}])

    work(6)

    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and "tuning key 6: 2 candidates" in out[0] and "picked [" in out[3]
    fresh, _ = counting([{"n": 1}, {"n": 2}])
    fresh(6)
    (served,) = capsys.readouterr().out.splitlines()
    assert "using the stored pick" in served


def test_verbose_lines_are_info_records_where_logging_shows_them(caplog, capsys):
    work, _ = counting([{"n": 1}, {"n": 2}])
    caplog.set_level(logging.INFO, logger="kerneltune")

    work(6, autotune_verbose=True)

    assert capsys.readouterr().out == "", "logged, so not printed as well"
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "kerneltune"]
    assert len(lines) == 4 and {level for level, _ in lines} == {logging.INFO}
    assert lines[0][1].startswith("work: tuning key 6: 2 candidates")


def test_lines_that_are_not_verbose_are_debug_records(caplog, capsys):
    work, _ = counting([{"n": 1}, {"n": 2}])
    caplog.set_level(logging.DEBUG, logger="kerneltune")

    work(6)

    assert capsys.readouterr().out == ""
    levels = {r.levelno for r in caplog.records if r.name == "kerneltune"}
    assert levels == {logging.DEBUG}


def test_print_autotuning_prints_tritons_lines_after_a_tuning_only(monkeypatch, clock, capsys):
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")

    @autotune(config_space=[{"cost": 3.0}, {"cost": 1.0}], key_fn=lambda x: (x, "f32"))
    def scale(x, cost):
        clock.advance(cost)

    scale(4)
    out = capsys.readouterr().out
    # Stock Triton's message; the pick's time is kerneltune's detail, in the verbose lines.
    assert out.startswith("Triton autotuning for function scale,\nwith key as (4, 'f32'),\nfinished after ")
    assert out.endswith("s,\nbest config selected: cost=<1.0>;\n")
    scale(4)
    autotune(config_space=[{"cost": 3.0}, {"cost": 1.0}], key_fn=lambda x: (x, "f32"))(scale.fn)(4)
    assert capsys.readouterr().out == "", "a pick in process or from the cache prints nothing"


def test_quiet_by_default_but_still_logs_to_file(capsys, isolated):
    work, _ = counting([{"n": 1}, {"n": 2}])

    work(6)

    assert capsys.readouterr().out == ""
    assert "picked" in (isolated / "work" / "tune-rank0.log").read_text()


# -- threads ------------------------------------------------------------------------


def test_two_threads_with_one_new_key_tune_once(isolated):
    calls = []
    start = threading.Barrier(2)

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def work(x, n):
        calls.append(n)
        threading.Event().wait(0.0005)
        return x * n

    results = []

    def call():
        start.wait()
        results.append(work(5))

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(results) == 2 and results[0] == results[1]
    assert len(calls) == 2 * (WARMUP + REPEAT) + 2
    assert len(stored_records(isolated, "work")) == 1


def test_a_hit_is_not_held_up_by_a_tuning_in_progress():
    inside = threading.Event()
    release = threading.Event()

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def work(x, n):
        if x == "slow":
            inside.set()
            release.wait(timeout=20)
        return n

    work("ready")
    tuning = threading.Thread(target=work, args=("slow",))
    tuning.start()
    try:
        assert inside.wait(timeout=20)
        hit = threading.Thread(target=work, args=("ready",))
        hit.start()
        hit.join(timeout=5)
        assert not hit.is_alive(), "a hit waited for another key's tuning"
    finally:
        release.set()
        tuning.join(timeout=20)


# -- environment variables -----------------------------------------------------------


def _shared_body(x, n):
    _shared_body.calls.append(n)
    return x * n


def _fresh_tuner():
    """A new AutoTuner over the same function: what a new process would build."""
    _shared_body.calls = []
    return autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)(_shared_body)


def test_a_new_tuner_reuses_the_disk_cache():
    _fresh_tuner()(3)
    assert len(_shared_body.calls) == 2 * (WARMUP + REPEAT) + 1

    second = _fresh_tuner()
    second(3)
    second(3)
    assert len(_shared_body.calls) == 2


def test_always_tune_retunes_once_per_key_per_process(monkeypatch, isolated):
    _fresh_tuner()(3)
    first = only_record_file(isolated, "_shared_body").read_text()

    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_ALWAYS_TUNE", "1")
    tuner = _fresh_tuner()
    tuner(3)
    assert len(_shared_body.calls) == 2 * (WARMUP + REPEAT) + 1, "stored result must be ignored"
    tuner(3)
    tuner(3)
    assert len(_shared_body.calls) == 2 * (WARMUP + REPEAT) + 3, "retune once, not on every call"
    assert only_record_file(isolated, "_shared_body").read_text() != first, "the new tuning is persisted"


# -- the tune setting: production switches ---------------------------------------------


def test_tune_never_runs_the_first_config_unmeasured_and_stores_nothing(monkeypatch, isolated, capsys):
    monkeypatch.setenv("KERNELTUNE_TUNE", "never")
    tuner = _fresh_tuner()

    assert tuner(3, autotune_verbose=True) == 3
    assert tuner(3) == 3
    assert _shared_body.calls == [1, 1], "config_space[0], once per call, nothing measured"
    assert stored_records(isolated, "_shared_body") == []
    (line,) = capsys.readouterr().out.splitlines()
    assert "key 3: no stored pick, and tune = 'never': running [0] n=<1> unmeasured" in line


def test_tune_never_runs_the_first_config_prune_fn_keeps(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_TUNE", "never")
    calls: list[int] = []

    @autotune(
        config_space=[{"n": 1}, {"n": 2}, {"n": 3}], key_fn=lambda x: x, prune_fn=lambda c, x: c["n"] > 1
    )
    def work(x, n):
        calls.append(n)
        return x * n

    assert work(3) == 6 and calls == [2]


@pytest.mark.parametrize("mode", ["never", "fail"])
def test_a_stored_pick_is_served_under_never_and_fail(monkeypatch, mode):
    _fresh_tuner()(3)
    (tuned,) = set(_shared_body.calls[-1:])

    monkeypatch.setenv("KERNELTUNE_TUNE", mode)
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_ALWAYS_TUNE", "1")  # nothing is measured, so it cannot apply
    tuner = _fresh_tuner()
    tuner(3)
    tuner(3)
    assert _shared_body.calls == [tuned, tuned]


def test_tune_fail_raises_on_a_miss_naming_the_function_the_key_and_the_variable(monkeypatch, isolated):
    monkeypatch.setenv("KERNELTUNE_TUNE", "fail")
    tuner = _fresh_tuner()

    with pytest.raises(NoStoredPickError) as info:
        tuner(("m", 128))

    message = str(info.value)
    assert message.startswith("_shared_body: no stored pick for key ('m', 128), and tune = 'fail'")
    assert "environment variable KERNELTUNE_TUNE" in message
    assert isinstance(info.value, RuntimeError)
    assert _shared_body.calls == []
    assert stored_records(isolated, "_shared_body") == []


def test_tune_from_a_config_file(tmp_path):
    (tmp_path / "kerneltune.toml").write_text('tune = "fail"\n')
    with pytest.raises(NoStoredPickError, match=r"kerneltune\.toml \(key 'tune'\)"):
        _fresh_tuner()(3)


def test_a_bad_tune_value_is_a_config_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_TUNE", "sometimes")
    expected = (
        "environment variable KERNELTUNE_TUNE: expected 'auto', 'never', 'fail', 'nearest' or 'pending', "
        "got 'sometimes'"
    )
    with pytest.raises(ConfigError, match=expected):
        _fresh_tuner()(3)
