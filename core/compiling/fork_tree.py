"""Compile processes forked as a tree: the tuning process forks once for a whole batch.

Forking copies the page tables, which takes long with torch and a CUDA
context loaded: forked one after another, a stage's last compile process
begins late (``bench/fork_tree.py`` compares the two).

:func:`fork` forks one *forker* for a batch. A forker holding more than
two compiles hands the upper half to a forker it forks; then it forks its
compile processes, waits for them, and reports each through that
compile's pipe (its pid, then its wait status and processor time). Sixteen
compiles begin after six forks one after another, not sixteen. The root
forker leads a process group of its own, so :meth:`ForkTree.kill` stops
the whole tree at once.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

#: One message on a compile's pipe: ``P`` and the compile process's pid, or ``E``, its wait status
#: and the processor seconds it and its children used. Shorter than ``PIPE_BUF``: each write is whole.
_MESSAGE = struct.Struct("<cqd")
#: A forker forks the compile processes itself once it holds this many or fewer.
FORKER_HOLDS = 2

#: What a forker holds: for each of its compiles, the index and the write end of its pipe.
_Held = Sequence[tuple[int, int]]
#: Runs compile ``i`` in its process, and exits.
_Compile = Callable[[int], NoReturn]


class ChildCompile:
    """A compile process this process forked: :meth:`ended` asks the system (``wait4``)."""

    def __init__(self, pid: int) -> None:
        self.pid: int | None = pid
        #: its wait status, once ended.
        self.status = 0
        #: processor seconds it and its children used, once ended.
        self.processor_seconds = 0.0

    def ended(self, timeout: float) -> bool:
        """Whether it has ended (and is reaped); if not, return after ``timeout`` seconds."""
        assert self.pid is not None
        pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        if pid:
            self.status, self.processor_seconds = status, usage.ru_utime + usage.ru_stime
            return True
        time.sleep(timeout)
        return False

    def kill(self) -> None:
        """Stop it (``SIGKILL``) and reap it."""
        if self.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)

    def release(self) -> None:
        """Nothing to give back: :meth:`ended` or :meth:`kill` reaped it."""


class TreeCompile:
    """A compile process of a :class:`ForkTree`, read from its pipe; its pid comes once it is forked."""

    def __init__(self, tree: ForkTree, fd: int) -> None:
        self.pid: int | None = None
        self.status = 0
        self.processor_seconds = 0.0
        self._tree, self._fd = tree, fd
        # poll, not select: a process may hold more than select's 1024 descriptors.
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._unread = b""
        self._closed = False

    def ended(self, timeout: float) -> bool:
        """Whether it has ended; if not, return once ``timeout`` seconds pass or a message comes.

        A pipe that closes without saying how its compile ended (its
        forker was killed) reads as a compile process killed.
        """
        if self._closed:
            return True
        if not self._poll.poll(timeout * 1000):
            return False
        chunk = os.read(self._fd, 4096)
        if not chunk:
            self.status = signal.SIGKILL  # a wait status: killed by that signal
            self._close()
            return True
        self._unread += chunk
        while len(self._unread) >= _MESSAGE.size:
            kind, value, seconds = _MESSAGE.unpack_from(self._unread)
            self._unread = self._unread[_MESSAGE.size :]
            if kind == b"P":
                self.pid = value
            else:
                self.status, self.processor_seconds = value, seconds
                self._close()
                return True
        return False

    def kill(self) -> None:
        """Stop its compile process (``SIGKILL``); its forker reaps it."""
        if self.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)

    def release(self) -> None:
        """Done with it: close its pipe and tell the tree (the last one reaps the root forker)."""
        self._close()
        self._tree.release()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)


class ForkTree:
    """One batch of compile processes forked as a tree (:func:`fork`)."""

    def __init__(self, size: int) -> None:
        #: the root forker, which leads the tree's process group.
        self.root = 0
        self._left = size
        self._reaped = False
        self._lock = threading.Lock()

    def release(self) -> None:
        """One compile of the tree is done with (each pool thread its own); after the last, reap the
        root forker, which exits once its forkers and compiles have."""
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self._reap()

    def kill(self) -> None:
        """Stop every process of the tree (its forkers, its compiles and theirs), then reap the root."""
        with self._lock:
            if self._reaped:
                return
        for stop in (os.killpg, os.kill):  # the group; the root, should it not lead one yet
            with contextlib.suppress(OSError):
                stop(self.root, signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        with self._lock:
            if self._reaped:
                return
            self._reaped = True
        with contextlib.suppress(OSError):
            os.waitpid(self.root, 0)


def fork(size: int, compile_one: Callable[[int], NoReturn]) -> tuple[ForkTree, list[TreeCompile]]:
    """Fork ``size`` compile processes as a tree; the ``i``-th runs ``compile_one(i)``, which must exit.

    Returns the tree and a :class:`TreeCompile` for each compile, in order.
    Raises ``OSError`` where there are no descriptors left for the pipes, or
    no fork; nothing is left open.
    """
    pipes: list[tuple[int, int]] = []
    try:
        for _ in range(size):
            pipes.append(os.pipe())
        pid = os.fork()
    except OSError:
        for read, write in pipes:
            os.close(read)
            os.close(write)
        raise
    tree = ForkTree(size)
    if pid == 0:  # pragma: no cover - the forker's coverage is not collected
        for read, _ in pipes:
            os.close(read)
        _forker(list(enumerate(write for _, write in pipes)), compile_one)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also done by the root itself: whichever runs first
    tree.root = pid
    for _, write in pipes:
        os.close(write)
    return tree, [TreeCompile(tree, read) for read, _ in pipes]


def _forker(held: _Held, compile_one: _Compile) -> NoReturn:  # pragma: no cover - in the forkers
    """The tree's root forker: leads the tree's process group, forks the tree, never returns."""
    code = 1
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # the tree's group, which the forkers and compiles below inherit
        _split(held, compile_one)
        code = 0
    finally:
        os._exit(code)


def _split(held: _Held, compile_one: _Compile) -> None:  # pragma: no cover - in the forkers
    forkers = 0
    while len(held) > FORKER_HOLDS:
        middle = len(held) // 2
        lower, upper = held[:middle], held[middle:]
        if os.fork() == 0:
            _close(lower)
            held, forkers = upper, 0
        else:
            _close(upper)
            held, forkers = lower, forkers + 1
    compiles: dict[int, int] = {}
    for index, write in held:
        pid = os.fork()
        if pid == 0:
            _close(held)
            compile_one(index)
        compiles[pid] = write
        _say(write, b"P", pid, 0.0)
    while compiles or forkers:
        try:
            pid, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        if pid not in compiles:
            forkers -= 1  # a forker below this one, done
            continue
        write = compiles.pop(pid)
        _say(write, b"E", status, usage.ru_utime + usage.ru_stime)
        os.close(write)


def _say(write: int, kind: bytes, value: int, seconds: float) -> None:  # pragma: no cover
    with contextlib.suppress(OSError):  # the tuning process gave up on this compile
        os.write(write, _MESSAGE.pack(kind, value, seconds))


def _close(held: _Held) -> None:  # pragma: no cover
    for _, write in held:
        os.close(write)
