"""SELECT and PERSIST's record for a tuning: the pick among the agreed times, its verdict, its record.

:func:`outcome` is a pure function of what the ranks agreed on;
:func:`flag_idle_device` says when device time could not rank the candidates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
from kerneltune.core.machine.confidence import Confidence
from kerneltune.core.machine.following import Following
from kerneltune.core.machine.reduce import Agreed
from kerneltune.core.machine.schedule import Schedule
from kerneltune.core.machine.ties import NearTies
from kerneltune.core.machine.timing import IdleDevice
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.records import IDLE_DEVICE, Candidate, Measurement, TuningRecord


@attrs.frozen
class Choice:
    """SELECT's pick.

    :ivar best: the pick's index, ``None`` when no allowed candidate has a finite time.
    :ivar compared: the allowed candidates with a finite time, which the pick was chosen among.
    :ivar allowed: the candidates SELECT could choose, ``None`` for all of them.
    """

    best: int | None
    compared: tuple[int, ...]
    allowed: frozenset[int] | None


def select_best(
    times: Sequence[float],
    among: Iterable[int] | None,
    *,
    finalists: bool = False,
    scope: Iterable[int] | None = None,
) -> Choice:
    """SELECT: the fastest allowed candidate, ties to the lower index.

    :param among: the candidates to choose among (``None``: all).
    :param finalists: ``among`` are the near ties re-timed: if every one of them failed while
        being re-timed, the first pass still stands and all may be chosen.
    :param scope: the candidates a plan measured, chosen among when ``among`` is not given.
    """
    allowed = None if among is None else frozenset(among)
    if finalists and allowed and not any(math.isfinite(times[i]) for i in allowed):
        allowed = None
    if allowed is None and scope is not None:
        allowed = frozenset(scope)
    compared = tuple(i for i, t in enumerate(times) if math.isfinite(t) and (allowed is None or i in allowed))
    best = min(compared, key=lambda i: (times[i], i)) if compared else None
    return Choice(best, compared, allowed)


@attrs.frozen
class Outcome:
    """SELECT's pick, its verdict and PERSIST's record (the last two ``None`` when no candidate ran).

    :ivar choice: the pick and what it was chosen among.
    """

    choice: Choice
    verdict: Confidence | None
    record: TuningRecord | None


def outcome(
    agreed: Agreed,
    measurements: Sequence[Measurement],
    among: Iterable[Candidate] | None,
    *,
    ties: NearTies,
    follow: Following,
    session: Session,
    encoded: Any,
    schedule: Schedule,
    measured: Iterable[int],
    world_size: int,
) -> Outcome:
    """SELECT and PERSIST's record, from what the ranks agreed on; nothing is sent or stored.

    :param measurements: this rank's measurement of each candidate.
    :param among: select only among these candidates (default: the near ties re-timed, if any).
    :param measured: the candidates this rank measured.
    """
    times = agreed.reduced.times
    if among is None:
        among = ties.finalists
    choice = select_best(
        times,
        None if among is None else (c.index for c in among),
        finalists=among is ties.finalists,
        scope=follow.scope,
    )
    best = choice.best
    if best is None:
        return Outcome(choice, None, None)
    verdict = ties.verdict(agreed.evidence, best, choice.compared)
    # Sharded, every rank's record keeps each candidate's measurement from the rank that took it.
    taken = agreed.measurements or tuple(measurements)
    on_some_rank = {i for i, r in enumerate(agreed.owners) if r is not None}
    record = follow.record(
        session,
        encoded,
        best,
        times,
        agreed.reduced.rank_times,
        taken.__getitem__,
        {*measured, *on_some_rank},
        schedule,
        allowed=choice.allowed,
        shards=world_size if schedule.shard else 1,
        verdict=verdict,
        measured_on=agreed.owners,
    )
    return Outcome(choice, verdict, record)


def verdict_fields(verdict: Confidence | None) -> dict[str, Any]:
    """What ``TuningFinished`` says of the verdict (nothing when every candidate failed)."""
    if verdict is None:
        return {}
    fields = {"rivals": verdict.rivals, "margin": verdict.margin, "noise": verdict.noise}
    fields["descheduled"] = verdict.descheduled
    return {"confidence": verdict.level, **fields}


def flag_idle_device(name: str, idle: IdleDevice, record: TuningRecord) -> TuningRecord:
    """``record``, saying so when every candidate's device time read what a run with no device work reads.

    Then a warning says it too, once per function.
    """
    if not idle.idle or len(idle.medians) <= 1:
        return record
    floor_us = (idle.floor_ms or 0.0) * 1000
    warn_once(
        (name, "idle device"),
        f"kerneltune: {name}: every candidate's timed runs read about "
        f"{floor_us:.2f} us of device time, what a run with no device work "
        "reads: this work runs on the host, and device time cannot rank it (the pick is noise). "
        'Set objective = "wall" (KERNELTUNE_OBJECTIVE=wall) to time it by the host clock.',
    )
    return attrs.evolve(record, method=attrs.evolve(record.method, timed=IDLE_DEVICE))
