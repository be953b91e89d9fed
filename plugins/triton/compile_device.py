"""The device as a Triton compile sees it: the calling thread's and its limits, or, in a compile
process forked by COMPILE, none to touch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kerneltune.plugins.triton import adapter


def shared_memory_problem(compiled: Any) -> str | None:
    """Why a compiled kernel cannot launch on the current device, from its metadata; ``None`` if it can
    (or nobody can tell).

    Compares the shared memory the compiler allotted with the device's limit,
    the check Triton itself makes only at the first launch.
    """
    shared = getattr(getattr(compiled, "metadata", None), "shared", None)
    if not isinstance(shared, int):
        return None
    try:
        from triton.runtime import driver

        limit = _shared_memory_limit(driver.active)
    except Exception:
        return None
    if limit is not None and shared > limit:
        return f"needs {shared} bytes of shared memory, the device has {limit}"
    return None


#: Each device's shared memory limit and the driver helper that said it, asked once
#: per helper and device: the query is slow beside the check, and every compiled candidate is checked.
_shared_limits: dict[int, tuple[Any, int | None]] = {}


def _shared_memory_limit(active: Any) -> int | None:
    """The shared memory per block, in bytes, of the device that ``active`` (Triton's driver) is on;
    ``None`` if the driver does not say."""
    device = active.get_current_device()
    utils = active.utils
    known = _shared_limits.get(device)
    if known is None or known[0] is not utils:  # another driver since (tests swap them)
        properties = utils.get_device_properties(device)
        limit = properties.get("max_shared_mem") if isinstance(properties, dict) else None
        known = _shared_limits[device] = (utils, limit if isinstance(limit, int) else None)
    return known[1]


def device_binding() -> Callable[[], None]:
    """A function that makes the thread calling it use this thread's current device.

    Compile threads need it: Triton files a compiled kernel under the calling
    thread's current device, and a new thread starts on device 0.
    """
    if adapter.interpreting():
        return lambda: None
    from triton.runtime import driver

    active = driver.active
    device = active.get_current_device()
    setter = getattr(active, "set_current_device", None)
    if setter is None:
        return lambda: None

    def bind() -> None:
        if not this_process.forked:  # a forked compile process has no device to bind
            setter(device)

    return bind


class CompileProcessState:
    """Whether this process is a compile process forked by COMPILE, and what it was handed."""

    #: this process is a compile process forked by COMPILE (:func:`~.compiler.forked_compiles`).
    forked = False
    #: a file descriptor the compile processes of one parent lock ranges of
    #: (:func:`~kerneltune.plugins.triton.programs.build_launcher`).
    launcher_lock: int | None = None


#: This process's state, set in a forked child (:meth:`~.compiler.TritonCompileProcess.prepare`).
this_process = CompileProcessState()


class ChildDriver:
    """The active driver as a forked compile process sees it: the parent's device and target, no device calls.

    A process forked from one holding a CUDA context cannot use the device;
    compiling needs only the target and the device's number, which the JIT
    asks the driver for.
    """

    def __init__(self, real: Any, device: int, target: Any) -> None:
        self._real, self._device, self._target = real, device, target

    def get_current_device(self) -> int:
        return self._device

    def set_current_device(self, device: int) -> None:
        pass

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self._target

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def in_compile_process() -> bool:
    """Whether this process was forked by COMPILE to compile (:func:`~.compiler.forked_compiles`)."""
    return this_process.forked
