"""How long a COMPILE stage's compile processes took, and the rules that judge one still running:
past the ``compile_deadline``, or stuck."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import NamedTuple

#: A compile process still running this many times longer than the slowest
#: sibling that ended (and at least ``STALL_MIN_S``) is taken for stuck...
STALL_FACTOR = 5.0
STALL_MIN_S = 15.0
#: ...unless its tree spent more than this share of its life on a processor, or has a thread runnable now.
STUCK_CPU_SHARE = 0.05
#: The ``compile_deadline`` never stops a compile sooner than this (seconds; a higher floor let a
#: search's rounds wait for compiles of configs far too slow)...
DEADLINE_MIN_S = 2.0
#: ...nor before this many siblings have ended.
DEADLINE_QUORUM = 3


def _stat_fields(path: Path) -> list[str]:
    """The fields of a ``/proc`` ``stat`` file after the command name (which may hold spaces): the
    state first, then utime, stime, cutime and cstime as the 12th to 15th."""
    stat = path.read_text()
    return stat[stat.rindex(")") + 2 :].split()


class TreeUsage(NamedTuple):
    """What a process and its descendants still running have had of the host's processors."""

    #: processor seconds: their own, and their children's that ended (a compile's ``ptxas``).
    seconds: float
    #: whether a thread of one of them is runnable now (on a processor, or waiting for one).
    runnable: bool
    #: seconds their threads have waited for a processor while runnable: what other work on the
    #: host took from them (0.0 where the system keeps no ``schedstat``).
    waited: float


def tree_usage(pid: int) -> TreeUsage | None:
    """Process ``pid``'s :class:`TreeUsage`; ``None`` where ``/proc`` does not say."""
    try:
        ticks = sum(int(field) for field in _stat_fields(Path(f"/proc/{pid}/stat"))[11:15])
        runnable, waited, children = False, 0, list[str]()
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                runnable = runnable or _stat_fields(task / "stat")[0] == "R"
                waited += int((task / "schedstat").read_text().split()[1])  # nanoseconds
            with contextlib.suppress(OSError):
                children += (task / "children").read_text().split()
    except (OSError, ValueError, IndexError):
        return None
    usage = TreeUsage(ticks / os.sysconf("SC_CLK_TCK"), runnable, waited / 1e9)
    for child in children:
        below = tree_usage(int(child))
        if below is not None:
            usage = TreeUsage(
                usage.seconds + below.seconds, usage.runnable or below.runnable, usage.waited + below.waited
            )
    return usage


class Siblings:
    """The compile processes a stage forked, and how long those that ended took.

    A compile begun ahead counts once it has ended, by the processor time
    its tree used (its clock ran niced and stopped): a search begins most
    compiles ahead, and left out they kept the deadline from its quorum.

    :param deadline: the ``compile_deadline`` setting (0: none).
    """

    def __init__(self, deadline: float = 0.0) -> None:
        self.deadline = deadline
        #: how long each compile process that ended took, seconds.
        self.seconds: list[float] = []
        #: compile processes forked so far.
        self.forked = 0
        self._lock = threading.Lock()

    def started(self) -> None:
        """One more compile process was forked."""
        with self._lock:
            self.forked += 1

    def ended(self, seconds: float, *, ahead: bool = False) -> None:
        """A compile process ended after ``seconds``; ``ahead``: one begun ahead, not counted when forked."""
        with self._lock:
            self.seconds.append(seconds)
            if ahead:
                self.forked += 1

    def past_deadline(self, seconds: float) -> float | None:
        """The deadline a compile process running ``seconds`` is past, or ``None`` (see ``deadline``).

        A compile far slower than its siblings is a config the search rarely
        wants (a 256-wide tile at five stages can take minutes where its
        siblings take a second), and a round waits for its slowest compile.
        """
        if self.deadline <= 0:
            return None
        with self._lock:
            ended = sorted(self.seconds)
            forked = self.forked
        if len(ended) < max(DEADLINE_QUORUM, (forked + 1) // 2):
            return None
        limit = max(DEADLINE_MIN_S, self.deadline * ended[len(ended) // 2])
        return limit if seconds > limit else None

    def stuck(self, seconds: float, pid: int) -> bool:
        """Whether compile process ``pid``, running ``seconds``, is stuck rather than slow.

        A child can inherit a lock that another thread held at the fork (an
        import in progress, say) and wait for it forever, using no processor
        time; with no sibling ended yet, only the timeout stops it. A child
        whose tree keeps a processor busy (its ``ptxas`` included) is
        compiling, however long it takes, and so is one runnable now however
        little it got: a niced compile on a host busy with other work.
        Without ``/proc``, the time rule alone decides.
        """
        with self._lock:
            slowest = max(self.seconds, default=None)
        if slowest is None or seconds <= max(STALL_MIN_S, STALL_FACTOR * slowest):
            return False
        usage = tree_usage(pid)
        return usage is None or (not usage.runnable and usage.seconds < STUCK_CPU_SHARE * seconds)
