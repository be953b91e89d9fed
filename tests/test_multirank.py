"""The multi-rank engine (AGREE, REDUCE, PERSIST) over ranks simulated by threads.

The ``threads`` reducer of :mod:`rank_doubles` counts collectives, so these
tests pin how many each tuning uses; a collective that some rank skips breaks
the group's barrier within seconds and shows up as an exception, not a hang.
Real torch.distributed runs are in test_distributed.py.
"""

from __future__ import annotations

import collections
import functools
import itertools
import json
import logging
import threading
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from kerneltune.core import (
    CandidateFailedWarning,
    NoStoredPickError,
    NoValidConfigError,
    PluginError,
    RankMismatchError,
    Session,
    Settings,
    hookimpl,
    register_key_encoder,
)
from kerneltune.core.driving import KEY_INDEX_ENTRY, Space, Tuner
from kerneltune.core.machine.agreement import resolve
from rank_doubles import ThreadGroup, plugin, run_ranks

CONFIGS = [{"block": 64}, {"block": 128}, {"block": 256}, {"block": 512}]


def make_session(cache_dir: Path, *, extra: tuple[object, ...] = (), **overrides: Any) -> Session:
    # One sample per candidate, as these tests record, says nothing about noise, so
    # every candidate would be a near tie: tests that count collectives turn it off.
    fields = {
        "reducer": "threads",
        "cache": "json",
        "timer": "wallclock",
        "cache_dir": cache_dir,
        "tie_rounds": 0,
        **overrides,
    }
    settings = Settings(**fields)
    return Session.create(settings, extra=(plugin, *extra))


def space(configs: Sequence[dict[str, int]] = CONFIGS) -> Space:
    return Space.build("work", list(configs), source="def work(x, block): ...")


def tune(
    tuner: Tuner,
    session: Session,
    key: Any,
    handle: Any,
    times_ms: Sequence[float],
    *,
    keep: Callable[[Any], bool] | None = None,
    failure: BaseException | None = None,
    failing: Sequence[int] = (),
) -> tuple[int, bool]:
    """Drive one tuning as a driver would; the pick's index and whether it was a hit."""
    with tuner.begin(session, key, keep=keep, failure=failure, group=handle) as tuning:
        while (candidate := tuning.next_candidate()) is not None:
            if candidate.index in failing:
                tuning.fail(candidate, RuntimeError("out of shared memory"))
            else:
                tuning.record(candidate, [times_ms[candidate.index]])
        return tuning.finish().index, tuning.hit


def records(cache_dir: Path) -> list[dict[str, Any]]:
    folder = cache_dir / "work"
    return (
        [json.loads(p.read_text()) for p in sorted(folder.glob("[0-9a-f]*.json"))] if folder.is_dir() else []
    )


def seed(cache_dir: Path, times_ms: Sequence[float], key: Any = 7) -> int:
    """Tune alone (reducer 'local') so that ``cache_dir`` holds a record; its pick."""
    session = Session.create(Settings(reducer="local", cache="json", timer="wallclock", cache_dir=cache_dir))
    return tune(Tuner(space()), session, key, None, times_ms)[0]


# -- collectives ----------------------------------------------------------------


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("count", [1, 2, 5, 9])
def test_a_tuning_uses_two_collectives_besides_one_barrier_per_candidate(tmp_path, size, count):
    group = ThreadGroup(size)
    configs = [{"block": 2**i} for i in range(count)]

    def rank(r: int) -> list[int]:
        session, tuner = make_session(tmp_path / "cache"), Tuner(space(configs))
        first = tune(tuner, session, 7, group.member(r), [float(i + 1) for i in range(count)])
        again = tune(tuner, session, 7, group.member(r), [0.0] * count)
        return [*first, *again]

    assert run_ranks(size, rank) == [[0, False, 0, True]] * size
    for counts in group.counts:
        assert counts == {"gather": 1, "max": 1, "barrier": count}
        assert sum(n for op, n in counts.items() if op != "barrier") <= 2


@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_gathering_reducer_keeps_each_ranks_times_from_its_one_collective(tmp_path, size):
    group = ThreadGroup(size)
    failing = {1: 2}  # candidate 2 fails on rank 1 only

    def rank(r: int) -> int:
        session = make_session(tmp_path / "cache", reducer="gathering-threads")
        times = [1.0 + r, 5.0 - r, 3.0, 9.0]
        return tune(Tuner(space()), session, 7, group.member(r), times, failing=[failing.get(r, -1)])[0]

    # Slowest ranks: [0] 1 + (size - 1), [1] 5, [2] inf, [3] 9.
    assert run_ranks(size, rank) == [0] * size
    for counts in group.counts:
        assert counts == {"gather": 1, "gather_vector": 1, "barrier": 4}
    (record,) = records(tmp_path / "cache")
    rows = [c["rank_times_ms"] for c in record["candidates"]]
    assert rows[0] == [1.0 + r for r in range(size)]
    assert rows[1] == [5.0 - r for r in range(size)]
    assert rows[2] == [3.0, None, *[3.0] * (size - 2)]
    assert [c["time_ms"] for c in record["candidates"]] == [float(size), 5.0, None, 9.0]


def test_a_reducer_with_max_alone_still_tunes_and_keeps_no_rank_times(tmp_path):
    group = ThreadGroup(2)

    def rank(r: int) -> int:
        session = make_session(tmp_path / "cache")
        return tune(Tuner(space()), session, 7, group.member(r), [1.0 + r, 5.0, 3.0, 9.0])[0]

    assert run_ranks(2, rank) == [0, 0]
    assert all(counts == {"gather": 1, "max": 1, "barrier": 4} for counts in group.counts)
    (record,) = records(tmp_path / "cache")
    assert [c["time_ms"] for c in record["candidates"]] == [2.0, 5.0, 3.0, 9.0]
    assert all("rank_times_ms" not in c for c in record["candidates"])


def test_verify_pick_asked_by_one_rank_adds_one_gather_on_every_rank(tmp_path):
    group = ThreadGroup(3)

    def rank(r: int) -> int:
        session = make_session(tmp_path / "cache", verify_pick=r == 1)
        return tune(Tuner(space()), session, 7, group.member(r), [4.0, 3.0, 2.0, 1.0])[0]

    assert run_ranks(3, rank) == [3, 3, 3]
    assert all(counts == {"gather": 2, "max": 1, "barrier": 4} for counts in group.counts)


def test_ranks_holding_records_agree_in_one_gather_and_measure_nothing(tmp_path):
    seed(tmp_path / "cache", [9.0, 1.0, 9.0, 9.0])
    group = ThreadGroup(2)

    def rank(r: int) -> tuple[int, bool]:
        return tune(
            Tuner(space()), make_session(tmp_path / "cache"), 7, group.member(r), [1.0, 9.0, 9.0, 9.0]
        )

    assert run_ranks(2, rank) == [(1, True), (1, True)]
    assert all(counts == {"gather": 1} for counts in group.counts)


# -- REDUCE and SELECT ----------------------------------------------------------


def test_the_slowest_rank_decides_even_where_every_rank_prefers_another(tmp_path):
    per_rank = [
        [1.0, 8.0, 5.0, 9.0],  # rank 0 alone would pick 0
        [8.0, 1.0, 5.0, 9.0],  # rank 1 alone would pick 1
    ]
    group = ThreadGroup(2)

    def rank(r: int) -> int:
        return tune(Tuner(space()), make_session(tmp_path / "cache"), 7, group.member(r), per_rank[r])[0]

    assert run_ranks(2, rank) == [2, 2]
    (record,) = records(tmp_path / "cache")
    assert [c["time_ms"] for c in record["candidates"]] == [8.0, 8.0, 5.0, 9.0]


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_candidate_failing_on_one_rank_is_infinite_for_all(tmp_path):
    group = ThreadGroup(3)

    def rank(r: int) -> int:
        failing = (0,) if r == 2 else ()
        session = make_session(tmp_path / "cache")
        return tune(Tuner(space()), session, 7, group.member(r), [1.0, 2.0, 3.0, 4.0], failing=failing)[0]

    assert run_ranks(3, rank) == [1, 1, 1]
    (record,) = records(tmp_path / "cache")
    zero = record["candidates"][0]
    # Rank 0 wrote the record: it measured candidate 0, yet the reduced time is infinite.
    assert zero["time_ms"] is None and zero["samples_ms"] == [1.0] and zero["error"] is None


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_candidates_failing_on_different_ranks_leave_nothing_valid_on_any(tmp_path):
    group = ThreadGroup(2)
    two = CONFIGS[:2]

    def rank(r: int) -> int:
        session = make_session(tmp_path / "cache")
        return tune(Tuner(space(two)), session, 7, group.member(r), [1.0, 2.0], failing=(r,))[0]

    outcomes = run_ranks(2, rank)
    assert all(isinstance(o, NoValidConfigError) for o in outcomes)
    # Each rank names its own error and marks the candidate that failed elsewhere.
    assert "[0] {'block': 64}: RuntimeError: out of shared memory" in str(outcomes[0])
    assert "[1] {'block': 128}: failed on another rank" in str(outcomes[0])
    assert "[1] {'block': 128}: RuntimeError: out of shared memory" in str(outcomes[1])
    assert records(tmp_path / "cache") == []


# -- AGREE: failures before measuring ---------------------------------------------


def test_prune_fn_keeping_different_candidates_stops_every_rank(tmp_path):
    group = ThreadGroup(3)

    def rank(r: int) -> int:
        session = make_session(tmp_path / "cache")
        keep = lambda c, r=r: c.index != r  # noqa: E731
        return tune(Tuner(space()), session, 7, group.member(r), [1.0] * 4, keep=keep)[0]

    outcomes = run_ranks(3, rank)
    assert all(isinstance(o, RankMismatchError) for o in outcomes)
    message = str(outcomes[0])
    assert "prune_fn" in message
    assert "rank 0 keeps [1, 2, 3]" in message and "rank 2 keeps [0, 1, 3]" in message
    assert all(counts == {"gather": 1} for counts in group.counts)


def test_different_config_spaces_with_the_same_pruning_stop_every_rank(tmp_path):
    group = ThreadGroup(2)

    def rank(r: int) -> int:
        configs = CONFIGS if r == 0 else [*CONFIGS[:3], {"block": 1024}]
        return tune(Tuner(space(configs)), make_session(tmp_path / "cache"), 7, group.member(r), [1.0] * 4)[0]

    outcomes = run_ranks(2, rank)
    assert all(isinstance(o, RankMismatchError) for o in outcomes)
    assert "config_space must be identical on every rank" in str(outcomes[1])


def test_a_key_failure_on_one_rank_stops_every_rank_and_the_group_recovers(tmp_path):
    group = ThreadGroup(3)

    def rank(r: int) -> list[Any]:
        session, tuner = make_session(tmp_path / "cache"), Tuner(space())
        handle = group.member(r)
        # Every rank holds a pick for the key None, the key a failing driver passes:
        # the failing rank must still join the agreement, not dispatch to that pick.
        tune(tuner, session, None, handle, [1.0, 2.0, 3.0, 4.0])
        failure = ValueError("x has no shape on this rank") if r == 1 else None
        try:
            tune(tuner, session, None if failure else 8, handle, [1.0] * 4, failure=failure)
        except RankMismatchError as exc:
            error = str(exc)
        return [error, tune(tuner, session, 9, handle, [4.0, 3.0, 2.0, 1.0])[0]]

    outcomes = run_ranks(3, rank)
    assert [o[1] for o in outcomes] == [3, 3, 3]
    assert outcomes[0][0] == outcomes[2][0]
    assert "rank 1 failed while computing the key: ValueError: x has no shape on this rank" in outcomes[0][0]


# -- the tune setting: never or fail, alike on every rank -------------------------------


def test_tune_fail_raises_on_every_rank_after_one_gather(tmp_path):
    group = ThreadGroup(3)

    def rank(r: int) -> tuple[int, bool]:
        session = make_session(tmp_path / "cache", tune="fail")
        return tune(Tuner(space()), session, 7, group.member(r), [1.0] * 4)

    outcomes = run_ranks(3, rank)
    assert all(isinstance(o, NoStoredPickError) for o in outcomes), outcomes
    assert "work: no stored pick for key 7, and tune = 'fail'" in str(outcomes[2])
    assert all(counts == {"gather": 1} for counts in group.counts)


@pytest.mark.parametrize("mode", ["never", "fail"])
def test_a_pick_one_rank_holds_is_served_to_every_rank_under_never_and_fail(tmp_path, mode):
    held = tmp_path / "held"
    pick = seed(held, [9.0, 1.0, 9.0, 9.0])
    group = ThreadGroup(2)

    def rank(r: int) -> tuple[int, bool]:
        session = make_session(held if r == 1 else tmp_path / "empty", tune=mode)
        return tune(Tuner(space()), session, 7, group.member(r), [1.0, 9.0, 9.0, 9.0])

    assert run_ranks(2, rank) == [(pick, True), (pick, True)]
    assert all(counts == {"gather": 1} for counts in group.counts)


def test_tune_never_runs_the_first_kept_candidate_on_every_rank(tmp_path):
    group = ThreadGroup(2)

    def rank(r: int) -> tuple[int, bool]:
        session = make_session(tmp_path / "cache", tune="never")
        return tune(Tuner(space()), session, 7, group.member(r), [9.0, 1.0, 9.0, 9.0], keep=lambda c: c.index)

    assert run_ranks(2, rank) == [(1, True), (1, True)]
    assert all(counts == {"gather": 1} for counts in group.counts)
    assert records(tmp_path / "cache") == [], "nothing measured, nothing stored"


def test_ranks_with_different_tune_settings_stop_every_rank(tmp_path):
    group = ThreadGroup(2)

    def rank(r: int) -> int:
        session = make_session(tmp_path / "cache", tune="never" if r == 0 else "auto")
        return tune(Tuner(space()), session, 7, group.member(r), [1.0] * 4)[0]

    outcomes = run_ranks(2, rank)
    assert all(isinstance(o, RankMismatchError) for o in outcomes)
    assert "ranks hold different tune settings (rank 0: tune = 'never', rank 1: tune = 'auto')" in str(
        outcomes[1]
    )


class Layout:
    """Encodable through a registered encoder, yet unhashable."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, rows: int) -> None:
        self.rows = rows


register_key_encoder(Layout, "tests.Layout", lambda layout: layout.rows)


@pytest.mark.parametrize(
    ("bad_key", "reason"),
    [(Layout(4), "unhashable type: 'Layout'"), (frozenset({4}), "cannot be part of a tuning key")],
)
def test_a_key_one_rank_cannot_use_stops_every_rank(tmp_path, bad_key, reason):
    group = ThreadGroup(2)

    def rank(r: int) -> int:
        key = bad_key if r == 1 else (4,)
        return tune(Tuner(space()), make_session(tmp_path / "cache"), key, group.member(r), [1.0] * 4)[0]

    outcomes = run_ranks(2, rank)
    assert all(isinstance(o, RankMismatchError) for o in outcomes)
    assert "rank 1 failed while computing the key: TypeError" in str(outcomes[0])
    assert reason in str(outcomes[0])


def test_a_cache_that_raises_on_one_rank_is_a_miss_there_and_the_ranks_stay_in_step(tmp_path):
    group = ThreadGroup(2)
    seeded = seed(tmp_path / "cache1", [3.0, 1.0, 2.0, 4.0])

    def rank(r: int) -> tuple[int, bool]:
        session = make_session(tmp_path / f"cache{r}")
        if r == 0:

            def load(namespace: str, digest: str) -> None:
                raise RuntimeError("cache server unreachable")

            session.cache.load = load
        return tune(Tuner(space()), session, 7, group.member(r), [1.0] * 4)

    with pytest.warns(
        RuntimeWarning, match=r"cache 'json' .* failed to load a pick \(RuntimeError: cache server"
    ):
        outcomes = run_ranks(2, rank)
    assert outcomes == [(seeded, True), (seeded, True)], "rank 1's record serves both ranks"


def test_an_observer_failing_on_one_rank_does_not_desynchronise_the_ranks(tmp_path):
    def kerneltune_candidate_measured(event):
        raise OSError("log directory is read-only")

    broken = types.ModuleType("tests_broken_observer")
    broken.kerneltune_candidate_measured = hookimpl(kerneltune_candidate_measured)
    group = ThreadGroup(2)

    def rank(r: int) -> int:
        session = make_session(tmp_path / "cache", extra=(broken,) if r == 1 else ())
        return tune(Tuner(space()), session, 7, group.member(r), [4.0, 1.0, 2.0, 3.0])[0]

    assert run_ranks(2, rank) == [1, 1]


def test_ranks_tuning_under_different_keys_get_a_warning(tmp_path):
    group = ThreadGroup(2)

    def rank(r: int) -> int:
        return tune(
            Tuner(space()), make_session(tmp_path / "cache"), (1024 + r,), group.member(r), [1.0] * 4
        )[0]

    with pytest.warns(RuntimeWarning, match=r"different keys \(rank 0: \(1024,\), rank 1: \(1025,\)\)"):
        assert run_ranks(2, rank) == [0, 0]


def test_under_different_keys_no_rank_adopts_another_ranks_record(tmp_path):
    seed(tmp_path / "cache0", [9.0, 9.0, 1.0, 9.0], key=(1024,))
    group = ThreadGroup(2)

    def rank(r: int) -> tuple[int, bool]:
        session = make_session(tmp_path / f"cache{r}")
        return tune(Tuner(space()), session, (1024 + r,), group.member(r), [1.0, 9.0, 9.0, 9.0])

    with pytest.warns(RuntimeWarning, match="different keys"):
        outcome = run_ranks(2, rank)
    # Rank 0's record answers key (1024,), not rank 1's (1025,): both measure, in step.
    assert outcome == [(0, False), (0, False)]


# -- AGREE: sharing records, PERSIST ----------------------------------------------


def test_a_record_on_one_rank_only_is_shared_and_persisted_by_the_others(tmp_path):
    picked = seed(tmp_path / "cache0", [9.0, 9.0, 1.0, 9.0])
    group = ThreadGroup(3)

    def rank(r: int) -> tuple[int, bool]:
        session = make_session(tmp_path / f"cache{r}")
        # Measuring would pick 0; adopting rank 0's record gives its pick.
        return tune(Tuner(space()), session, 7, group.member(r), [1.0, 9.0, 9.0, 9.0])

    assert run_ranks(3, rank) == [(picked, True)] * 3
    assert picked == 2
    assert all(counts == {"gather": 1} for counts in group.counts)
    for r in (1, 2):
        (record,) = records(tmp_path / f"cache{r}")
        assert record["best"]["index"] == 2


def test_ranks_with_different_records_all_take_the_lowest_ranks(tmp_path):
    seed(tmp_path / "cache0", [9.0, 9.0, 9.0, 1.0])
    seed(tmp_path / "cache1", [9.0, 1.0, 9.0, 9.0])
    group = ThreadGroup(2)

    def rank(r: int) -> int:
        return tune(Tuner(space()), make_session(tmp_path / f"cache{r}"), 7, group.member(r), [1.0] * 4)[0]

    assert run_ranks(2, rank) == [3, 3]
    assert [records(tmp_path / f"cache{r}")[0]["best"]["index"] for r in (0, 1)] == [3, 3]


def test_always_tune_on_one_rank_makes_every_rank_measure(tmp_path):
    seed(tmp_path / "cache", [1.0, 9.0, 9.0, 9.0])
    group = ThreadGroup(2)

    def rank(r: int) -> tuple[int, bool]:
        session = make_session(tmp_path / "cache", always_tune=r == 1)
        return tune(Tuner(space()), session, 7, group.member(r), [9.0, 9.0, 1.0, 9.0])

    assert run_ranks(2, rank) == [(2, False), (2, False)]
    assert all(counts["barrier"] == 4 for counts in group.counts)


@pytest.mark.parametrize(
    ("cache", "per_rank_dirs", "writers"),
    [("json", False, [0]), ("json", True, [0, 1, 2]), ("memory", False, [0, 1, 2])],
)
def test_one_writer_per_cache_place(tmp_path, cache, per_rank_dirs, writers):
    group = ThreadGroup(3)
    stores: list[int] = []

    def rank(r: int) -> int:
        session = make_session(tmp_path / (f"cache{r}" if per_rank_dirs else "cache"), cache=cache)
        store = session.cache.store

        def counted(*args: Any) -> None:
            if args[1] != KEY_INDEX_ENTRY:  # the record, not the key index's row beside it
                stores.append(r)
            store(*args)

        session.cache.store = counted
        return tune(Tuner(space()), session, 7, group.member(r), [2.0, 1.0, 3.0, 4.0])[0]

    assert run_ranks(3, rank) == [1, 1, 1]
    assert sorted(stores) == writers


# -- the reducer seam ----------------------------------------------------------------


def test_a_reducer_outside_its_group_is_a_clear_error(tmp_path):
    class Outsider:
        name = "outsider"
        rank = -1
        world_size = -1

        @classmethod
        def is_available(cls, group=None):
            return True

        def __init__(self, group=None):
            pass

    outsider = types.ModuleType("tests_outsider_reducer")
    outsider.kerneltune_register_reducers = hookimpl(lambda register: register(Outsider))
    session = Session.create(Settings(reducer="outsider", cache_dir=tmp_path), extra=(outsider,))
    with pytest.raises(PluginError, match="not one of the ranks of autotune_pg"):
        session.make_reducer(object())


def test_the_local_reducer_refuses_a_group_without_torch_distributed(tmp_path):
    session = Session.create(Settings(reducer="local", cache_dir=tmp_path))
    with pytest.raises(PluginError, match=r"torch\.distributed is not initialised"):
        session.make_reducer(object())


def test_votes_from_other_ranks_than_the_group_are_a_plugin_error():
    vote = {"rank": 0, "global_rank": 0, "error": None}
    with pytest.raises(PluginError, match=r"gathered votes from ranks \[0\] for a group of 2"):
        resolve([vote], 2, "work")


@pytest.mark.parametrize("size", [2, 3])
def test_near_ties_are_re_timed_in_the_same_rounds_on_every_rank(tmp_path, size):
    group = ThreadGroup(size)
    configs = [{"block": 2**i} for i in range(4)]

    def rank(r: int) -> int:
        session, tuner = make_session(tmp_path / "cache", tie_rounds=2), Tuner(space(configs))
        # 0 and 1 swap places on rank 1.
        times = [1.0, 1.01, 1.015, 9.0] if r != 1 else [1.02, 1.0, 1.015, 9.0]
        return tune(tuner, session, 7, group.member(r), times)[0]

    picks = run_ranks(size, rank)
    assert len(set(picks)) == 1
    for counts in group.counts:
        # On the host's clock the first pass takes two rounds, a barrier before each
        # candidate's runs; one more max decides the near ties from every rank's maxima
        # (the three within 2%, their two samples alike); then two rounds over the three.
        assert counts == {"gather": 1, "max": 2, "barrier": 2 * 4 + 2 * 3}


@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_sharded_verbose_shows_the_times_other_ranks_measured_once_gathered(tmp_path, size, caplog):
    group = ThreadGroup(size)
    configs = [{"block": 2**i} for i in range(5)]

    def rank(r: int) -> int:
        session = make_session(tmp_path / "cache", shard=True)
        with Tuner(space(configs)).begin(session, 7, group=group.member(r), verbose=True) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                if candidate.index == 2:
                    tuning.fail(candidate, RuntimeError("out of resources"))
                else:
                    tuning.record(candidate, [candidate.index + 1.0])
            return tuning.finish().index

    with caplog.at_level(logging.INFO, logger="kerneltune"):
        assert run_ranks(size, rank) == [0] * size
    shown = [r.getMessage() for r in caplog.records]
    log = (tmp_path / "cache" / "work" / "tune-rank0.log").read_text()
    for index in range(5):
        owner = index % size
        if owner == 0:
            continue
        outcome = "failed" if index == 2 else f"trimmed mean {index + 1.0:.4f} ms"
        line = f"work: [{index}] {{'block': {2**index}}} (measured on rank {owner}): {outcome}"
        assert line in log, log
        assert line in shown, shown
    assert "(measured on rank 0)" not in log, "rank 0's own candidates were shown when measured"


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_sharded_ranks_measure_a_share_each_and_gather_the_times_once(tmp_path, size):
    group = ThreadGroup(size)
    configs = [{"block": 2**i} for i in range(7)]
    measured: dict[int, list[int]] = {}

    def rank(r: int) -> int:
        session, tuner = make_session(tmp_path / "cache", shard=True), Tuner(space(configs))
        mine = measured.setdefault(r, [])
        with tuner.begin(session, 7, group=group.member(r)) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                mine.append(candidate.index)
                if candidate.index == 2:
                    tuning.fail(candidate, RuntimeError("out of resources"))
                else:
                    tuning.record(candidate, [abs(candidate.index - 4) + 1.0])
            return tuning.finish().index

    assert run_ranks(size, rank) == [4] * size
    assert measured == {r: list(range(r, 7, size)) for r in range(size)}
    for counts in group.counts:
        # The agreement's gather, one barrier before measuring (no rank measures while another
        # compiles), the times' gather; no barrier per candidate, no max.
        assert counts == {"gather": 2, "barrier": 1}
    (record,) = records(tmp_path / "cache")
    assert record["measured_with"]["shards"] == size
    times = [row["time_ms"] for row in record["candidates"]]
    assert times == [5.0, 4.0, None, 2.0, 1.0, 2.0, 3.0], "every rank's times, a failure on its owner kept"


def test_ranks_run_each_candidate_alike_though_one_rank_is_switched_out_in_every_run(tmp_path, monkeypatch):
    # Alone, a timed run the thread was switched out of is taken again; with several ranks none is,
    # or a rank would run a candidate more often than the others (deadlocking work with collectives).
    from kerneltune.core.machine import timing

    group, ranks, calls = ThreadGroup(2), threading.local(), itertools.count()
    monkeypatch.setattr(
        timing, "running", lambda: (time.perf_counter(), 0.0, next(calls), 0) if ranks.rank == 0 else None
    )
    runs: list[collections.Counter] = [collections.Counter(), collections.Counter()]

    def rank(r: int) -> int:
        ranks.rank = r
        session = make_session(tmp_path / "cache", warmup=1, repeat=3)
        with Tuner(space()).begin(session, 7, group=group.member(r)) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                tuning.measure(candidate, functools.partial(runs[r].update, [candidate.index]))
            return tuning.finish().index

    run_ranks(2, rank)
    assert runs[0] == runs[1] == {i: 4 for i in range(len(CONFIGS))}
