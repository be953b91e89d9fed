"""Hands ``triton.autotune`` launches to the contextual tuner while one is active.

The first ``install`` replaces ``run`` on Triton's ``Autotuner`` class and its
subclasses with a ``run`` of their own for the rest of the process (:data:`PATCH`).
The replacement routes only launches made on the installing thread between
``install`` and ``uninstall``, of autotuners with more than one candidate,
outside the tuner's own handling of a launch; a launch filed as a plain cache hit
(:class:`~kerneltune.core.DirectLaunches`) it makes itself from the pick.
Everything else reaches the original ``run`` untouched. All reads and
writes of the autotuner go through :mod:`kerneltune.plugins.triton.adapter`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import sys
import threading
from collections.abc import Callable, Hashable, Sequence
from threading import get_ident
from typing import Any, ClassVar

from kerneltune.core import CandidateTiming, CompileProcess, DirectLaunches, hookimpl
from kerneltune.plugins.triton import adapter, compiler, configs, isolated, programs, warm_cache
from kerneltune.plugins.triton.adapter.direct import NOT_DIRECT, DirectKernel


class TritonLaunch:
    """One intercepted ``kernel[grid](...)`` of an autotuned kernel (a ``KernelLaunch``)."""

    def __init__(
        self,
        tuner: Any,
        original: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        unsupported: str | None = None,
    ) -> None:
        self.kernel = tuner
        self.key: Hashable = adapter.tuning_key(tuner, args, kwargs)
        self._original = original
        self._args = args
        self._kwargs = kwargs
        self._unsupported = unsupported
        self._configs: tuple[list[Any], list[Any]] | None = None
        self._program: Callable[[Any], Hashable | None] | None = None

    @property
    def name(self) -> str:
        """The kernel function's name."""
        return adapter.kernel_name(self.kernel)

    @property
    def source(self) -> str:
        """The kernel function's source."""
        return adapter.kernel_source(self.kernel)

    def configs(self) -> list[Any]:
        """The autotuner's configs for this launch (those it generates, where it does, and the user's)."""
        return self._launch_configs()[0]

    def candidates(self) -> list[Any]:
        """The configs its ``prune_configs_by`` keeps for this launch."""
        return self._launch_configs()[1]

    def _launch_configs(self) -> tuple[list[Any], list[Any]]:
        if self._configs is None:
            self._configs = adapter.launch_configs(self.kernel, self._args, self._kwargs)
        return self._configs

    def unsupported(self) -> str | None:
        """Why this launch's autotuner cannot be tuned here (a class the version table lacks), or ``None``."""
        return self._unsupported

    def cached(self) -> Any | None:
        """Triton's in-process pick for this key."""
        return adapter.cached_config(self.kernel, self.key)

    def label(self, config: Any) -> str:
        """Triton's own text for a config."""
        return configs.config_label(config)

    def run(self, config: Any, around: Callable[[adapter.Thunk], object] | None = None) -> Any:
        """Launch with ``config``, its hooks outside ``around``."""
        return adapter.launch_config(self.kernel, self._args, self._kwargs, config, around)

    def reset(self, config: Any) -> None:
        """Zero what the autotuner zeroes, as Triton does after tuning, before the run with ``config``."""
        adapter.reset_arguments(self.kernel, self._args, self._kwargs, config)

    def in_place_problem(self) -> str | None:
        """Why what the autotuner zeroes or restores cannot be, for this launch; ``None`` when it can."""
        return adapter.in_place_problem(self.kernel, self._args, self._kwargs)

    def arguments(self) -> dict[str, Any]:
        """The launch's kernel arguments by name."""
        return adapter.named_arguments(self.kernel, self._args, self._kwargs)

    def scratch(self) -> tuple[str, ...]:
        """The arguments the autotuner zeroes or restores around each run (:func:`adapter.in_place_names`)."""
        return adapter.in_place_names(self.kernel)

    def changes_in_place(self) -> bool:
        """Whether the autotuner puts arguments back after each run (``restore_value``, a post-hook)."""
        return adapter.changes_in_place(self.kernel)

    def compiler(self) -> Callable[[Any], None] | None:
        """Compiles configs for this launch's arguments on any thread.

        ``None`` under the interpreter, and where this process has every
        candidate's program loaded already (:func:`compiler.all_loaded`).
        """
        if compiler.all_loaded(self.kernel, self._args, self._kwargs, self.candidates()):
            return None
        return compiler.config_compiler(self.kernel, self._args, self._kwargs)

    def compile_process(self) -> CompileProcess | None:
        """How this launch's configs compile in forked processes (:func:`compiler.forked_compiles`)."""
        return compiler.forked_compiles()

    def program(self, config: Any) -> Hashable | None:
        """Which program ``config`` launches with this launch's arguments (:func:`programs.program_of`)."""
        if self._program is None:
            self._program = programs.program_of(self.kernel, self._args, self._kwargs)
        return self._program(config)

    def options(self, config: Any) -> dict[str, object]:
        """``config``'s meta-parameters and options by name."""
        return dict(config.all_kwargs())

    def isolation(self) -> isolated.KernelIsolation:
        """How the isolation worker repeats this launch; raises ``IsolationError`` where it cannot."""
        return isolated.KernelIsolation(self.kernel, self._args, self._kwargs)

    def run_default(self) -> Any:
        """Triton's own ``run`` for this launch."""
        return self._original(self.kernel, *self._args, **self._kwargs)

    def direct(self) -> tuple[Any, dict[str, Any]] | None:
        """What the interceptor makes this key's later launches with (:func:`adapter.direct_entry`)."""
        return adapter.direct_entry(self.kernel, self.key)

    def commit(self, config: Any) -> None:
        """Store the pick in the autotuner's cache and ``best_config``."""
        adapter.store_config(self.kernel, self.key, config)

    def report(self, config: Any, timings: Sequence[CandidateTiming], seconds: float | None) -> None:
        """After a tuning, what Triton's own leaves: its timings and message, and its listener told.

        ``configs_timings`` and ``bench_time`` (:func:`adapter.store_timings`);
        with ``TRITON_PRINT_AUTOTUNING`` the running release's own message;
        Triton's autotune listener (:func:`adapter.tell_listener`). A pick found
        without measuring (``seconds`` ``None``) reaches the listener alone, as a cache hit.
        """
        if seconds is None:
            adapter.tell_listener(self.kernel, self.key, config, {}, None)
            return
        adapter.store_timings(self.kernel, timings, seconds)
        if adapter.prints_autotuning():
            layout = adapter.layout_of(self.kernel)
            print(adapter.autotuning_message(layout, self.name, self.key, seconds, config), flush=True)
        adapter.tell_listener(self.kernel, self.key, config, self.kernel.configs_timings, seconds)


class _Patch:
    """Triton's autotuner classes as patched in this process: at the first install, then kept.

    Replacing and restoring the class attribute around every call of an
    outer function would cost more than the launch it serves; so would
    listing a class's subclasses on every call to find one whose ``run``
    is not patched yet. A patched root class counts its new subclasses
    instead (:func:`_count_subclasses`), and a later :meth:`ensure` walks the
    classes again only where that count moved or the root's own ``run`` was
    replaced.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        #: the interceptor installed last: routing while its ``owner`` is set, dormant after.
        self.installed: TritonInterceptor | None = None
        #: classes made under a patched root so far (:func:`_count_subclasses`).
        self.subclasses = 0
        #: by root class, at its last walk: :attr:`subclasses` then, and the root's own ``run``.
        self.roots: dict[type, tuple[int, Callable[..., Any]]] = {}

    def ensure(self, root: type, walk: bool = False) -> None:
        """Patch ``root`` and its subclasses where not yet, and a ``run`` someone replaced since.

        Nothing is walked while no subclass was made and the root's ``run``
        is the one patched, unless ``walk``.
        """
        known = self.roots.get(root)
        if not walk and known == (self.subclasses, root.__dict__.get("run")):
            return
        with self.lock:
            if known is None:
                _count_subclasses(root)
            for owner, run in adapter.own_runs(root):
                if getattr(run, _REPLACES, None) is None:
                    owner.run = _replacement(run, owner, root)
            self.roots[root] = (self.subclasses, root.__dict__["run"])


def _count_subclasses(root: type) -> None:
    """Make every class defined under ``root`` from now on bump :attr:`_Patch.subclasses`.

    Through ``root.__init_subclass__``, which Python calls for every
    descendant; a hook the root had is still called.
    """
    own = root.__dict__.get("__init_subclass__")

    def counted(cls: Any, **kwargs: Any) -> None:
        PATCH.subclasses += 1
        if own is not None:
            own.__func__(cls, **kwargs)
        else:
            super(root, cls).__init_subclass__(**kwargs)  # type: ignore[arg-type]

    root.__init_subclass__ = classmethod(counted)  # type: ignore[assignment,method-assign]


#: The process's one patch (an instance: writing a class's attribute costs more on every call).
PATCH = _Patch()


#: Set on a replacement ``run``: the original it hands launches to.
_REPLACES = "__kerneltune_replaces__"


def _replacement(original: Callable[..., Any], cls: type, root: type) -> Callable[..., Any]:
    """``cls.run``, handing this thread's launches to the installed interceptor while there is one."""
    # A class whose own run the version table does not describe is handed over as such:
    # the driver refuses it where ranks must agree, and lets it tune itself elsewhere.
    unsupported = None
    if cls is not root and not adapter.understood(cls):
        unsupported = (
            f"its autotuner class {cls.__module__}.{cls.__qualname__} has a run() of its own that "
            'kerneltune\'s Triton adapter does not know (docs/contextual.md, "Triton versions")'
        )

    @functools.wraps(original)
    def run(tuner: Any, *args: Any, **kwargs: Any) -> Any:
        active = PATCH.installed
        if active is None or get_ident() != active.owner or active.handling or kwargs.get("warmup"):
            return original(tuner, *args, **kwargs)
        if active.direct.serving and (served := active.served.get(tuner) or active.serve_kernel(tuner)):
            made = served.launch(tuner, args, kwargs)
            if made is not NOT_DIRECT:
                return made
        if unsupported is None and not adapter.tunable(tuner):
            return original(tuner, *args, **kwargs)
        return active.route_launch(tuner, original, args, kwargs, unsupported)

    setattr(run, _REPLACES, original)
    return run


class TritonInterceptor:
    """Routes this thread's ``triton.autotune`` launches to a contextual tuner."""

    name: ClassVar[str] = "triton"

    @classmethod
    def is_available(cls) -> bool:
        """Whether triton can be imported."""
        return importlib.util.find_spec("triton") is not None

    def __init__(self) -> None:
        self.route: Callable[[TritonLaunch], Any] | None = None
        #: what this interceptor launches itself (:meth:`serve`); empty until served.
        self.direct = DirectLaunches()
        #: by autotuner, its picks in :attr:`direct` as launched (:meth:`serve_kernel`).
        self.served: dict[Any, DirectKernel] = {}
        #: the installing thread, and whether a launch of it is being routed now.
        self.owner = 0
        self.handling = False
        self._prepared = False
        #: Triton's autotuner class, once Triton was imported.
        self._triton: type | None = None
        #: at the last :meth:`_patch`: the root class, its ``run`` and :attr:`_Patch.subclasses`.
        self._root: type | None = None
        self._run: object = None
        self._subclasses = -1

    def serve(self, direct: DirectLaunches) -> None:
        """Launch the tuned (kernel, key) pairs ``direct`` holds from their picks, without the route."""
        self.direct = direct
        self.served = {}

    def serve_kernel(self, tuner: Any) -> DirectKernel | None:
        """The direct launches of ``tuner``, where :attr:`direct` holds picks of it."""
        picks = self.direct.picks.get(tuner)
        if picks is None:
            return None
        served = self.served[tuner] = DirectKernel(picks)
        return served

    def install(self, route: Callable[[TritonLaunch], Any], root: type | None = None) -> None:
        """Route this thread's tunable launches to ``route`` until :meth:`uninstall`.

        :param root: the autotuner class to patch (default: Triton's);
            tests pass fakes shaped like other releases.

        While Triton is not imported nothing is patched: no ``triton.autotune``
        kernel exists yet (one first imported inside the tuned function is
        intercepted from the next call), and importing Triton here would run
        its set-up beside the measurements.
        """
        if root is None:
            root = self._triton
            if root is None:
                if "triton" not in sys.modules:
                    return
                root = self._triton = adapter.autotuner_class()
        if (
            root is not self._root
            or root.run is not self._run  # type: ignore[attr-defined]
            or self._subclasses != PATCH.subclasses
        ):
            self._patch(root)
        self.route = route
        self.owner = get_ident()
        PATCH.installed = self

    def _patch(self, root: type) -> None:
        """Patch ``root``'s family (:meth:`_Patch.ensure`); in full at this interceptor's first install."""
        walk = not self._prepared
        if walk:
            adapter.register_key_types()
            if root is self._triton and not adapter.interpreting():
                # Before this call compiles or loads a kernel: Triton's hash of itself, kept across processes.
                warm_cache.remember_triton_key()
            self._prepared = True
        PATCH.ensure(root, walk)
        self._root, self._run, self._subclasses = root, root.run, PATCH.subclasses  # type: ignore[attr-defined]

    def route_launch(
        self,
        tuner: Any,
        original: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        unsupported: str | None,
    ) -> Any:
        """Hand one launch to the route; this thread's launches inside it go to Triton's own ``run``."""
        assert self.route is not None
        self.handling = True
        try:
            adapter.name_list_key_axes(tuner)
            return self.route(TritonLaunch(tuner, original, args, kwargs, unsupported))
        finally:
            self.handling = False

    def recording(self) -> contextlib.AbstractContextManager[list[Callable[[], object]]] | None:
        """Record this thread's Triton JIT launches as compiles instead of making them.

        ``None`` under Triton's interpreter, where nothing is compiled, and
        while Triton is not imported (as :meth:`install`).
        """
        if adapter.interpreting() or "triton" not in sys.modules:
            return None
        return compiler.recording()

    def compile_process(self) -> CompileProcess | None:
        """How recorded launches compile in forked processes (:func:`compiler.forked_compiles`)."""
        return compiler.forked_compiles()

    def uninstall(self) -> None:
        """Stop routing: every launch reaches Triton's own ``run`` again, through the pass-through.

        The interceptor stays :attr:`_Patch.installed`, dormant (no owner), so
        that the next :meth:`install` of the same tuner sets two attributes.
        """
        self.owner = 0
        self.route = None


@hookimpl
def kerneltune_register_interceptors(register):
    register(TritonInterceptor)
