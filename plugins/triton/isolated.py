"""Isolation for Triton kernels: one launch of a tuned kernel, as the isolation worker repeats it.

:class:`KernelIsolation` computes on the host what the launch derives from a
config, so that only plain data travels; :func:`kernel_runner` launches the
JIT function with it in the worker. docs/isolation.md ("How a kernel's
candidate runs in the worker") says what travels and what cannot be screened.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from kerneltune.core import TURN_OFF, IsolationError, Target, copier, named_target
from kerneltune.plugins.triton import adapter, autotune

#: What the worker imports to launch a kernel's candidates.
RUNNER = f"{__name__}:kernel_runner"
#: Keyword arguments of ``Autotuner.run`` that are launch options, not kernel arguments.
LAUNCH_OPTIONS = frozenset({"grid", "warmup"})


def _jit_classes() -> tuple[type, ...]:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return JITFunction, InterpretedFunction


def kernel_layers(tuner: Any) -> tuple[list[Any], Any]:
    """The ``triton.heuristics`` layers under a kernel's tuner, outermost first, and the JIT function.

    :raises IsolationError: when something else stands between the tuner and its JIT function.
    """
    from triton.runtime.autotuner import Heuristics

    layers = []
    layer = tuner.fn
    while isinstance(layer, Heuristics):
        layers.append(layer)
        layer = layer.fn
    if not isinstance(layer, _jit_classes()):
        raise IsolationError(
            f"isolate = 'subprocess' launches the JIT function under the tuner of "
            f"{adapter.kernel_name(tuner)} and its triton.heuristics, but the tuner wraps a "
            f"{type(layer).__name__}; tune a JIT function (under triton.heuristics if need be), {TURN_OFF}"
        )
    return layers, layer


def _prepare() -> tuple[str, ...]:
    """What the worker must do to import kernels as this process did: replace ``triton.autotune`` alike."""
    installer = autotune.autotune_installer()
    return () if installer is None else (installer,)


class KernelIsolation:
    """One launch of a tuned kernel, as the worker repeats it (an ``IsolatedLaunch``).

    :param tuner: the ``triton.autotune`` Autotuner or search_params kernel being tuned.
    :param args: the launch's positional arguments.
    :param kwargs: its keyword arguments, ``grid`` (and ``warmup``) included, as ``Autotuner.run`` gets them.
    :raises IsolationError: when the worker could not import the kernel by name (decorated inside
        a function, or held by no module-level name), launch its JIT function, or receive an argument.
    """

    def __init__(self, tuner: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        self._tuner = tuner
        self._args = tuple(args)
        self._kwargs = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS}
        self._grid = kwargs.get("grid")
        self._layers, _ = kernel_layers(tuner)
        base = tuner.base_fn
        self._defaults = {
            name: parameter.default
            for name, parameter in inspect.signature(base).parameters.items()
            if parameter.default is not inspect.Parameter.empty
        }
        #: what the worker imports, with the arguments it copies (``grid`` and ``warmup`` left out).
        self.target: Target = named_target(
            tuner,
            getattr(base, "__module__", None),
            getattr(base, "__qualname__", adapter.kernel_name(tuner)),
            self._args,
            self._kwargs,
            what="kernel",
            arg_names=list(tuner.arg_names),
            runner=RUNNER,
            prepare=_prepare(),
        )

    def payload(self, config: Any) -> dict[str, Any] | None:
        """What :func:`kernel_runner` takes to launch with ``config``; ``None`` when the launch raises first.

        A clash between the config and the launch's own meta-parameters, or a
        heuristic or grid function that raises, makes the launch raise in
        this process before the kernel runs: such a candidate fails safely
        when measured, so there is nothing to screen.
        """
        hook = self._hook(config)
        try:
            if set(self._kwargs) & set(config.kwargs):
                return None
            options = dict(config.all_kwargs())
            derived = self._derived(options)
            grid = self._grid_of({**self._kwargs, **options, **derived})
        except Exception:
            return None
        return {"options": options, "derived": derived, "grid": grid, "pre_hook": hook}

    def _hook(self, config: Any) -> Any:
        """The config's pre_hook as the worker finds it: its config's position, or itself to pickle.

        By position, the worker uses the hook of its own import of the
        kernel's module (so lambdas work). A config made at run time (by a
        prune function) sends its hook pickled; one that cannot be pickled
        makes the candidate unscreenable, and so failed.
        """
        hook = getattr(config, "pre_hook", None)
        if hook is None:
            return None
        for index, own in enumerate(adapter.candidate_configs(self._tuner)):
            if own.pre_hook is hook:
                return index
        return hook

    def _derived(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The values the heuristics layers set, each seeing those set before it, as ``Heuristics.run``."""
        kwargs = {**self._kwargs, "grid": self._grid, "warmup": False, **options}
        derived: dict[str, Any] = {}
        for layer in self._layers:
            for name, heuristic in layer.values.items():
                named = {**dict(zip(layer.arg_names, self._args, strict=False)), **kwargs}
                kwargs[name] = derived[name] = heuristic(named)
        return derived

    def _grid_of(self, meta: Mapping[str, Any]) -> tuple[int, ...]:
        grid = self._grid
        assert grid is not None  # Autotuner.run is always given the launch's grid
        if callable(grid):
            named = {**self._defaults, **meta, **dict(zip(self._tuner.arg_names, self._args, strict=False))}
            grid = grid(named)
        return tuple(int(size) for size in grid)


def fresh_descriptors(values: Sequence[Any]) -> list[Any]:
    """``values`` with each host-side ``TensorDescriptor`` over a copy of its base tensor (same layout)."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:  # a release without host-side descriptors
        return list(values)
    copy = copier()
    return [
        dataclasses.replace(value, base=copy(value.base)) if isinstance(value, TensorDescriptor) else value
        for value in values
    ]


def kernel_runner(tuner: Any) -> Any:
    """In the worker: ``run(args, kwargs, payload)``, which launches the JIT function under ``tuner``
    with a ``KernelIsolation.payload``, between the config's and the tuner's hooks."""
    _, jit = kernel_layers(tuner)
    configs = adapter.candidate_configs(tuner)

    def run(args: tuple[Any, ...], kwargs: dict[str, Any], payload: Mapping[str, Any]) -> Any:
        options, grid, hook = payload["options"], payload["grid"], payload["pre_hook"]
        args = tuple(fresh_descriptors(args))
        kwargs = dict(zip(kwargs, fresh_descriptors(list(kwargs.values())), strict=True))
        if isinstance(hook, int):
            hook = configs[hook].pre_hook
        hooked = {**dict(zip(tuner.arg_names, args, strict=False)), **kwargs, "grid": grid, "warmup": False}
        hooked.update(options)
        meta = {**kwargs, **options, **payload["derived"]}
        return adapter.hooked_launch(
            tuner, hooked, hook, lambda: adapter.run_function(jit, args, grid=grid, warmup=False, meta=meta)
        )

    return run
