"""What a tuning is made with and what it queues: its schedule, its jobs, its setup."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import attrs
from kerneltune.core.machine.warm_start import Parsed, WarmStart
from kerneltune.core.values.records import Candidate
from kerneltune.core.values.space import Space

if TYPE_CHECKING:
    from kerneltune.core.plugin_system.contracts import Reducer
    from kerneltune.core.plugin_system.session import Session


@attrs.frozen
class Schedule:
    """How a tuning measures each candidate.

    :param warmup: untimed runs per candidate.
    :param repeat: timed runs per candidate.
    :param flush: let the timer evict the device's caches before timed runs.
    :param adaptive: the driver chooses what to measure in rounds
        (:meth:`Tuning.request`); nothing is queued up front and near ties
        are left to it.
    """

    warmup: int
    repeat: int
    flush: bool = True
    adaptive: bool = False
    #: split the candidates between the ranks (``shard`` setting, several ranks, not adaptive).
    shard: bool = False


@attrs.frozen
class Job:
    """One queued measurement: a candidate and its runs."""

    candidate: Candidate
    warmup: int
    repeat: int
    #: add to the candidate's earlier samples instead of replacing them.
    extend: bool = False
    #: what the measurement is for, as verbose lines and logs say it ("" for the first pass).
    purpose: str = ""
    #: the interleaved round the samples belong to (0: none): a candidate's samples of one round are
    #: one group of ``Measurement.rounds``, however many jobs took them.
    round: int = 0
    #: whether the observers hear of the measurement when this job is done; the jobs of an
    #: interleaved round but its candidate's last take one sample each and report nothing.
    reports: bool = True
    #: launched without waiting for the device after the batched job before it: the samples of a
    #: run of such jobs are collected once the last is launched (a warm start's screen; see
    #: :meth:`~kerneltune.core.machine.measuring.Measuring.measure`).
    batched: bool = False

    @property
    def stage(self) -> str | None:
        """``purpose``, or ``None`` for the first pass."""
        return self.purpose or None


@attrs.frozen
class Setup:
    """What a :class:`Tuning` is made with: ``Tuner.begin`` resolves it from the call."""

    space: Space
    #: the tuner's in-process picks, by business key; a tuning adds its pick.
    picks: dict[Hashable, Candidate]
    #: the plain data of the records this process holds, by cache entry; a tuning reads and adds.
    records: dict[str, dict[str, Any]]
    session: Session
    reducer: Reducer
    key: Hashable
    #: the key as plain data, ``None`` when computing it failed.
    encoded: Any
    #: the cache entry's digest, ``None`` when computing the key failed.
    entry: str | None
    verbose: bool
    #: the per-entry lock, held from ``begin`` until the tuning exits.
    lock: threading.Lock
    schedule: Schedule
    #: which tuner drives the tuning, for observers (see ``TuningStarted.driver``).
    driver: str = "function"
    #: the entry's name before records outlived candidate lists, ``None`` when computing the key failed.
    legacy_entry: str | None = None
    #: whether a key without a record warm starts, and within what budget.
    warm: WarmStart = attrs.field(factory=WarmStart)
    #: the records a warm start read before, parsed, by entry (:func:`~.warm_start.stored_records`).
    parsed: Parsed = attrs.field(factory=dict)
