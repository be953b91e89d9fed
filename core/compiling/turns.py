"""The order in which COMPILE's pool threads load programs from the backend's cache, and who goes first.

A restart finds every program in the backend's on-disk cache, and loading
one holds the interpreter lock for milliseconds. The pool's threads all
start at once and queue on the fork lock, which every load holds; a lock
serves its waiters about first come, first served, so the measuring thread,
which asks for the same lock once the first candidate's program is loaded,
waited behind every other load (``bench/restart.py``'s timeline shows every
load, then the first measurement).
:class:`LoadTurns` lets one load at a time queue for the fork lock, the
earliest handed over first, and the measuring thread before them.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
from collections.abc import Iterator


class LoadTurns:
    """Loads one at a time, in the order their candidates were handed over; the measuring thread first.

    Every ticket handed out must end, by its :meth:`turn` or by :meth:`done`:
    a later one waits for it. The pool runs its compiles in the order handed
    over, so the earliest ticket not ended is always one under way.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        #: tickets handed out whose load has not ended (a heap: the earliest first).
        self._pending: list[int] = []
        self._ended: set[int] = set()
        self._loading = False
        #: how many times the measuring thread wants or holds the fork lock (0: loads may begin).
        self._measuring = 0
        #: while the measuring thread waits for a candidate: its ticket (loads up to it may begin).
        self._wanted: int | None = None
        #: a load missed (:meth:`missed`): loads no longer wait for the measuring thread's candidate.
        self._missed = False
        self._numbers = itertools.count()

    def ticket(self) -> int:
        """A number for a candidate handed over now: it loads after every earlier one."""
        with self._changed:
            number = next(self._numbers)
            heapq.heappush(self._pending, number)
            return number

    @contextlib.contextmanager
    def turn(self, ticket: int) -> Iterator[None]:
        """Wait until every earlier ticket has ended, no load is under way and the measuring thread
        neither wants nor holds the fork lock; then load (take the fork lock inside)."""
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

    @contextlib.contextmanager
    def waiting_for(self, ticket: int | None) -> Iterator[None]:
        """The measuring thread waits for the load of ``ticket`` (``None``: for no load): only it and
        those before it may begin, until the measuring thread has the fork lock and gives it back."""
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

    def missed(self) -> None:
        """A load missed, and its candidate compiles in a process: from now on, while the measuring
        thread waits for a candidate (:meth:`waiting_for`), every load may begin in its turn.

        The measuring thread then waits for every compile, not only its
        candidate's, so the loads after it hold it up no longer; and each
        of them may be a miss, whose compile process should start now, not
        once the first candidate's compile has ended (a search's compiles
        ran one, then all the others).
        """
        with self._changed:
            self._missed = True
            self._changed.notify_all()

    def done(self, ticket: int) -> None:
        """``ticket`` ended without a turn (or after its turn: then nothing changes)."""
        with self._changed:
            self._end(ticket)

    def _end(self, ticket: int) -> None:
        self._ended.add(ticket)
        while self._pending and self._pending[0] in self._ended:
            self._ended.discard(heapq.heappop(self._pending))
        self._changed.notify_all()

    def measuring(self) -> None:
        """The measuring thread wants the fork lock: no load begins until :meth:`measured`."""
        with self._changed:
            self._measuring += 1

    def measured(self) -> None:
        """The measuring thread gave the fork lock back: loads may begin again."""
        with self._changed:
            self._measuring -= 1
            self._changed.notify_all()
