"""A stage's compile processes: forked (alone, or as a :mod:`~kerneltune.core.compiling.fork_tree`),
watched until each ends, stopped past its timeout or deadline, and told apart from a crash."""

from __future__ import annotations

import concurrent.futures
import contextlib
import faulthandler
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Collection, Sequence
from typing import NoReturn

from kerneltune.core.compiling import fork_tree
from kerneltune.core.compiling.fork_tree import ChildCompile, TreeCompile
from kerneltune.core.compiling.gate import LoadGate
from kerneltune.core.compiling.siblings import STALL_FACTOR, Siblings, tree_usage
from kerneltune.core.errors import CandidateDropped
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.contracts import CompileProcess
from kerneltune.core.values.records import Candidate

#: How often a pool thread checks whether its compile process has ended.
CHILD_POLL_S = 0.005
#: A compile process's exit status when the compile raised (0: it compiled); the
#: candidate then compiles again in this process, so the error is the backend's own.
_RAISED = 3
#: How much a compile process handed over ahead lowers its priority (``nice``), so that the
#: compiles a round waits for keep the cores they need.
AHEAD_NICENESS = 10

#: Compiles one candidate (in a compile process, then here, where it loads that process's work).
CompileOne = Callable[[Candidate], object]
_Process = ChildCompile | TreeCompile
_Spawned = concurrent.futures.Future[_Process]


class CompileTimeout(TimeoutError):
    """A candidate's compile took longer than ``compile_timeout``, or ran past the ``compile_deadline``."""


class CompileDeadline(CompileTimeout, CandidateDropped):
    """A candidate's compile passed the ``compile_deadline``: part of searching, dropped without a warning."""


class CompilerCrashed(RuntimeError):
    """A candidate's compile killed the process compiling it (a signal)."""


class ForkSupervisor:
    """Forks a stage's compile processes and judges each while it runs.

    Called by the stage's pool threads (:meth:`compile`, :meth:`queue`) and by the thread driving
    the stage (:meth:`promote`, :meth:`signal`, :meth:`kill`).

    :param child: the backend's part in compiling in a forked process.
    :param gate: the stage's fork lock and the measuring thread's flags.
    :param timeout: the ``compile_timeout`` setting (0: none).
    :param deadline: the ``compile_deadline`` setting (0: none; :class:`~.siblings.Siblings`).
    :param is_ahead: whether a candidate is still one handed over ahead, which no round waits for.
    """

    def __init__(
        self,
        child: CompileProcess,
        gate: LoadGate,
        timeout: float,
        deadline: float,
        is_ahead: Callable[[int], bool],
    ) -> None:
        self._child = child
        self._gate = gate
        self._timeout = timeout
        self._is_ahead = is_ahead
        #: the compile processes forked, those that ended, and the rules that judge one running.
        self._siblings = Siblings(deadline)
        #: guards every field below.
        self._lock = threading.Lock()
        #: the compile process of each candidate compiling in one now.
        self._pids: dict[int, int] = {}
        #: the compile processes forked as children of this process, and the trees.
        self._children: set[int] = set()
        self._trees: list[fork_tree.ForkTree] = []
        #: each candidate's compile process, once queued for one; the queued not forked yet.
        self._spawned: dict[int, _Spawned] = {}
        self._unforked: list[tuple[Candidate, CompileOne]] = []
        #: when a round asked for each compile that had begun ahead: its clock starts there.
        self._promoted: dict[int, float] = {}
        #: how long its tree had waited for a processor then (``TreeUsage.waited``): not taken off again.
        self._waited: dict[int, float] = {}

    def queue(self, begun: Sequence[tuple[Candidate, CompileOne]]) -> None:
        """Queue these compiles for processes, in this order, but one queued before.

        Called at the first miss: each thread would queue itself after the
        fork under way (a long one, with torch and CUDA loaded); queued now,
        one tree forks them all.
        """
        with self._lock:
            for candidate, compile_one in begun:
                if candidate.index not in self._spawned:
                    self._queue(candidate, compile_one)

    def _queue(self, candidate: Candidate, compile_one: CompileOne) -> None:
        """Queue ``candidate`` for a compile process; under the lock."""
        self._spawned[candidate.index] = concurrent.futures.Future()
        self._unforked.append((candidate, compile_one))

    def compile(self, candidate: Candidate, compile_one: CompileOne, began: float) -> BaseException | None:
        """Compile ``candidate`` in a forked process: ``None`` when it ended (compiled or raised), else
        why it failed; ``began`` is when its compile began."""
        self._child.ready()
        index = candidate.index
        behind = self._is_ahead(index)
        process = self._spawn(candidate, compile_one, behind)
        forked = time.monotonic()
        if not behind:
            self._siblings.started()
        seen: float | None = None  # when its pid came: a tree's forker forks it some time after
        try:
            while not process.ended(CHILD_POLL_S):
                pid = process.pid
                if pid is None:
                    continue  # a tree's forker has yet to fork it: it says so in milliseconds
                if seen is None:
                    seen = time.monotonic()
                with self._lock:
                    self._pids[index] = pid
                if self._is_ahead(index):
                    # Not judged while ahead (niced, stopped while measuring); blocked, not polling,
                    # while stopped, so that no thread of ours wakes beside a timed run.
                    self._gate.wait_ahead()
                    continue
                with self._lock:  # the stage promotes one before it is no longer ahead
                    since = max(forked, self._promoted.get(index, forked))
                    waited = self._waited.get(index, 0.0)
                stopped, problem = self._judge(process, pid, (since, waited), max(since, seen), began, behind)
                if stopped:
                    return problem
        finally:
            process.release()
            with self._lock:
                self._pids.pop(index, None)
                if isinstance(process, ChildCompile):
                    self._children.discard(process.pid)
        return self._ended(process, forked, behind)

    def _judge(
        self,
        process: _Process,
        pid: int,
        judged: tuple[float, float],
        alive: float,
        began: float,
        behind: bool,
    ) -> tuple[bool, BaseException | None]:
        """Whether ``process`` was stopped (past its timeout, its deadline, or stuck: then its candidate
        compiles here instead), and why its candidate fails; judged from ``judged`` (when, and how long
        its tree had waited for a processor then), stuck from ``alive`` (when it was seen running: a
        process not forked yet has used no processor)."""
        now = time.monotonic()
        since, waited = judged
        if self._timeout > 0 and now - max(began, since) > self._timeout:
            process.kill()
            return True, CompileTimeout(f"compiling took longer than compile_timeout = {self._timeout:g} s")
        limit = self._siblings.past_deadline(_age(now - since, pid, behind))
        if limit is not None and (usage := tree_usage(pid)) is not None:
            # Read only once past it: the time other work on the host (or, niced, a round's compiles)
            # kept it from a processor is none of its own, and a deadline stop is remembered for
            # every later key.
            limit = self._siblings.past_deadline(_age(now - since - (usage.waited - waited), pid, behind))
        if limit is not None:
            process.kill()
            return True, CompileDeadline(
                f"compiling took longer than {limit:.1f} s, compile_deadline = {self._siblings.deadline:g} "
                "times the median compile of its siblings"
            )
        if self._siblings.stuck(now - alive, pid):
            process.kill()
            warn_once(
                ("compile-process-stuck", os.getpid()),
                f"kerneltune: a compile process ran {now - alive:.0f} s, {STALL_FACTOR:g} times its "
                "slowest sibling; it was stopped and that candidate compiled in this process instead "
                "(a child forked while another thread held a lock it needs; compile_pool = 'threads' "
                "avoids forking)",
            )
            return True, None
        return False, None

    def _ended(self, process: _Process, forked: float, behind: bool) -> BaseException | None:
        """``process`` ended: ``None`` where it compiled or raised (compiling here loads it, or raises
        the error itself), else the crash that fails its candidate."""
        status = process.status
        if not os.WIFSIGNALED(status):
            if behind:  # niced and stopped while measuring: what it used of a processor, ptxas included
                self._siblings.ended(process.processor_seconds, ahead=True)
            else:
                self._siblings.ended(time.monotonic() - forked)
            return None
        # The compiler crashed: compiling it here would crash this process, so the candidate fails.
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return CompilerCrashed(f"the compiler crashed ({name}) in a compile process")

    def _spawn(self, candidate: Candidate, compile_one: CompileOne, behind: bool) -> _Process:
        """Fork ``candidate``'s compile process, with those of every other candidate queued for one.

        One handed over ahead is forked alone, a child of this process (niced,
        stopped and resumed by its pid).
        """
        index = candidate.index
        if behind:
            spawned: _Spawned = concurrent.futures.Future()
        else:
            with self._lock:
                if index not in self._spawned:
                    self._queue(candidate, compile_one)
                spawned = self._spawned[index]
        while not spawned.done():
            with self._gate.quiet(lambda: self._is_ahead(index)), warnings.catch_warnings():
                if not spawned.done() and self._gate.may_fork():
                    # Python 3.12 warns about forking a process with threads: the child runs
                    # only the compile (or forks the tree's), on this thread's copy, and exits.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    if behind:
                        spawned.set_result(self._fork(candidate, compile_one, ahead=True))
                    else:
                        self._fork_queued()
            if not spawned.done():
                self._gate.wait_between()
        return spawned.result()

    def _fork(self, candidate: Candidate, compile_one: CompileOne, ahead: bool) -> ChildCompile:
        """Fork one compile process, a child of this process; under the fork lock."""
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            self._child_main(candidate, compile_one, ahead)
        with self._lock:
            self._children.add(pid)
            self._pids[candidate.index] = pid
        return ChildCompile(pid)

    def _fork_queued(self) -> None:
        """Fork the compile process of every candidate queued for one; under the fork lock."""
        with self._lock:
            batch, self._unforked = self._unforked, []
            waiting = [self._spawned[candidate.index] for candidate, _ in batch]
        if len(batch) > 1:
            try:
                tree, compiles = fork_tree.fork(len(batch), lambda i: self._child_main(*batch[i], False))
            except OSError:
                pass  # no descriptors left for its pipes, or no fork: each is forked alone, below
            except Exception as exc:
                for spawned in waiting:
                    spawned.set_exception(exc)
                return
            else:
                with self._lock:
                    self._trees.append(tree)
                for spawned, process in zip(waiting, compiles, strict=True):
                    spawned.set_result(process)
                return
        for (candidate, compile_one), spawned in zip(batch, waiting, strict=True):
            try:
                spawned.set_result(self._fork(candidate, compile_one, ahead=False))
            except Exception as exc:  # this candidate's compile fails with it
                spawned.set_exception(exc)

    def _child_main(
        self, candidate: Candidate, compile_one: CompileOne, ahead: bool
    ) -> NoReturn:  # pragma: no cover - in the child
        code = _RAISED
        # A crash here fails the candidate with its signal; no traceback dump over the user's output.
        faulthandler.disable()
        try:
            if ahead:
                with contextlib.suppress(OSError):
                    os.nice(AHEAD_NICENESS)
            self._child.prepare()
            compile_one(candidate)
            code = 0
        except BaseException:
            pass
        finally:
            os._exit(code)

    def promote(self, index: int) -> None:
        """A compile ahead that a round now waits for: judged from now, its process back at the usual
        priority where this process may raise it (root, or ``RLIMIT_NICE``)."""
        with self._lock:
            self._promoted[index] = time.monotonic()
            pid = self._pids.get(index)
        if pid is not None:
            usage = tree_usage(pid)
            with self._lock:
                self._waited[index] = 0.0 if usage is None else usage.waited
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0))

    def signal(self, signum: signal.Signals, indexes: Collection[int] | None = None) -> None:
        """Send ``signum`` to the compile process of each of ``indexes`` (``None``: of every candidate)."""
        with self._lock:
            pids = [pid for index, pid in self._pids.items() if indexes is None or index in indexes]
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signum)

    def kill(self) -> None:
        """Stop every compile process forked, and every tree."""
        with self._lock:
            children, trees = list(self._children), list(self._trees)
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for tree in trees:
            tree.kill()


def _age(seconds: float, pid: int, ahead: bool) -> float:
    """How long compile process ``pid``, asked for ``seconds`` ago, has compiled, for the deadline.

    One begun ``ahead`` also compiled before a round asked for it: that
    counts by the processor time its tree used (not its waits at its lower
    priority, nor while stopped). Judged from the ask alone, a search's slow
    compile had the deadline over again, and the round waited for it.
    """
    if not ahead:
        return seconds
    usage = tree_usage(pid)
    return seconds if usage is None else max(seconds, usage.seconds)
