"""Compiling Triton kernels ahead of running them: the adapter's compiler half.

:func:`config_compiler` (a kernel's config, for one launch's arguments) and
:func:`recording` (a host launcher's JIT launches, recorded instead of made)
compile through ``JITFunction.run(..., warmup=True)``, in forked processes
where :func:`forked_compiles` allows. The only module that patches
``JITFunction.run`` and touches Triton's per-device kernel cache;
docs/architecture.md ("The stages", COMPILE) says how it fits in.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
from kerneltune.plugins.triton import adapter, compile_device, configs, programs, warm_cache, warming
from kerneltune.plugins.triton.adapter import Thunk


def out_of_resources(exc: BaseException) -> bool:
    """Whether ``exc`` is Triton's ``OutOfResources`` (shared memory, registers, threads)."""
    try:
        from triton.runtime.errors import OutOfResources
    except ImportError:
        return False
    return isinstance(exc, OutOfResources)


def _cache_is_shared() -> bool:
    """Whether another process's compile is found here: Triton's own file cache, no forced recompiles."""
    if os.environ.get("TRITON_ALWAYS_COMPILE", "0").lower() in ("1", "true", "on", "yes"):
        return False
    if os.environ.get("TRITON_CACHE_MANAGER"):
        return False
    try:
        from triton import knobs
    except ImportError:
        return True  # releases before knobs read only the environment
    if getattr(getattr(knobs, "compilation", None), "always_compile", False):
        return False
    manager = getattr(getattr(knobs, "cache", None), "manager_class", None)
    from triton.runtime.cache import FileCacheManager

    return manager is None or manager is FileCacheManager


@attrs.frozen
class TritonCompileProcess:
    """Triton's part in compiling in forked processes.

    A :class:`kerneltune.core.plugin_system.contracts.CompileProcess` that
    probes Triton's cache and guesses which configs compile longest.
    """

    driver: Any
    device: int
    target: Any
    #: the parent's file whose byte ranges its children lock to build each launcher once.
    launcher_lock: int | None = None

    def ready(self) -> None:
        """Wait until the compiler's one-time set-up is done (:func:`~.warming.complete`)."""
        warming.complete()

    def probing(self) -> contextlib.AbstractContextManager[None]:
        """Compiles Triton's cache cannot serve raise ``CompileMiss`` (:func:`~.warm_cache.probing`)."""
        return warm_cache.probing()

    def effort(self, config: Any) -> float:
        """How long ``config`` is guessed to compile, to fork the longest first (``compile_effort``)."""
        return configs.compile_effort(config)

    def prepare(self) -> None:
        """Make the child compile for the parent's device and target without asking the device."""
        global _priming
        from triton.runtime import driver

        compile_device.this_process.forked = True
        compile_device.this_process.launcher_lock = self.launcher_lock
        _priming = threading.Lock()  # another thread of the parent may have held it at the fork
        driver.set_active(compile_device.ChildDriver(self.driver, self.device, self.target))


def forked_compiles() -> TritonCompileProcess | None:
    """How this thread's kernels compile in forked processes; starts :func:`~.warming.warm_up`.

    ``None`` where compiles cannot move to a forked process: Triton's
    interpreter (nothing is compiled), a release whose driver cannot be
    swapped, or a cache another process's
    compile would not reach (a custom cache manager, forced recompiles).
    """
    if adapter.interpreting() or not _cache_is_shared():
        return None
    from triton.runtime import driver

    if not hasattr(driver, "set_active"):
        return None
    warming.warm_up()  # first: it overlaps the driver's build, which the next line would otherwise make alone
    try:
        active = driver.active
        device, target = active.get_current_device(), active.get_current_target()
    except Exception:
        return None  # no device here: compiling will say so in this process
    return TritonCompileProcess(active, device, target, programs.launcher_lock())


class CannotRun(RuntimeError):
    """A compiled kernel the device cannot launch (more shared memory than it has)."""


# Triton creates a kernel's per-device cache on its first compile for a device
# (``JITFunction.device_caches``, a defaultdict); threads racing to create it
# could file their kernels in a cache that is then dropped. So the cache is
# created on the calling thread before any compile goes to the pool
# (:func:`_prime`); where a release has no such attribute, the first compile of
# each kernel runs alone instead.
_primed: weakref.WeakSet[Any] = weakref.WeakSet()
_priming = threading.Lock()


def _prime(fn: Any) -> None:
    jit = fn
    while jit is not None and not hasattr(jit, "device_caches"):
        jit = getattr(jit, "fn", None)  # heuristics and other wrappers keep the kernel in .fn
    if jit is None or fn in _primed:
        return
    from triton.runtime import driver

    try:
        device = driver.active.get_current_device()
    except Exception:
        return  # no device to compile for: the compile itself will say so
    jit.device_caches[device]
    _primed.add(fn)


def _compile(fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    warming.warmed()
    kwargs = {**kwargs, "warmup": True}
    if fn not in _primed:
        with _priming:
            if fn not in _primed:
                compiled = fn.run(*args, **kwargs)
                _primed.add(fn)
                _check(compiled)
                return
    _check(fn.run(*args, **kwargs))


def _check(compiled: Any) -> None:
    if compile_device.this_process.forked:
        programs.build_launcher(compiled, compile_device.this_process.launcher_lock)
        return  # the parent checks what it loads; a forked process asks the device nothing
    problem = compile_device.shared_memory_problem(compiled)
    if problem is not None:
        raise CannotRun(f"cannot launch: {problem}")


def config_compiler(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Callable[[Any], None] | None:
    """A function compiling ``tuner``'s configs for this launch's arguments, on any thread.

    Call it where the launch was made: it takes that thread's device. Each
    call compiles one config without launching and raises what the launch
    would (a compile error, ``OutOfResources``, :class:`CannotRun`).

    :returns: ``None`` where kernels are not compiled (Triton's interpreter).
    """
    if adapter.interpreting():
        return None
    bind = compile_device.device_binding()
    fn = tuner.fn
    _prime(fn)
    return lambda config: _compile_bound(bind, fn, args, {**kwargs, **config.all_kwargs()})


class _Recording(threading.local):
    compiles: list[Thunk] | None = None


_recording = _Recording()
_patch_lock = threading.Lock()
_patch_users = 0
_original_run: Callable[..., Any] | None = None


def _recording_run(fn: Any, *args: Any, **kwargs: Any) -> Any:
    compiles = _recording.compiles
    assert _original_run is not None
    if compiles is None or kwargs.get("warmup"):
        return _original_run(fn, *args, **kwargs)
    if _loaded(fn, args, kwargs):
        return None  # nothing to compile: a new key of a specialisation this process has run
    warming.warm_up()  # a launch to compile: only now is the compiler's set-up worth starting
    _prime(fn)
    compiles.append(functools.partial(_compile_bound, compile_device.device_binding(), fn, args, kwargs))
    return None


def all_loaded(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any], candidates: Sequence[Any]) -> bool:
    """Whether this process has every config's program for this launch of ``tuner`` loaded (:func:`_loaded`).

    A contextual tuning's next key of a specialisation the process has run then needs no COMPILE.
    """
    fn = tuner.fn
    return bool(candidates) and all(
        _loaded(fn, args, {**kwargs, **config.all_kwargs()}) for config in candidates
    )


def _loaded(fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether this process has the program of a launch loaded already, and it can run.

    A warm-up launch under :func:`warm_cache.peeking` finds a loaded program
    without compiling and raises for one that is not; only a kernel with
    programs loaded on this device is asked, so Triton's hash of itself is
    known by then. A new key of a specialisation the process has run (a
    warm start's next M) then starts no COMPILE.
    """
    caches = getattr(fn, "device_caches", None)
    if not caches:
        return False
    from triton.runtime import driver

    try:
        kernels = caches.get(driver.active.get_current_device())
        if not kernels or not kernels[0]:
            return False
        with warm_cache.peeking():
            compiled = fn.run(*args, **{**kwargs, "warmup": True})
    except Exception:  # not loaded, or anything else: the recorded compile will say
        return False
    return compiled is not None and compile_device.shared_memory_problem(compiled) is None


def _compile_bound(bind: Thunk, fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Compile on the device ``bind`` makes the calling thread's."""
    bind()
    _compile(fn, args, kwargs)


@contextlib.contextmanager
def recording() -> Iterator[list[Thunk]]:
    """Within the block, this thread's Triton JIT launches are recorded, not made.

    Yields a list that fills with one thunk per launch; a thunk compiles
    that launch (same function, arguments and meta-parameters) on any
    thread, raising what the launch would. A recorded launch returns
    ``None`` to the caller, and the first one starts :func:`~.warming.warm_up`: a
    launcher that launches no kernel starts nothing. Other threads launch
    as usual meanwhile.
    """
    from triton.runtime.jit import JITFunction

    global _patch_users, _original_run
    with _patch_lock:
        if _patch_users == 0:
            _original_run = JITFunction.run
            JITFunction.run = _recording_run
        _patch_users += 1
    outer, _recording.compiles = _recording.compiles, []
    try:
        yield _recording.compiles
    finally:
        _recording.compiles = outer
        with _patch_lock:
            _patch_users -= 1
            if _patch_users == 0:
                JITFunction.run = _original_run
                _original_run = None
