"""Picks that carry their confidence: the verdict, the warning, the record, the re-check.

Times come from a fake clock that each run advances by its candidate's cost
times the machine's load at that moment, so a busy machine is a script: a
burst of load that covers one candidate's first pass, load that flips
between runs, or none.
"""

from __future__ import annotations

import json
import math
import random
import warnings

import pytest
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import UncertainPickWarning
from kerneltune.core.driving import Tuner
from kerneltune.core.machine.confidence import (
    CONFIDENT,
    TOLERANCE,
    UNCERTAIN,
    Evidence,
    first_pass_lead,
    judge,
    paired_lead,
    round_means,
)
from kerneltune.core.machine.reuse import RECHECK_MAX, RECHECKS
from kerneltune.core.machine.ties import finalists
from kerneltune.core.values.records import Measurement, spread
from rank_doubles import ThreadGroup, run_ranks
from test_multirank import make_session, space
from tuning_doubles import FakeClock, clock_plugin, install_session, stored_records

from triton_dist.tune import autotune

# Their tuned functions return which config ran (its n, its cost), on purpose: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

# -- the statistics -----------------------------------------------------------------------------


def test_spread_is_the_range_of_the_trimmed_samples_over_their_median():
    assert spread([10.0] * 10) == 0.0
    assert spread([1.0]) == 0.0, "one sample shows no noise"
    # Ten samples: the two lowest and two highest are left out.
    assert spread([1.0, 9.0, 10.0, 10.0, 10.5, 11.0, 11.0, 11.5, 30.0, 50.0]) == pytest.approx(1.5 / 10.75)


def test_a_first_pass_lead_is_discounted_by_the_errors_and_the_noise():
    assert first_pass_lead(1.0, 1.2, (0.0, 0.0), 0.0) == pytest.approx(0.2)
    assert first_pass_lead(1.0, 1.2, (0.03, 0.04), 0.0) == pytest.approx(0.1), "2 x hypot(0.03, 0.04)"
    assert first_pass_lead(1.0, 1.2, (0.0, 0.0), 0.1) == pytest.approx(-0.1), "3 x the noise"
    assert first_pass_lead(1.0, 1.2, (0.0, 0.0), 0.05) == pytest.approx(0.2), "up to 5%, none"
    assert first_pass_lead(1.0, math.inf, (0.0, 0.0), 1.0) == math.inf, "a failed rival cannot win"


def test_a_paired_lead_is_the_rivals_worst_round():
    assert paired_lead([1.0, 2.0, 1.0], [1.1, 2.4, 1.05]) == pytest.approx(0.05)
    assert paired_lead([1.0, 1.0], [0.9, 1.3]) == pytest.approx(-0.1)
    assert paired_lead([1.0, math.inf], [1.1, 1.1]) is None, "one round both were timed in is no pair"
    rounds = Measurement(0, samples=(1.0, 1.0, 2.0, 2.0, 2.0), rounds=(2, 3))
    assert round_means(rounds, 3) == [1.0, 2.0, math.inf]
    assert round_means(Measurement(0, samples=(1.0, 2.0)), 2) == [math.inf, math.inf], "one pass: no rounds"


def evidence(times, errors=None, spreads=None, rounds=None):
    count = len(times)
    return Evidence(
        tuple(times),
        tuple(errors or [0.0] * count),
        tuple(spreads or [0.0] * count),
        tuple(tuple(r) for r in (rounds or [()] * count)),
    )


def test_judge_names_the_rivals_not_told_apart_and_keeps_ties_within_the_tolerance():
    clear = judge(evidence([1.0, 1.3, 1.01]), 0, [0, 1, 2], noise=0.0)
    assert clear.level == CONFIDENT and clear.rivals == (), "1% behind with no noise: either would do"
    quiet = judge(evidence([1.0, 1.3, 1.01]), 0, [0, 1, 2], noise=0.04)
    assert quiet.level == CONFIDENT, "a spread of 4% (a GPU's) adds nothing to the errors"
    noisy = judge(evidence([1.0, 1.3, 1.01]), 0, [0, 1, 2], noise=0.1)
    assert noisy.level == UNCERTAIN and noisy.rivals == (2,)
    assert noisy.margin == pytest.approx(0.01 - 0.3)
    # Re-timed in rounds, a rival is judged round by round, whatever the first pass's noise.
    rounds = evidence([1.0, 1.1], rounds=[(1.0, 1.5, 1.0), (1.1, 1.6, 1.12)])
    assert judge(rounds, 0, [0, 1], noise=0.5).level == CONFIDENT
    flipped = evidence([1.0, 1.1], rounds=[(1.0, 1.5, 1.0), (1.1, 1.4, 1.12)])
    assert judge(flipped, 0, [0, 1], noise=0.0).rivals == (1,)
    assert judge(evidence([1.0, 2.0]), 0, [0, 1], noise=0.0, left_out=[1]).rivals == (1,), "left out"
    # A rival the cap left out of the rounds bounds the margin by its first pass, though the
    # finalists' rounds show the pick ahead of every one of them.
    capped = evidence(
        [1.0, 1.5, 1.01], errors=[0.05, 0.0, 0.05], rounds=[(1.0, 1.0), (1.5, 1.5), (math.inf, math.inf)]
    )
    verdict = judge(capped, 0, [0, 1], noise=0.0, left_out=[2])
    assert verdict.rivals == (2,) and verdict.margin < -TOLERANCE
    assert verdict.margin == pytest.approx(first_pass_lead(1.0, 1.01, (0.05, 0.05), 0.0))


def test_a_noisy_first_pass_sends_every_rival_within_reach_to_the_rounds():
    means, errors = [1.0, 1.25, 1.8, 5.0], [0.0] * 4
    quiet = finalists(means, errors, [0.01] * 4)
    assert quiet.indices == () and quiet.left_out == ()
    # Within reach: a lead below 3 x 0.3 of the best's mean, less the 2% tolerance.
    busy = finalists(means, errors, [0.3] * 4)
    assert busy.indices == (0, 1, 2) and busy.noise == pytest.approx(0.3)
    crowded = finalists([1.0, 1.1, 1.2, 1.3, 1.4, 1.5], [0.0] * 6, [0.3] * 6)
    assert crowded.indices == (0, 1, 2, 3) and crowded.left_out == (4, 5)


# -- a tuning on a machine whose load the test scripts --------------------------------------------


class Machine:
    """Each run costs its candidate's time times the load of the moment (``load(run number)``)."""

    def __init__(self, clock: FakeClock, cost: dict[int, float], load=lambda run: 1.0) -> None:
        self.clock = clock
        self.cost = cost
        self.load = load
        self.runs: list[int] = []

    def run(self, n: int) -> int:
        self.clock.advance(self.cost[n] * self.load(len(self.runs)))
        self.runs.append(n)
        return n


COST = {1: 1.0, 2: 1.12, 3: 1.25}
WARMUP, REPEAT = 1, 10
PASS = len(COST) * (WARMUP + REPEAT)


#: What other processes add to each run, from 0 to 3 times its cost.
NOISE = [random.Random(run).uniform(0.0, 3.0) for run in range(1000)]


def busy_load(run: int) -> float:
    """Load that covers n=1's whole first pass, then comes and goes at random: nothing is told apart."""
    if run < WARMUP + REPEAT:
        return 3.0 + 0.01 * (run % 3)
    return 1.0 + NOISE[run]


def session_for(monkeypatch, clock, **settings):
    fields = {"timer": "scripted", "warmup": WARMUP, "repeat": REPEAT, "tie_rounds": 3, "recheck": True}
    return install_session(monkeypatch, extra=(clock_plugin(clock),), **(fields | settings))


def tuned(machine: Machine):
    # It returns which config ran, on purpose: outputs unchecked.
    @autotune(config_space=[{"n": n} for n in COST], key_fn=lambda x: x, check_outputs=False)
    def work(x, n):
        return machine.run(n)

    return work


def tune_on(monkeypatch, load, **settings):
    clock = FakeClock()
    machine = Machine(clock, COST, load)
    session_for(monkeypatch, clock, **settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pick = tuned(machine)(7)
    return pick, machine, [w for w in caught if issubclass(w.category, UncertainPickWarning)]


def test_a_quiet_machine_stores_a_confident_pick_without_a_warning(monkeypatch, isolated):
    pick, _, warned = tune_on(monkeypatch, lambda run: 1.0 + 0.001 * (run % 2))
    assert pick == 1 and warned == []
    (record,) = stored_records(isolated, "work")
    assert record["confidence"] == "confident" and record["rivals"] == []
    assert all(row["spread"] < 0.01 for row in record["candidates"])
    listed = json.loads(CliRunner().invoke(cli.main, ["cache", "list", "--json"]).stdout)
    assert [(row["confidence"], row["rivals"]) for row in listed] == [("confident", [])]


def test_a_busy_machine_stores_an_uncertain_pick_names_its_rivals_and_warns_once(monkeypatch, isolated):
    _, machine, warned = tune_on(monkeypatch, busy_load)
    # n=1, slow in its burst-covered first pass, was still within reach: every rival went to the
    # rounds, which on a machine this noisy take one run of each in turn after their warm-ups.
    assert set(machine.runs[PASS:-1]) == {1, 2, 3}
    assert sorted(machine.runs[PASS + 6 : PASS + 9]) == [1, 2, 3]
    (record,) = stored_records(isolated, "work")
    assert record["confidence"] == "uncertain" and record["rivals"]
    assert all(len(row["rounds"]) == 3 for row in record["candidates"]), "every rival re-timed in 3 rounds"
    (warning,) = warned
    message = str(warning.message)
    assert message.startswith(f"kerneltune: work: the pick for key 7, [{record['best']['index']}] ")
    assert "is uncertain" in message and "the next process that loads it re-checks it" in message
    assert warning.filename == __file__, "it points at the user's call"
    # The record says so wherever it is read.
    listed = CliRunner().invoke(cli.main, ["cache", "list"]).stdout
    assert " uncertain " in listed
    shown = CliRunner().invoke(cli.main, ["cache", "show", "work"]).stdout
    assert "confidence:    uncertain (not told apart from" in shown
    assert "not told apart from the pick" in shown
    reported = CliRunner().invoke(cli.main, ["report"]).stdout
    assert ", uncertain (not told apart from" in reported
    log = (isolated / "work" / "tune-rank0.log").read_text()
    assert "; uncertain (not told apart from" in log


def test_the_next_process_re_checks_an_uncertain_pick_head_to_head_and_stores_the_verdict(
    monkeypatch, isolated
):
    tune_on(monkeypatch, busy_load)
    (before,) = stored_records(isolated, "work")
    assert before["confidence"] == "uncertain"
    # A later process on a quiet machine: the same function, made anew.
    clock = FakeClock()
    quiet = Machine(clock, COST)
    session_for(monkeypatch, clock)
    assert tuned(quiet)(7) == 1
    measured = {n - 1 for n in quiet.runs[:-1]}
    assert {before["best"]["index"], *before["rivals"]} <= measured and len(measured) <= RECHECK_MAX
    # Interleaved rounds: after each candidate's warm-up and first run, one run of each in turn.
    count = len(measured)
    assert sorted(quiet.runs[2 * count : 3 * count]) == sorted(n + 1 for n in measured)
    (after,) = stored_records(isolated, "work")
    assert after["confidence"] == "confident" and after["best"]["index"] == 0
    assert after["rechecks"] == 0 and after["recheck"] is False
    # Loaded again, it is served.
    again = Machine(clock, COST)
    assert tuned(again)(7) == 1 and again.runs == [1]


def test_a_pick_that_stays_uncertain_is_re_checked_by_at_most_three_processes(monkeypatch, isolated):
    tune_on(monkeypatch, busy_load)
    counts = []
    for _ in range(RECHECKS + 1):
        clock = FakeClock()
        machine = Machine(clock, COST, lambda run: 1.0 + NOISE[run])
        session_for(monkeypatch, clock)
        tuned(machine)(7)
        (record,) = stored_records(isolated, "work")
        counts.append((record["rechecks"], len(machine.runs)))
    assert [rechecks for rechecks, _ in counts] == [1, 2, 3, 3]
    assert counts[-1][1] == 1, "the fourth process serves the pick as it is"


@pytest.mark.parametrize("setting", [{"tune": "never"}, {"recheck": False}])
def test_tune_never_and_recheck_off_serve_an_uncertain_pick_as_it_is(monkeypatch, isolated, setting):
    tune_on(monkeypatch, busy_load)
    (before,) = stored_records(isolated, "work")
    clock = FakeClock()
    machine = Machine(clock, COST)
    session_for(monkeypatch, clock, **setting)
    assert tuned(machine)(7) == before["best"]["index"] + 1
    assert len(machine.runs) == 1
    assert stored_records(isolated, "work") == [before]


def test_cache_verify_marks_records_for_the_next_process_to_re_check(monkeypatch, isolated):
    tune_on(monkeypatch, lambda run: 1.0)
    result = CliRunner().invoke(cli.main, ["cache", "verify", "work"])
    assert result.exit_code == 0, result.output
    assert "marked 1 record(s)" in result.stdout
    (marked,) = stored_records(isolated, "work")
    assert marked["recheck"] is True and marked["confidence"] == "confident"
    shown = CliRunner().invoke(cli.main, ["cache", "show", "work"]).stdout
    assert "re-check asked (kerneltune cache verify)" in shown
    clock = FakeClock()
    machine = Machine(clock, COST)
    session_for(monkeypatch, clock)
    assert tuned(machine)(7) == 1
    assert set(machine.runs) == {1, 2, 3}, "a confident pick's re-check times it against the next fastest"
    (after,) = stored_records(isolated, "work")
    assert after["recheck"] is False and after["confidence"] == "confident"
    missing = CliRunner().invoke(cli.main, ["cache", "verify", "nothing"])
    assert missing.exit_code == 1 and "no records" in missing.output


def test_cache_verify_marks_a_record_stored_after_its_listing_as_it_is_now(monkeypatch, isolated):
    from kerneltune.cli import cache_commands

    tune_on(monkeypatch, lambda run: 1.0)
    listing = cache_commands.readable

    def listed_then_stored_again(caches, function):
        found = listing(caches, function)
        for stored in found:  # a tuning stores its verdict after the command read the records
            stored.cache.store(stored.namespace, stored.digest, {**stored.data, "rechecks": 7})
        return found

    monkeypatch.setattr(cache_commands, "readable", listed_then_stored_again)
    result = CliRunner().invoke(cli.main, ["cache", "verify", "work"])
    assert result.exit_code == 0, result.output
    (marked,) = stored_records(isolated, "work")
    assert marked["recheck"] is True
    assert marked["rechecks"] == 7, "the record stored meanwhile is kept, not replaced by the older copy"


# -- several ranks ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [2, 3])
def test_every_rank_judges_the_slowest_ranks_evidence_without_a_collective_of_its_own(tmp_path, size):
    group = ThreadGroup(size)
    base = [1.0, 1.05, 3.0]

    def rank(r: int) -> tuple[int, str, tuple[int, ...]]:
        session = make_session(tmp_path / f"cache{r}", tie_rounds=2)
        tuner = Tuner(space([{"block": 2**i} for i in range(3)]))
        noise = random.Random(r)
        # Rank 1 shares its host with other work, which doubles a run's time half the time.
        loads = (1.0, 2.0) if r == 1 else (1.0, 1.001)
        with tuner.begin(session, 7, group=group.member(r)) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                repeat = tuning.runs(candidate).repeat
                cost = base[candidate.index]
                tuning.record(candidate, [cost * noise.choice(loads) for _ in range(repeat)])
            best = tuning.finish().index
        (record,) = tuner.records.values()
        return best, record["confidence"], tuple(record["rivals"])

    verdicts = run_ranks(size, rank)
    assert len(set(verdicts)) == 1, verdicts
    assert verdicts[0][1] == "uncertain", "the busy rank's noise is every rank's"
    for counts in group.counts:
        # The votes; one max for the finalists, one for REDUCE with the evidence in it.
        assert counts["gather"] == 1 and counts["max"] == 2


def test_on_the_hosts_clock_the_first_pass_takes_two_rounds_so_a_slow_spell_cannot_hide(
    monkeypatch, isolated
):
    # A spell of the machine running 1.6 times slower covers n=1's first round alone: its
    # samples there agree with each other, and measured in one block it would lose by 30%.
    def spell(run: int) -> float:
        return 1.6 if run < WARMUP + REPEAT // 2 else 1.0

    pick, machine, _ = tune_on(monkeypatch, spell)
    # Two rounds of half the timed runs, the second one candidate on and without warm-up.
    half = REPEAT // 2
    first_pass = [1] * (WARMUP + half) + [2] * (WARMUP + half) + [3] * (WARMUP + half)
    first_pass += [2] * half + [3] * half + [1] * half
    assert machine.runs[: len(first_pass)] == first_pass
    (record,) = stored_records(isolated, "work")
    assert pick == 1 or record["confidence"] == "uncertain", "right, or not confident"
    assert pick == 1, "its second round, beside the others', sent it to the near-tie rounds"


def test_the_warning_says_how_far_rivals_may_lead_and_when_only_the_cap_left_them_undecided():
    from kerneltune.plugins.observers.uncertain import how_far

    assert how_far(-0.05) == "by up to 5.0%"
    assert how_far(math.inf) == "by any amount"
    # Only rivals the cap kept out of the rounds: never "by up to -0.3%", as the warning once said.
    capped = how_far(0.003)
    assert capped.startswith("by up to 0.0% by the first pass") and "cap" in capped
    assert how_far(-0.009).startswith("by up to 0.9% by the first pass")
