"""What a tuning is made with and what it queues: its schedule of runs, its jobs, its setup."""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from kerneltune.core.machine.stored_keys import StoredKeys
from kerneltune.core.machine.warm_start import Parsed, WarmStart
from kerneltune.core.values.records import Candidate
from kerneltune.core.values.space import Space

if TYPE_CHECKING:
    from kerneltune.core.machine.failed_configs import FailedConfigMemory
    from kerneltune.core.plugin_system.contracts import Reducer
    from kerneltune.core.plugin_system.session import Session


@attrs.frozen
class Schedule:
    """How a tuning measures: every count of runs it takes of a candidate, purpose by purpose.

    The one place a number of runs is decided; ``Tuner.begin`` makes it from
    the call and the settings. The fields after ``tie_rounds`` are the
    engine's own choices, not settings (``bench/warm_start.py`` varies them).

    :param warmup: untimed runs per candidate in the first pass.
    :param repeat: timed runs per candidate in the first pass; an interleaved round takes half.
    :param flush: let the timer evict the device's caches before timed runs.
    :param adaptive: the driver chooses what to measure in rounds; nothing is queued up front and
        near ties are left to it.
    :param shard: split the candidates between the ranks (``shard`` setting, several ranks, not
        adaptive): each measures its :func:`share` apart, without the barrier before each candidate
        or near-tie rounds (they would compare ranks' devices), and REDUCE gathers the shares.
    :param tie_rounds: interleaved rounds near ties are re-timed in (the ``tie_rounds`` setting; 0: none).
    :param tie_warmup: untimed runs of each candidate at the start of an interleaved round but the first.
    :param screen_warmup: a warm start's screen: untimed runs of each kept candidate...
    :param screen_repeat: ...and timed ones (two: replays of recorded sweeps kept every pick with them).
    :param finalist_repeat: at most this many timed runs per round (of two) for each finalist of a
        screen; ``None``: half of ``repeat``, as tie rounds take.
    :param stage3_factor: a staged search re-times each finalist with this many times ``repeat``...
    :param stage3_rounds: ...in this many interleaved rounds, so that drift lands on every finalist
        alike instead of on whichever ran last.
    """

    warmup: int
    repeat: int
    flush: bool = True
    adaptive: bool = False
    shard: bool = False
    tie_rounds: int = 4
    tie_warmup: int = 1
    screen_warmup: int = 1
    screen_repeat: int = 2
    finalist_repeat: int | None = None
    stage3_factor: int = 4
    stage3_rounds: int = 4

    @property
    def per_round(self) -> int:
        """Timed runs per candidate in an interleaved round: half of ``repeat``, at least one."""
        return max(1, math.ceil(self.repeat / 2))

    @property
    def finalist_per_round(self) -> int:
        """Timed runs per round of a screen's finalist: :attr:`per_round`, at most ``finalist_repeat``."""
        most = self.finalist_repeat
        return self.per_round if most is None else max(1, min(self.per_round, most))

    @property
    def recheck_rounds(self) -> int:
        """Interleaved rounds a re-check of a stored pick takes: ``tie_rounds``, at least 2."""
        return max(2, self.tie_rounds)

    @property
    def recheck_repeat(self) -> int:
        """Timed runs per round of an adaptive driver's re-check: half of ``repeat``, at least one."""
        return max(1, self.repeat // 2)

    @property
    def stage3_per_round(self) -> int:
        """Timed runs per round of a staged search's finalist (its stage 3)."""
        return max(1, self.repeat * self.stage3_factor // self.stage3_rounds)


T = TypeVar("T")


def share(items: Sequence[T], rank: int, world_size: int) -> list[T]:
    """The items rank ``rank`` of ``world_size`` measures when the ranks shard: every N-th from its own."""
    return list(items[rank::world_size])


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
    #: :meth:`~kerneltune.core.machine.recorder.Recorder.measure`).
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
    #: whether a key without a record warm starts, and within what budget.
    warm: WarmStart = attrs.field(factory=WarmStart)
    #: the records a warm start read before, parsed, by entry (:func:`~.warm_start.stored_records`).
    parsed: Parsed = attrs.field(factory=dict)
    #: the tuner's stored keys, read once for the keys ``tune = "nearest"`` serves (:mod:`.serving`).
    stored: StoredKeys = attrs.field(factory=StoredKeys)
    #: the configs of the space's code that failed for every key, and the argument dtypes this
    #: key's are; ``None`` where the driver gave no dtypes (nothing is remembered or consulted).
    failed: FailedConfigMemory | None = None
    dtypes: tuple[str, ...] = ()
