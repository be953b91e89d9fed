"""The tuning state machine's entry: a :class:`Tuner` holds one candidate space and its picks.

Each miss is one :class:`~kerneltune.core.machine.tuning.Tuning` made by
:meth:`Tuner.begin` and driven from outside. docs/architecture.md ("The
stages") draws the machine and says where each stage is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from kerneltune.core.machine import collector
from kerneltune.core.machine.failed_configs import FailedConfigMemory
from kerneltune.core.machine.options import (
    PAUSE_GC,
    REPEAT,
    SHARD,
    TIE_ROUNDS,
    WARM_START,
    WARM_START_BUDGET,
    WARMUP,
)
from kerneltune.core.machine.schedule import Schedule, Setup
from kerneltune.core.machine.stored_keys import StoredKeys
from kerneltune.core.machine.tuning import Tuning
from kerneltune.core.machine.warm_start import Parsed, WarmStart, checked_warm_start
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.keys import digest, encode_key
from kerneltune.core.values.records import Candidate
from kerneltune.core.values.space import Space

__all__ = ["Schedule", "Tuner", "Tuning"]


class Tuner:
    """The in-process picks of one :class:`Space`, and the way to make more.

    ``picks`` (business key -> :class:`Candidate`) is what drivers dispatch
    from; ``records`` the plain data of every record this process made or
    read for the space's code, by cache entry, which LOOKUP and warm starts read first.
    """

    def __init__(
        self,
        space: Space,
        picks: dict[Hashable, Candidate] | None = None,
        records: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """:param picks: the dict to keep picks in (default: a new one), for a driver that reads it first.
        :param records: the dict to keep records in (default: a new one); tuners of one code's
            candidate lists may share one, so a list that grew reuses what the other measured.
        """
        self.space = space
        self.picks: dict[Hashable, Candidate] = {} if picks is None else picks
        self.records: dict[str, dict[str, Any]] = {} if records is None else records
        #: ``records`` parsed, by entry, as warm starts read them (:func:`.warm_start.stored_records`).
        self.parsed: Parsed = {}
        #: whether ``records`` holds what the cache listed, for keys served unmeasured.
        self.stored = StoredKeys()
        #: the configs that failed for a reason no key changes (:mod:`~.failed_configs`).
        self.failed = FailedConfigMemory(space)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def begin(
        self,
        session: Session,
        key: Hashable,
        *,
        keep: Callable[[Candidate], bool] | None = None,
        failure: BaseException | None = None,
        group: Any = None,
        verbose: bool = False,
        adaptive: bool = False,
        warmup: int | None = None,
        repeat: int | None = None,
        flush: bool = True,
        driver: str = "function",
        warm_start: str | None = None,
        warm_start_budget: int | None = None,
        dtypes: tuple[str, ...] | None = None,
    ) -> Tuning:
        """Run KEY, LOOKUP, PRUNE and AGREE for ``key``; the result is a context manager.

        :param keep: the prune predicate; ``False`` drops a candidate.
        :param adaptive: queue nothing up front: the driver measures in rounds
            (:class:`~kerneltune.core.machine.faces.SearchTuning`); what it never requests is not measured.
        :param warmup: untimed runs per candidate (default: the ``warmup`` setting).
        :param repeat: timed runs per candidate (default: the ``repeat`` setting).
        :param flush: let the timer evict the device's caches before each timed run.
        :param driver: which tuner drives the tuning, as observers see it:
            ``"function"``, ``"contextual"``, ``"search_params"`` or a plugin's own.
        :param warm_start: ``"nearest"``, ``"screen"`` or ``"off"`` (default: the ``warm_start`` setting).
        :param warm_start_budget: how many configs a warm start measures at most
            (default: the ``warm_start_budget`` setting).
        :param dtypes: the arguments' dtypes (:func:`~.failed_configs.argument_dtypes`): a config
            that failed for a reason no key changes is remembered under them and, alone, failed
            at once for a later key with the same; ``None`` (default) remembers nothing.
        :param failure: an exception the driver met while computing the key;
            alone it is re-raised, with several ranks it is reported to all.
        :param group: the process group handed to the reducer.
        :raises TypeError: for a key that cannot be encoded or hashed (single rank).
        :raises ValueError: for a ``warm_start`` or ``warm_start_budget`` that is not one.
        :raises RankMismatchError: when ranks disagree (every rank raises).
        :raises PluginError: when the reducer cannot run over ``group``.
        """
        reducer = session.make_reducer(group)
        distributed = reducer.world_size > 1
        encoded = None
        if failure is None:
            try:
                encoded = encode_key(key)
                hash(key)
            except TypeError as exc:
                failure = exc
        if failure is not None and not distributed:
            raise failure
        warm_start = session.settings[WARM_START] if warm_start is None else warm_start
        budget = session.settings[WARM_START_BUDGET] if warm_start_budget is None else warm_start_budget
        warm_start = checked_warm_start(self.space.name, warm_start, budget)
        # Test the failure, not the encoding: a key of None encodes to None. The entry
        # leaves the candidate list out (see kerneltune.core.machine.reuse).
        entry = None
        if failure is None:
            entry = digest({"source": self.space.source, "hardware": session.hardware, "key": encoded})
        schedule = Schedule(
            warmup=session.settings[WARMUP] if warmup is None else warmup,
            repeat=session.settings[REPEAT] if repeat is None else repeat,
            flush=flush,
            adaptive=adaptive,
            shard=session.settings[SHARD] and distributed and not adaptive,
            tie_rounds=session.settings[TIE_ROUNDS],
        )
        lock = self._lock_for(entry or "")
        lock.acquire()
        # The contextual tuner runs the user's whole outer function again and again: not under it.
        pause = session.settings[PAUSE_GC] and driver != "contextual"
        if pause:
            collector.hold_off()
        try:
            warm = WarmStart(warm_start, budget)
            setup = Setup(
                self.space,
                self.picks,
                self.records,
                session,
                reducer,
                key,
                encoded,
                entry,
                verbose,
                lock,
                schedule,
                driver=driver,
                warm=warm,
                parsed=self.parsed,
                stored=self.stored,
                failed=None if dtypes is None else self.failed,
                dtypes=dtypes or (),
            )
            tuning = Tuning(setup, paused_gc=pause)
            tuning.prepare(keep, failure)
        except BaseException:
            if pause:
                collector.let_go()
            lock.release()
            raise
        return tuning

    def _lock_for(self, entry: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(entry, threading.Lock())
