"""Isolation, the parent's side: candidates screened in a worker process before they run in the user's.

With ``isolate = "subprocess"`` each kept candidate first runs once in a
worker (one per device unit, kept for the process) on copies of the
arguments; one that kills the worker or outlasts ``isolate_timeout`` there
fails with :class:`ScreenedOut` and never runs here (docs/isolation.md).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import itertools
import multiprocessing
import multiprocessing.connection
import os
import pickle
import queue
import sys
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

import attrs
from kerneltune.core.errors import IsolationError, PluginError
from kerneltune.core.isolation.options import ISOLATE_TIMEOUT
from kerneltune.core.isolation.targets import worker_device
from kerneltune.core.isolation.worker import copier, first_line, map_tensors, serve
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.seam import origin
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.records import Candidate
from kerneltune.core.values.target import Target

__all__ = [
    "SUBPROCESS",
    "ScreenedOut",
    "Screening",
    "merge_ranks",
    "screen_all",
    "screener",
    "warn_unscreened",
]

#: Seconds a worker may take to start (spawn, imports, the device's context) or to load a target.
STARTUP_S = 120.0
#: Seconds a worker may take to let go of a screening's arguments before it is stopped instead.
RELEASE_S = 10.0

SUBPROCESS = "subprocess"


class ScreenedOut(RuntimeError):
    """A candidate crashed or hung the isolation worker; it is never run in this process."""


def _shared(tensor: Any, session: Session) -> bool:
    """Whether ``tensor`` reaches the worker through torch's sharing rather than as a copy made here."""
    return any(device.shares_memory and device.owns(tensor) for device in session.placement)


class _Died(Exception):
    """The worker ended; the message says how."""


class _Stuck(Exception):
    """The worker did not answer in time."""


_guard = threading.Lock()

# Starts come to one thread that lives as long as this process. Linux sends a worker its
# parent-death signal when the *thread* that started it ends, not the process: a worker
# started by a tuning on a short-lived thread would be killed with that thread.
_starts: queue.SimpleQueue[tuple[Any, concurrent.futures.Future[None]]] = queue.SimpleQueue()
_starter: threading.Thread | None = None


def _start_forever() -> None:
    while True:
        process, started = _starts.get()
        try:
            process.start()
        except BaseException as exc:
            started.set_exception(exc)
        else:
            started.set_result(None)


def _start(process: Any) -> None:
    """``process.start()``, on the starting thread."""
    global _starter
    with _guard:
        # Not alive in a child forked from this process: threads do not survive a fork.
        if _starter is None or not _starter.is_alive():
            _starter = threading.Thread(target=_start_forever, name="kerneltune-worker-starter", daemon=True)
            _starter.start()
    started: concurrent.futures.Future[None] = concurrent.futures.Future()
    _starts.put((process, started))
    started.result()


def _spawn_context() -> Any:
    """The ``spawn`` context: torch's, which sends tensors through shared memory, once torch is imported.

    A program that never imported torch has no tensor to send, and the
    standard library's context spares it torch's import.
    """
    if "torch" not in sys.modules:
        return multiprocessing.get_context("spawn")
    import torch.multiprocessing

    return torch.multiprocessing.get_context("spawn")


class _Worker:
    """One worker process, the parent's end of its pipe, and the lifeline it watches."""

    def __init__(self, device: str, session: Session) -> None:
        """Start a worker on ``device`` (``name:unit``) with ``session``'s device plugin; its set-up may take
        ``isolate_timeout`` s.

        :raises RuntimeError: when the process does not come up (a script without a main guard, most often).
        :raises PluginError: naming the device plugin, when its set-up raises or outlasts ``isolate_timeout``.
        """
        name, _, unit = device.rpartition(":")
        timeout = session.settings[ISOLATE_TIMEOUT]
        plugin = session.registries.devices.get(name)
        owner = origin(session.manager, session.registries.devices.owners.get(plugin.name, name))
        context = _spawn_context()
        self._conn, child = context.Pipe()
        # Nothing is ever sent on it: the worker ends when it closes, that is when this process ends.
        watched, self._lifeline = context.Pipe(duplex=False)
        self.process = context.Process(
            target=serve,
            args=(child, plugin, int(unit), os.getpid(), watched),
            name=f"kerneltune-isolation-{device}",
        )
        _start(self.process)
        child.close()
        watched.close()
        try:
            self.ask(None, STARTUP_S)
        except (_Died, _Stuck) as exc:
            self.stop()
            raise RuntimeError(
                f"the isolation worker did not start ({exc}); a script that tunes with isolation needs "
                "its work under `if __name__ == '__main__':`, as any spawned process does"
            ) from None
        try:
            kind, detail = self.ask(None, timeout)
        except _Stuck:
            self.stop()
            raise PluginError(
                f"{owner}: device {name!r}: set_current({unit}) in the isolation worker took longer than "
                f"isolate_timeout = {timeout:g} s"
            ) from None
        except _Died as exc:
            self.stop()
            raise PluginError(
                f"{owner}: device {name!r}: the isolation worker died setting it up ({exc})"
            ) from None
        if kind == "device":
            self.stop()
            raise PluginError(f"{owner}: device {name!r}: {detail} in the isolation worker")

    def ask(self, request: tuple[str, Any] | None, timeout: float) -> tuple[str, Any]:
        """Send ``request`` (``None``: only listen) and wait up to ``timeout`` s for the reply."""
        try:
            if request is not None:
                self._conn.send(request)
            ready = multiprocessing.connection.wait([self._conn, self.process.sentinel], timeout)
            if self._conn in ready:
                reply: tuple[str, Any] = self._conn.recv()
                return reply
        except (EOFError, BrokenPipeError, ConnectionResetError):
            pass
        else:
            if not ready:
                raise _Stuck()
        self.process.join(timeout=5)
        code = self.process.exitcode
        raise _Died(f"signal {-code}" if code is not None and code < 0 else f"exit code {code}")

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self._conn.close()
        self._lifeline.close()


_workers: dict[str, _Worker] = {}
_device_locks: dict[str, threading.Lock] = {}
_numbers = itertools.count()


def _stop_all() -> None:
    # Ahead of multiprocessing's own exit handler, which would wait for the workers forever.
    for worker in list(_workers.values()):
        worker.stop()
    _workers.clear()


atexit.register(_stop_all)


class Screening:
    """One tuning's use of its device's worker: :meth:`run` screens one candidate.

    A context manager: the target is loaded into the worker at the first
    run (again after the worker was replaced) and its arguments let go at
    exit. Screenings on several threads share the worker one request at a
    time, so ranks played by threads can screen side by side.

    :param target: the function and arguments; ``target`` keeps them.
    :param session: the tuning's session: its devices, and its ``isolate_timeout``, the seconds one
        candidate may run in the worker.
    """

    def __init__(self, target: Target, session: Session) -> None:
        self.target = target
        self._session = session
        #: the worker's device (:func:`~kerneltune.core.isolation.targets.worker_device`).
        self.device = worker_device(target.args, target.kwargs, session)
        self._timeout = session.settings[ISOLATE_TIMEOUT]
        self._number = next(_numbers)
        #: the worker holding the target, while it lives.
        self._worker: _Worker | None = None
        self._unusable: str | None = None
        with _guard:
            self._lock = _device_locks.setdefault(self.device, threading.Lock())

    def __enter__(self) -> Screening:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
            if worker is not None and _workers.get(self.device) is worker:
                try:
                    worker.ask(("release", self._number), RELEASE_S)
                except (_Died, _Stuck):
                    self._stop(worker)

    def _loaded(self) -> _Worker:
        """The device's worker, started if need be, holding the target; call under the lock."""
        if self._unusable is not None:
            raise RuntimeError(self._unusable)
        device = self.device
        worker = _workers.get(device)
        if worker is not None and worker is self._worker and worker.process.is_alive():
            return worker
        if worker is None or not worker.process.is_alive():
            try:
                worker = _workers[device] = _Worker(device, self._session)
            except (RuntimeError, PluginError) as exc:
                self._unusable = str(exc)
                raise RuntimeError(self._unusable) from None
        # Host tensors are copied here: sharing would move the caller's own into shared memory.
        args, kwargs = map_tensors(
            (self.target.args, self.target.kwargs), copier(lambda t: not _shared(t, self._session))
        )
        payload = attrs.evolve(self.target, args=args, kwargs=kwargs)
        try:
            kind, detail = worker.ask(("load", (self._number, payload)), STARTUP_S)
        except (_Died, _Stuck) as exc:
            self._stop(worker)
            raise RuntimeError(f"the isolation worker ended while loading the arguments ({exc})") from None
        if kind != "ok":
            where = f"{self.target.module}.{self.target.qualname}"
            self._unusable = f"the isolation worker cannot load {where}: {detail}"
            raise RuntimeError(self._unusable)
        self._worker = worker
        return worker

    def _stop(self, worker: _Worker) -> None:
        worker.stop()
        if _workers.get(self.device) is worker:
            del _workers[self.device]

    def run(self, payload: Any) -> None:
        """Run one candidate of the target once in the worker.

        :param payload: what the target's runner takes for one candidate
            (picklable); for a function, the config's keyword arguments.

        :raises ScreenedOut: when the candidate killed the worker (the
            worker is replaced at the next run) or ran past the timeout (the
            worker is stopped); a candidate that raised returns normally.
        :raises RuntimeError: when the worker cannot start or load the target.
        """
        # Here, not in the pipe: a candidate that cannot travel must not cost the worker.
        try:
            pickle.dumps(payload)
        except Exception as exc:
            raise IsolationError(
                f"the candidate cannot reach the isolation worker ({first_line(exc)})"
            ) from None
        with self._lock:
            worker = self._loaded()
            try:
                kind, detail = worker.ask(("run", (self._number, payload)), self._timeout)
            except _Died as exc:
                self._stop(worker)
                raise ScreenedOut(f"crashed the isolation worker ({exc})") from None
            except _Stuck:
                self._stop(worker)
                raise ScreenedOut(f"hung for more than {self._timeout:g} s in the isolation worker") from None
            except BaseException:
                self._stop(worker)  # interrupted while the candidate runs: it would still be running
                raise
            if kind == "dead":
                self._stop(worker)
                raise ScreenedOut(f"crashed the isolation worker (the device stopped working: {detail})")


def screen_all(screen_one: Callable[[Candidate], object], candidates: Iterable[Candidate]) -> dict[int, str]:
    """Screen each candidate; the reason of each that must not run in this process, by index.

    A candidate that could not be screened at all (the worker did not start,
    the target did not load) fails too: running it unscreened is what
    isolation was asked to prevent.
    """
    failed: dict[int, str] = {}
    for candidate in candidates:
        try:
            screen_one(candidate)
        except ScreenedOut as exc:
            failed[candidate.index] = str(exc)
        except Exception as exc:
            failed[candidate.index] = f"could not be screened in the isolation worker: {first_line(exc)}"
    return failed


def merge_ranks(gathered: Iterable[Iterable[Iterable[Any]]], rank: int) -> dict[int, str]:
    """Every rank's screening failures (``[index, reason]`` pairs, in rank order) as one table.

    This rank's reason wins for a candidate it failed itself; otherwise the
    lowest failing rank's, naming that rank.
    """
    merged: dict[int, str] = {}
    for other, pairs in enumerate(gathered):
        for index, reason in pairs:
            if other == rank:
                merged[int(index)] = reason
            else:
                merged.setdefault(int(index), f"{reason} on rank {other}")
    return merged


def screener(screening: Screening, payload: Callable[[Any], Any]) -> Callable[[Candidate], None]:
    """A ``screen_one`` for :meth:`Tuning.isolate <kerneltune.core.Tuning.isolate>`, run in ``screening``.

    :param payload: gives what the worker runs for a candidate's config, or
        ``None`` for a candidate with nothing to screen: one whose launch
        raises in this process before anything reaches the device, so that
        measuring it fails it as safely.
    """

    def screen_one(candidate: Candidate) -> None:
        sent = payload(candidate.config)
        if sent is not None:
            screening.run(sent)

    return screen_one


def warn_unscreened(function: str) -> None:
    """Warn once per function and process that isolation is on for a tuning that was not screened."""
    warn_once(
        ("unscreened", function),
        f"kerneltune: {function}: isolate = 'subprocess' does not reach this tuner (it screens "
        "function-level tuners, and the Triton kernels of contextual_autotune and search_params); its "
        "candidates run unscreened in this process",
    )
