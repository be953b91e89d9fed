"""Isolation: candidates screened in a worker process before they run in the user's.

A config that makes a kernel fault (an illegal address, a trap) kills the
CUDA context and with it the whole program; so does a host function that
segfaults. With ``isolate = "subprocess"`` each kept candidate first runs
once in a worker process, on copies of the arguments; one that kills the
worker or outlasts ``isolate_timeout`` there is failed with the reason
(:class:`ScreenedOut`) and never launched in the user's process. A candidate
that raises there is not screened out: it fails as usual when measured.

There is one worker per device, started with torch.multiprocessing's spawn
context on first use and kept for every later tuning of the process; one
that crashed or hung is replaced at the next screening. Arguments travel
once per screening: CUDA tensors through torch's inter-process sharing (no
copy on the way), CPU tensors as copies, everything else pickled; the
worker copies every tensor again before each candidate, so no candidate
writes into the caller's memory or into the next candidate's inputs. That
holds for tensors passed directly or in tuples, lists and dicts; one held
inside another object travels as torch shares it.

The worker runs functions it can import by qualified name; :func:`target_of`
checks that at the call, with an error that says what to change.
"""

from __future__ import annotations

import atexit
import importlib
import itertools
import multiprocessing.connection
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

import attrs
from kerneltune.core.errors import IsolationError
from kerneltune.core.notices import warn_once
from kerneltune.core.records import Candidate

#: Seconds a worker may take to start (spawn, imports, the device's context) or to load a target.
STARTUP_S = 120.0
#: Seconds a worker may take to let go of a screening's arguments before it is stopped instead.
RELEASE_S = 10.0

SUBPROCESS = "subprocess"


class ScreenedOut(RuntimeError):
    """A candidate crashed or hung the isolation worker; it is never run in this process."""


@attrs.frozen
class Target:
    """A function the worker imports by name, and the arguments to call it with."""

    module: str
    qualname: str
    #: the name holds a tuner (an ``AutoTuner``) whose ``.fn`` is the function.
    unwrap: bool
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    #: the worker's device: ``"cpu"`` or ``"cuda:<index>"``.
    device: str


def _map_tensors(value: Any, change: Callable[[Any], Any]) -> Any:
    """``value`` with each tensor in it, or in its tuples, lists and dicts, replaced by ``change(tensor)``."""
    torch = sys.modules.get("torch")
    if torch is None:
        return value
    if isinstance(value, torch.Tensor):
        return change(value)
    if type(value) in (tuple, list):
        return type(value)(_map_tensors(item, change) for item in value)
    if type(value) is dict:
        return {key: _map_tensors(item, change) for key, item in value.items()}
    return value


def _leaves(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    for position, value in enumerate(args):
        yield f"positional argument {position}", value
    for name, value in kwargs.items():
        yield f"keyword argument {name!r}", value


def _device(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """The device of the first CUDA tensor in the arguments, else the current one once CUDA is in use."""
    found: list[str] = []

    def note(tensor: Any) -> Any:
        if tensor.is_cuda and not found:
            found.append(f"cuda:{tensor.device.index}")
        return tensor

    _map_tensors((args, dict(kwargs)), note)
    if found:
        return found[0]
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return f"cuda:{torch.cuda.current_device()}"
    return "cpu"


def target_of(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Target:
    """What the worker needs to call ``fn(*args, **kwargs)``.

    :raises IsolationError: when the worker could not import ``fn`` by its
        module and qualified name (a function defined inside another, or a
        name that holds something else), or an argument can neither be shared
        (a tensor) nor pickled; the message says what to change.
    """
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", repr(fn))
    off = "or turn isolation off (isolate = 'none', KERNELTUNE_ISOLATE=none)"
    where = f"{module}.{qualname}"
    if "<locals>" in qualname or "<lambda>" in qualname or module is None:
        raise IsolationError(
            f"isolate = 'subprocess' runs candidates in a worker process that imports the tuned function "
            f"by name, but {where} is defined inside another function; define it at module level, {off}"
        )
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not fn and getattr(found, "fn", None) is not fn:
        raise IsolationError(
            f"isolate = 'subprocess' runs candidates in a worker process that imports the tuned function "
            f"by name, but the name {where} does not hold it (another decorator over the tuner, or a name "
            f"bound to something else); make {where} the function or its tuner, {off}"
        )
    torch = sys.modules.get("torch")
    for name, value in _leaves(args, kwargs):
        for leaf in _flatten(value):
            if torch is not None and isinstance(leaf, torch.Tensor):
                continue
            try:
                pickle.dumps(leaf)
            except Exception as exc:
                raise IsolationError(
                    f"isolate = 'subprocess' sends the arguments of {where} to a worker process, but "
                    f"{name} ({type(leaf).__name__}) can be neither shared nor pickled ({exc}); pass "
                    f"tensors and picklable values, {off}"
                ) from None
    return Target(module, qualname, found is not fn, tuple(args), dict(kwargs), _device(args, kwargs))


def _flatten(value: Any) -> Iterable[Any]:
    if type(value) in (tuple, list):
        for item in value:
            yield from _flatten(item)
    elif type(value) is dict:
        for item in value.values():
            yield from _flatten(item)
    else:
        yield value


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# -- the worker process ---------------------------------------------------------------------------------


def _context_error() -> str | None:
    """Why this process's CUDA context no longer works; ``None`` when it does or was never made.

    A fault such as an illegal address reaches Python as an ordinary
    exception, but leaves the context unusable: every later call fails.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
    except Exception as exc:
        return _first_line(exc)
    torch.cuda.empty_cache()  # what the candidate allocated is the user's process's to use
    return None


def _call(loaded: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]], config: dict[str, Any]) -> None:
    fn, args, kwargs = loaded
    fresh = _map_tensors((args, kwargs), lambda tensor: tensor.clone())
    fn(*fresh[0], **config, **fresh[1])
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        # A kernel's fault surfaces at a synchronisation: let it surface while this candidate is current.
        torch.cuda.synchronize()


def _load(target: Target) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
    found: Any = importlib.import_module(target.module)
    for part in target.qualname.split("."):
        found = getattr(found, part)
    return (found.fn if target.unwrap else found), target.args, target.kwargs


def serve(conn: multiprocessing.connection.Connection, device: str) -> None:
    """The worker's loop: load targets, run candidates of them, let them go; until the pipe closes.

    Requests are ``("load", (number, target))``, ``("run", (number,
    config))`` and ``("release", number)``, where ``number`` names one
    :class:`Screening`. Each gets a reply ``(kind, detail)``: ``("ok",
    None)``, ``("raised", text)`` for a candidate that raised, ``("error",
    text)`` for a target that cannot be loaded, and ``("dead", text)`` for a
    candidate after which the device no longer works, whereupon it exits.
    """
    # Ctrl-C reaches the whole process group: the parent decides, and stops the worker if need be.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if device.startswith("cuda"):
        import torch

        torch.cuda.set_device(device)
    conn.send(("ok", None))
    loaded: dict[int, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = {}
    while True:
        try:
            kind, payload = conn.recv()
        except EOFError:
            return
        except Exception as exc:  # a load whose arguments cannot be rebuilt here
            conn.send(("error", _first_line(exc)))
            continue
        reply: tuple[str, str | None] = ("ok", None)
        if kind == "load":
            try:
                loaded[payload[0]] = _load(payload[1])
            except Exception as exc:
                reply = ("error", _first_line(exc))
        elif kind == "release":
            loaded.pop(payload, None)
        elif kind == "run":
            try:
                _call(loaded[payload[0]], payload[1])
            except Exception as exc:
                reply = ("raised", _first_line(exc))
            dead = _context_error()
            if dead is not None:
                conn.send(("dead", dead))
                return
        conn.send(reply)


class _Died(Exception):
    """The worker ended; the message says how."""


class _Stuck(Exception):
    """The worker did not answer in time."""


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, device: str) -> None:
        import torch.multiprocessing

        context = torch.multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(
            target=serve, args=(child, device), name=f"kerneltune-isolation-{device}"
        )
        self.process.start()
        child.close()
        try:
            self.ask(None, STARTUP_S)
        except (_Died, _Stuck) as exc:
            self.stop()
            raise RuntimeError(
                f"the isolation worker did not start ({exc}); a script that tunes with isolation needs "
                "its work under `if __name__ == '__main__':`, as any spawned process does"
            ) from None

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


_workers: dict[str, _Worker] = {}
_device_locks: dict[str, threading.Lock] = {}
_guard = threading.Lock()
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
                worker = _workers[device] = _Worker(device)
            except RuntimeError as exc:
                self._unusable = str(exc)
                raise
        # CPU tensors are copied here: sharing would move the caller's own into shared memory.
        payload = attrs.evolve(
            self.target,
            args=_map_tensors(self.target.args, _shareable),
            kwargs=_map_tensors(self.target.kwargs, _shareable),
        )
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

    def run(self, config: Mapping[str, Any]) -> None:
        """Run the target once in the worker with ``config`` among its keyword arguments.

        :raises ScreenedOut: when the candidate killed the worker (the
            worker is replaced at the next run) or ran past the timeout (the
            worker is stopped); a candidate that raised returns normally.
        :raises RuntimeError: when the worker cannot start or load the target.
        """
        with self._lock:
            worker = self._loaded()
            try:
                kind, detail = worker.ask(("run", (self._number, dict(config))), self._timeout)
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


def _shareable(tensor: Any) -> Any:
    tensor = tensor.detach()
    return tensor if tensor.is_cuda else tensor.clone()


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
            failed[candidate.index] = f"could not be screened in the isolation worker: {_first_line(exc)}"
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


def warn_unscreened(function: str) -> None:
    """Warn once per function and process that isolation is on for a tuner that does not screen."""
    warn_once(
        ("unscreened", function),
        f"kerneltune: {function}: isolate = 'subprocess' covers function-level tuners only; this tuner's "
        "candidates run unscreened in this process",
    )
