"""The isolation worker's side: its loop (:func:`serve`) over what it is sent.

It knows nothing of any kernel library: a target that is not a plain
function names a *runner*, a module-level factory of a backend plugin that
the worker imports by name.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing.connection
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kerneltune.core.values.target import Target

if TYPE_CHECKING:
    from kerneltune.core.plugin_system.contracts import Device

#: What runs one candidate in the worker: ``run(args, kwargs, payload)`` on the worker's fresh copies.
Runner = Callable[[tuple[Any, ...], dict[str, Any], Any], object]


def map_tensors(value: Any, change: Callable[[Any], Any]) -> Any:
    """``value`` with each tensor in it, or in its tuples, lists and dicts, replaced by ``change(tensor)``."""
    torch = sys.modules.get("torch")
    if torch is None:
        return value
    if isinstance(value, torch.Tensor):
        return change(value)
    if type(value) in (tuple, list):
        return type(value)(map_tensors(item, change) for item in value)
    if type(value) is dict:
        return {key: map_tensors(item, change) for key, item in value.items()}
    return value


def copier(only: Callable[[Any], bool] = lambda tensor: True) -> Callable[[Any], Any]:
    """A ``change`` for :func:`map_tensors` that copies the tensors ``only`` accepts (the others: detached).

    A copy keeps its tensor's size, strides and storage offset, and tensors
    that shared a storage share the copy of it: a kernel handed a view of a
    larger buffer and its strides as numbers reads the copy as it would the
    original. The price is that a view's whole storage is copied.
    """
    copies: dict[tuple[str, int], Any] = {}

    def copy(tensor: Any) -> Any:
        tensor = tensor.detach()
        if not only(tensor):
            return tensor
        try:
            storage = tensor.untyped_storage()
            key = (str(tensor.device), storage.data_ptr())
            if key not in copies:
                copies[key] = storage.clone()
            fresh = tensor.new_empty(0)
            return fresh.set_(copies[key], tensor.storage_offset(), tensor.size(), tensor.stride())
        except (RuntimeError, NotImplementedError):  # no one plain storage (sparse, nested): a plain copy
            return tensor.clone()

    return copy


def flatten(value: Any) -> Iterable[Any]:
    """The leaves of ``value``'s tuples, lists and dicts (``value`` itself when it is none of them)."""
    if type(value) in (tuple, list):
        for item in value:
            yield from flatten(item)
    elif type(value) is dict:
        for item in value.values():
            yield from flatten(item)
    else:
        yield value


def first_line(exc: BaseException) -> str:
    """``"Type: first line of the message"``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _broken(device: Device) -> str | None:
    """Why the device no longer works after a candidate; ``None`` when it does (its cache then released)."""
    try:
        device.check_health()
    except Exception as exc:
        return first_line(exc)
    device.release()  # what the candidate allocated is the user's process's to use
    return None


Loaded = tuple[Runner, tuple[Any, ...], dict[str, Any]]


def _call(loaded: Loaded, payload: Any, device: Device) -> None:
    run, args, kwargs = loaded
    fresh = map_tensors((args, kwargs), copier())
    run(fresh[0], fresh[1], payload)
    if device.in_use():
        # A kernel's fault surfaces at a synchronisation: let it surface while this candidate is current.
        device.synchronize()


def _keywords(fn: Callable[..., Any]) -> Runner:
    def run(args: tuple[Any, ...], kwargs: dict[str, Any], config: Mapping[str, Any]) -> object:
        return fn(*args, **config, **kwargs)

    return run


def _named(path: str) -> Any:
    module, _, qualname = path.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _load(target: Target) -> Loaded:
    for step in target.prepare:
        _named(step)()
    found = _named(f"{target.module}:{target.qualname}")
    for _ in range(target.unwrap):
        found = found.fn
    run = _keywords(found) if target.runner is None else _named(target.runner)(found)
    return run, target.args, target.kwargs


# From <linux/prctl.h>.
_PR_SET_PDEATHSIG = 1


def _ask_for_parent_death_signal() -> None:
    """Have Linux send this process SIGKILL when the thread that started it ends.

    That thread lives as long as the parent process (see the starter in
    :mod:`kerneltune.core.isolation.parent`). Elsewhere, or if the call fails, the
    lifeline alone ends the worker.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _watch_lifeline(lifeline: multiprocessing.connection.Connection) -> None:
    """End this process when the parent's end of ``lifeline`` closes; the parent never writes to it."""

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            lifeline.recv_bytes()
        os._exit(1)

    threading.Thread(target=watch, name="kerneltune-isolation-lifeline", daemon=True).start()


def die_with_parent(parent: int, lifeline: multiprocessing.connection.Connection) -> None:
    """Make this worker end when its parent process ends, whatever signal ends the parent.

    A worker left behind would run a hung candidate forever, holding its
    device and the parent's multiprocessing resource tracker (which lasts
    while any process holds its pipe). SIGTERM and SIGKILL reach the parent
    alone, and a hung candidate keeps the worker from noticing that its
    request pipe closed. So there are two ways out, each covering the
    other's gaps: the parent-death signal (Linux; lost if the call fails),
    and a thread that waits on ``lifeline`` (late if another child of the
    parent, such as a forked compile, inherited the parent's end).

    :param parent: the parent's process id, to catch a parent that ended
        before the signal was asked for.
    """
    _ask_for_parent_death_signal()
    if os.getppid() != parent:
        os._exit(1)
    _watch_lifeline(lifeline)


def serve(
    conn: multiprocessing.connection.Connection,
    device_class: type[Device],
    unit: int,
    parent: int,
    lifeline: multiprocessing.connection.Connection,
) -> None:
    """The worker's loop: load targets, run candidates of them, let them go; until the pipe closes.

    :param device_class: the registered device plugin's class for the target's device, at ``unit``.
    :param parent: with ``lifeline``, for :func:`die_with_parent`.

    It first says ``("up", None)``, then ``("ok", None)`` once the device
    is set, or ``("device", text)`` when the device plugin raised there,
    whereupon it exits. Requests are ``("load", (number, target))``, ``("run", (number,
    payload))`` and ``("release", number)``, where ``number`` names one
    screening. Each gets a reply ``(kind, detail)``: ``("ok", None)``,
    ``("raised", text)`` for a candidate that raised, ``("error", text)``
    for a target that cannot be loaded, and ``("dead", text)`` for a
    candidate after which the device no longer works, whereupon it exits.
    """
    die_with_parent(parent, lifeline)
    # Ctrl-C reaches the whole process group: the parent decides, and stops the worker if need be.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Running: the script's import is behind us. Then the device, which is the plugin's to answer for.
    conn.send(("up", None))
    try:
        device = device_class()
        device.set_current(unit)
    except Exception as exc:
        conn.send(("device", f"set_current({unit}) raised {first_line(exc)}"))
        return
    conn.send(("ok", None))
    loaded: dict[int, Loaded] = {}
    while True:
        try:
            kind, payload = conn.recv()
        except EOFError:
            return
        except Exception as exc:  # a load whose arguments cannot be rebuilt here
            conn.send(("error", first_line(exc)))
            continue
        reply: tuple[str, str | None] = ("ok", None)
        if kind == "load":
            try:
                loaded[payload[0]] = _load(payload[1])
            except Exception as exc:
                reply = ("error", first_line(exc))
        elif kind == "release":
            loaded.pop(payload, None)
        elif kind == "run":
            try:
                _call(loaded[payload[0]], payload[1], device)
            except Exception as exc:
                reply = ("raised", first_line(exc))
            dead = _broken(device)
            if dead is not None:
                conn.send(("dead", dead))
                return
        conn.send(reply)
