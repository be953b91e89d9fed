"""When COMPILE's work in this process may run beside the measuring thread, and when a fork may start.

A restart finds every program in the backend's on-disk cache, and a load
holds the interpreter lock for milliseconds. The pool's threads all queue
on the fork lock, which every load holds, and a lock serves its waiters
about first come, first served: the measuring thread waited behind every
load (``bench/restart.py``'s timeline). So loads take turns: one at a time
queues for the fork lock, the earliest handed over first, and the
measuring thread before them.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
from collections.abc import Callable, Iterator


class LoadGate:
    """The fork lock, the timing hold, the loads' turns and the pause of the compiles ahead of one stage.

    Everything of COMPILE that runs in this process (a fork, a load from the
    backend's on-disk cache, a compile after its process ended) holds the
    fork lock: no child is forked while this process is inside the compiler.

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
        #: guards ``_tickets``: each candidate's turn, numbered in the order handed over; taken before
        #: ``_changed``.
        self._lock = threading.Lock()
        self._tickets: dict[int, int] = {}
        self._numbers = itertools.count()
        #: guards the turns' state below, and wakes the loads waiting for their turn.
        self._changed = threading.Condition()
        #: tickets handed out whose load has not ended (a heap: the earliest first).
        self._pending: list[int] = []
        self._ended: set[int] = set()
        self._loading = False
        #: how many times the measuring thread wants or holds the fork lock (0: loads may begin).
        self._measuring = 0
        #: while the measuring thread waits for a candidate: its ticket (loads up to it may begin).
        self._wanted: int | None = None
        #: a compile went to a compile process (set once, never cleared).
        self._missed = False

    def enter(self, index: int) -> None:
        """Candidate ``index`` loads in its turn, after every candidate entered before it; its ticket
        must end, by its :meth:`turn` or by :meth:`done` (the pool runs its compiles in the order
        handed over, so the earliest ticket not ended is always one under way)."""
        with self._lock, self._changed:
            self._tickets[index] = next(self._numbers)
            heapq.heappush(self._pending, self._tickets[index])

    def _ticket(self, index: int) -> int | None:
        with self._lock:
            return self._tickets.get(index)

    @property
    def missed(self) -> bool:
        """Whether a compile went to a compile process: from then on every wait settles."""
        return self._missed

    def miss(self) -> None:
        """A compile goes to a compile process: probes end, and while the measuring thread waits for
        a candidate (:meth:`waiting_for`), every load may begin in its turn.

        The measuring thread then waits for every compile, not only its
        candidate's, so the loads after it hold it up no longer; and each
        of them may be a miss, whose compile process should start now, not
        once the first candidate's compile has ended (a search's compiles
        ran one, then all the others).
        """
        with self._changed:
            self._missed = True
            self._changed.notify_all()

    @contextlib.contextmanager
    def turn(self, index: int) -> Iterator[None]:
        """Candidate ``index``'s turn to load (none for one never entered: begun ahead): once every
        earlier ticket has ended, no load is under way and the measuring thread neither wants nor
        holds the fork lock. The load takes the fork lock inside."""
        ticket = self._ticket(index)
        if ticket is None:
            yield
            return
        with self._changed:
            self._changed.wait_for(lambda: self._may_load(ticket))
            self._loading = True
        try:
            yield
        finally:
            with self._changed:
                self._loading = False
                self._end(ticket)

    def _may_load(self, ticket: int) -> bool:
        if self._loading or self._pending[0] != ticket:
            return False
        wanted = self._wanted
        return not self._measuring or (wanted is not None and (self._missed or ticket <= wanted))

    def done(self, index: int) -> None:
        """Candidate ``index``'s compile has ended: those behind its turn wait for it no longer."""
        ticket = self._ticket(index)
        if ticket is not None:
            with self._changed:
                self._end(ticket)

    def _end(self, ticket: int) -> None:
        self._ended.add(ticket)
        while self._pending and self._pending[0] in self._ended:
            self._ended.discard(heapq.heappop(self._pending))
        self._changed.notify_all()

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
        """The measuring thread waits for candidate ``index``'s load: only it and those before it
        begin, until the measuring thread has the fork lock and gives it back."""
        ticket = self._ticket(index)
        with self._changed:
            self._measuring += 1
            self._wanted = ticket
        try:
            yield
        finally:
            with self._changed:
                self._measuring -= 1
                self._wanted = None
                self._changed.notify_all()

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

        A load holds the interpreter lock for milliseconds, longer than a
        hold keeps the device busy: beside a timed run it would put host time
        into the device's. The measuring thread takes the fork lock, which
        every load holds.
        """
        if self.beside and not self._between.is_set() and not self._timing_held:
            with self._changed:
                self._measuring += 1
            self._forking.acquire()
            self._timing_held = True

    def timing_ends(self) -> None:
        """A candidate's timed runs are all launched: loads go on while the device runs them.

        The host's part of every timed run is done, so a load cannot delay
        one. No compile process is forked until the next :meth:`between`.
        """
        if self._timing_held:
            self._timing_held = False
            self._forking.release()
            with self._changed:
                self._measuring -= 1
                self._changed.notify_all()
