"""LOOKUP, PRUNE and AGREE for one key: what a tuning does before it measures.

:func:`decide` finds the key's record, prunes, plans what a stored record or
a warm start saves and, with several ranks, agrees; the :class:`Decision`
is a pick to adopt or what to measure. docs/architecture.md ("The stages")
describes each stage.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
from kerneltune.core.errors import CacheReadError, UserFunctionError, describe_error
from kerneltune.core.machine.agreement import Vote, reach_verdict, short_repr
from kerneltune.core.machine.options import (
    ALWAYS_TUNE,
    RECHECK,
    TUNE,
    TUNE_AUTO,
    VERIFY_PICK,
)
from kerneltune.core.machine.portfolio_start import portfolio_plan
from kerneltune.core.machine.reuse import Plan, plan_recheck, plan_reuse
from kerneltune.core.machine.serving import untuned
from kerneltune.core.machine.stored import method_of, read_record, report_damage
from kerneltune.core.machine.warm_start import NEAREST, SCREEN, propose
from kerneltune.core.values.keys import digest
from kerneltune.core.values.pending import PendingMark
from kerneltune.core.values.records import Candidate, TuningRecord

if TYPE_CHECKING:
    from kerneltune.core.machine.schedule import Setup


@attrs.frozen
class Decision:
    """What LOOKUP, PRUNE and AGREE decided for one key: a pick to adopt, or what to measure."""

    #: the ranks that persist the outcome (this rank alone without others).
    writers: frozenset[int]
    #: the ranks on this rank's host, which split the compiling.
    neighbours: tuple[int, ...]
    #: whether every rank checks, with one more gather, that all picked the same.
    verify_pick: bool = False
    #: the candidates PRUNE kept (empty when a pick was found before pruning).
    kept: tuple[int, ...] = ()
    #: the candidate to adopt without measuring, ``None`` to measure (or, under
    #: ``tune = "never"`` or ``"fail"``, to go without).
    pick: int | None = None
    #: the record that comes with ``pick``; without a pick, the record whose stored times a plan carries.
    record: TuningRecord | None = None
    #: store the pick's record (shared by another rank).
    store: bool = False
    #: where the pick came from, for ``kerneltune_pick_loaded``: ``"cache"`` or ``"rank"``.
    source: str = "cache"
    #: what to measure instead of every kept candidate; ``None``: measure them.
    plan: Plan | None = None
    #: why the key's stored record could not be used: it is damaged (its file and what is wrong).
    damaged: str | None = None
    #: the key's pending mark, where it was served unmeasured before and not tuned since.
    pending: PendingMark | None = None


def retuning(setup: Setup) -> bool:
    """Whether stored records are ignored (``always_tune``).

    ``tune = "never"`` or ``"fail"`` measures nothing, so there a stored pick is all there is to run.
    """
    settings = setup.session.settings
    return settings[ALWAYS_TUNE] and settings[TUNE] == TUNE_AUTO


def decide(
    setup: Setup,
    keep: Callable[[Candidate], bool] | None,
    failure: BaseException | None,
    *,
    log_dir: Path | None,
    global_rank: int,
) -> Decision:
    """LOOKUP, PRUNE and AGREE: find the pick, or decide with the other ranks what to measure.

    :param keep: the prune predicate; ``False`` drops a candidate.
    :param failure: what went wrong computing the key, reported to every rank.
    :param log_dir: where this rank's cache keeps files (ranks sharing it share one writer).
    :param global_rank: this rank in the whole job, for messages.
    """
    reducer = setup.reducer
    distributed = reducer.world_size > 1
    alone = Decision(writers=frozenset({reducer.rank}), neighbours=(reducer.rank,))
    record: TuningRecord | None = None
    mark: PendingMark | None = None
    plan = None
    loaded = False
    damaged = None
    kept: tuple[int, ...] = ()
    stage = "computing the key"
    if failure is None:
        # With several ranks, a local failure must still reach the gather below,
        # or the other ranks would wait in it forever.
        try:
            stage = "reading the cache"
            if not retuning(setup):
                found, loaded, damaged = _lookup(setup)
                mark = found if isinstance(found, PendingMark) else None
                record = found if isinstance(found, TuningRecord) else None
            due = record is not None and loaded and _rechecks(setup, record)
            if record is not None and not due and not distributed and _lists_alike(setup, record):
                return attrs.evolve(alone, pick=record.best_index, record=record)
            stage = "pruning"
            kept = _prune(setup, keep)
            stage = "planning what to measure"
            if record is not None or not untuned(setup.session.settings, mark):
                plan = _plan(setup, record, kept, recheck=loaded)
        except Exception as exc:
            if not distributed:
                raise
            failure = exc
    if not distributed:
        if plan is not None and plan.pick is not None:
            assert record is not None
            return attrs.evolve(alone, pick=plan.pick, record=record)
        return attrs.evolve(alone, kept=kept, record=record, plan=plan, damaged=damaged, pending=mark)
    vote = _vote(setup, stage, failure, kept, record, plan, log_dir=log_dir, global_rank=global_rank)
    verdict = reach_verdict(reducer, vote, setup.space.name)
    agreed = Decision(
        writers=verdict.writers,
        neighbours=verdict.neighbours(reducer.rank),
        verify_pick=verdict.verify_pick,
        kept=kept,
        damaged=damaged,
    )
    # Every rank follows the plan of the rank whose record (or warm start) the verdict chose.
    shared = None if verdict.shared_record is None else TuningRecord.from_data(verdict.shared_record)
    plan = None if verdict.plan is None else Plan.from_data(verdict.plan, len(setup.space.candidates))
    if plan is not None and plan.pick is not None:
        assert shared is not None
        same = record is not None and record.best_index == shared.best_index
        return attrs.evolve(
            agreed,
            pick=plan.pick,
            record=shared,
            store=not same,
            source="cache" if same else "rank",
        )
    return attrs.evolve(agreed, record=shared, plan=plan)


def _lookup(setup: Setup) -> tuple[TuningRecord | PendingMark | None, bool, str | None]:
    """LOOKUP: the record of this key, held in this process or stored, whatever its candidate list.

    Where the key's entry holds a pending mark instead, the mark.

    :returns: the record, whether this process loaded it from the cache just
        now (rather than holding it already), and what damage kept a stored
        record from being used.
    """
    assert setup.entry is not None
    held = setup.records.get(setup.entry)
    record, damaged = _read(setup, setup.entry, held)
    return record, held is None and record is not None, damaged


def _read(
    setup: Setup, entry: str, held: dict | None = None
) -> tuple[TuningRecord | PendingMark | None, str | None]:
    """:func:`read_record`, a damaged record reported and as good as absent: the record, or what is wrong."""
    try:
        return read_record(setup.session, setup.space.name, entry, setup.encoded, held), None
    except CacheReadError as exc:
        report_damage(setup.session, setup.space.name, entry, exc)
        return None, str(exc)


def _rechecks(setup: Setup, record: TuningRecord) -> bool:
    """Whether a record loaded from the cache may be re-checked here (:func:`plan_recheck` says if it is due).

    Only where a tuning may measure: ``tune = "never"`` or ``"fail"`` serves
    the stored pick as it is, and so does ``recheck = false``.
    """
    settings = setup.session.settings
    return (
        settings[TUNE] == TUNE_AUTO
        and settings[RECHECK]
        and (record.recheck or record.confidence == "uncertain")
    )


def _lists_alike(setup: Setup, record: TuningRecord) -> bool:
    return record.fingerprints == tuple(c.fingerprint for c in setup.space.candidates)


def _prune(setup: Setup, keep: Callable[[Candidate], bool] | None) -> tuple[int, ...]:
    space = setup.space
    kept = tuple(c.index for c in space.candidates if keep is None or keep(c))
    if not kept:
        raise ValueError(
            f"prune_fn removed every candidate of {space.name} for key {setup.key!r}; keep at least one"
        )
    return kept


def _warm(setup: Setup) -> bool:
    return setup.warm.mode in (NEAREST, SCREEN) and not setup.schedule.adaptive


def _plan(setup: Setup, record: TuningRecord | None, kept: tuple[int, ...], *, recheck: bool) -> Plan | None:
    """What this rank would do instead of measuring every kept candidate; ``None``: measure them.

    :param recheck: the record was loaded from the cache just now, so a re-check it asks for is due here.
    """
    session, space, schedule = setup.session, setup.space, setup.schedule
    if record is not None:
        if recheck and _rechecks(setup, record):
            plan = plan_recheck(record, space, kept)
            if plan is not None:
                return plan
        return plan_reuse(record, space, kept, method_of(session, schedule), adaptive=schedule.adaptive)
    if session.settings[ALWAYS_TUNE] or schedule.adaptive:
        return None
    portfolio = portfolio_plan(session, space, kept, setup.key)
    if portfolio is not None:
        return portfolio
    if _warm(setup):
        screen = setup.warm.mode == SCREEN
        known = setup.records
        return propose(session, space, setup.encoded, kept, known, setup.warm.budget, screen, setup.parsed)
    return None


def _vote(
    setup: Setup,
    stage: str,
    failure: BaseException | None,
    kept: tuple[int, ...],
    record: TuningRecord | None,
    plan: Plan | None,
    *,
    log_dir: Path | None,
    global_rank: int,
) -> Vote:
    settings, space = setup.session.settings, setup.space
    error = None if failure is None else f"{stage}: {describe_error(failure)}"
    if isinstance(failure, UserFunctionError) and failure.__cause__ is not None:
        # The stage says it was the key or the pruning; the line names what the user's function raised.
        error = f"{stage}: {describe_error(failure.__cause__)} (raised by {failure.who})"
    return Vote(
        rank=setup.reducer.rank,
        global_rank=global_rank,
        host=socket.gethostname(),
        place=None if log_dir is None else str(log_dir.resolve()),
        error=error,
        kept=tuple((i, space.candidates[i].fingerprint) for i in kept),
        key=None if failure is not None else digest(setup.encoded),
        key_label=short_repr(setup.key),
        retune=retuning(setup),
        verify_pick=settings[VERIFY_PICK],
        record=None if record is None else record.to_data(),
        tune=settings[TUNE],
        plan=None if plan is None else plan.to_data(),
        warm=_warm(setup),
    )
