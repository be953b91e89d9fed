"""Compiling Triton kernels ahead of running them: the adapter's compiler half.

:func:`config_compiler` (a kernel's config, for one launch's arguments) and
:func:`recording` (a host launcher's JIT launches, recorded instead of made)
compile through ``JITFunction.run(..., warmup=True)``, in forked processes
where :func:`forked_compiles` allows; the driver facts compiling needs are
here too. Like :mod:`kerneltune.plugins.triton.adapter`, this is the only
module that touches what it touches: ``JITFunction.run`` (patched while a
recording is open on any thread) and Triton's per-device kernel cache
(:mod:`~kerneltune.plugins.triton.warm_cache` wraps what a filled cache saves).
README.md ("Compiling") and docs/architecture.md ("The stages", COMPILE)
say how it fits in.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import importlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
from kerneltune.plugins.triton import adapter, configs, programs, warm_cache

Thunk = Callable[[], object]


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
#: per helper and device: the query takes about 1 ms, and every compiled candidate is checked.
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


def out_of_resources(exc: BaseException) -> bool:
    """Whether ``exc`` is Triton's ``OutOfResources`` (shared memory, registers, threads)."""
    try:
        from triton.runtime.errors import OutOfResources
    except ImportError:
        return False
    return isinstance(exc, OutOfResources)


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
        if not _child.forked:  # a forked compile process has no device to bind
            setter(device)

    return bind


class _Child:
    #: this process is a compile process forked by COMPILE (:func:`forked_compiles`).
    forked = False
    #: a file descriptor the compile processes of one parent lock ranges of
    #: (:func:`~kerneltune.plugins.triton.programs.build_launcher`).
    launcher_lock: int | None = None


_child = _Child()


class _ChildDriver:
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
    """Whether this process was forked by COMPILE to compile (:func:`forked_compiles`)."""
    return _child.forked


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


class _WarmUp:
    """The compiler's one-time set-up in this process, on a background thread (:func:`warm_up`)."""

    def __init__(self) -> None:
        #: the thread importing the code generators and compiling an empty kernel, once started.
        self.thread: threading.Thread | None = None
        #: the thread hashing Triton (:func:`_hash_triton`), once started.
        self.hashing: threading.Thread | None = None
        #: the driver's binding for the warm-up thread, set once the driver is built.
        self.binding: concurrent.futures.Future[Thunk | None] | None = None
        #: the warm-up thread waits for the first compile process (:meth:`TritonCompileProcess.ready`).
        self.deferred = False
        #: :func:`warm_up` ran here (once is enough).
        self.tried = False
        self.lock = threading.Lock()


_warm = _WarmUp()


def _empty_kernel():
    pass


def _hash_triton() -> None:
    """Triton's hash of its own sources and library, which every cache key holds (cached per process)."""
    try:
        warm_cache.remember_triton_key()
        try:
            from triton.runtime.cache import triton_key  # 3.6 on
        except ImportError:
            from triton.compiler.compiler import triton_key
        triton_key()
    except Exception:
        pass  # best effort: the first compile hashes instead


def _start_hashing() -> threading.Thread | None:
    """Start :func:`_hash_triton` on a thread of its own, to overlap the driver's build."""
    thread = threading.Thread(target=_hash_triton, name="kerneltune-hash", daemon=True)
    thread.start()
    return thread


#: Modules a process's first compile imports (the code generator and, through
#: it, the language's semantics): the warm-up imports them while Triton hashes
#: itself and the driver is built.
FIRST_IMPORTS = ("triton.compiler.code_generator", "triton.language.extra.libdevice")


def _compile_empty(binding: concurrent.futures.Future[Thunk | None]) -> None:
    """The warm-up thread: imports, then (once the hash and the driver are done) an empty kernel's compile."""
    try:
        for name in FIRST_IMPORTS:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        bind = binding.result()
        _hashed()  # the warm-up ends after all of its parts: a compile waiting for it waits for them
        if bind is None:
            return  # no device: nothing is compiled here
        import triton

        bind()
        triton.jit(_empty_kernel).warmup(grid=(1,))
    except Exception:
        pass  # best effort: the candidates' own compiles report what is wrong


def _device_binding_or_none() -> Thunk | None:
    """The calling thread's device binding, the driver made first; ``None`` without a device."""
    try:
        from triton.runtime import driver

        driver.active.get_current_target()
        return device_binding()
    except Exception:
        return None


def warm_up() -> None:
    """Start the compiler's one-time set-up in this process, once, on a background thread.

    A process's first compile costs far more than the next (on an H200's
    host 0.73 s against 0.05 s for a one-block kernel): the C compiler
    builds the driver's helper module (0.25 s, with an empty cache), Triton
    hashes its own sources and library for its cache keys (0.33 s) and
    imports its code generators. The three run side by side: the driver on
    the calling thread, the hash on a thread of its own, the imports on the
    warm-up thread, which then compiles an empty kernel. A compile process
    forked afterwards inherits it all (:meth:`TritonCompileProcess.ready`
    waits for the warm-up thread).
    Called once a tuning knows it will compile: when a launcher's first
    launch is recorded and when COMPILE asks for compile processes; never
    on a cache hit, which compiles nothing, nor for work that launches no
    kernel. Every compile waits for it to end (:func:`_warmed`), so none of
    it outlives the compiles and runs beside a measurement.

    Where Triton's cache already keeps kerneltune's record of Triton's hash
    (:func:`warm_cache.holds_triton_key`), the cache has served this install
    before and a restarted tuning usually finds every program there: then
    only the hash and the driver start here, and the warm-up thread waits
    for the first compile that has to fork (:meth:`TritonCompileProcess.ready`).
    A tuning whose programs are all cached loads them without importing the
    code generators or compiling the empty kernel.
    """
    if _warm.tried or adapter.interpreting():
        return  # every recorded launch makes this check: no lock on the way
    with _warm.lock:
        if _warm.tried:
            return
        _warm.tried = True
        # Three things at once: Triton reads and hashes its files, the warm-up
        # thread imports, and this thread has the C compiler build the driver.
        _warm.hashing = _start_hashing()
        _warm.binding = concurrent.futures.Future()
        _warm.deferred = warm_cache.holds_triton_key()
        if not _warm.deferred:
            _start_warm_up_thread()
        bind = None
        try:
            bind = _device_binding_or_none()
        finally:
            _warm.binding.set_result(bind)  # whatever happens here: the warm-up thread waits for it


def _start_warm_up_thread() -> None:
    """Start the thread that imports the code generators and compiles an empty kernel.

    The caller holds ``_warm.lock``. The thread is published once started:
    others read ``_warm.thread`` without the lock and join it.
    """
    thread = threading.Thread(
        target=_compile_empty, args=(_warm.binding,), name="kerneltune-warm-up", daemon=True
    )
    thread.start()
    _warm.thread = thread


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
        """Wait until :func:`warm_up` is done, so that no child repeats it or forks in the middle of it.

        Only once it is over: a child forked while the warm-up thread imports
        a module inherits that module's import lock, held by a thread the
        child does not have, and hangs at its own import of it (seen on an
        H200 when forks waited only for the hash). A warm-up that
        :func:`warm_up` deferred starts here, for the first fork.
        """
        if _warm.deferred and _warm.thread is None:
            with _warm.lock:
                if _warm.thread is None and _warm.binding is not None:
                    _start_warm_up_thread()
        thread = _warm.thread
        if thread is not None:
            thread.join()

    @contextlib.contextmanager
    def probing(self) -> Iterator[None]:
        """Within the block, this thread's compiles that Triton's on-disk cache cannot serve raise
        :class:`~kerneltune.core.CompileMiss` before compiling; a hit loads as usual.

        Triton's ``compile`` looks a program up by its cache key before it
        compiles anything: the probe wraps that lookup (Triton's
        ``get_cache_manager`` in its compiler module). Where a release has
        no such lookup, every compile under the probe is a miss, and
        compiles fork as they did without one. A lookup needs Triton's hash
        of itself: the probe's compile waits for it (:func:`_warmed`).
        """
        with warm_cache.probing():
            yield

    def effort(self, config: Any) -> float:
        """How long ``config`` is guessed to compile, to fork the longest first (``compile_effort``)."""
        return configs.compile_effort(config)

    def prepare(self) -> None:
        """Make the child compile for the parent's device and target without asking the device."""
        global _priming
        from triton.runtime import driver

        _child.forked = True
        _child.launcher_lock = self.launcher_lock
        _priming = threading.Lock()  # another thread of the parent may have held it at the fork
        driver.set_active(_ChildDriver(self.driver, self.device, self.target))


def forked_compiles() -> TritonCompileProcess | None:
    """How this thread's kernels compile in forked processes; starts :func:`warm_up`.

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
    warm_up()  # first: it overlaps the driver's build, which the next line would otherwise make alone
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


def _hashed() -> None:
    """Wait for the warm-up's hash of Triton, where one is under way."""
    hashing = _warm.hashing
    if hashing is not None:
        hashing.join()


def _warmed() -> None:
    """Wait for the whole warm-up, where one is under way: the hash, and the warm-up thread if started.

    A compile needs the hash for its cache key, and Triton does not share
    one under way: each compile on a pool thread that came before it would
    compute it again, on the interpreter lock the others need. And waiting
    for all of the warm-up, not only the hash, means that once the tuning's
    compiles have ended no thread of the warm-up is left running beside a
    measurement.
    """
    _hashed()
    thread = _warm.thread
    if thread is not None:
        thread.join()


def _compile(fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    _warmed()
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
    if _child.forked:
        programs.build_launcher(compiled, _child.launcher_lock)
        return  # the parent checks what it loads; a forked process asks the device nothing
    problem = shared_memory_problem(compiled)
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
    bind = device_binding()
    fn = tuner.fn
    _prime(fn)

    def compile_config(config: Any) -> None:
        bind()
        _compile(fn, args, {**kwargs, **config.all_kwargs()})

    return compile_config


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
    warm_up()  # a launch to compile: only now is the compiler's set-up worth starting
    _prime(fn)
    compiles.append(functools.partial(_compile_recorded, device_binding(), fn, args, kwargs))
    return None


def all_loaded(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any], candidates: Sequence[Any]) -> bool:
    """Whether this process has every config's program for this launch of ``tuner`` loaded, each able to run.

    Asked as :func:`_loaded` asks, config by config, stopping at the first
    that is not. A contextual tuning's next key of a specialisation the
    process has run (another M) then needs no COMPILE.
    """
    fn = tuner.fn
    return bool(candidates) and all(
        _loaded(fn, args, {**kwargs, **config.all_kwargs()}) for config in candidates
    )


def _loaded(fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether this process has the program of a launch loaded already, and it can run.

    Only a kernel with programs loaded on this device is asked, so Triton's
    hash of itself is known by then: a warm-up launch under
    :func:`warm_cache.peeking` finds a loaded program without compiling and
    raises, before looking anything up, for one that is not. A new key of a
    specialisation the process has run (a warm start's next M) then records
    nothing, and the tuning starts no COMPILE for it. The warm-up launch goes
    through ``fn.run``: where :func:`recording` has replaced it, a warm-up
    passes through to Triton's own.
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
    return compiled is not None and shared_memory_problem(compiled) is None


def _compile_recorded(bind: Thunk, fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    bind()
    _compile(fn, args, kwargs)


@contextlib.contextmanager
def recording() -> Iterator[list[Thunk]]:
    """Within the block, this thread's Triton JIT launches are recorded, not made.

    Yields a list that fills with one thunk per launch; a thunk compiles
    that launch (same function, arguments and meta-parameters) on any
    thread, raising what the launch would. A recorded launch returns
    ``None`` to the caller, and the first one starts :func:`warm_up`: a
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
