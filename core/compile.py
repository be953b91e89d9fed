"""COMPILE: the kept candidates compiled on a pool of threads while measuring goes on.

A cold tuning (a fresh process, an empty Triton cache) is mostly compiling:
sixteen matmul configs took an H200's host 8-9 s one after another. The
stage hands every candidate this rank compiles to a pool of threads as soon
as the tuning knows what it measures, and MEASURE waits only for the
candidate it is about to run, so the first candidate is measured while the
others still compile. Triton releases the interpreter lock in its compiler
back ends, so threads overlap most of the work.

A candidate whose compile raises, or outlasts the timeout, fails alone: the
engine records the error as that candidate's and goes on (a thread cannot be
stopped, so a compile that timed out finishes in the background, unused).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
from kerneltune.core.errors import describe_error
from kerneltune.core.events import CompileFinished, CompileStarted
from kerneltune.core.records import Candidate

#: Threads when the ``compile_workers`` setting is 0 ("one per core"), at most.
MAX_AUTO_WORKERS = 32
#: How often a wait checks whether a started compile has outlasted its timeout.
POLL_S = 0.05


class CompileTimeout(TimeoutError):
    """A candidate's compile took longer than the ``compile_timeout`` setting."""


def worker_count(setting: int, candidates: int) -> int:
    """Threads for ``candidates`` compiles: the setting, or one per core (capped) when it is 0."""
    wanted = setting if setting > 0 else min(MAX_AUTO_WORKERS, os.cpu_count() or 1)
    return max(1, min(wanted, candidates))


@attrs.frozen
class Subject:
    """What the stage's events say about the tuning they belong to."""

    function: str
    key: object
    rank: int
    verbose: bool
    log_dir: Path | None


class CompileStage:
    """Compiles candidates on a thread pool; :meth:`wait` gives one's outcome.

    :param compile_one: compiles one candidate; raises what makes it unusable.
    :param candidates: the candidates this rank compiles, in the order they
        will be measured (the pool starts them in that order).
    :param workers: the pool's threads.
    :param timeout: seconds a compile may take once started; 0 for no limit.
    :param subject: the tuning, as its events name it.
    :param notify: sends an observer hook its event
        (:meth:`kerneltune.core.session.Session.notify`); called on pool
        threads with ``kerneltune_compile_started`` and
        ``kerneltune_compile_finished``.
    """

    def __init__(
        self,
        compile_one: Callable[[Candidate], object],
        candidates: Sequence[Candidate],
        *,
        workers: int,
        timeout: float,
        subject: Subject,
        notify: Callable[[str, object], object],
    ) -> None:
        self._compile_one = compile_one
        self._timeout = timeout
        self._subject = subject
        self._notify = notify
        self._began: dict[int, float] = {}
        self._done = 0
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="kerneltune-compile"
        )
        self._futures: dict[int, concurrent.futures.Future[BaseException | None]] = {}
        self.add(candidates)

    def add(self, candidates: Sequence[Candidate]) -> None:
        """Compile these too, after those handed over before; one already handed over is not redone."""
        with self._lock:
            for candidate in candidates:
                if candidate.index not in self._futures:
                    self._futures[candidate.index] = self._pool.submit(self._run, candidate)

    def _run(self, candidate: Candidate) -> BaseException | None:
        began = time.monotonic()
        with self._lock:
            self._began[candidate.index] = began
        about = self._subject
        self._notify(
            "kerneltune_compile_started",
            CompileStarted(
                function=about.function,
                key=about.key,
                candidate=candidate,
                rank=about.rank,
                verbose=about.verbose,
            ),
        )
        error: BaseException | None = None
        try:
            self._compile_one(candidate)
        except Exception as exc:
            error = exc
        with self._lock:
            self._done += 1
            done, total = self._done, len(self._futures)
        self._notify(
            "kerneltune_compile_finished",
            CompileFinished(
                function=about.function,
                key=about.key,
                candidate=candidate,
                seconds=time.monotonic() - began,
                error=None if error is None else describe_error(error),
                done=done,
                total=total,
                rank=about.rank,
                verbose=about.verbose,
                log_dir=about.log_dir,
            ),
        )
        return error

    def wait(self, candidate: Candidate) -> BaseException | None:
        """Block until ``candidate`` is compiled; why it cannot run, or ``None``.

        A candidate this rank does not compile (another rank on the host
        does, or it was never handed over) returns ``None`` at once.
        """
        future = self._futures.get(candidate.index)
        if future is None:
            return None
        while True:
            done, _ = concurrent.futures.wait([future], timeout=POLL_S)
            if done:
                return future.result()
            with self._lock:
                began = self._began.get(candidate.index)
            if self._timeout > 0 and began is not None and time.monotonic() - began > self._timeout:
                return CompileTimeout(f"compiling took longer than compile_timeout = {self._timeout:g} s")

    def close(self) -> None:
        """Drop compiles not started; those running finish in the background."""
        self._pool.shutdown(wait=False, cancel_futures=True)
