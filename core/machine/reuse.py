"""Measurements kept per config: what a stored record of another candidate list saves a tuning.

A record's rows are matched to the live candidates by config fingerprint,
and a :class:`Plan` says what is left to measure (new configs against the
*anchor*, the stored pick or the best stored time left) and what is carried
over. docs/guide.md ("A grown list measures only what is new") says what a
user sees.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import attrs
from kerneltune.core.values.records import NOT_MEASURED, PRUNED, Measurement, Method, TuningRecord
from kerneltune.core.values.space import Space

logger = logging.getLogger("kerneltune")


@attrs.frozen
class Plan:
    """What a tuning does instead of measuring every kept candidate; every rank follows one.

    :param pick: the pick, found without measuring (the stored record answers), or ``None``.
    :param measure: the candidates to measure, first pass in this order, or
        ``()`` for every kept one (an adaptive driver chooses itself).
    :param reuse: keep the shared record's measurements of the candidates not measured now.
    :param warm_start: where a warm start begins (``{"from": key, "distance": d}``), or ``None``.
    :param recheck: ``measure`` re-checks the stored pick (its first) against
        the rivals it could not be told apart from, in interleaved rounds.
    """

    pick: int | None = None
    measure: tuple[int, ...] = ()
    reuse: bool = False
    warm_start: dict[str, Any] | None = None
    recheck: bool = False

    def to_data(self) -> dict[str, Any]:
        """Plain data, for the agreement's gather."""
        data = attrs.asdict(self, recurse=False)
        data["measure"] = list(self.measure)
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any], size: int) -> Plan:
        """Read :meth:`to_data`'s output (from another rank) for a space of ``size`` candidates.

        :raises ValueError: for an index outside the space: the ranks' lists differ.
        """
        indices = [*data["measure"], *([] if data["pick"] is None else [data["pick"]])]
        if any(type(i) is not int or not 0 <= i < size for i in indices):
            raise ValueError(f"a shared tuning plan names candidates {indices} of a list of {size}")
        return cls(
            pick=data["pick"],
            measure=tuple(data["measure"]),
            reuse=bool(data["reuse"]),
            warm_start=data["warm_start"],
            recheck=bool(data.get("recheck", False)),
        )


def measured(record: TuningRecord, row: int) -> bool:
    """Whether the record's candidate ``row`` was measured: a time, or a failure while running.

    Pruned candidates were never run, and those a tuning chose not to
    measure (a staged search, a warm start) were passed over on purpose.
    """
    if math.isfinite(record.times[row]):
        return True
    measurement = record.measurements[row]
    if measurement.error is None:
        # No time, no error: it ran here but failed on another rank.
        return bool(measurement.samples)
    return measurement.error not in (PRUNED, NOT_MEASURED)


def rows_by_fingerprint(record: TuningRecord) -> dict[str, int]:
    """Each config fingerprint of the record and its row (the first, should a config repeat)."""
    rows: dict[str, int] = {}
    for row, fingerprint in enumerate(record.fingerprints):
        rows.setdefault(fingerprint, row)
    return rows


def carried_rows(record: TuningRecord, space: Space) -> dict[int, tuple[float, Measurement]]:
    """The stored time and measurement of each live candidate the record measured, by live index."""
    rows = rows_by_fingerprint(record)
    carried = {}
    for candidate in space.candidates:
        row = rows.get(candidate.fingerprint)
        if row is not None and measured(record, row):
            stored = attrs.evolve(record.measurements[row], index=candidate.index)
            carried[candidate.index] = (record.times[row], stored)
    return carried


def comparable(stored: Method, now: Method) -> str | None:
    """Why times measured as ``stored`` cannot stand beside times measured as ``now``; ``None``: they can."""
    differences = [
        f"{name} {getattr(stored, name)!r}, now {getattr(now, name)!r}"
        for name in ("objective", "statistic", "timer")
        if getattr(stored, name) != getattr(now, name)
    ]
    return "; ".join(differences) or None


#: The most candidates a re-check times head to head: the stored pick and its closest rivals.
RECHECK_MAX = 4
#: Re-checks an uncertain pick gets from the processes that load it before it is served as it is.
RECHECKS = 3


def plan_recheck(record: TuningRecord, space: Space, kept: tuple[int, ...]) -> Plan | None:
    """A re-check of the record's pick, where its record asks for one; ``None`` otherwise.

    An uncertain pick, re-checked fewer than :data:`RECHECKS` times, or any
    pick ``kerneltune cache verify`` marked, of the live candidate list, is
    timed head to head with the rivals it could not be told apart from (for
    a marked confident pick: the next fastest), at most :data:`RECHECK_MAX`
    in all, among those kept; every other stored time is carried over.
    """
    due = record.recheck or (record.confidence == "uncertain" and record.rechecks < RECHECKS)
    if not due or record.fingerprints != tuple(c.fingerprint for c in space.candidates):
        return None
    best = record.best_index
    timed = sorted(
        (i for i in kept if i != best and math.isfinite(record.times[i])), key=lambda i: (record.times[i], i)
    )
    rivals = [i for i in record.rivals if i in timed]
    rivals += [i for i in timed if i not in rivals]
    if best not in kept or not rivals:
        return None
    return Plan(measure=(best, *rivals[: RECHECK_MAX - 1]), reuse=True, recheck=True)


def plan_reuse(
    record: TuningRecord, space: Space, kept: tuple[int, ...], method: Method, *, adaptive: bool
) -> Plan | None:
    """What the record of this key saves a tuning of ``space``; ``None``: measure as if there were none.

    :param kept: the candidates left after pruning.
    :param method: how this tuning measures.
    :param adaptive: the driver chooses what to measure; the plan then only says whether to reuse.
    """
    name = space.name
    if record.fingerprints == tuple(c.fingerprint for c in space.candidates):
        return Plan(pick=record.best_index)
    why = comparable(record.method, method)
    if why is not None:
        logger.info(
            "kerneltune: %s: stored times were measured otherwise (%s), retuning every candidate", name, why
        )
        return None
    carried = carried_rows(record, space)
    if not carried:
        logger.info("kerneltune: %s: the stored record measured none of these candidates, retuning", name)
        return None
    rows = rows_by_fingerprint(record)
    fingerprints = [c.fingerprint for c in space.candidates]
    new = tuple(
        i
        for i in kept
        if fingerprints[i] not in rows or record.measurements[rows[fingerprints[i]]].error == PRUNED
    )
    anchor = next((i for i in kept if fingerprints[i] == record.fingerprints[record.best_index]), None)
    if anchor is None:
        timed = [i for i in kept if i in carried and math.isfinite(carried[i][0])]
        anchor = min(timed, key=lambda i: (carried[i][0], i), default=None)
    if not new:
        if anchor is None:
            logger.info("kerneltune: %s: no stored candidate that ran is left, retuning", name)
            return None
        return Plan(pick=anchor, reuse=True)
    if adaptive:
        return Plan(reuse=True)
    return Plan(measure=((anchor,) if anchor is not None else ()) + new, reuse=True)


def explain(
    name: str,
    key: object,
    *,
    rechecked: TuningRecord | None,
    rounds: int,
    warm_start: dict[str, Any] | None,
    carried: int,
    scoped: bool,
    measuring: int,
    kept: int,
) -> None:
    """Log what a plan has a tuning measure, and why: a re-check, a warm start, or a grown list."""
    if rechecked is not None:
        why = "uncertain" if rechecked.confidence == "uncertain" else "marked by kerneltune cache verify"
        logger.info(
            "kerneltune: %s: key %r: re-checking the stored pick [%d] %s (%s) against %d rival(s), "
            "head to head in %d interleaved rounds",
            name,
            key,
            rechecked.best_index,
            rechecked.labels[rechecked.best_index],
            why,
            measuring - 1,
            rounds,
        )
    elif warm_start is not None and "portfolio" in warm_start:
        pass  # portfolio_plan said so
    elif warm_start is not None and warm_start.get("screen"):
        logger.info(
            "kerneltune: %s: key %r: warm start from the stored key %s (distance %.3g): screening all %d "
            "kept candidates, then re-timing the fastest with its pick [%s] head to head",
            name,
            key,
            warm_start["from"],
            warm_start["distance"],
            kept,
            warm_start.get("lead"),
        )
    elif warm_start is not None:
        logger.info(
            "kerneltune: %s: key %r: warm start from the stored key %s (distance %.3g): "
            "measuring %d of %d candidates",
            name,
            key,
            warm_start["from"],
            warm_start["distance"],
            measuring,
            kept,
        )
    elif carried:
        logger.info(
            "kerneltune: %s: key %r: the candidate list changed; %d stored measurement(s) reused, "
            "measuring %s",
            name,
            key,
            carried,
            f"{measuring} candidate(s) against the stored pick" if scoped else "what the driver asks",
        )
