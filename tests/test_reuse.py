"""Measurements kept per config: a changed candidate list measures only what its key's record lacks.

Times come from a fake clock that each config advances by its cost, so
picks are decided by the test. One timed run per candidate and no warm-up:
a candidate measured head to head runs three times (round one; round two's
one warm-up and one timed run), and the pick runs once more for the call.
"""

from __future__ import annotations

import collections
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kernels
import pytest
import torch
import triton
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import CandidateFailedWarning, Session, Settings, add_plugin, hookimpl, remove_plugin
from kerneltune.core.driving import Space, Tuner
from kerneltune.core.machine.reuse import Plan, plan_reuse
from kerneltune.core.machine.schedule import Schedule
from kerneltune.core.machine.stored import method_of
from kerneltune.core.values.records import TuningRecord
from kerneltune.plugins.triton import configs
from rank_doubles import ThreadGroup, plugin, run_ranks
from search_doubles import Script, by_block, timer_plugin, use_session
from test_search_params import launch_double, make_double, search
from tuning_doubles import FakeClock, clock_plugin, install_session, only_record_file, record_files

from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune

HEAD_TO_HEAD = 3

# Their tuned functions return which config ran (its n, its cost), on purpose: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")


class Costs:
    """A function whose configs cost what the test says, and the runs it made."""

    def __init__(self, clock: FakeClock, costs: dict[int, float]) -> None:
        self.clock = clock
        self.costs = costs
        self.calls: list[int] = []

    def tuner(self, ns: Sequence[int], **options: Any) -> Any:
        """A new tuned function over ``n in ns``, as a new process would make it."""

        def grown(x: int, n: int) -> int:
            self.calls.append(n)
            if self.costs[n] < 0:
                raise RuntimeError(f"n={n} cannot run")
            self.clock.advance(self.costs[n])
            return x * n

        return autotune(config_space=[{"n": n} for n in ns], key_fn=lambda x: x, **options)(grown)

    def take(self) -> collections.Counter[int]:
        counted, self.calls = collections.Counter(self.calls), []
        return counted


@pytest.fixture
def costs(monkeypatch):
    clock = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted", warmup=0, repeat=1)
    return Costs(clock, {1: 3.0, 2: 1.0, 3: 2.0, 4: 0.5, 5: 4.0})


def record_of(cache: Path) -> dict[str, Any]:
    return json.loads(only_record_file(cache, "grown").read_text())


def test_growing_the_space_by_one_config_measures_it_and_the_stored_pick_only(costs, isolated):
    assert costs.tuner([1, 2, 3])(10) == 20
    assert costs.take() == {1: 1, 2: 2, 3: 1}

    assert costs.tuner([1, 2, 3, 4])(10) == 40
    assert costs.take() == {2: HEAD_TO_HEAD, 4: HEAD_TO_HEAD + 1}, "n=1 and n=3 keep their stored times"

    record = record_of(isolated)
    assert [row["label"] for row in record["candidates"]] == ["n=<1>", "n=<2>", "n=<3>", "n=<4>"]
    assert record["best"]["index"] == 3
    assert record["carried"] == [0, 2]
    assert record["finalists"] == [1, 3], "SELECT chose between the two measured now"
    assert [row["time_ms"] for row in record["candidates"]] == [3.0, 1.0, 2.0, 0.5]

    assert costs.tuner([1, 2, 3, 4])(10) == 40
    assert costs.take() == {4: 1}, "the list just tuned: a hit"


def test_a_stored_pick_that_left_the_list_hands_over_to_the_best_stored_time(costs, isolated):
    costs.tuner([1, 2, 3])(10)
    costs.take()

    costs.tuner([1, 3, 5])(10)
    assert set(costs.take()) == {3, 5}, "n=3 stored 2 ms, n=1 3 ms: n=3 meets the new n=5"
    assert record_of(isolated)["best"]["label"] == "n=<3>"


@pytest.mark.parametrize("ns", [[3, 2], [3, 1, 2], [2, 1]], ids=["shrunk", "reordered", "reversed"])
def test_a_list_without_new_configs_measures_nothing(costs, isolated, ns):
    costs.tuner([1, 2, 3])(10)
    costs.take()

    assert costs.tuner(ns)(10) == 20
    assert costs.take() == {2: 1}


def test_a_stale_stored_time_never_beats_a_fresh_one(costs, isolated):
    costs.tuner([1, 2, 3])(10)
    costs.take()
    # Everything runs three times slower now: n=3's stored 2 ms would beat n=4's fresh 1.5 ms.
    costs.costs.update({n: 3 * c for n, c in costs.costs.items()})

    assert costs.tuner([1, 2, 3, 4])(10) == 40
    record = record_of(isolated)
    assert record["candidates"][2]["time_ms"] == 2.0
    assert record["candidates"][3]["time_ms"] == 1.5
    assert costs.tuner([1, 2, 3, 4])(10) == 40, "the record reads back: its pick is SELECT's"


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_config_that_failed_stays_failed_and_one_pruned_before_is_new(costs, isolated):
    costs.costs[5] = -1.0
    costs.tuner([1, 2, 5])(10)
    costs.take()

    costs.tuner([1, 2, 5, 4])(10)
    assert set(costs.take()) == {2, 4}, "n=5 raised before: not run again"
    assert record_of(isolated)["candidates"][2]["error"] == "RuntimeError: n=5 cannot run"


def test_a_candidate_pruned_before_and_kept_now_is_measured(costs, isolated):
    costs.tuner([1, 2, 3], prune_fn=lambda config, x: config["n"] != 3)(10)
    costs.take()

    costs.tuner([1, 2, 3, 4])(10)
    assert set(costs.take()) == {2, 3, 4}


def test_times_measured_another_way_are_not_reused(costs, isolated, monkeypatch, caplog):
    costs.tuner([1, 2, 3])(10)
    costs.take()
    clock = costs.clock
    install_session(
        monkeypatch, extra=(clock_plugin(clock),), timer="scripted", warmup=0, repeat=1, objective="wall"
    )

    with caplog.at_level(logging.INFO, logger="kerneltune"):
        costs.tuner([1, 2, 3, 4])(10)
    assert set(costs.take()) == {1, 2, 3, 4}
    assert "stored times were measured otherwise (objective 'device', now 'wall')" in caplog.text


# -- the engine, driven directly --------------------------------------------------------------


def session_at(cache: Path, **overrides: Any) -> Session:
    fields = {"reducer": "local", "cache": "json", "timer": "wallclock", "cache_dir": cache, "tie_rounds": 0}
    return Session.create(Settings(**{**fields, **overrides}))


def space_of(ns: Sequence[int]) -> Space:
    return Space.build("work", [{"n": n} for n in ns], source="def work(x, n): ...")


def drive(tuner: Tuner, session: Session, key: Any, times: dict[int, float]) -> tuple[str, list[int]]:
    """One tuning with the given time per ``n``: the pick's label and the ``n`` measured, in order."""
    measured = []
    with tuner.begin(session, key) as tuning:
        while (candidate := tuning.next_candidate()) is not None:
            measured.append(candidate.config["n"])
            tuning.record(candidate, [times[candidate.config["n"]]])
        return tuning.finish().label, measured


def test_an_adaptive_tuning_gets_the_stored_times_and_chooses_itself(tmp_path):
    session = session_at(tmp_path)
    drive(Tuner(space_of([1, 2, 3])), session, 8, {1: 3.0, 2: 1.0, 3: 2.0})
    grown = Tuner(space_of([1, 2, 3, 4]))
    with grown.begin(session, 8, adaptive=True) as tuning:
        assert tuning.reused == {0: 3.0, 1: 1.0, 2: 2.0}
        fourth, second = grown.space.candidates[3], grown.space.candidates[1]
        tuning.request([fourth, second])
        while (candidate := tuning.next_candidate()) is not None:
            tuning.record(candidate, [{3: 0.5, 1: 1.2}[candidate.index]])
        assert tuning.reused == {0: 3.0, 2: 2.0}, "what is measured now is no longer reused"
        assert tuning.finish(among=[fourth, second]).index == 3
    record = json.loads(only_record_file(tmp_path, "work").read_text())
    assert record["carried"] == [0, 2]


def test_plans_name_the_anchor_first_and_say_nothing_for_a_list_alike(tmp_path):
    session = session_at(tmp_path)
    schedule = Schedule(warmup=0, repeat=1)
    drive(Tuner(space_of([1, 2, 3])), session, 8, {1: 3.0, 2: 1.0, 3: 2.0})
    stored = TuningRecord.from_data(json.loads(only_record_file(tmp_path, "work").read_text()))
    method = method_of(session, schedule)
    assert plan_reuse(stored, space_of([1, 2, 3]), (0, 1, 2), method, adaptive=False) == Plan(pick=1)
    grown = space_of([4, 1, 2, 3, 5])
    assert plan_reuse(stored, grown, (0, 1, 2, 3, 4), method, adaptive=False) == Plan(
        measure=(2, 0, 4), reuse=True
    )
    assert plan_reuse(stored, grown, (0, 1, 3, 4), method, adaptive=False) == Plan(
        measure=(3, 0, 4), reuse=True
    )


# -- the contextual tuner and search_params --------------------------------------------------


class Launches:
    """Observer: the label of every candidate a contextual tuner launched while measuring."""

    def __init__(self) -> None:
        self.labels: list[str] = []

    @hookimpl
    def kerneltune_launch_measured(self, event: Any) -> None:
        self.labels.append(event.candidate.label)


def test_a_contextual_kernel_whose_configs_grew_measures_the_new_one_and_its_pick(monkeypatch):
    launches = Launches()
    add_plugin(launches)
    try:
        warps = [triton.Config({"BLOCK": 64}, num_warps=w) for w in (4, 8)]
        kernel = triton.autotune(configs=list(warps), key=["n"])(kernels.scale_kernel)

        @contextual_autotune(n_repeat=2, n_warmup=1)
        def run(x):
            y = torch.empty_like(x)
            kernel[(triton.cdiv(x.numel(), 64),)](x, y, 2.0, x.numel())
            return y

        x = torch.randn(64, device=kernels.DEVICE)
        run(x)
        assert set(launches.labels) == {configs.config_label(c) for c in warps}
        first = configs.config_label(kernel.cache[(64, "torch.float32", "torch.float32")])

        added = triton.Config({"BLOCK": 64}, num_warps=2)
        kernel.configs.append(added)
        kernel.cache.clear()
        launches.labels.clear()
        torch.testing.assert_close(run(x), 2.0 * x)
        assert set(launches.labels) == {first, configs.config_label(added)}
    finally:
        remove_plugin(launches)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="scripts the interpreter's search")
def test_a_search_params_space_that_grew_reuses_the_stored_times_until_stage_3(monkeypatch):
    script = Script(by_block({16: 2.0, 32: 3.0, 64: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    double = make_double(search(params=["BLOCK"], values=[16, 32]), pre_hook=script.hook)
    launch_double(double)
    assert double.best_config.kwargs == {"BLOCK": 16}
    script.launches.clear()

    grown = make_double(search(params=["BLOCK"], values=[16, 32, 64]), pre_hook=script.hook)
    launch_double(grown)
    assert grown.best_config.kwargs == {"BLOCK": 64}
    seen = script.seen("BLOCK")
    assert seen[0] == (64,), "stage 1 measures only the new shape"
    # Stage 3 re-times the finalists (64 and 32) in 4 interleaved rounds; nothing else ran 32.
    assert seen.count((32,)) == Schedule(0, 1).stage3_rounds


# -- the command ------------------------------------------------------------------------------


def test_report_show_and_list_say_which_times_were_carried_over(costs, isolated):
    costs.tuner([1, 2, 3])(10)
    costs.tuner([1, 2, 3, 4])(10)

    reported = CliRunner().invoke(cli.main, ["report", "grown"], catch_exceptions=False)
    assert reported.exit_code == 0
    assert (
        "2 time(s) carried over from an earlier tuning of this key (another candidate list)"
        in reported.stdout
    )
    rows = {
        line.split()[0]: line
        for line in reported.stdout.splitlines()
        if "n=<" in line and not line.lstrip().startswith("pick:")
    }
    assert set(rows) == {"*[3]", "[1]", "~[0]", "~[2]"}
    digest_ = only_record_file(isolated, "grown").stem
    shown = CliRunner().invoke(cli.main, ["cache", "show", digest_[:8]], catch_exceptions=False)
    assert "history:       2 time(s) carried over" in shown.stdout
    (listed,) = json.loads(CliRunner().invoke(cli.main, ["cache", "list", "--json"]).stdout)
    assert listed["carried"] == [0, 2]


# -- ranks (threads) ----------------------------------------------------------------------------


def seed_alone(cache: Path, ns: Sequence[int], times: dict[int, float]) -> None:
    drive(Tuner(space_of(ns)), session_at(cache), 8, times)


def tune_together(tmp_path: Path, size: int, ns: Sequence[int], times: dict[int, float]) -> tuple[Any, Any]:
    group = ThreadGroup(size)
    measured: dict[int, list[int]] = {}

    def rank(r: int) -> str:
        session = Session.create(
            Settings(
                reducer="threads",
                cache="json",
                timer="wallclock",
                cache_dir=tmp_path / f"cache{r}",
                tie_rounds=0,
            ),
            extra=(plugin,),
        )
        mine = measured.setdefault(r, [])
        with Tuner(space_of(ns)).begin(session, 8, group=group.member(r)) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                mine.append(candidate.config["n"])
                tuning.record(candidate, [times[candidate.config["n"]]])
            return tuning.finish().label

    return run_ranks(size, rank), (measured, group.counts)


@pytest.mark.parametrize("size", [2, 3])
def test_every_rank_measures_what_the_one_ranks_record_lacks(tmp_path, size):
    seed_alone(tmp_path / "cache0", [1, 2, 3], {1: 3.0, 2: 1.0, 3: 2.0})

    picks, (measured, counts) = tune_together(tmp_path, size, [1, 2, 3, 4], {1: 9.0, 2: 1.0, 3: 9.0, 4: 0.5})
    assert picks == ["{'n': 4}"] * size
    assert all(sorted(set(measured[r])) == [2, 4] for r in range(size))
    # The votes; the head to head (two rounds, a barrier before each run); one max over it
    # (had both candidates failed, every rank would measure the rest of the list); REDUCE.
    assert all(c == {"gather": 1, "max": 2, "barrier": 4} for c in counts)
    for r in range(size):
        (record,) = [json.loads(p.read_text()) for p in record_files(tmp_path / f"cache{r}", "work")]
        assert record["carried"] == [0, 2], f"rank {r} stored the carried times of rank 0's record"


def test_a_record_that_answers_outright_beats_a_lower_ranks_that_saves_part(tmp_path):
    seed_alone(tmp_path / "cache0", [1, 2, 3], {1: 3.0, 2: 1.0, 3: 2.0})
    seed_alone(tmp_path / "cache1", [1, 2, 3, 4], {1: 3.0, 2: 1.0, 3: 2.0, 4: 5.0})

    picks, (measured, counts) = tune_together(tmp_path, 2, [1, 2, 3, 4], {n: 1.0 for n in range(1, 5)})
    assert picks == ["{'n': 2}"] * 2
    assert measured == {0: [], 1: []}
    assert all(c == {"gather": 1} for c in counts)
