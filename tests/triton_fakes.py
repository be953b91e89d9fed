"""A fake Triton autotuner shaped like a release that cannot run here, and fake kernels.

:class:`Autotuner32` keeps exactly the attribute layout that
``kerneltune.plugins.triton.adapter`` documents for upstream triton 3.2
(list ``keys``, ``configs``, ``prune_configs(kwargs)`` reading ``nargs``,
``cache``, ``best_config``, ``pre_hook``/``post_hook``; its ``Config`` has no
``__eq__``); none of its code is Triton's. It stays because triton 3.2's
``triton.autotune`` asks a GPU driver for a benchmarker at decoration, so
the real release cannot make an autotuner without a GPU.

triton-ascend 3.2's autotuners are not imitated here any more: the tests
use the real package (``make test-tritons``). Only
:func:`later_ascend_autotune` remains, the signature of later triton-ascend
releases (``hints`` keyword-only), which are not on the package index.

Kernels are :class:`FakeKernel` objects whose ``run`` records the call and
advances a :class:`tests.tuning_doubles.FakeClock` by a cost that depends on
the config, so picks are deterministic; they have what a real autotuner
reads of a ``JITFunction`` (``fn``, ``arg_names``), so the installed
Triton's own ``triton.autotune`` can wrap them too.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from kerneltune.core import hookimpl
from kerneltune.plugins.triton.interceptor import TritonInterceptor

ARG_NAMES = ["x", "n", "BLOCK"]


class Config32:
    """A config as triton 3.2 has it: compared by identity."""

    def __init__(self, kwargs: dict[str, Any], num_warps: int = 4, pre_hook: Callable | None = None) -> None:
        self.kwargs = kwargs
        self.num_warps = num_warps
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict[str, Any]:
        return {**self.kwargs, "num_warps": self.num_warps}

    def __str__(self) -> str:
        return ", ".join([*(f"{k}: {v}" for k, v in self.kwargs.items()), f"num_warps: {self.num_warps}"])


class KernelFailure(RuntimeError):
    """What a fake kernel raises for a config it cannot run (out of resources)."""


class FakeKernel:
    """A jitted kernel: ``run`` records its arguments and charges the clock."""

    def __init__(self, clock: Any, costs: dict[int, float | None], function: Callable | None = None) -> None:
        self.function = self.fn = function or kernel_function
        self.arg_names = list(ARG_NAMES)
        self.clock = clock
        self.costs = costs
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def run(self, *args: Any, grid: Any, warmup: bool, **meta: Any) -> str:
        cost = self.costs[meta["BLOCK"]]
        if cost is None:
            raise KernelFailure(f"out of resources for BLOCK={meta['BLOCK']}")
        self.calls.append((args, meta))
        self.clock.advance(cost)
        return f"launched BLOCK={meta['BLOCK']}"


def kernel_function(x, n, BLOCK):
    """The Python function a fake kernel pretends to compile."""
    return x, n, BLOCK


def other_kernel_function(x, n, BLOCK):
    """A second kernel's function: another name and source, so another candidate space."""
    return BLOCK, n, x


class Autotuner32:
    """The parts of triton 3.2's Autotuner the adapter touches."""

    def __init__(self, fn, arg_names, configs, key, prune_configs_by=None, pre_hook=None, post_hook=None):
        self.fn = fn
        self.base_fn = fn.function
        self.arg_names = arg_names
        self.configs = configs
        self.keys = key
        self.cache = {}
        self.nargs = None
        self.pre_hook = pre_hook or (lambda kwargs, reset_only=False: 0)
        self.post_hook = post_hook or (lambda kwargs, exception: 0)
        self.early_config_prune = (prune_configs_by or {}).get("early_config_prune")

    def _key(self, args, kwargs):
        named = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
        named = {k: v for k, v in named.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        return tuple(key)

    def prune_configs(self, kwargs):
        assert self.nargs is not None, "prune_configs reads nargs, which run() sets first"
        if self.early_config_prune:
            return self.early_config_prune(self.configs, self.nargs, **kwargs)
        return self.configs

    def run(self, *args, **kwargs):
        key = self._key(args, kwargs)
        if key not in self.cache:
            raise AssertionError("stock Autotuner.run would benchmark here (it needs a GPU driver)")
        self.best_config = config = self.cache[key]
        return self.fn.run(*args, **kwargs, **config.all_kwargs())

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)


def later_ascend_autotune(configs, key, prune_configs_by=None, *, auto_prof_dir=None, hints=None):
    """Later triton-ascend's decorator (not on the package index): ``hints`` is keyword-only."""
    raise NotImplementedError


def interceptor_plugin(root: type) -> types.ModuleType:
    """A plugin registering an interceptor that patches the fake family under ``root``."""

    class FakeTritonInterceptor(TritonInterceptor):
        name = f"fake-{root.__name__}"

        def install(self, route, root_class=None):
            super().install(route, root)

    plugin = types.ModuleType(f"tests_fake_interceptor_{root.__name__}")

    @hookimpl
    def kerneltune_register_interceptors(register):
        register(FakeTritonInterceptor)

    plugin.kerneltune_register_interceptors = kerneltune_register_interceptors
    return plugin
