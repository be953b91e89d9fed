"""Isolation, the parent's side: candidates screened in a worker process before they run in the user's.

With ``isolate = "subprocess"`` each kept candidate first runs once in a
worker (one per device unit, kept for the process) on copies of the
arguments; one that kills the worker or outlasts ``isolate_timeout`` there
fails with :class:`ScreenedOut` and never runs here. The worker's side is
:mod:`kerneltune.core.isolation.worker`. README.md ("Isolation") says what
it guarantees and costs; docs/architecture.md (ISOLATE) where each part is.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import itertools
import multiprocessing.connection
import os
import pickle
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType, TracebackType
from typing import Any

import attrs
from kerneltune.core.errors import IsolationError, PluginError
from kerneltune.core.isolation.worker import copier, first_line, flatten, map_tensors, serve
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.seam import origin
from kerneltune.core.plugin_system.session import current_session
from kerneltune.core.values.records import Candidate
from kerneltune.core.values.target import Target

__all__ = [
    "SUBPROCESS",
    "TURN_OFF",
    "ScreenedOut",
    "Screening",
    "Target",
    "merge_ranks",
    "named_target",
    "screen_all",
    "screener",
    "target_of",
    "warn_unscreened",
]

#: Seconds a worker may take to start (spawn, imports, the device's context) or to load a target.
STARTUP_S = 120.0
#: Seconds a worker may take to let go of a screening's arguments before it is stopped instead.
RELEASE_S = 10.0
#: How many ``.fn`` steps :func:`named_target` follows from a name to what is tuned.
MAX_UNWRAP = 8

SUBPROCESS = "subprocess"
#: How every isolation error message ends.
TURN_OFF = "or turn isolation off (isolate = 'none', KERNELTUNE_ISOLATE=none)"


class ScreenedOut(RuntimeError):
    """A candidate crashed or hung the isolation worker; it is never run in this process."""


def _leaves(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], names: Sequence[str]
) -> Iterable[tuple[str, Any]]:
    for position, value in enumerate(args):
        name = f"argument {names[position]!r}" if position < len(names) else f"positional argument {position}"
        yield name, value
    for name, value in kwargs.items():
        yield f"keyword argument {name!r}", value


def _device(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """``"name:unit"`` of the device the worker runs on for these arguments.

    The devices are asked in the session's order: the first that owns one of
    the tensors, at that tensor's unit; a device that owns none but is in use
    (its context exists) at its current unit. The host is always in use, so
    a device ranked below it is chosen only as the session's own.
    """
    tensors = [leaf for leaf in flatten((args, dict(kwargs))) if _is_tensor(leaf)]
    session = current_session()
    placement = session.placement
    device = placement[0]
    try:
        for device in placement:
            owned = next((tensor for tensor in tensors if device.owns(tensor)), None)
            if owned is not None:
                return f"{device.name}:{device.index_of(owned)}"
            if device.in_use():
                return f"{device.name}:{device.current()}"
        device = placement[0]
        return f"{device.name}:{device.current()}"
    except Exception as exc:
        owner = origin(session.manager, session.registries.devices.owners.get(device.name, device.name))
        raise PluginError(
            f"{owner}: device {device.name!r}: raised {type(exc).__name__}: {exc} while the isolation "
            "worker's device was chosen"
        ) from exc


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _shared(tensor: Any) -> bool:
    """Whether ``tensor`` reaches the worker through torch's sharing rather than as a copy made here."""
    return any(device.shares_memory and device.owns(tensor) for device in current_session().placement)


def _inner(value: Any) -> Any:
    """``value.fn`` when it is an attribute of the instance itself, read without running its class's code."""
    try:
        own = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return None
    return own.get("fn") if isinstance(own, dict) else None


def _steps_to(holder: Any, tuned: Any) -> int | None:
    """How many ``.fn`` steps lead from ``holder`` to ``tuned``; ``None`` when none do."""
    for steps in range(MAX_UNWRAP + 1):
        if holder is tuned:
            return steps
        holder = _inner(holder)
        if holder is None:
            return None
    return None


def _holder(tuned: Any, module: str, qualname: str) -> tuple[str, str, int] | None:
    """The module and name whose value leads to ``tuned``, and how many ``.fn`` steps away.

    ``module.qualname`` first, then every name of ``module``, then of every
    other module loaded: a tuner made over a function under another name
    (``fast = autotune(...)(slow)``), or in another module, is found too.
    """
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    steps = _steps_to(found, tuned)
    if steps is not None:
        return module, qualname, steps
    loaded = [(name, owner) for name, owner in list(sys.modules.items()) if isinstance(owner, ModuleType)]
    for name, owner in sorted(loaded, key=lambda item: item[0] != module):
        for attribute, value in list(vars(owner).items()):
            steps = _steps_to(value, tuned)
            if steps is not None:
                return name, attribute, steps
    return None


def named_target(
    tuned: Any,
    module: str | None,
    qualname: str,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    *,
    what: str = "function",
    arg_names: Sequence[str] = (),
    runner: str | None = None,
    prepare: tuple[str, ...] = (),
) -> Target:
    """What the worker needs to import ``tuned`` and run its candidates on these arguments.

    :param tuned: what the worker runs (through ``runner``): a function, or a kernel's tuner.
    :param module: the module whose names are searched first for one that holds ``tuned``
        (directly or through ``.fn`` steps); then every loaded module's.
    :param qualname: the name to try first (a function's own ``__qualname__``).
    :param what: ``"function"`` or ``"kernel"``, for the messages.
    :param arg_names: names of the positional arguments, for the messages.
    :param runner: see :attr:`Target.runner`. :param prepare: see :attr:`Target.prepare`.
    :raises IsolationError: when the worker could not import ``tuned`` by
        name (defined inside a function, or held by no module-level name), or
        an argument can neither be shared (a tensor) nor pickled; the message
        says what to change.
    """
    where = f"{module}.{qualname}"
    lead = f"isolate = 'subprocess' runs candidates in a worker process that imports the tuned {what} by name"
    held = None if module is None else _holder(tuned, module, qualname)
    if held is None and ("<locals>" in qualname or "<lambda>" in qualname):
        raise IsolationError(
            f"{lead}, but {where} is defined inside another function; define it at module level, {TURN_OFF}"
        )
    if held is None:
        raise IsolationError(
            f"{lead}, but no module-level name holds it ({where} holds something else: another "
            f"decorator over the tuner, a tuner made at run time, or a name bound to something else); "
            f"assign the {what} or its tuner to a module-level name, {TURN_OFF}"
        )
    torch = sys.modules.get("torch")
    for name, value in _leaves(args, kwargs, arg_names):
        for leaf in flatten(value):
            if torch is not None and isinstance(leaf, torch.Tensor):
                continue
            try:
                pickle.dumps(leaf)
            except Exception as exc:
                raise IsolationError(
                    f"isolate = 'subprocess' sends the arguments of {where} to a worker process, but "
                    f"{name} ({type(leaf).__name__}) can be neither shared nor pickled ({exc}); pass "
                    f"tensors and picklable values, {TURN_OFF}"
                ) from None
    return Target(*held, tuple(args), dict(kwargs), _device(args, kwargs), runner, prepare)


def target_of(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Target:
    """What the worker needs to call the function ``fn(*args, **kwargs)`` (:func:`named_target`).

    :raises IsolationError: as :func:`named_target` does.
    """
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", repr(fn))
    return named_target(fn, module, qualname, args, kwargs)


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


class _Worker:
    """One worker process, the parent's end of its pipe, and the lifeline it watches."""

    def __init__(self, device: str, timeout: float) -> None:
        """Start a worker on ``device`` (``name:unit``); the device plugin's set-up may take ``timeout`` s.

        :raises RuntimeError: when the process does not come up (a script without a main guard, most often).
        :raises PluginError: naming the device plugin, when its set-up raises or outlasts ``timeout``.
        """
        import torch.multiprocessing

        name, _, unit = device.rpartition(":")
        session = current_session()
        plugin = session.registries.devices.get(name)
        owner = origin(session.manager, session.registries.devices.owners.get(plugin.name, name))
        context = torch.multiprocessing.get_context("spawn")
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
    :param timeout: seconds one candidate may run in the worker.
    """

    def __init__(self, target: Target, timeout: float) -> None:
        self.target = target
        self._timeout = timeout
        self._number = next(_numbers)
        #: the worker holding the target, while it lives.
        self._worker: _Worker | None = None
        self._unusable: str | None = None
        with _guard:
            self._lock = _device_locks.setdefault(target.device, threading.Lock())

    def __enter__(self) -> Screening:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
            if worker is not None and _workers.get(self.target.device) is worker:
                try:
                    worker.ask(("release", self._number), RELEASE_S)
                except (_Died, _Stuck):
                    self._stop(worker)

    def _loaded(self) -> _Worker:
        """The device's worker, started if need be, holding the target; call under the lock."""
        if self._unusable is not None:
            raise RuntimeError(self._unusable)
        device = self.target.device
        worker = _workers.get(device)
        if worker is not None and worker is self._worker and worker.process.is_alive():
            return worker
        if worker is None or not worker.process.is_alive():
            try:
                worker = _workers[device] = _Worker(device, self._timeout)
            except (RuntimeError, PluginError) as exc:
                self._unusable = str(exc)
                raise RuntimeError(self._unusable) from None
        # Host tensors are copied here: sharing would move the caller's own into shared memory.
        args, kwargs = map_tensors((self.target.args, self.target.kwargs), copier(lambda t: not _shared(t)))
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
        if _workers.get(self.target.device) is worker:
            del _workers[self.target.device]

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
