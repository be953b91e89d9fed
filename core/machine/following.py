"""What LOOKUP's plan leaves a tuning to honour while it measures.

:class:`Following` holds what of a :class:`~kerneltune.core.machine.reuse.Plan`
a tuning still needs after LOOKUP: SELECT's scope, the stored rows carried
over, the record being re-checked, and the fall back to the whole kept list
when every planned candidate failed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Container, Sequence
from typing import Any

import attrs
from kerneltune.core.machine.confidence import UNCERTAIN, Confidence
from kerneltune.core.machine.reuse import Plan, carried_rows
from kerneltune.core.machine.schedule import Schedule
from kerneltune.core.machine.stored import new_record
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.records import Candidate, Measurement, TuningRecord
from kerneltune.core.values.space import Space

logger = logging.getLogger("kerneltune")


@attrs.define
class Following:
    """A tuning's plan, as far as it binds measuring and SELECT.

    :ivar kept: the candidates PRUNE kept.
    :ivar scope: the only candidates measured, and SELECT's choice, when the plan names them.
    :ivar carried: the stored time and measurement of candidates an earlier tuning of this key measured.
    :ivar rechecked: the stored record this tuning re-checks (an uncertain pick, or one
        ``kerneltune cache verify`` asked about).
    :ivar warm_start: where a warm start began, for the record.
    :ivar fell_back: every planned candidate failed, and the rest of the kept list was queued.
    """

    space: Space
    kept: tuple[int, ...] = ()
    scope: frozenset[int] | None = None
    carried: dict[int, tuple[float, Measurement]] = attrs.Factory(dict)
    rechecked: TuningRecord | None = None
    warm_start: dict[str, Any] | None = None
    fell_back: bool = False

    @property
    def screening(self) -> int | None:
        """For a screened warm start, the nearest key's pick (the lead; -1 where none); else ``None``."""
        if self.warm_start is None or not self.warm_start.get("screen"):
            return None
        lead = self.warm_start.get("lead")
        return lead if type(lead) is int else -1

    def screened(self, finalists: Sequence[int]) -> None:
        """Keep, for the record, which candidates the screen sent on to be re-timed."""
        assert self.warm_start is not None
        self.warm_start = {**self.warm_start, "finalists": list(finalists)}

    def follow(
        self, plan: Plan | None, shared: TuningRecord | None, kept: tuple[int, ...]
    ) -> tuple[Candidate, ...]:
        """Take in LOOKUP's plan (``None``: measure every kept candidate); what to measure first."""
        self.kept = kept
        candidates = self.space.candidates
        if plan is None:
            return tuple(candidates[i] for i in kept)
        if plan.reuse and shared is not None:
            self.carried = carried_rows(shared, self.space)
        if plan.recheck:
            self.rechecked = shared
        self.warm_start = plan.warm_start
        if not plan.measure:
            return tuple(candidates[i] for i in kept)
        self.scope = frozenset(plan.measure)
        return tuple(candidates[i] for i in plan.measure)

    def stored(self, measured: Container[int]) -> dict[int, tuple[float, Measurement]]:
        """The carried rows of candidates this tuning has not measured."""
        return {i: row for i, row in self.carried.items() if i not in measured}

    def fall_back(self, times: Sequence[float], key: object) -> list[Candidate] | None:
        """Where every candidate the plan measured failed on some rank, the rest of the kept list.

        A warm start's few configs or a grown list's new ones may all fail where the full list
        holds ones that run. ``times`` are the ranks' agreed ones, so all fall back alike; the
        scope is lifted, so SELECT chooses among all that were measured.

        :returns: the candidates to measure now, or ``None`` when one planned candidate has a time.
        """
        if any(math.isfinite(times[i]) for i in self.scope or ()):
            return None
        scoped = sorted(self.scope or ())
        rest = [c for c in self.space.candidates if c.index in self.kept and c.index not in scoped]
        self.fell_back = True
        self.scope = None
        logger.info(
            "kerneltune: %s: key %r: every candidate the plan measured failed (%s); measuring the other %d "
            "kept candidates",
            self.space.name,
            key,
            ", ".join(f"[{i}]" for i in scoped),
            len(rest),
        )
        return rest

    def rechecking(self) -> tuple[Candidate, ...]:
        """The stored pick, then its rivals by stored time, when this tuning re-checks a record."""
        record = self.rechecked
        if record is None or self.scope is None:
            return ()

        def order(index: int) -> tuple[bool, float, int]:
            return (index != record.best_index, record.times[index], index)

        return tuple(self.space.candidates[i] for i in sorted(self.scope, key=order))

    def record(
        self,
        session: Session,
        encoded: Any,
        best: int,
        times: Sequence[float],
        rank_times: Sequence[tuple[float, ...]],
        measurement: Callable[[int], Measurement],
        measured: Container[int],
        schedule: Schedule,
        *,
        allowed: frozenset[int] | None,
        shards: int,
        verdict: Confidence,
        measured_on: Sequence[int | None] = (),
    ) -> TuningRecord:
        """PERSIST's record: what this tuning measured, the carried rows of what it did not, the verdict.

        :param times: every candidate's agreed time; ``rank_times`` each rank's, where REDUCE kept them.
        :param measurement: candidate ``i``'s measurement in this tuning.
        :param measured: the candidates this tuning measured (sharded: on any rank).
        :param measured_on: sharded, the rank that measured each candidate (``None``: none did).
        :param allowed: the candidates SELECT chose among (``None``: all).
        """
        carried = self.stored(measured)
        count = len(self.space.candidates)
        if carried and allowed is None:
            allowed = frozenset(range(count))
        record = new_record(
            session,
            self.space,
            encoded,
            best,
            tuple(carried[i][0] if i in carried else t for i, t in enumerate(times)),
            tuple(carried[i][1] if i in carried else measurement(i) for i in range(count)),
            schedule,
            None if allowed is None else tuple(sorted(allowed - carried.keys())),
            shards=shards,
            carried=tuple(sorted(carried)),
            warm_start=self.warm_start,
            rank_times=tuple(() if i in carried else t for i, t in enumerate(rank_times)),
            measured_on=tuple(None if i in carried else r for i, r in enumerate(measured_on)),
        )
        # A re-check that leaves the pick uncertain counts; the next loading process re-checks again.
        rechecks = 0
        if self.rechecked is not None and verdict.level == UNCERTAIN:
            rechecks = self.rechecked.rechecks + 1
        return attrs.evolve(record, confidence=verdict.level, rivals=verdict.rivals, rechecks=rechecks)
