"""The contextual driver, behind ``triton_dist.autotuner.contextual_autotune``.

A :class:`ContextualAutoTuner` installs the interceptor plugins and runs the
outer function again and again, one (kernel, key)'s launches timed at a
time, until every (kernel, key) it launches has a pick. docs/contextual.md
says how, and when :data:`STALL_LIMIT` stops it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from threading import get_ident
from typing import Any

from kerneltune.core.drivers.checked_outputs import CheckOptions
from kerneltune.core.drivers.contextual_call import ContextualCall
from kerneltune.core.drivers.executions import STALL_LIMIT
from kerneltune.core.drivers.wrapping import FunctionWrapper, source_of
from kerneltune.core.errors import TunerBusyError
from kerneltune.core.machine.options import CONTEXTUAL_CACHE, CONTEXTUAL_DISK
from kerneltune.core.plugin_system.contracts import DirectInterceptor, Interceptor, KernelLaunch, provides
from kerneltune.core.plugin_system.session import Session, current_session
from kerneltune.core.plugin_system.settings import load_settings
from kerneltune.core.values.direct import DirectLaunches

__all__ = ["STALL_LIMIT", "ContextualAutoTuner", "contextual_autotune"]


class _Active:
    """The process's one active contextual tuner: its lock, and the tuner and thread for the busy error."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tuner: ContextualAutoTuner | None = None
        self.thread = 0


#: An instance, not class attributes: writing a class's attribute costs more on every call.
_ACTIVE = _Active()


def _thread_name(ident: int) -> str:
    return next((t.name for t in threading.enumerate() if t.ident == ident), str(ident))


class ContextualAutoTuner(FunctionWrapper):
    """An outer function whose inner tunable kernels are tuned in its real context.

    Call it as the original function. See :func:`contextual_autotune`.
    """

    # What a call reads, in slots (as AutoTuner's).
    __slots__ = ("_call", "_direct", "_interceptors", "_route_launch", "fn")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        is_dist: bool = False,
        n_repeat: int = 5,
        n_warmup: int = 3,
        flush_cache: bool = True,
        verbose: bool = False,
        check_outputs: bool | str | None = None,
        rtol: float | None = None,
        atol: float | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"contextual_autotune decorates a function, got {fn!r}")
        for name, value, least in (("n_repeat", n_repeat, 1), ("n_warmup", n_warmup, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"contextual_autotune: {name} must be an integer >= {least}, got {value!r}")
        for name, flag in (("is_dist", is_dist), ("flush_cache", flush_cache), ("verbose", verbose)):
            if not isinstance(flag, bool):
                raise TypeError(f"contextual_autotune: {name} takes True or False, got {flag!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.is_dist = is_dist
        self.n_repeat = n_repeat
        self.n_warmup = n_warmup
        self.flush_cache = flush_cache
        self.verbose = verbose
        self._checking = CheckOptions.of("contextual_autotune", None, check_outputs, rtol, atol)
        self._source_text: str | None = None
        #: the (kernel, key) pairs met as plain cache hits, which the interceptors launch themselves.
        self._direct = DirectLaunches()
        #: the interceptors of the session last resolved, installed around every call.
        self._interceptors: tuple[Interceptor, ...] | None = None
        self._session: Session | None = None
        #: the current call's routing state, made at its first launch that needs the route.
        self._call: ContextualCall | None = None
        #: :meth:`_route`, bound once: the interceptors are handed it at every call.
        self._route_launch = self._route

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Tune every inner kernel launch not tuned yet, then return a run with the picks.

        Once every launch has its pick, a call is the outer function's own
        work and the interceptors' direct launches: no setting, file or
        session is looked up (:meth:`_start_call` says when they are), and
        nothing is called beyond installing and uninstalling the interceptors.
        """
        if not _ACTIVE.lock.acquire(False):
            raise self._busy()
        _ACTIVE.tuner = self
        _ACTIVE.thread = get_ident()
        interceptors = self._interceptors
        installed = 0
        try:
            if interceptors is None:
                self._start_call()
                interceptors = self._interceptors or ()
            for interceptor in interceptors:
                interceptor.install(self._route_launch)
                installed += 1
            self._direct.serving = self._call is None
            try:
                result = self.fn(*args, **kwargs)
            except BaseException as exc:
                self._raise_abort(exc)
                raise
            if self._call is None:  # every launch had its pick and was made directly
                return result
            return self._until_tuned(args, kwargs, result)
        finally:
            # Whatever was raised: the first `installed` interceptors out, last installed first
            # (one failing must not leave another routing; the first such error is raised after
            # the rest), open tunings closed, the lock released.
            self._direct.serving = False
            failed: BaseException | None = None
            while installed:
                installed -= 1
                try:
                    interceptors[installed].uninstall()  # type: ignore[index]
                except BaseException as exc:
                    failed = failed or exc
            if self._call is None:
                _ACTIVE.tuner = None
                _ACTIVE.lock.release()
            else:
                self._close_call()
            if failed is not None:
                raise failed

    def _busy(self) -> TunerBusyError:
        other = _ACTIVE.tuner
        return TunerBusyError(
            f"contextual_autotune: cannot run {self.__name__} while {other.__name__ if other else '?'} is "
            f"being tuned (in thread {_thread_name(_ACTIVE.thread)}); only one ContextualAutoTuner may be "
            "active at a time, nested or concurrent use is not supported"
        )

    def _close_call(self) -> None:
        """After a call that routed launches: its open tunings released, then the lock."""
        try:
            self._call.close()  # type: ignore[union-attr]
        finally:
            self._call = _ACTIVE.tuner = None
            _ACTIVE.lock.release()

    def _source(self) -> str:
        """The outer function's source, read once: every later call that serves its picks needs it."""
        if self._source_text is None:
            self._source_text = source_of(self.fn)
        return self._source_text

    def _start_call(self) -> ContextualCall:
        """The call's routing state, with the settings and session in force now.

        Made at a call's first launch that the interceptors cannot make
        themselves (and before the first call, to know the interceptors): a
        call whose every launch has its pick reads no setting and no file.
        """
        # The kernels' own caches hold the picks (and kernel_keys.py's tuners the engine's,
        # per kernel object); without is_dist every rank tunes on its own. Only with
        # contextual_cache = "disk" does the cache plugin keep them for the next process,
        # keyed by this function's source too: a kernel's best config depends on the
        # work launched around it.
        self._direct.serving = False
        settings = load_settings()
        persist = settings[CONTEXTUAL_CACHE] == CONTEXTUAL_DISK
        overrides: dict[str, Any] = {"shard": False} if persist else {"cache": "none", "shard": False}
        if not self.is_dist:
            overrides["reducer"] = "local"
        session = current_session(settings, **overrides)
        call = self._call = ContextualCall(
            self.__name__,
            session,
            context=self._source() if persist else "",
            is_dist=self.is_dist,
            verbose=self.verbose,
            warmup=self.n_warmup,
            repeat=self.n_repeat,
            flush=self.flush_cache,
            direct=self._direct,
            checking=self._checking,
        )
        call.start_execution()
        if session is self._session:
            return call
        # Taken up from the next call on when the session changed (a setting, an added plugin).
        self._session = session
        interceptors = []
        registry = session.registries.interceptors
        for cls in registry.classes.values():
            if registry.available(cls):
                interceptor: Interceptor = registry.build(cls)
                if provides(interceptor, DirectInterceptor):
                    interceptor.serve(self._direct)
                interceptors.append(interceptor)
        self._interceptors = tuple(interceptors)
        return call

    def _route(self, launch: KernelLaunch) -> Any:
        call = self._call
        if call is None:
            call = self._start_call()
        return call.route(launch)

    def _execute(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One execution of the outer function (:meth:`_raise_abort` on an error)."""
        try:
            return self.fn(*args, **kwargs)
        except BaseException as exc:
            self._raise_abort(exc)
            raise

    def _raise_abort(self, exc: BaseException) -> None:
        """The machine's own error, where it caused ``exc``: it wins over what it caused."""
        call = self._call
        if call is not None and call.abort is not None and exc is not call.abort:
            raise call.abort from exc

    def _until_tuned(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> Any:
        """Execute again until nothing waits for a pick; the last execution's result."""
        call = self._call
        assert call is not None
        while True:
            if call.abort is not None:
                raise call.abort
            if not call.executions.pending:
                if not call.executions.needs_final():
                    return result
            else:
                call.executions.check_progress(call.focus)
            call.start_execution()
            result = self._execute(args, kwargs)


def contextual_autotune(
    is_dist: bool = False,
    n_repeat: int = 5,
    n_warmup: int = 3,
    *,
    flush_cache: bool = True,
    verbose: bool = False,
    check_outputs: bool | str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> Callable[[Callable[..., Any]], ContextualAutoTuner]:
    """Decorate a function so that the ``triton.autotune`` kernels it launches are tuned in its context.

    :param is_dist: take each candidate's MAX time over the ranks of
        torch.distributed's WORLD group before selecting (every rank must
        make the same calls); without it each rank picks on its own.
    :param n_repeat: timed launches per candidate; their mean is compared.
    :param n_warmup: untimed launches per candidate before timing.
    :param flush_cache: evict the device's L2 cache before each timed launch
        where the device has one (CUDA: a 256 MB write), outside the timing.
    :param verbose: show each candidate's time and the picks as INFO lines
        (:mod:`kerneltune.core.verbose`); the ``verbose`` setting turns them
        on for every tuner.
    :param check_outputs: ``True``, ``False`` or ``"strict"``: check each
        candidate's writes into its kernel's tensor arguments against a
        reference config's, dropping the wrong ones (docs/contextual.md,
        "Checked launches"); default: the ``check_outputs`` setting, and
        off with ``is_dist=True``, whose kernels may talk to other ranks.
    :param rtol, atol: the check's tolerances for every floating dtype;
        default: by dtype, as the function-level tuner's.

    The outer function runs repeatedly until every kernel it launches has a
    pick, then once more with the picks; that result is returned. A kernel
    whose candidates all fail raises ``RuntimeError("cannot find valid
    config ...")``. Executions that stop launching the (kernel, key) being
    measured, as when a key holds a counter, raise
    :class:`~kerneltune.core.errors.StalledTuningError` after
    :data:`STALL_LIMIT` of them in a row. Only one ContextualAutoTuner may
    be active at a time.
    """

    if callable(is_dist):  # @contextual_autotune, without the call
        raise TypeError(
            "contextual_autotune takes its options and returns the decorator: write @contextual_autotune() "
            f"above {getattr(is_dist, '__name__', 'the function')}, with parentheses"
        )

    def decorate(fn: Callable[..., Any]) -> ContextualAutoTuner:
        return ContextualAutoTuner(
            fn,
            is_dist=is_dist,
            n_repeat=n_repeat,
            n_warmup=n_warmup,
            flush_cache=flush_cache,
            verbose=verbose,
            check_outputs=check_outputs,
            rtol=rtol,
            atol=atol,
        )

    return decorate
