"""The engine driven adaptively: rounds of requests, agreed times between rounds, a restricted pick."""

from __future__ import annotations

import math

import attrs
import pytest
from kerneltune.core import CandidateFailedWarning, NoValidConfigError, Session, load_settings
from kerneltune.core.driving import CandidateDropped, Space, Tuner
from rank_doubles import ThreadGroup, run_ranks
from test_multirank import make_session, space
from tuning_doubles import FakeClock, clock_plugin, stored_records

COSTS = {"a": 3.0, "b": 1.0, "c": 2.0, "d": 0.5}


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def session(clock):
    settings = attrs.evolve(load_settings(), timer="scripted", warmup=1, repeat=2)
    return Session.create(settings, extra=(clock_plugin(clock),))


def make_tuner():
    return Tuner(Space.build("adaptive", [{"name": n} for n in COSTS], "source"))


def runner(clock, candidate, calls):
    def run():
        calls.append(candidate.config["name"])
        clock.advance(COSTS[candidate.config["name"]])

    return run


def drain(tuning, clock, calls):
    while (candidate := tuning.next_candidate()) is not None:
        tuning.measure(candidate, runner(clock, candidate, calls))


def test_adaptive_tuning_measures_only_what_is_requested(session, clock, isolated):
    tuner = make_tuner()
    a, b, c, _ = tuner.space.candidates
    calls = []
    with tuner.begin(session, "key", adaptive=True) as tuning:
        assert tuning.next_candidate() is None
        tuning.request([a, b])
        drain(tuning, clock, calls)
        assert tuning.times([a, b, c]) == [3.0, 1.0, math.inf]
        tuning.request([c])
        drain(tuning, clock, calls)
        best = tuning.finish()
    assert best is b
    assert calls == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    (record,) = stored_records(isolated, "adaptive")
    assert [row["error"] for row in record["candidates"]] == [None, None, None, "not measured"]
    assert tuner.picks["key"] is b


def test_a_request_again_replaces_the_measurement_and_counts_can_be_raised(session, clock):
    tuner = make_tuner()
    a, b, *_ = tuner.space.candidates
    calls = []
    with tuner.begin(session, "key", adaptive=True) as tuning:
        tuning.request([a, b])
        drain(tuning, clock, calls)
        tuning.request([a], warmup=0, repeat=5)
        drain(tuning, clock, calls)
        assert tuning.times([a]) == [3.0]
        tuning.finish()
    assert calls.count("a") == 3 + 5


def test_finish_among_selects_only_from_the_given_candidates(session, clock):
    tuner = make_tuner()
    a, b, c, _ = tuner.space.candidates
    with tuner.begin(session, "key", adaptive=True) as tuning:
        tuning.request([a, b, c])
        drain(tuning, clock, [])
        assert tuning.finish(among=[a, c]) is c


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_no_valid_candidate_among_reports_only_those(session, clock):
    tuner = make_tuner()
    a, b, *_ = tuner.space.candidates
    with tuner.begin(session, "key", adaptive=True) as tuning:
        tuning.request([a, b])
        drain(tuning, clock, [])
        tuning.fail(a, RuntimeError("wrong answer"))
        with pytest.raises(NoValidConfigError) as caught:
            tuning.finish(among=[a])
    message = str(caught.value)
    assert "[0] " in message and "wrong answer" in message
    assert "[1] " not in message


def test_pruned_candidates_cannot_be_requested(session):
    tuner = make_tuner()
    a, *_ = tuner.space.candidates
    tuning = tuner.begin(session, "key", adaptive=True, keep=lambda c: c is not a)
    with tuning, pytest.raises(ValueError, match="pruned"):
        tuning.request([a])


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_extended_records_add_samples_and_a_failure_stays(session, clock):
    tuner = make_tuner()
    a, b, c, d = tuner.space.candidates
    with tuner.begin(session, "extend", adaptive=True) as tuning:
        tuning.request([a, b])
        tuning.record(a, [1.0])
        tuning.fail(b, RuntimeError("out of resources"))
        tuning.record(a, [3.0], extend=True)
        tuning.record(b, [0.1], extend=True)
        tuning.record(c, [2.5], extend=True)
        while tuning.next_candidate() is not None:
            pass
        assert tuning.times([a, b, c, d]) == [2.0, math.inf, 2.5, math.inf]


# -- the round API -----------------------------------------------------------


def test_a_round_compiles_what_may_run_measures_the_batch_and_returns_the_agreed_times(session, clock):
    tuner = make_tuner()
    a, b, c, d = tuner.space.candidates
    calls, compiled = [], []
    with tuner.begin(session, "key", adaptive=True) as tuning:
        times = tuning.round(
            [a, b, c],
            lambda candidate: runner(clock, candidate, calls),
            failed={b.index: CandidateDropped("too big")},
            compile_one=lambda candidate: compiled.append(candidate.config["name"]),
        )
        assert times == [3.0, math.inf, 2.0]
        assert tuning.error(b) == "CandidateDropped: too big"
        assert tuning.round([d, a], lambda candidate: runner(clock, candidate, calls), repeat=1) == [0.5, 3.0]
        assert tuning.finish() is d
    assert sorted(compiled) == ["a", "c"], "what is known not to run is not compiled"
    assert calls == ["a"] * 3 + ["c"] * 3 + ["d"] * 2 + ["a"] * 2


def test_on_one_rank_the_round_api_sends_nothing_and_reads_the_tuning(session):
    tuner = make_tuner()
    with tuner.begin(session, "key", adaptive=True) as tuning:
        assert tuning.world_size == 1
        assert tuning.max_over_ranks([1, 2.5]) == [1.0, 2.5]
        assert tuning.gather({"mine": 1}) == [{"mine": 1}]
        assert tuning.candidates == tuner.space.candidates
        assert tuning.settings is session.settings and tuning.settings.get("repeat") == 2
        strategy = tuning.strategy("exhaustive", "a test")
        assert strategy.name == "exhaustive"
        assert tuning.origin(strategy) == "plugin kerneltune.plugins.search.exhaustive (built in)"


def test_with_several_ranks_agree_is_the_maximum_and_gather_every_ranks_value(tmp_path):
    group = ThreadGroup(2)

    def rank(r: int) -> tuple[int, list[float], list[str]]:
        session = make_session(tmp_path / "cache")
        with Tuner(space()).begin(session, 7, group=group.member(r), adaptive=True) as tuning:
            return tuning.world_size, tuning.max_over_ranks([float(r), 5.0 - r]), tuning.gather(f"rank {r}")

    assert run_ranks(2, rank) == [(2, [1.0, 5.0], ["rank 0", "rank 1"])] * 2
    for counts in group.counts:
        assert counts == {"gather": 2, "max": 1}, "AGREE's gather, then one collective each"
