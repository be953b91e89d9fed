"""COMPILE's stage: the kept candidates compiled on a pool, ahead of MEASURE (:class:`CompileStage`).

docs/architecture.md ("The stages", COMPILE) says where each part is.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from kerneltune.core.compiling.forks import CompileOne, CompileTimeout, ForkSupervisor
from kerneltune.core.compiling.gate import LoadGate
from kerneltune.core.compiling.options import COMPILE_DEADLINE, COMPILE_POOL, COMPILE_TIMEOUT, COMPILE_WORKERS
from kerneltune.core.compiling.processes import can_fork, effort, probes
from kerneltune.core.errors import CompileMiss, describe_error
from kerneltune.core.plugin_system.contracts import CompileProcess, ProbingCompileProcess
from kerneltune.core.values.events import CompileFinished, CompileStarted, Header
from kerneltune.core.values.records import Candidate

if TYPE_CHECKING:
    from kerneltune.core.plugin_system.observers import Observers
    from kerneltune.core.plugin_system.settings import Settings

#: Threads when the ``compile_workers`` setting is 0 ("one per core"), at most.
MAX_AUTO_WORKERS = 32
#: How often a wait checks whether a started compile has outlasted its timeout.
POLL_S = 0.05


def worker_count(setting: int) -> int:
    """Threads for compiles: the setting, or one per core (capped) when it is 0."""
    return max(1, setting if setting > 0 else min(MAX_AUTO_WORKERS, os.cpu_count() or 1))


class CompileStage:
    """Compiles candidates on a pool; :meth:`wait` gives one's outcome.

    Called by the thread driving the tuning, which also measures (every public method); its pool
    threads run :meth:`_run`.

    :param compile_one: compiles one candidate; raises what makes it unusable. With ``child`` it
        runs in a forked process, then here, loading that process's work from the backend's on-disk
        cache; under a probe it lets :class:`~kerneltune.core.CompileMiss` through (a compile to fork).
    :param candidates: the candidates this rank compiles, in the order they
        will be measured (the pool starts them in that order).
    :param workers: how many compile at once.
    :param timeout: seconds a compile may take once started; 0 for no limit.
    :param deadline: the ``compile_deadline`` setting (:class:`~.siblings.Siblings`); 0 for none.
    :param child: the backend's part in compiling in forked processes (:class:`~.forks.ForkSupervisor`),
        which inherit the compiler's one-time set-up here (threads share one interpreter lock for
        Triton's code generation, ``bench/compile_parallel.py``); ``None``, or no ``fork``: threads.
        Where it can probe, only a miss is forked (:meth:`_loaded`).
    :param header: the tuning, as its events name it.
    :param observers: told of each compile's start and end, from pool threads.
    """

    def __init__(
        self,
        compile_one: CompileOne,
        candidates: Sequence[Candidate],
        *,
        workers: int,
        timeout: float,
        header: Header,
        deadline: float = 0.0,
        observers: Observers,
        child: CompileProcess | None = None,
        beside: bool = False,
    ) -> None:
        child = child if can_fork() else None
        #: the backend's part in compiling, where it can probe.
        self._prober = cast(ProbingCompileProcess, child) if child is not None and probes(child) else None
        #: the fork lock, the measuring thread's flags and the loads' turns.
        self._gate = LoadGate(beside=beside and self._prober is not None)
        #: the compile processes, where compiles fork (``None``: they run on the pool's threads).
        self._forks = None
        if child is not None:
            self._forks = ForkSupervisor(child, self._gate, timeout, deadline, self._is_ahead)
        self._timeout = timeout
        self._workers = workers
        self._header = header
        self._observers = observers
        #: guards the fields below, which the driving thread and the pool threads share (the pools
        #: and ``_closed`` only the driving thread writes); taken after the gate's fork lock, before
        #: the supervisor's lock.
        self._lock = threading.Lock()
        #: each candidate handed over, how it compiles (a later :meth:`add` may bring its own), and
        #: the backend's guess at how long it compiles.
        self._candidates: dict[int, tuple[Candidate, CompileOne]] = {}
        self._efforts: dict[int, float] = {}
        self._futures: dict[int, concurrent.futures.Future[BaseException | None]] = {}
        #: compiles handed over ahead (:meth:`ahead`) that no round has asked for yet.
        self._ahead: set[int] = set()
        #: when each compile began, the candidates whose probe has run (a hit among them is loaded,
        #: never queued for a process) and those whose compile has ended.
        self._began: dict[int, float] = {}
        self._probed: set[int] = set()
        self._finished: set[int] = set()
        self._closed = False
        #: made when compiles are handed over, shut down when they have all ended (:meth:`settle`).
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._ahead_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.add(candidates, compile_one)

    @classmethod
    def configured(
        cls,
        settings: Settings,
        observers: Observers,
        compile_one: CompileOne,
        candidates: Sequence[Candidate],
        header: Header,
        child: CompileProcess | None,
        beside: bool = False,
    ) -> CompileStage:
        """A stage under the ``compile_workers``, ``compile_timeout`` and ``compile_pool`` settings.

        :param beside: the timer holds the device, so loads may go on beside a measurement (:meth:`wait`).
        """
        return cls(
            compile_one,
            candidates,
            # Not capped by this first batch: an adaptive driver's later rounds may hand over more
            # (the pool starts a thread only for a compile no idle one takes).
            workers=worker_count(settings[COMPILE_WORKERS]),
            timeout=settings[COMPILE_TIMEOUT],
            deadline=settings[COMPILE_DEADLINE],
            header=header,
            observers=observers,
            child=child if settings[COMPILE_POOL] == "processes" else None,
            beside=beside,
        )

    def add(self, candidates: Sequence[Candidate], compile_one: CompileOne) -> None:
        """Compile these too, with ``compile_one``, after those handed over before.

        One already handed over is not redone; one handed over ahead
        (:meth:`ahead`) becomes one that :meth:`settle` waits for, and starts
        now if it had not. Each batch keeps its own ``compile_one``: an
        adaptive driver's function for a round knows only that round's
        candidates.
        """
        self.resume()
        with self._lock:
            for candidate in candidates:
                index = candidate.index
                if index in self._ahead:
                    self._ahead.discard(index)
                    if not self._futures[index].cancel():
                        assert self._forks is not None  # compiles go ahead only in processes
                        self._forks.promote(index)
                        continue
                elif index in self._futures:
                    continue
                self._submit(candidate, compile_one, ahead=False)

    def ahead(self, candidates: Sequence[Candidate], compile_one: CompileOne) -> None:
        """Compile these in the background: candidates an adaptive driver expects to ask for next.

        Only in compile processes (they can be stopped; threads cannot):
        without them this does nothing. Each runs at a lower priority
        (``AHEAD_NICENESS``), no :meth:`settle` waits for it, and every one is
        stopped while candidates are measured (:meth:`pause`). A later
        :meth:`add` of one makes it a compile like any other; one never asked
        for is stopped by :meth:`close`. One handed over before is not redone.
        The driver's word replaces its last: those handed over ahead before,
        not among these and not started yet, are dropped (they may be handed
        over again).
        """
        if self._forks is None:
            return
        self.resume()
        wanted = {candidate.index for candidate in candidates}
        with self._lock:
            for index in sorted(self._ahead - wanted):
                if self._futures[index].cancel():
                    self._ahead.discard(index)
                    del self._futures[index]
            for candidate in candidates:
                index = candidate.index
                if index in self._futures:
                    continue
                self._ahead.add(index)
                self._submit(candidate, compile_one, ahead=True)

    def _submit(self, candidate: Candidate, compile_one: CompileOne, *, ahead: bool) -> None:
        """Hand ``candidate`` to the pool of the compiles waited for, or of those ``ahead`` (made by its
        first compile); under the lock."""
        index = candidate.index
        self._candidates[index] = (candidate, compile_one)
        if self._prober is not None and not ahead:
            self._efforts[index] = effort(self._prober, candidate.config)
            self._gate.enter(index)
        pool = self._ahead_pool if ahead else self._pool
        if pool is None:
            prefix = "kerneltune-compile-ahead" if ahead else "kerneltune-compile"
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=prefix)
            if ahead:
                self._ahead_pool = pool
            else:
                self._pool = pool
        self._futures[index] = pool.submit(self._run, candidate)

    def _is_ahead(self, index: int) -> bool:
        with self._lock:
            return index in self._ahead

    def pause(self) -> None:
        """Stop every compile ahead (``SIGSTOP``) and start no other until :meth:`resume`.

        Called before a candidate is measured: what runs beside a timed run
        takes the host's cores and memory bandwidth from it.
        """
        with self._lock:
            if not self._ahead:
                return  # without taking the fork lock, which a load beside the measurement may hold
        with self._gate.held(), self._lock:
            if self._ahead and self._gate.stop_ahead():
                assert self._forks is not None  # compiles go ahead only in processes
                self._forks.signal(signal.SIGSTOP, self._ahead)

    def resume(self) -> None:
        """Let the compiles ahead go on (``SIGCONT``)."""
        with self._lock:
            if self._gate.let_ahead_run() and self._forks is not None:
                self._forks.signal(signal.SIGCONT)

    def _run(self, candidate: Candidate) -> BaseException | None:
        """Compile ``candidate``, tell the observers; why it cannot run, or ``None``. On a pool thread."""
        index = candidate.index
        if self._is_ahead(index):
            self._gate.wait_ahead()
            if self._closed:
                return None
        began = time.monotonic()
        with self._lock:
            self._began[index] = began
            ahead = index in self._ahead
            compile_one = self._candidates[index][1]
        self._observers.compile_started(self._header.make(CompileStarted, candidate=candidate, ahead=ahead))
        error: BaseException | None = None
        try:
            if self._forks is None:
                compile_one(candidate)
            elif not self._loaded(candidate, compile_one):
                self._gate.miss()
                error = self._forks.compile(candidate, compile_one, began)
                if error is None:
                    with self._gate.quiet(lambda: self._is_ahead(index)):
                        compile_one(candidate)
        except Exception as exc:
            error = exc
        finally:
            self._gate.done(index)
        with self._lock:
            self._finished.add(index)
            ahead = index in self._ahead
            done = len(self._finished - self._ahead)
            total = len(self._futures) - len(self._ahead)
        self._observers.compile_finished(
            self._header.make(
                CompileFinished,
                candidate=candidate,
                seconds=time.monotonic() - began,
                error=None if error is None else describe_error(error),
                done=done,
                total=total,
                ahead=ahead,
            ),
        )
        return error

    def _loaded(self, candidate: Candidate, compile_one: CompileOne) -> bool:
        """Whether ``candidate`` compiled here from the backend's on-disk cache, under its probe, in
        its turn (:meth:`~.gate.LoadGate.turn`); a miss (:class:`CompileMiss`) goes to a process.

        Once a probe has missed, the cache is taken for cold: the rest go to
        compile processes unprobed and are forked together; a program the
        cache held after all costs a fork in a tree.
        """
        if self._prober is None:
            return False
        index = candidate.index
        # One begun ahead has no turn: it waits in the gate while compiles ahead are stopped. After a
        # miss each still passes through its turn, which ends its ticket for those behind it.
        with self._gate.turn(index):
            if self._gate.missed:
                return False
            with self._lock:
                self._probed.add(index)
            with self._gate.quiet(lambda: self._is_ahead(index)):
                try:
                    with self._prober.probing():
                        compile_one(candidate)
                except CompileMiss:
                    # Before the turn ends, so that the next in turn already finds it queued.
                    self._gate.miss()
                    self._queue_begun(index)
                    return False
        return True

    def _queue_begun(self, missed: int) -> None:
        """At the first miss (``missed``'s probe): queue it and every compile the pool has begun and not
        probed for processes, the longest first.

        Compiles the pool has not begun queue themselves when they begin.
        """
        assert self._forks is not None
        with self._lock:
            begun = [
                index
                for index in self._began
                if (index == missed or index not in self._probed)
                and index not in self._finished
                and index not in self._ahead
            ]
            begun.sort(key=lambda index: -self._efforts.get(index, 0.0))
            self._forks.queue([self._candidates[index] for index in begun])

    def wait(self, candidate: Candidate) -> BaseException | None:
        """:meth:`settle`, then why ``candidate`` cannot run, or ``None`` (also for one this rank does
        not compile); the measuring thread calls it before each candidate.

        Where loads may go on beside a measurement and every compile so far
        was a load, it waits for ``candidate``'s alone: the others go on
        beside its warm-up runs (:meth:`timing_begins`), until a compile goes
        to a process.
        """
        self._gate.between()
        index = candidate.index
        if self._gate.beside and not self._gate.missed:
            # Loads after this candidate's wait until it is measured (beside its warm-up, at the latest).
            with self._gate.waiting_for(index):
                if index in self._futures and not self._is_ahead(index):
                    self._settle(index)
                if not self._gate.missed:
                    return self._ready(index)
            # A load missed meanwhile: compiles are under way in processes.
        self.settle()
        return self._ready(index)

    def _ready(self, index: int) -> BaseException | None:
        """Candidate ``index``'s compile has ended (or its timeout passed): stop the compiles ahead,
        fork nothing until the next :meth:`wait`, and say why it cannot run (``None``: it can)."""
        self.pause()
        future = self._futures.get(index)
        if future is None or self._is_ahead(index):
            problem = None
        else:
            problem = future.result() if future.done() else self._expired(index)
        self._gate.measuring()
        return problem

    def timing_begins(self) -> None:
        """:meth:`~.gate.LoadGate.timing_begins`."""
        self._gate.timing_begins()

    def timing_ends(self) -> None:
        """:meth:`~.gate.LoadGate.timing_ends`."""
        self._gate.timing_ends()

    def settle(self) -> None:
        """Block until no compile handed over is running, and the pool's threads have ended.

        Every compile, not only the next candidate's: a compile beside a
        timed run takes the host's cores and memory bandwidth from it. One
        past its timeout is given up (its process killed; a thread finishes
        in the background).
        """
        waited = [index for index in list(self._futures) if not self._is_ahead(index)]
        for index in waited:
            self._settle(index)
        pool, self._pool = self._pool, None
        if pool is not None:
            # Idle threads are joined; one still in a timed-out compile ends when it returns.
            pool.shutdown(wait=all(self._futures[index].done() for index in waited))

    def _settle(self, index: int) -> None:
        """Wait until compile ``index`` has ended or outlasted its timeout."""
        future = self._futures[index]
        while not concurrent.futures.wait([future], timeout=POLL_S)[0]:
            if self._expired(index) is not None:
                return

    def _expired(self, index: int) -> CompileTimeout | None:
        with self._lock:
            began = self._began.get(index)
        if self._timeout > 0 and began is not None and time.monotonic() - began > self._timeout:
            return CompileTimeout(f"compiling took longer than compile_timeout = {self._timeout:g} s")
        return None

    def close(self) -> None:
        """Drop compiles not started, stop compile processes; compiles on threads finish in the background."""
        self._closed = True
        self._gate.between()
        for pool in (self._pool, self._ahead_pool):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self.resume()
        if self._forks is not None:
            self._forks.kill()
