"""The function-level driver, behind ``triton_dist.tune.autotune``: a host function over keyword configs.

A key seen before dispatches straight to its pick (one ``key_fn`` call and
one dict lookup); a new key runs the state machine, which calls the
function with each kept config, then the function runs once with the pick.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from kerneltune.core.compiling.processes import CompileProcesses
from kerneltune.core.drivers.checked_outputs import CheckOptions
from kerneltune.core.drivers.inplace import InPlaceArguments, InPlaceRuns
from kerneltune.core.drivers.launcher_signature import signature_of
from kerneltune.core.drivers.options import PRECOMPILE, VERBOSE
from kerneltune.core.drivers.user_functions import call_key_fn, prune_predicate
from kerneltune.core.drivers.wrapping import FunctionWrapper, source_of
from kerneltune.core.isolation.options import ISOLATE
from kerneltune.core.isolation.parent import SUBPROCESS, Screening, screener
from kerneltune.core.isolation.targets import target_of
from kerneltune.core.machine.faces import SteppedTuning
from kerneltune.core.machine.failed_configs import argument_dtypes
from kerneltune.core.machine.tuner import Tuner
from kerneltune.core.machine.warm_start import checked_warm_start
from kerneltune.core.plugin_system.contracts import ForkingRecorder, RecordingInterceptor, provides
from kerneltune.core.plugin_system.session import Session, current_session
from kerneltune.core.values.records import Candidate, Origin
from kerneltune.core.values.space import Space, source_digest


def _label(config: Mapping[str, Any], session: Session) -> str:
    # Plugins name the values they know (a triton.Config by the options it sets).
    return ", ".join(f"{name}=<{session.describe_value(value) or value}>" for name, value in config.items())


class AutoTuner(FunctionWrapper):
    """A host function that picks its fastest keyword configuration per key.

    Call it as the original function, without the config fields; see
    :func:`autotune` for the call-time controls and the options.
    """

    # What a hit reads, in slots: functools.update_wrapper leaves the instance's own dict slower to
    # read from (hotpath.py --parts).
    __slots__ = ("_picks", "_positional_limit", "fn", "key_fn")

    def __init__(
        self,
        fn: Callable[..., Any],
        config_space: Sequence[Mapping[str, Any]],
        key_fn: Callable[..., Hashable],
        prune_fn: Callable[..., bool] | None = None,
        *,
        reset_to_zero: Sequence[str] | None = None,
        restore_value: Sequence[str] | None = None,
        warmup: int | None = None,
        repeat: int | None = None,
        warm_start: str | None = None,
        warm_start_budget: int | None = None,
        reference_fn: Callable[..., Any] | None = None,
        check_outputs: bool | str | None = None,
        rtol: float | None = None,
        atol: float | None = None,
    ) -> None:
        name = getattr(fn, "__name__", repr(fn))
        if not callable(fn):
            raise TypeError(f"autotune decorates a function, got {fn!r}")
        if not callable(key_fn):
            raise TypeError(f"{name}: key_fn must be callable, got {key_fn!r}")
        if prune_fn is not None and not callable(prune_fn):
            raise TypeError(f"{name}: prune_fn must be callable or None, got {prune_fn!r}")
        for option, value, least in (("warmup", warmup, 0), ("repeat", repeat, 1)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
                raise ValueError(f"{name}: {option} must be an integer >= {least} or None, got {value!r}")
        signature = signature_of(name, fn, config_space)
        warm_start = checked_warm_start(name, warm_start, warm_start_budget, unset=True)
        self._inplace = InPlaceArguments.of(fn, reset_to_zero, restore_value, signature.fields)
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.config_space = [dict(config) for config in config_space]
        self.key_fn = key_fn
        self.prune_fn = prune_fn
        self.warmup = warmup
        self.repeat = repeat
        self.warm_start = warm_start
        self.warm_start_budget = warm_start_budget
        self.reference_fn = reference_fn
        self._checking = CheckOptions.of(name, reference_fn, check_outputs, rtol, atol)
        self._signature = signature
        # Read on every hit: one attribute, not the signature's property.
        self._positional_limit = signature.positional_limit
        self._picks: dict[Hashable, Candidate] = {}
        # Built at the first tuning, when plugins can label the configs.
        self._tuner: Tuner | None = None
        self._tuner_lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function with the best config for this call's key (tuning first if needed).

        The call-time controls, by keyword: ``autotune`` (``False``: the first
        config, untuned), ``autotune_verbose``, ``autotune_allow_arg_overwrite``
        and ``autotune_pg`` (:func:`autotune`). A call with positional
        arguments only, whose key has its pick, is one ``key_fn`` call, one
        dict lookup and the function's own call.
        """
        if not kwargs:
            try:
                best = self._picks.get(self.key_fn(*args))
            except Exception:
                # key_fn raised or the key is unhashable. The slow path repeats key_fn and hands
                # the failure to the engine, which reports it on every rank; raising here would
                # leave the other ranks waiting in the agreement.
                best = None
            if best is not None and len(args) <= self._positional_limit:
                return self.fn(*args, **best.config)
            return self._tune(args, kwargs, True, False, False, None)
        return self._call(args, kwargs)

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """:meth:`__call__` with keyword arguments, the controls among them."""
        autotune = kwargs.pop("autotune", True)
        verbose = kwargs.pop("autotune_verbose", False)
        allow_overwrite = kwargs.pop("autotune_allow_arg_overwrite", False)
        group = kwargs.pop("autotune_pg", None)
        if autotune is True:
            try:
                best = self._picks.get(self.key_fn(*args, **kwargs))
            except Exception:
                best = None  # as in __call__
            if best is not None and len(args) <= self._positional_limit and self._signature.accepts(kwargs):
                return self.fn(*args, **kwargs, **best.config)
        return self._tune(args, kwargs, autotune, verbose, allow_overwrite, group)

    def _tune(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        autotune: bool,
        verbose: bool,
        allow_overwrite: bool,
        group: Any,
    ) -> Any:
        self._signature.refuse_unknown_controls(kwargs)
        for name, value in (
            ("autotune", autotune),
            ("autotune_verbose", verbose),
            ("autotune_allow_arg_overwrite", allow_overwrite),
        ):
            if not isinstance(value, bool):
                raise TypeError(f"{self.__name__}: {name} takes True or False, got {value!r}")
        first = self._signature.merge(self.config_space[0], args, kwargs, allow_overwrite)  # refuses clashes
        if not autotune:
            return self.fn(*args, **first)
        failure: BaseException | None = None
        key: Hashable = None
        inplace: InPlaceRuns | None = None
        try:
            key = call_key_fn(self.__name__, self.key_fn, args, kwargs)
            if self._inplace is not None:
                inplace = self._inplace.bind(args, kwargs)
        except Exception as exc:
            failure = exc
        keep = None if self.prune_fn is None else prune_predicate(self.__name__, self.prune_fn, args, kwargs)

        session = current_session()
        verbose = verbose or session.settings[VERBOSE]
        isolated = session.settings[ISOLATE] == SUBPROCESS
        target = target_of(self.fn, args, kwargs) if isolated else None
        with self._tuner_for(session).begin(
            session,
            key,
            keep=keep,
            failure=failure,
            group=group,
            verbose=verbose,
            warmup=self.warmup,
            repeat=self.repeat,
            warm_start=self.warm_start,
            warm_start_budget=self.warm_start_budget,
            dtypes=argument_dtypes((*args, *kwargs.values())),
        ) as tuning:
            check = None
            if not tuning.hit and failure is None:
                check = self._checking.check(
                    self.__name__,
                    session.settings,
                    self._signature.positional,
                    self._inplace,
                    args,
                    kwargs,
                    odd_reference=True,
                )
            if target is not None and not tuning.hit:
                self._screen(tuning, Screening(target, session), allow_overwrite)
            precompile = not tuning.hit and session.settings[PRECOMPILE]
            ran = precompile and self._precompile(session, tuning, args, kwargs, allow_overwrite, inplace)
            if ran and check is not None:
                check.touched()  # the COMPILE runs may have changed undeclared arguments
            around = None if inplace is None else inplace.around
            if check is not None and self.reference_fn is not None:
                check.run_reference(functools.partial(self.reference_fn, *args, **kwargs), around)
            while (candidate := tuning.next_candidate()) is not None:
                bound = self._signature.merge(candidate.config, args, kwargs, allow_overwrite)
                runs = around if check is None else check.around(candidate, around)
                tuning.measure(candidate, functools.partial(self.fn, *args, **bound), around=runs)
                if check is not None:
                    check.raise_if_unchecked()
            if check is not None:
                check.settle(tuning)
            best = tuning.finish() if check is None else check.finish(tuning.finish, key)
        if inplace is not None:
            inplace.finish()
        return self.fn(*args, **self._signature.merge(best.config, args, kwargs, allow_overwrite))

    def _screen(self, tuning: SteppedTuning, screening: Screening, allow_overwrite: bool) -> None:
        """ISOLATE: run each queued candidate once in the isolation worker before measuring."""
        args, kwargs = screening.target.args, screening.target.kwargs

        def payload(config: Mapping[str, Any]) -> dict[str, Any]:
            bound = self._signature.merge(config, args, kwargs, allow_overwrite)
            return {name: value for name, value in bound.items() if name not in kwargs}

        with screening:
            tuning.isolate(screener(screening, payload))

    @property
    def origin(self) -> Origin | None:
        """The wrapped function's module and qualified name, kept in its records; ``None`` if it has none."""
        module = getattr(self.fn, "__module__", None)
        qualname = getattr(self.fn, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(qualname, str):
            return None
        path = None
        if module == "__main__":  # a script: nothing imports it, but its file can be read
            with contextlib.suppress(TypeError, OSError):
                found = inspect.getsourcefile(self.fn)
                path = None if found is None else os.path.abspath(found)
        return Origin(module=module, qualname=qualname, path=path)

    def source_digest(self) -> str:
        """The digest of the wrapped function's source as it is now: the ``source`` its new records get.

        Read afresh at each call, so a tool that imports the function can
        tell a stored record of its current source from one of an earlier edit.
        """
        return source_digest(source_of(self.fn))

    def _tuner_for(self, session: Session) -> Tuner:
        with self._tuner_lock:
            if self._tuner is None:
                space = Space.build(
                    self.__name__,
                    self.config_space,
                    source_of(self.fn),
                    label=lambda c: _label(c, session),
                    origin=self.origin,
                )
                self._tuner = Tuner(space, picks=self._picks)
            return self._tuner

    def _precompile(
        self,
        session: Session,
        tuning: SteppedTuning,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        allow_overwrite: bool,
        inplace: InPlaceRuns | None = None,
    ) -> bool:
        """COMPILE for a host launcher: run each candidate once with its kernel launches recorded.

        Interceptor plugins that can (``recording()``) turn the launches into
        compiles on the engine's pool. This runs on the calling thread in
        candidate order, so ranks whose launchers hold collectives stay in
        step; a launcher that raises here compiles at its first warm-up.
        Returns whether it ran the function.
        """
        interceptors = session.registries.interceptors
        available = (
            interceptors.build(cls) for cls in interceptors.classes.values() if interceptors.available(cls)
        )
        capable = [rec for rec in available if provides(rec, RecordingInterceptor)]
        # recording() is None where nothing is compiled ahead (Triton's interpreter).
        recorders = [rec for rec in capable if rec.recording() is not None]
        if not recorders:
            return False
        compiles: dict[int, list[Callable[[], object]]] = {}
        for candidate in tuning.queued():
            bound = self._signature.merge(candidate.config, args, kwargs, allow_overwrite)
            try:
                with contextlib.ExitStack() as stack:
                    contexts = (rec.recording() for rec in recorders)
                    lists = [stack.enter_context(context) for context in contexts if context is not None]
                    if inplace is None:
                        self.fn(*args, **bound)
                    else:
                        inplace.run(functools.partial(self.fn, *args, **bound))
            except Exception:
                continue
            thunks = [thunk for recorded in lists for thunk in recorded]
            if thunks:
                compiles[candidate.index] = thunks
        if not compiles:
            return True  # nothing launched a kernel: no compile stage, no backend set-up

        def compile_candidate(candidate: Candidate) -> None:
            for thunk in compiles[candidate.index]:
                thunk()

        processes = [rec.compile_process() if provides(rec, ForkingRecorder) else None for rec in recorders]
        parts = tuple(process for process in processes if process is not None)
        child = CompileProcesses(parts) if len(parts) == len(processes) else None
        tuning.compile(compile_candidate, [c for c in tuning.queued() if c.index in compiles], child=child)
        return True


def autotune(
    config_space: Sequence[Mapping[str, Any]],
    key_fn: Callable[..., Hashable],
    prune_fn: Callable[..., bool] | None = None,
    *,
    reset_to_zero: Sequence[str] | None = None,
    restore_value: Sequence[str] | None = None,
    warmup: int | None = None,
    repeat: int | None = None,
    warm_start: str | None = None,
    warm_start_budget: int | None = None,
    reference_fn: Callable[..., Any] | None = None,
    check_outputs: bool | str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> Callable[[Callable[..., Any]], AutoTuner]:
    """Decorate a host function to run with its fastest config from ``config_space``.

    Tuning calls the function many times on the caller's arguments (every
    warm-up and timed run of every candidate): work it does in place must
    be reset or restored through the two options below, or give the same
    result however often it is repeated.

    :param config_space: non-empty list of dicts; each field is passed as a
        keyword argument. ``config_space[0]`` is used when ``autotune=False``.
    :param key_fn: ``key_fn(*args, **kwargs)`` gives the business key; one
        pick is kept per key.
    :param prune_fn: ``prune_fn(config, *args, **kwargs)`` returns ``False`` to
        skip a config before measuring.
    :param reset_to_zero: names of the function's tensor arguments to zero
        before each run while tuning, and once more before the call with the
        pick (as ``triton.autotune``'s option).
    :param restore_value: names of the function's tensor arguments to put
        back as the caller passed them after each run while tuning (as
        ``triton.autotune``'s option). With both, the caller's arguments end
        as after one call with the pick.
    :param warmup: untimed runs per candidate for this function (default:
        the ``warmup`` setting, 5).
    :param repeat: timed runs per candidate for this function (default:
        the ``repeat`` setting, 10).
    :param warm_start: ``"nearest"``: a key with no stored pick measures only
        the best configs of the stored keys nearest to it; ``"screen"``: it
        times every config briefly, then re-times the fastest with the
        nearest key's pick (:mod:`kerneltune.core.machine.warm_start`);
        ``"off"``: every config. Default: the ``warm_start`` setting.
    :param warm_start_budget: how many configs a warm start measures at
        most (``"screen"``: re-times head to head). Default: the
        ``warm_start_budget`` setting.
    :param reference_fn: ``reference_fn(*args, **kwargs)``, called as the
        function without the config, gives the reference outputs: what it
        returns and the arguments it changes. Default: the first candidate
        that runs. Each candidate's first run must give the same, or it is
        dropped as wrong; a first candidate that at least two others differ
        from, agreeing among themselves, is dropped instead
        (docs/guide.md, "Checked outputs").
    :param check_outputs: ``True``, ``False`` or ``"strict"`` (fail a tuning
        whose outputs cannot be compared); default: the ``check_outputs`` setting.
    :param rtol: relative tolerance of floating-point outputs, every dtype
        (default by dtype: 1e-5 for float32/64, 1e-2 for float16/bfloat16).
    :param atol: absolute tolerance, as a fraction of each output's largest
        magnitude (default by dtype: 1e-4, 1e-2); integers, booleans and fp8
        are compared bit for bit.
    :raises ValueError: for a name in ``reset_to_zero`` or ``restore_value``
        that is not a parameter of the function (or is a config field), or
        a ``warmup`` below 0 or ``repeat`` below 1.

    The returned :class:`AutoTuner` accepts, besides the function's own
    arguments, ``autotune`` (default ``True``), ``autotune_verbose``,
    ``autotune_allow_arg_overwrite`` and ``autotune_pg``.
    """

    def decorate(fn: Callable[..., Any]) -> AutoTuner:
        return AutoTuner(
            fn,
            config_space,
            key_fn,
            prune_fn,
            reset_to_zero=reset_to_zero,
            restore_value=restore_value,
            warmup=warmup,
            repeat=repeat,
            warm_start=warm_start,
            warm_start_budget=warm_start_budget,
            reference_fn=reference_fn,
            check_outputs=check_outputs,
            rtol=rtol,
            atol=atol,
        )

    return decorate
