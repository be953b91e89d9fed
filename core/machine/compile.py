"""COMPILE: the kept candidates compiled ahead, in parallel, before any is measured.

A :class:`CompileStage` compiles on a pool of forked processes (where the
backend offers a :class:`~kerneltune.core.plugin_system.contracts.CompileProcess`
and ``compile_pool = "processes"``) or of threads; MEASURE waits until every
compile handed over has ended (:meth:`CompileStage.settle`). Where the timer
holds the device and every program so far came from the backend's on-disk
cache, MEASURE waits only for the next candidate's, and the other loads go
on beside its measurement (:meth:`CompileStage.wait`). An adaptive
driver may also hand over, ahead, the candidates it expects to ask for next
(:meth:`CompileStage.ahead`): those compile in processes at a lower priority,
no wait is for them, and they are stopped while anything is measured.
README.md ("Compiling") says what a user sees and why; docs/architecture.md
("The stages", COMPILE) where each part is.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import faulthandler
import math
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NoReturn, cast

import attrs
from kerneltune.core.errors import CompileMiss, describe_error
from kerneltune.core.machine import fork_tree
from kerneltune.core.machine.fork_tree import ChildCompile, TreeCompile
from kerneltune.core.machine.options import COMPILE_DEADLINE, COMPILE_POOL, COMPILE_TIMEOUT, COMPILE_WORKERS
from kerneltune.core.machine.siblings import STALL_FACTOR, Siblings, tree_processor_seconds
from kerneltune.core.machine.turns import LoadTurns
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.contracts import (
    CompileProcess,
    ProbingCompileProcess,
    WeighingCompileProcess,
    provides,
)
from kerneltune.core.values.events import CompileFinished, CompileStarted, Header
from kerneltune.core.values.records import Candidate

if TYPE_CHECKING:
    from kerneltune.core.plugin_system.observers import Observers
    from kerneltune.core.plugin_system.settings import Settings

#: Threads when the ``compile_workers`` setting is 0 ("one per core"), at most.
MAX_AUTO_WORKERS = 32
#: How often a wait checks whether a started compile has outlasted its timeout.
POLL_S = 0.05


#: How often a pool thread checks whether its compile process has ended.
CHILD_POLL_S = 0.005
#: A compile process's exit status when the compile raised (0: it compiled); the
#: candidate then compiles again in this process, so the error is the backend's own.
_RAISED = 3
#: How much a compile process handed over ahead lowers its priority (``nice``), so that the
#: compiles a round waits for keep the cores they need.
AHEAD_NICENESS = 10


class CompileTimeout(TimeoutError):
    """A candidate's compile took longer than the ``compile_timeout`` setting."""


class CompilerCrashed(RuntimeError):
    """A candidate's compile killed the process compiling it (a signal)."""


def can_fork() -> bool:
    """Whether this platform can compile in forked processes."""
    return hasattr(os, "fork") and hasattr(os, "waitpid")


def worker_count(setting: int, candidates: int | None = None) -> int:
    """Threads for ``candidates`` compiles (any number when ``None``): the setting, or one per core
    (capped) when it is 0."""
    wanted = setting if setting > 0 else min(MAX_AUTO_WORKERS, os.cpu_count() or 1)
    return max(1, wanted if candidates is None else min(wanted, candidates))


@attrs.frozen
class CompileProcesses:
    """Several backends' :class:`~kerneltune.core.plugin_system.contracts.CompileProcess` as one.

    A launcher's kernels may come from several backends.
    """

    parts: tuple[CompileProcess, ...]

    def ready(self) -> None:
        """Every part ready."""
        for part in self.parts:
            part.ready()

    def prepare(self) -> None:
        """Every part's preparation, in order."""
        for part in self.parts:
            part.prepare()

    @contextlib.contextmanager
    def probing(self) -> Iterator[None]:
        """Every part probing; only where every part can (:func:`probes`)."""
        with contextlib.ExitStack() as stack:
            for part in self.parts:
                assert provides(part, ProbingCompileProcess)
                stack.enter_context(part.probing())
            yield

    def effort(self, config: object) -> float:
        """The sum of the parts' guesses (:func:`effort`)."""
        return sum(effort(part, config) for part in self.parts)


def effort(child: CompileProcess, config: object) -> float:
    """``child``'s guess at how long ``config`` takes to compile (``WeighingCompileProcess``).

    0 where it makes none, raises, or answers with anything but a finite
    number: a hint never fails a tuning.
    """
    if not provides(child, WeighingCompileProcess):
        return 0.0
    try:
        guess = float(child.effort(config))
    except Exception:
        return 0.0
    return guess if math.isfinite(guess) else 0.0


def probes(child: CompileProcess) -> bool:
    """Whether ``child`` can tell a cached program from one to compile: every part of it can."""
    if isinstance(child, CompileProcesses):
        return all(provides(part, ProbingCompileProcess) for part in child.parts)
    return provides(child, ProbingCompileProcess)


class CompileStage:
    """Compiles candidates on a pool; :meth:`wait` gives one's outcome.

    :param compile_one: compiles one candidate; raises what makes it unusable.
        With ``child`` it runs first in a forked process, then here, where
        it must find that process's work (the backend's on-disk cache). Under
        a probe it must let :class:`~kerneltune.core.CompileMiss` through
        untouched: that is no failure of the candidate, only a compile to fork.
    :param candidates: the candidates this rank compiles, in the order they
        will be measured (the pool starts them in that order).
    :param workers: how many compile at once.
    :param timeout: seconds a compile may take once started; 0 for no limit.
    :param deadline: a compile process still running this many times longer than the median
        of its siblings that ended (and at least :data:`~.siblings.DEADLINE_MIN_S`) is stopped,
        and its candidate fails with :class:`CompileTimeout`, once at least half of the processes
        forked so far (and three) have ended; 0 for none. Compiles on threads cannot be stopped
        and have none (:class:`~.siblings.Siblings`).
    :param child: the backend's part in compiling in forked processes: it
        makes the child compile without touching the device (a forked child
        cannot use a CUDA context) and holds the forks until the compiler's
        one-time set-up is done here, which each child then inherits
        (threads share one interpreter lock for Triton's code generation:
        ``bench/compile_parallel.py``, BENCHMARKS.md); ``None``, or a
        platform without ``fork``, compiles on threads of this process.
        Where it can probe (:class:`~kerneltune.core.plugin_system.contracts.ProbingCompileProcess`),
        each candidate is first compiled here under its probe: a program the
        on-disk cache holds (a restarted process) is loaded, and only a miss
        is forked. Probes take turns in the order handed over until one
        misses; then every compile the pool has begun is queued for a
        process unprobed, the longest first where the child can guess how
        long each takes (:class:`~kerneltune.core.plugin_system.contracts.WeighingCompileProcess`),
        and forked at once as a :mod:`~kerneltune.core.machine.fork_tree`.
    :param header: the tuning, as its events name it.
    :param observers: told of each compile (:attr:`kerneltune.core.plugin_system.session.Session.observers`),
        from pool threads: ``compile_started`` and ``compile_finished``.
    """

    def __init__(
        self,
        compile_one: Callable[[Candidate], object],
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
        #: how each candidate handed over compiles (a later :meth:`add` may bring its own).
        self._compilers: dict[int, Callable[[Candidate], object]] = {}
        self._child = child if can_fork() else None
        self._probes = self._child is not None and probes(self._child)
        #: loads from the backend's cache may go on while a candidate is measured (:meth:`wait`).
        self._beside = beside and self._probes
        #: a compile went to a compile process: from then on :meth:`wait` waits for every compile.
        self._missed = False
        #: set while the measuring thread is between candidates (in :meth:`wait`), cleared under the
        #: fork lock while it measures one: a fork starts only while it is set (:meth:`_in_child`).
        self._between = threading.Event()
        self._between.set()
        #: the measuring thread holds the fork lock from a candidate's first timed run to the next
        #: :meth:`wait`: loads go on beside its warm-up, not its timed runs (:meth:`timing_begins`).
        self._timing_held = False
        #: held while forking and while compiling here with children about, so
        #: that no child is forked while this process is inside the compiler.
        self._forking = threading.Lock()
        #: loads take the fork lock one at a time, in the order handed over, after the measuring thread.
        self._turns = LoadTurns()
        self._tickets: dict[int, int] = {}
        #: the compile processes forked as children of this process, and the trees (:mod:`.fork_tree`).
        self._children: set[int] = set()
        self._trees: list[fork_tree.ForkTree] = []
        #: each candidate's compile process, once queued for one (:meth:`_spawn`); those not forked yet.
        self._spawned: dict[int, concurrent.futures.Future[ChildCompile | TreeCompile]] = {}
        self._unforked: list[int] = []
        #: the candidates whose probe has run (a hit among them is loaded, never queued for a process).
        self._probed: set[int] = set()
        #: the candidates handed over, and the backend's guess at how long each compiles.
        self._candidates: dict[int, Candidate] = {}
        self._efforts: dict[int, float] = {}
        self._timeout = timeout
        #: the compile processes forked, those that ended, and the rules that judge one running.
        self._siblings = Siblings(deadline)
        self._header = header
        self._observers = observers
        self._began: dict[int, float] = {}
        #: the candidates whose compile has ended.
        self._finished: set[int] = set()
        self._lock = threading.Lock()
        self._workers = workers
        #: made when compiles are handed over, shut down when they have all ended (:meth:`wait`).
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._futures: dict[int, concurrent.futures.Future[BaseException | None]] = {}
        #: compiles handed over ahead (:meth:`ahead`) that no round has asked for yet, and their pool.
        self._ahead: set[int] = set()
        self._ahead_pool: concurrent.futures.ThreadPoolExecutor | None = None
        #: the compile process of each candidate compiling in one now.
        self._pids: dict[int, int] = {}
        #: set while compiles ahead may run; cleared while candidates are measured (:meth:`pause`).
        self._running = threading.Event()
        self._running.set()
        #: when a round asked for each compile that had begun ahead: its clock starts there.
        self._promoted: dict[int, float] = {}
        self._closed = False
        self.add(candidates, compile_one)

    @classmethod
    def configured(
        cls,
        settings: Settings,
        observers: Observers,
        compile_one: Callable[[Candidate], object],
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

    def add(self, candidates: Sequence[Candidate], compile_one: Callable[[Candidate], object]) -> None:
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
                        self._promoted[index] = time.monotonic()
                        self._hurry(index)
                        continue
                elif index in self._futures:
                    continue
                self._submit(candidate, compile_one, ahead=False)

    def ahead(self, candidates: Sequence[Candidate], compile_one: Callable[[Candidate], object]) -> None:
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
        if self._child is None:
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

    def _submit(
        self, candidate: Candidate, compile_one: Callable[[Candidate], object], *, ahead: bool
    ) -> None:
        """Hand ``candidate`` to the pool of the compiles waited for, or of those ``ahead``; under the lock.

        Each pool is made by its first compile.
        """
        self._compilers[candidate.index] = compile_one
        self._candidates[candidate.index] = candidate
        if self._probes and not ahead:
            assert self._child is not None
            guess = effort(self._child, candidate.config)
            self._efforts[candidate.index] = guess
            self._tickets[candidate.index] = self._turns.ticket()
        pool = self._ahead_pool if ahead else self._pool
        if pool is None:
            prefix = "kerneltune-compile-ahead" if ahead else "kerneltune-compile"
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=prefix)
            if ahead:
                self._ahead_pool = pool
            else:
                self._pool = pool
        self._futures[candidate.index] = pool.submit(self._run, candidate)

    def _is_ahead(self, index: int) -> bool:
        with self._lock:
            return index in self._ahead

    def _hurry(self, index: int) -> None:
        """A compile ahead that a round now waits for: its process back at the usual priority.

        Raising a priority needs the privilege to (root, or ``RLIMIT_NICE``);
        without it the process keeps the lower one.
        """
        pid = self._pids.get(index)
        if pid is not None:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0))

    def pause(self) -> None:
        """Stop every compile ahead (``SIGSTOP``) and start no other until :meth:`resume`.

        Called before a candidate is measured: what runs beside a timed run
        takes the host's cores and memory bandwidth from it.
        """
        with self._lock:
            if not self._ahead:
                return  # without taking the fork lock, which a load beside the measurement may hold
        with self._forking, self._lock:
            if not self._running.is_set() or not self._ahead:
                return
            self._running.clear()
            for index in self._ahead:
                pid = self._pids.get(index)
                if pid is not None:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Let the compiles ahead go on (``SIGCONT``)."""
        with self._lock:
            if self._running.is_set():
                return
            for pid in self._pids.values():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
            self._running.set()

    @contextlib.contextmanager
    def _quiet(self, index: int) -> Iterator[None]:
        """Hold the fork lock: for a compile ahead, only while compiles ahead may run."""
        while True:
            if self._is_ahead(index):
                self._running.wait()
            self._forking.acquire()
            if self._running.is_set() or not self._is_ahead(index):
                break
            self._forking.release()
        try:
            yield
        finally:
            self._forking.release()

    def _run(self, candidate: Candidate) -> BaseException | None:
        if self._is_ahead(candidate.index):
            self._running.wait()
            if self._closed:
                return None
        began = time.monotonic()
        with self._lock:
            self._began[candidate.index] = began
            ahead = candidate.index in self._ahead
        self._observers.compile_started(self._header.make(CompileStarted, candidate=candidate, ahead=ahead))
        error: BaseException | None = None
        try:
            if self._child is None:
                self._compilers[candidate.index](candidate)
            elif not self._loaded(candidate):
                self._missed = True
                self._turns.missed()
                error = self._in_child(candidate, began)
                if error is None:
                    with self._quiet(candidate.index):
                        self._compilers[candidate.index](candidate)
        except Exception as exc:
            error = exc
        finally:
            ticket = self._tickets.get(candidate.index)
            if ticket is not None:
                self._turns.done(ticket)
        with self._lock:
            self._finished.add(candidate.index)
            ahead = candidate.index in self._ahead
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

    def _loaded(self, candidate: Candidate) -> bool:
        """Whether ``candidate`` compiled here from the backend's on-disk cache, under its probe.

        A miss raises :class:`CompileMiss` before anything is compiled, and
        the candidate goes to a compile process. The probe holds the fork
        lock as any compile here does: no child is forked mid-compile. One
        a round waits for takes its turn first (:class:`LoadTurns`). Once a
        probe has missed, the cache is taken for cold: the rest go to compile
        processes unprobed, queued by the miss (:meth:`_queue_begun`) or by
        themselves, and are forked together (:meth:`_spawn`); a program the
        cache held after all is loaded by its compile process and then here,
        at the cost of a fork in a tree.
        """
        if not self._probes:
            return False
        child = cast(ProbingCompileProcess, self._child)  # probes() said so
        index = candidate.index
        # One begun ahead has no turn: it waits in _quiet while compiles ahead are stopped.
        ticket = self._tickets.get(index)
        # After a miss each still passes through its turn, which ends its ticket for those behind it.
        with contextlib.nullcontext() if ticket is None else self._turns.turn(ticket):
            if self._missed:
                return False
            with self._lock:
                self._probed.add(index)
            with self._quiet(index):
                try:
                    with child.probing():
                        self._compilers[candidate.index](candidate)
                except CompileMiss:
                    # Before the turn ends, so that the next in turn already finds it queued.
                    self._missed = True
                    self._turns.missed()
                    self._queue_begun(index)
                    return False
        return True

    def _in_child(self, candidate: Candidate, began: float) -> BaseException | None:
        """Compile ``candidate`` in a forked process: ``None`` when it ended (compiled or raised)."""
        assert self._child is not None
        self._child.ready()
        index = candidate.index
        behind = self._is_ahead(index)
        process = self._spawn(candidate, behind)
        forked = time.monotonic()
        if not behind:
            self._siblings.started()
        try:
            while not process.ended(CHILD_POLL_S):
                pid = process.pid
                if pid is None:
                    continue  # a tree's forker has yet to fork it: it says so in milliseconds
                with self._lock:
                    self._pids[index] = pid
                if self._is_ahead(index):
                    # Not judged while ahead (niced, stopped while measuring); blocked, not polling,
                    # while stopped, so that no thread of ours wakes beside a timed run.
                    if not self._running.is_set():
                        self._running.wait()
                    continue
                # One that began ahead is judged from when a round asked for it.
                since = max(forked, self._promoted.get(index, forked))
                now = time.monotonic()
                if self._timeout > 0 and now - max(began, since) > self._timeout:
                    process.kill()
                    return CompileTimeout(f"compiling took longer than compile_timeout = {self._timeout:g} s")
                limit = self._siblings.past_deadline(self._age(now - since, pid, behind))
                if limit is not None:
                    process.kill()
                    deadline = self._siblings.deadline
                    return CompileTimeout(
                        f"compiling took longer than {limit:.1f} s, compile_deadline = {deadline:g} "
                        "times the median compile of its siblings"
                    )
                if self._siblings.stuck(now - since, pid):
                    process.kill()
                    warn_once(
                        ("compile-process-stuck", os.getpid()),
                        f"kerneltune: a compile process ran {now - since:.0f} s, {STALL_FACTOR:g} times its "
                        "slowest sibling; it was stopped and that candidate compiled in this process instead "
                        "(a child forked while another thread held a lock it needs; compile_pool = 'threads' "
                        "avoids forking)",
                    )
                    return None
        finally:
            process.release()
            with self._lock:
                self._pids.pop(index, None)
                if isinstance(process, ChildCompile):
                    self._children.discard(process.pid)
        status = process.status
        if not os.WIFSIGNALED(status):
            if behind:  # niced and stopped while measuring: what it used of a processor, ptxas included
                self._siblings.ended(process.processor_seconds, ahead=True)
            else:
                self._siblings.ended(time.monotonic() - forked)
            return None  # compiled, or raised: compiling here loads it, or raises the error itself
        # The compiler crashed: compiling it here would crash this process, so the candidate fails.
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return CompilerCrashed(f"the compiler crashed ({name}) in a compile process")

    def _spawn(self, candidate: Candidate, behind: bool) -> ChildCompile | TreeCompile:
        """Fork ``candidate``'s compile process, with those of every other candidate queued for one.

        Never while a candidate is measured (where loads go on beside one):
        the measuring thread clears the flag under the fork lock held here.
        One handed over ahead is forked alone, a child of this process (it is
        niced, stopped and resumed by its pid). The others are queued, here
        or, at the first miss, by the thread that missed (:meth:`_queue_begun`):
        the thread that next holds the fork lock forks every one queued at
        once, as a :mod:`~kerneltune.core.machine.fork_tree` where there are several.
        """
        index = candidate.index
        if behind:
            spawned: concurrent.futures.Future[ChildCompile | TreeCompile] = concurrent.futures.Future()
        else:
            with self._lock:
                if index not in self._spawned:
                    self._queue(index)
                spawned = self._spawned[index]
        while not spawned.done():
            with self._quiet(index), warnings.catch_warnings():
                if not spawned.done() and self._between.is_set():
                    # Python 3.12 warns about forking a process with threads: the child runs
                    # only the compile (or forks the tree's), on this thread's copy, and exits.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    if behind:
                        spawned.set_result(self._fork(candidate, ahead=True))
                    else:
                        self._fork_queued()
            if not spawned.done():
                self._between.wait()
        return spawned.result()

    def _queue(self, index: int) -> None:
        """Queue candidate ``index`` for a compile process; under the lock."""
        self._spawned[index] = concurrent.futures.Future()
        self._unforked.append(index)

    def _queue_begun(self, missed: int) -> None:
        """At the first miss (``missed``'s probe): queue it and every compile the pool has begun and not
        probed, the longest first.

        Their threads wait for their turns; each would queue itself after
        the fork under way, and one fork holds the interpreter lock for
        10-20 ms with torch and CUDA loaded: queued now, one tree forks them
        all. One whose probe found its program has loaded it; compiles the
        pool has not begun (more candidates than ``compile_workers``) queue
        themselves when they begin.
        """
        with self._lock:
            begun = [
                index
                for index in self._began
                if (index == missed or index not in self._probed)
                and index not in self._finished
                and index not in self._spawned
                and index not in self._ahead
            ]
            for index in sorted(begun, key=lambda index: -self._efforts.get(index, 0.0)):
                self._queue(index)

    def _fork(self, candidate: Candidate, ahead: bool) -> ChildCompile:
        """Fork one compile process, a child of this process; under the fork lock."""
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            self._child_main(candidate, ahead)
        with self._lock:
            self._children.add(pid)
            self._pids[candidate.index] = pid
        return ChildCompile(pid)

    def _fork_queued(self) -> None:
        """Fork the compile process of every candidate queued for one; under the fork lock."""
        with self._lock:
            indexes, self._unforked = self._unforked, []
            batch = [self._candidates[index] for index in indexes]
            waiting = [self._spawned[index] for index in indexes]
        if len(batch) > 1:
            try:
                tree, compiles = fork_tree.fork(len(batch), lambda i: self._child_main(batch[i], False))
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
        for candidate, spawned in zip(batch, waiting, strict=True):
            try:
                spawned.set_result(self._fork(candidate, ahead=False))
            except Exception as exc:  # this candidate's compile fails with it
                spawned.set_exception(exc)

    @staticmethod
    def _age(seconds: float, pid: int, ahead: bool) -> float:
        """How long compile process ``pid``, asked for ``seconds`` ago, has compiled, for the deadline.

        One begun ``ahead`` also compiled before a round asked for it: that
        counts by the processor time it and its children (``ptxas``) used,
        which leaves out the time it waited for a core at its lower priority
        and the time it was stopped. A search begins most of its compiles
        ahead; judged from the ask alone, a slow one had the deadline over
        again, and the round waited for it.
        """
        if not ahead:
            return seconds
        busy = tree_processor_seconds(pid)
        return seconds if busy is None else max(seconds, busy)

    def _child_main(self, candidate: Candidate, ahead: bool) -> NoReturn:  # pragma: no cover - in the child
        code = _RAISED
        # A crash here fails the candidate with its signal; no traceback dump over the user's output.
        faulthandler.disable()
        try:
            if ahead:
                with contextlib.suppress(OSError):
                    os.nice(AHEAD_NICENESS)
            assert self._child is not None
            self._child.prepare()
            self._compilers[candidate.index](candidate)
            code = 0
        except BaseException:
            pass
        finally:
            os._exit(code)

    def wait(self, candidate: Candidate) -> BaseException | None:
        """:meth:`settle`, then why ``candidate`` cannot run, or ``None``; the measuring thread calls it
        before each candidate.

        A candidate this rank does not compile (another rank on the host
        does, or it was never handed over) has no error of its own here.

        Where the stage may load beside a measurement (``beside``: the timer
        holds the device, so host work beside a timed run stays out of its
        device time) and every compile so far was a load from the backend's
        on-disk cache, it waits for ``candidate``'s alone: the other loads
        go on while it is measured (a restart that finds every program
        cached measures the first while the rest load), beside its warm-up
        runs but not its timed runs (:meth:`timing_begins`). Once a compile has
        gone to a compile process, it waits for every one again, as
        :meth:`settle` says; and no compile process is forked while a
        candidate is measured.
        """
        self._done_measuring()
        index = candidate.index
        if self._beside and not self._missed:
            # Loads after this candidate's wait until it is measured (beside its warm-up, at the latest).
            with self._turns.waiting_for(self._tickets.get(index)):
                if index in self._futures and not self._is_ahead(index):
                    self._settle(index)
                if not self._missed:
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
        if self._beside:
            with self._forking:  # a fork under way ends first; none starts until the next wait
                self._between.clear()
        return problem

    def timing_begins(self) -> None:
        """A candidate's timed runs begin: no load runs beside them, until the next :meth:`wait`.

        A load holds the interpreter lock for milliseconds at a time, longer
        than a hold keeps the device busy: beside a timed run it would put
        host time into the device's. So the measuring thread takes the fork
        lock, which every load holds (a load under way ends first), and
        loads go on only beside warm-up runs and between candidates.
        """
        if self._beside and not self._between.is_set() and not self._timing_held:
            self._turns.measuring()
            self._forking.acquire()
            self._timing_held = True

    def timing_ends(self) -> None:
        """A candidate's timed runs are all launched: loads go on while the device runs them.

        The host's part of every timed run is done, so a load cannot delay
        one; the measuring thread only waits for the device from here (its
        timer's ``collect``). No compile process is forked until the next
        :meth:`wait`.
        """
        if self._timing_held:
            self._timing_held = False
            self._forking.release()
            self._turns.measured()

    def _done_measuring(self) -> None:
        """The measuring thread is between candidates: loads go on, compile processes may be forked."""
        self.timing_ends()
        self._between.set()

    def settle(self) -> None:
        """Block until no compile handed over is running, and the pool's threads have ended.

        Every compile, not only the next candidate's: a compile beside a
        timed run takes the host's cores and memory bandwidth from it (see
        BENCHMARKS.md, "Figures behind choices in the code"), so nothing of the
        stage may run while a candidate is measured (but loads, where
        :meth:`wait` lets them). A compile past its
        timeout is given up: its process is killed; a thread cannot be, and
        finishes in the background.
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
        self._done_measuring()
        for pool in (self._pool, self._ahead_pool):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self.resume()
        with self._lock:
            children, trees = list(self._children), list(self._trees)
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for tree in trees:
            tree.kill()
