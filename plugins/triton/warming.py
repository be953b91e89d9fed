"""The Triton compiler's one-time set-up in this process (:func:`warm_up`), which every compile waits for."""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import threading

from kerneltune.plugins.triton import adapter, compile_device, warm_cache
from kerneltune.plugins.triton.adapter import Thunk


class _WarmUp:
    """The compiler's one-time set-up in this process, on a background thread (:func:`warm_up`)."""

    def __init__(self) -> None:
        #: the thread importing the code generators and compiling an empty kernel, once started.
        self.thread: threading.Thread | None = None
        #: the thread hashing Triton (:func:`_hash_triton`), once started.
        self.hashing: threading.Thread | None = None
        #: the driver's binding for the warm-up thread, set once the driver is built.
        self.binding: concurrent.futures.Future[Thunk | None] | None = None
        #: the warm-up thread waits for the first compile process (:func:`complete`).
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
        hashed()  # the warm-up ends after all of its parts: a compile waiting for it waits for them
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
        return compile_device.device_binding()
    except Exception:
        return None


def warm_up() -> None:
    """Start the compiler's one-time set-up in this process, once, on a background thread.

    A process's first compile costs far more than the next: the C compiler
    builds the driver's helper module, Triton hashes its own sources and
    library for its cache keys, and imports its code generators. The three
    run side by side: the driver on the calling thread, the hash on a
    thread of its own, the imports on the warm-up thread, which then
    compiles an empty kernel. Called once a tuning knows it will compile
    (a launcher's first recorded launch, COMPILE asking for compile
    processes), never on a cache hit. Every compile waits for it to end
    (:func:`warmed`), so none of it runs beside a measurement.

    Where Triton's cache keeps kerneltune's record of Triton's hash
    (:func:`warm_cache.holds_triton_key`), a restarted tuning usually finds
    every program cached: only the hash and the driver start here, and the
    warm-up thread waits for the first fork (:func:`complete`).
    """
    if _warm.tried or adapter.interpreting():
        return  # every recorded launch makes this check: no lock on the way
    with _warm.lock:
        if _warm.tried:
            return
        _warm.tried = True
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


def complete() -> None:
    """Wait until :func:`warm_up` is done, so that no compile process repeats it or is forked in the
    middle of it; a warm-up that :func:`warm_up` deferred starts here, for the first fork.

    A child forked while the warm-up thread imports a module inherits that
    module's import lock, held by a thread it does not have, and hangs.
    """
    if _warm.deferred and _warm.thread is None:
        with _warm.lock:
            if _warm.thread is None and _warm.binding is not None:
                _start_warm_up_thread()
    thread = _warm.thread
    if thread is not None:
        thread.join()


def hashed() -> None:
    """Wait for the warm-up's hash of Triton, where one is under way."""
    hashing = _warm.hashing
    if hashing is not None:
        hashing.join()


def warmed() -> None:
    """Wait for the whole warm-up, where one is under way: the hash, and the warm-up thread if started.

    A compile needs the hash for its cache key, and Triton does not share
    one under way: each compile that came before it would compute it again.
    Waiting for all of it means no thread of the warm-up outlives the
    compiles to run beside a measurement.
    """
    hashed()
    thread = _warm.thread
    if thread is not None:
        thread.join()
