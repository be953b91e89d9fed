"""When COMPILE's work in this process may run beside the measuring thread, and when a fork may start."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from kerneltune.core.compiling.turns import LoadTurns


class LoadGate:
    """The fork lock, the timing hold, the turn tickets and the pause of the compiles ahead of one stage.

    Everything of COMPILE that runs in this process (a fork, a load from the
    backend's on-disk cache, a compile after its process ended) holds the
    fork lock: no child is forked while this process is inside the compiler.
    Loads take it one at a time in the order handed over (:class:`LoadTurns`).

    Called by the measuring thread (:meth:`between`, :meth:`measuring`, :meth:`waiting_for`,
    :meth:`timing_begins`, :meth:`timing_ends`) and by the stage's pool threads (the rest).

    :param beside: loads may go on beside a measurement (the timer holds the device, and the backend
        can tell a cached program from one to compile).
    """

    def __init__(self, *, beside: bool) -> None:
        self.beside = beside
        #: held while forking, while compiling here with children about, and by the measuring thread
        #: through a candidate's timed runs (:meth:`timing_begins`).
        self._forking = threading.Lock()
        #: whether the measuring thread holds the fork lock for timed runs; only that thread reads it.
        self._timing_held = False
        #: set while the measuring thread is between candidates, cleared under the fork lock while
        #: it measures one: a fork starts only while it is set (:meth:`may_fork`).
        self._between = threading.Event()
        self._between.set()
        #: set while compiles ahead may run; cleared under the fork lock while candidates are measured.
        self._ahead_may_run = threading.Event()
        self._ahead_may_run.set()
        #: loads take the fork lock one at a time, in the order handed over, after the measuring thread.
        self._turns = LoadTurns()
        #: guards ``_tickets``: each candidate's turn, handed out as it is handed over.
        self._lock = threading.Lock()
        self._tickets: dict[int, int] = {}
        #: a compile went to a compile process (set once, never cleared: a plain flag).
        self._missed = False

    def enter(self, index: int) -> None:
        """Candidate ``index`` loads in its turn, after every candidate entered before it."""
        with self._lock:
            self._tickets[index] = self._turns.ticket()

    def _ticket(self, index: int) -> int | None:
        with self._lock:
            return self._tickets.get(index)

    @property
    def missed(self) -> bool:
        """Whether a compile went to a compile process: from then on every wait settles."""
        return self._missed

    def miss(self) -> None:
        """A compile goes to a compile process: probes end, and the loads held back go on in their turns."""
        self._missed = True
        self._turns.missed()

    @contextlib.contextmanager
    def turn(self, index: int) -> Iterator[None]:
        """Candidate ``index``'s turn to load (none for one never entered: begun ahead)."""
        ticket = self._ticket(index)
        with contextlib.nullcontext() if ticket is None else self._turns.turn(ticket):
            yield

    def done(self, index: int) -> None:
        """Candidate ``index``'s compile has ended: those behind its turn wait for it no longer."""
        ticket = self._ticket(index)
        if ticket is not None:
            self._turns.done(ticket)

    @contextlib.contextmanager
    def quiet(self, ahead: Callable[[], bool]) -> Iterator[None]:
        """Hold the fork lock; for a compile ``ahead`` (asked anew), only while compiles ahead may run."""
        while True:
            if ahead():
                self._ahead_may_run.wait()
            self._forking.acquire()
            if self._ahead_may_run.is_set() or not ahead():
                break
            self._forking.release()
        try:
            yield
        finally:
            self._forking.release()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the fork lock: a fork or a load under way ends first, none starts within."""
        with self._forking:
            yield

    def may_fork(self) -> bool:
        """Whether the measuring thread is between candidates; read under the fork lock."""
        return self._between.is_set()

    def wait_between(self) -> None:
        """Block until the measuring thread is between candidates."""
        self._between.wait()

    def wait_ahead(self) -> None:
        """Block until compiles ahead may run."""
        self._ahead_may_run.wait()

    def stop_ahead(self) -> bool:
        """Hold compiles ahead back; whether they ran until now. The caller holds the fork lock."""
        if not self._ahead_may_run.is_set():
            return False
        self._ahead_may_run.clear()
        return True

    def let_ahead_run(self) -> bool:
        """Let compiles ahead run again; whether they were held back."""
        held = not self._ahead_may_run.is_set()
        self._ahead_may_run.set()
        return held

    @contextlib.contextmanager
    def waiting_for(self, index: int) -> Iterator[None]:
        """The measuring thread waits for candidate ``index``'s load: only it and those before it begin."""
        with self._turns.waiting_for(self._ticket(index)):
            yield

    def measuring(self) -> None:
        """The measuring thread's candidate is ready: where loads go on beside it, a fork under way ends
        first and none starts until :meth:`between`."""
        if self.beside:
            with self._forking:
                self._between.clear()

    def between(self) -> None:
        """The measuring thread is between candidates: loads go on, compile processes may be forked."""
        self.timing_ends()
        self._between.set()

    def timing_begins(self) -> None:
        """A candidate's timed runs begin: no load runs beside them, until the next :meth:`between`.

        A load holds the interpreter lock for milliseconds at a time, longer
        than a hold keeps the device busy: beside a timed run it would put
        host time into the device's. So the measuring thread takes the fork
        lock, which every load holds (a load under way ends first), and
        loads go on only beside warm-up runs and between candidates.
        """
        if self.beside and not self._between.is_set() and not self._timing_held:
            self._turns.measuring()
            self._forking.acquire()
            self._timing_held = True

    def timing_ends(self) -> None:
        """A candidate's timed runs are all launched: loads go on while the device runs them.

        The host's part of every timed run is done, so a load cannot delay
        one; the measuring thread only waits for the device from here (its
        timer's ``collect``). No compile process is forked until the next
        :meth:`between`.
        """
        if self._timing_held:
            self._timing_held = False
            self._forking.release()
            self._turns.measured()
