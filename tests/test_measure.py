"""MEASURE: one path for every tuner: flush and hold, the objective, checked samples, near ties."""

from __future__ import annotations

import math
import statistics
import types

import pytest
from kerneltune.core import CandidateFailedWarning, PickLoaded, hookimpl
from kerneltune.core.driving import Candidate
from kerneltune.core.machine import timing
from kerneltune.core.machine.ties import near_ties
from kerneltune.core.machine.timing import standard_error
from kerneltune.core.values.records import Measurement, trimmed
from tuning_doubles import FakeClock, clock_plugin, install_session, steps_plugin, stored_records

from triton_dist.tune import autotune

# Their tuned functions return which config ran (its n, its cost), on purpose: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

# -- the hold ---------------------------------------------------------------------------------


def test_the_hold_is_twice_the_median_recent_host_time_capped():
    assert timing.hold_microseconds([]) == timing.HOLD_DEFAULT_US
    assert timing.hold_microseconds([30.0, 10.0, 20.0]) == 40.0
    assert timing.hold_microseconds([80.0, 90.0, 5e5]) == 180.0, "one compilation does not count"
    assert timing.hold_microseconds([5e5] * 3) == timing.HOLD_CAP_US


# -- the function-level path: hold, flush, start --------------------------------------------------


def two_configs():
    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def work(x, n):
        return x * n

    return work


@pytest.mark.parametrize("warmup", [0, 3])
@pytest.mark.expected_warning(RuntimeWarning, match="runs on the host")
def test_function_level_timed_runs_are_flushed_then_held_then_started(monkeypatch, isolated, warmup):
    steps = []
    install_session(monkeypatch, extra=(steps_plugin(steps),), timer="steps", warmup=warmup, repeat=4)
    assert two_configs()(5) == 5
    # Two candidates of four timed runs, and after the first the empty runs that learn what
    # a run with no device work reads (timing.IdleDevice), each set up the same way.
    assert [name for name, _ in steps] == ["hold", "flush", "start"] * (2 * 4 + timing.IDLE_PROBES)
    holds = [us for name, us in steps if name == "hold"]
    assert all(0.0 < us <= timing.HOLD_CAP_US for us in holds)
    # Sized from host times measured on the spot: the warm-ups', or the default
    # before any run was timed on the host.
    assert (holds[0] == timing.HOLD_DEFAULT_US) == (warmup == 0)
    assert holds[1] != timing.HOLD_DEFAULT_US, "the first timed run's host time sizes the next hold"
    (record,) = stored_records(isolated, "work")
    assert record["measured_with"] == {
        "objective": "device",
        "statistic": "20% trimmed mean",
        "timer": "steps",
        "warmup": warmup,
        "repeat": 4,
        "shards": 1,
        "timed": "idle device",  # the work is on the host: the device's marks read what empty runs do
    }


def test_an_idle_device_learns_what_an_empty_run_reads_once_and_is_idle_only_if_every_candidate_reads_it():
    idle = timing.IdleDevice()
    probes = []

    def probe():
        probes.append(1)
        return [0.0013, 0.00125, 0.0014]

    assert not idle.idle, "nothing observed yet"
    idle.observe(0.00125, probe)
    idle.observe(0.0015, probe)
    assert probes == [1] and idle.floor_ms == 0.00125
    assert idle.idle
    idle.observe(0.0031, probe)  # one one-element kernel on an H200
    assert not idle.idle

    def failing():
        raise RuntimeError("this timer cannot time nothing")

    unknown = timing.IdleDevice()
    unknown.observe(0.0, failing)
    unknown.observe(0.0, failing)
    assert not unknown.idle, "without a floor, nothing is called idle"


class HoldingTimer:
    """A timer that flushes and holds, noting each call in ``events``."""

    name = "noted"

    def __init__(self, events: list[str]) -> None:
        self.events, self.count = events, 0

    def flush(self) -> None:
        pass

    def hold(self, microseconds: float) -> bool:
        return True

    def sample(self, fn, *, before=None) -> None:
        if before is not None:
            before()
        fn()
        self.events.append("sample")
        self.count += 1

    def collect(self) -> list[float]:
        self.events.append("collect")
        count, self.count = self.count, 0
        return [0.01] * count


def test_loads_may_go_on_once_the_timed_runs_are_launched_but_not_beside_the_empty_runs():
    events: list[str] = []
    idle = timing.IdleDevice()

    def take(runs: timing.CandidateRuns) -> None:
        for _ in range(runs.warmup + runs.repeat):
            runs.run(lambda wrap: wrap(lambda: None))
        runs.samples()

    for _ in range(2):
        events.append("candidate")
        runs = timing.CandidateRuns(
            HoldingTimer(events), warmup=1, repeat=2, idle=idle, after_timing=lambda: events.append("after")
        )
        take(runs)
    probes = ["sample"] * timing.IDLE_PROBES
    first = ["candidate", "sample", "sample", "collect", *probes, "collect", "after"]
    # The first candidate's empty runs learn the floor: loads wait until they are over too.
    assert events == [*first, "candidate", "sample", "sample", "after", "collect"]


def test_host_work_timed_by_device_marks_warns_that_the_pick_is_noise(monkeypatch, isolated):
    # The steps timer reads the same for every run, empty ones included: the device did nothing.
    install_session(monkeypatch, extra=(steps_plugin([]),), timer="steps", warmup=0, repeat=2)
    with pytest.warns(RuntimeWarning, match='work: every candidate.*runs on the host.*objective = "wall"'):
        two_configs()(5)


def test_re_timing_rounds_do_not_hide_an_idle_first_pass(monkeypatch, isolated):
    """Interleaved rounds size each hold from other candidates' host times, so on a GPU heavy host
    work can outlast the hold and read host time; only the first pass says whether the device worked."""
    first_passes = []

    class FirstPasses:
        @hookimpl
        def kerneltune_candidate_measured(self, event):
            if event.stage is None:
                first_passes.append(event.candidate.index)

    # An empty run's 1 us until every candidate's first pass is in, then 50 us.
    plugin = steps_plugin([], sample_ms=lambda: 0.05 if len(first_passes) >= 2 else 0.001)
    install_session(
        monkeypatch, extra=(plugin, FirstPasses()), timer="steps", warmup=1, repeat=4, tie_rounds=2
    )
    with pytest.warns(RuntimeWarning, match="work: every candidate.*runs on the host"):
        two_configs()(5)
    assert first_passes == [0, 1]


def test_the_wall_objective_never_asks_whether_the_device_did_anything(monkeypatch, isolated, recwarn):
    install_session(monkeypatch, extra=(steps_plugin([]),), timer="steps", repeat=2, objective="wall")
    two_configs()(5)
    assert not [w for w in recwarn if "runs on the host" in str(w.message)]


def test_the_wall_objective_times_calls_back_to_back_with_nothing_between(monkeypatch, isolated):
    steps = []
    install_session(monkeypatch, extra=(steps_plugin(steps),), timer="steps", repeat=3, objective="wall")
    two_configs()(5)
    assert steps == [("start", 0.0)] * 2 * 3
    (record,) = stored_records(isolated, "work")
    assert record["measured_with"]["objective"] == "wall"


def test_the_objective_is_read_from_the_environment(monkeypatch, isolated):
    steps = []
    monkeypatch.setenv("KERNELTUNE_OBJECTIVE", "wall")
    install_session(monkeypatch, extra=(steps_plugin(steps),), timer="steps", repeat=1)
    two_configs()(5)
    assert {name for name, _ in steps} == {"start"}


# -- samples a timer got wrong --------------------------------------------------------------------


def faulty_timer_plugin(bad: object) -> types.ModuleType:
    """A timer named ``faulty`` whose samples for a call with ``n == 1`` are ``bad``."""

    class FaultyTimer:
        name = "faulty"
        auto_priority = -100
        current = 0

        @classmethod
        def is_available(cls):
            return True

        def __init__(self):
            self.count = 0

        def sample(self, fn, *, before=None):
            fn()
            self.count += 1

        def collect(self):
            count, self.count = self.count, 0
            if type(self).current == 1:
                return bad(count) if callable(bad) else bad
            return [float(type(self).current)] * count

    plugin = types.ModuleType("tests_faulty_timer")

    @hookimpl
    def kerneltune_register_timers(register):
        register(FaultyTimer)

    plugin.kerneltune_register_timers = kerneltune_register_timers
    plugin.timer = FaultyTimer
    return plugin


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (lambda n: [math.nan] * n, "returned a sample of nan ms"),
        (lambda n: [1.0] * (n - 1) + [math.inf], "returned a sample of inf ms"),
        (lambda n: [-0.5] * n, "returned a sample of -0.5 ms"),
        (lambda n: ["1.0"] * n, "returned a sample of '1.0' ms"),
        (lambda n: [True] * n, "returned a sample of True ms"),
        (lambda n: [1.0] * (n + 1), "returned 4 samples for 3 timed runs"),
        (None, "returned NoneType samples for 3 timed runs"),
    ],
    ids=["nan", "inf", "negative", "text", "bool", "count", "none"],
)
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_timer_sample_that_is_not_a_time_fails_that_candidate_only(monkeypatch, isolated, bad, message):
    plugin = faulty_timer_plugin(bad)
    install_session(monkeypatch, extra=(plugin,), timer="faulty", warmup=0, repeat=3)

    @autotune(config_space=[{"n": 1}, {"n": 2}, {"n": 3}], key_fn=lambda x: x)
    def work(x, n):
        plugin.timer.current = n
        return n

    assert work(0) == 2, "the tuning goes on without the candidate the timer failed"
    (record,) = stored_records(isolated, "work")
    first = record["candidates"][0]
    assert first["time_ms"] is None
    assert first["error"] == f"PluginError: timer 'faulty' {message}"


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_single_candidate_with_bad_samples_is_reported_with_the_timers_fault(monkeypatch, isolated):
    plugin = faulty_timer_plugin(lambda n: [math.nan] * n)
    install_session(monkeypatch, extra=(plugin,), timer="faulty", warmup=0, repeat=2)

    @autotune(config_space=[{"n": 1}], key_fn=lambda x: x)
    def work(x, n):
        plugin.timer.current = n

    with pytest.raises(Exception, match="timer 'faulty' returned a sample of nan ms") as raised:
        work(0)
    assert "another rank" not in str(raised.value)


# -- near ties --------------------------------------------------------------------------------------


def test_near_ties_are_within_the_noise_or_two_percent_of_the_best_and_at_most_four():
    inf = math.inf
    assert near_ties([1.0, 1.015, 1.1, inf], [0.0] * 4) == [0, 1], "2% of the best, no noise"
    assert near_ties([1.0, 1.08, 1.3], [0.03, 0.03, 0.03]) == [0, 1], "2 x sqrt(2) x 0.03 = 0.085"
    assert near_ties([2.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0.0] * 6) == [1, 2, 3, 4]
    assert near_ties([inf, inf], [inf, inf]) == []
    assert near_ties([1.0, 5.0], [inf, 0.0]) == [0, 1], "one sample says nothing about the noise"


class Drift:
    """Candidate costs that change after the first pass, as clocks and caches do between candidates."""

    def __init__(self, clock: FakeClock, first: dict[str, float], later: dict[str, float]) -> None:
        self.clock = clock
        self.first = first
        self.later = later
        self.calls: list[str] = []

    def run(self, name: str) -> None:
        first_pass = len(self.calls) < len(self.first) * RUNS
        self.calls.append(name)
        self.clock.advance((self.first if first_pass else self.later)[name])


WARMUP, REPEAT = 1, 4
RUNS = WARMUP + REPEAT


def drifting(monkeypatch, first, later, **settings):
    clock = FakeClock()
    drift = Drift(clock, first, later)
    settings = {"timer": "scripted", "warmup": WARMUP, "repeat": REPEAT, "tie_rounds": 3} | settings
    install_session(monkeypatch, extra=(clock_plugin(clock),), **settings)

    @autotune(config_space=[{"name": name} for name in first], key_fn=lambda x: x)
    def work(x, name):
        drift.run(name)
        return name

    return work, drift


def test_near_ties_are_re_timed_in_interleaved_rounds_and_the_pick_is_made_among_them(monkeypatch, isolated):
    # b read 1% slower than a when measured apart; measured side by side it is faster.
    first = {"a": 1.0, "b": 1.01, "c": 2.0}
    work, drift = drifting(monkeypatch, first, {"a": 1.0, "b": 0.9, "c": 0.1})
    assert work(0) == "b"
    retimed, final = drift.calls[3 * RUNS : -1], drift.calls[-1]
    assert final == "b", "then one more call, with the pick"
    # Three rounds of one warm-up and half of repeat, each round starting one candidate on;
    # c, clearly slower in the first pass, is never run again (its later cost would win).
    per_round = 1 + REPEAT // 2
    assert (
        retimed
        == ["a"] * per_round
        + ["b"] * per_round
        + ["b"] * per_round
        + ["a"] * per_round
        + ["a"] * per_round
        + ["b"] * per_round
    )
    (record,) = stored_records(isolated, "work")
    times = [row["time_ms"] for row in record["candidates"]]
    assert times == [pytest.approx(1.0), pytest.approx(0.9), pytest.approx(2.0)]
    assert len(record["candidates"][1]["samples_ms"]) == 3 * (REPEAT // 2), "re-timed samples replace"
    assert record["best"]["index"] == 1
    assert record["finalists"] == [0, 1]
    # The record holds up when read back: the pick is the fastest of the finalists.
    again, drift = drifting(monkeypatch, first, first)
    assert again(0) == "b"
    assert drift.calls == ["b"]


def test_a_clear_winner_is_not_re_timed(monkeypatch, isolated):
    work, drift = drifting(monkeypatch, {"a": 1.0, "b": 1.5, "c": 2.0}, {"a": 1.0, "b": 1.5, "c": 2.0})
    assert work(0) == "a"
    assert len(drift.calls) == 3 * RUNS + 1


def test_tie_rounds_zero_turns_re_timing_off(monkeypatch, isolated):
    work, drift = drifting(monkeypatch, {"a": 1.0, "b": 1.01}, {"a": 1.0, "b": 0.9}, tie_rounds=0)
    assert work(0) == "a"
    assert len(drift.calls) == 2 * RUNS + 1


# -- a stored pick, served ------------------------------------------------------------------------


def test_a_pick_served_from_the_cache_is_reported_once_per_key_and_printed_when_verbose(
    monkeypatch, isolated, capsys
):
    loaded: list[PickLoaded] = []

    class Watch:
        @hookimpl
        def kerneltune_pick_loaded(self, event):
            loaded.append(event)

    clock = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(clock), Watch()), timer="scripted", repeat=1, warmup=0)

    def build():
        @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
        def work(x, n):
            clock.advance(n)
            return n

        return work

    build()(1)
    assert loaded == []
    again = build()
    assert again(1, autotune_verbose=True) == 1
    again(1, autotune_verbose=True)
    assert [(e.function, e.key, e.best.index, e.source) for e in loaded] == [("work", 1, 0, "cache")]
    printed = [line for line in capsys.readouterr().out.splitlines() if "stored pick" in line]
    assert printed == [
        "[kerneltune] work: key 1: using the stored pick [0] n=<1> (confident) from the json cache: "
        "no measuring"
    ]


def test_the_mean_leaves_out_a_fifth_of_the_samples_at_each_end():
    steady = [14.0, 14.1, 13.9, 14.0]
    assert Measurement(0, samples=(*steady, 87.3)).mean == pytest.approx(14.0 + 0.1 / 3)
    ten = (39.2, 39.1, 41.7, 39.3, 39.2, 41.6, 39.1, 39.2, 39.3, 39.2)
    assert Measurement(0, samples=ten).mean == pytest.approx(39.2333, abs=1e-3), "two high ones left out"
    assert trimmed([3.0, 1.0, 2.0, 50.0]) == [1.0, 2.0, 3.0, 50.0], "fewer than five: all kept"
    assert standard_error([1.0, 1.0, 1.0, 1.0, 90.0]) == 0.0


def test_the_standard_error_is_the_trimmed_samples_stdev_over_the_root_of_their_count():
    samples = [0.1375, 0.1391, 0.1402, 0.1388, 0.1379, 0.1413, 0.1386, 0.1397, 0.1381, 0.2]
    kept = trimmed(samples)
    assert len(kept) == 6
    expected = statistics.stdev(kept) / math.sqrt(len(kept))
    assert standard_error(samples) == pytest.approx(expected, rel=1e-12)
    assert standard_error([1e9 + 1, 1e9 + 2, 1e9 + 3]) == pytest.approx(1 / math.sqrt(3), rel=1e-9)
    assert standard_error([2.0]) == math.inf
    assert standard_error([2.0, math.inf]) == math.inf


@pytest.mark.expected_warning(RuntimeWarning, match="runs on the host")
def test_shard_alone_measures_everything(monkeypatch, isolated):
    monkeypatch.setenv("KERNELTUNE_SHARD", "1")
    steps = []
    install_session(monkeypatch, extra=(steps_plugin(steps),), timer="steps", warmup=0, repeat=1)
    two_configs()(5)
    starts = len([s for s in steps if s[0] == "start"])
    assert starts == 2 + timing.IDLE_PROBES, "one rank: nothing to split (and the empty runs, once)"
    (record,) = stored_records(isolated, "work")
    assert record["measured_with"]["shards"] == 1


@pytest.mark.expected_warning(RuntimeWarning, match="runs on the host")
def test_verbose_lines_of_re_timing_rounds_say_which_round(isolated, capsys, monkeypatch):
    # Near ties re-timed in interleaved rounds: each line's mean covers every sample so far,
    # so an unlabelled line read as a new first measurement.
    # A timer that reads the same for both: an exact tie, whatever the host's jitter.
    tied = steps_plugin([], sample_ms=0.02)
    install_session(monkeypatch, extra=(tied,), timer="steps", warmup=0, repeat=3, tie_rounds=2)

    @autotune(config_space=[{"n": 1}, {"n": 1}], key_fn=lambda: "k")
    def work(n):
        return sum(range(1000 * n))

    work(autotune_verbose=True)
    lines = [line for line in capsys.readouterr().out.splitlines() if "] n=<1>" in line]
    assert any("(near-tie re-timing, round 1 of 2): trimmed mean of its " in line for line in lines), lines
    assert any("(near-tie re-timing, round 2 of 2): trimmed mean of its " in line for line in lines), lines
    assert any(" samples so far " in line for line in lines), "a round's line says its mean is a running one"


def test_no_valid_config_never_ends_with_its_heading_alone():
    from kerneltune.core.machine.samples import Samples

    candidates = [Candidate(index=i, config={"n": i}, label=f"n={i}", fingerprint=str(i)) for i in range(2)]
    samples = Samples()
    measurement, _ = samples.failure(0, RuntimeError("restore_value: an expanded tensor"))
    samples.put(measurement)
    # A plan whose candidates were none of these (allowed empty): every failure met is listed instead.
    report = samples.report("work", 7, candidates, allowed=[])
    assert report.splitlines() == [
        "cannot find valid config for work with key 7; every candidate failed:",
        "  [0] n=0: RuntimeError: restore_value: an expanded tensor",
        "  [1] n=1: not measured",
    ]
