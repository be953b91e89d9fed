"""Isolation's target: what the worker is sent to run a tuned function's or kernel's candidates.

The worker imports what is tuned by a module-level name, so :func:`named_target`
finds one that holds it, checks that every argument can reach the worker (a
tensor shared, anything else pickled); :func:`worker_device` picks the
device unit the worker runs on, from the session's devices. The parent's
side that sends it is :mod:`kerneltune.core.isolation.parent`.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MemberDescriptorType, ModuleType
from typing import Any

from kerneltune.core.errors import IsolationError, PluginError
from kerneltune.core.isolation.worker import flatten
from kerneltune.core.plugin_system.seam import origin
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.target import Target

__all__ = ["TURN_OFF", "Target", "named_target", "target_of", "worker_device"]

#: How many ``.fn`` steps :func:`named_target` follows from a name to what is tuned.
MAX_UNWRAP = 8
#: How every isolation error message ends.
TURN_OFF = "or turn isolation off (isolate = 'none', KERNELTUNE_ISOLATE=none)"


def _leaves(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], names: Sequence[str]
) -> Iterable[tuple[str, Any]]:
    for position, value in enumerate(args):
        name = f"argument {names[position]!r}" if position < len(names) else f"positional argument {position}"
        yield name, value
    for name, value in kwargs.items():
        yield f"keyword argument {name!r}", value


def worker_device(args: tuple[Any, ...], kwargs: Mapping[str, Any], session: Session) -> str:
    """``"name:unit"`` of the device the worker runs on for these arguments: a registered device's
    name and unit, ``"cpu:0"``, ``"cuda:1"``, ``"npu:0"``.

    The devices are asked in the session's order: the first that owns one of
    the tensors, at that tensor's unit; a device that owns none but is in use
    (its context exists) at its current unit. The host is always in use, so
    a device ranked below it is chosen only as the session's own.
    """
    tensors = [leaf for leaf in flatten((args, dict(kwargs))) if _is_tensor(leaf)]
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


def _inner(value: Any) -> Any:
    """``value.fn`` when it is an attribute of the instance itself (in its dict or a slot, as the
    tuners keep it), read without running its class's code."""
    slot = next((k.__dict__["fn"] for k in type(value).__mro__ if "fn" in k.__dict__), None)
    if isinstance(slot, MemberDescriptorType):
        try:
            return slot.__get__(value)
        except AttributeError:
            return None
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
    return Target(*held, tuple(args), dict(kwargs), runner, prepare)


def target_of(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Target:
    """What the worker needs to call the function ``fn(*args, **kwargs)`` (:func:`named_target`).

    :raises IsolationError: as :func:`named_target` does.
    """
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", repr(fn))
    return named_target(fn, module, qualname, args, kwargs)
