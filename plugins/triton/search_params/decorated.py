"""A ``search_params`` kernel as its decorator checked it: hints, configs, operator class, hooks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import triton
from kerneltune.plugins.triton.search_params.classify import operator_class, python_function
from kerneltune.plugins.triton.search_params.hints import SearchHints, check_params, parse_hints


class DecoratedKernel(triton.KernelInterface):
    """A kernel decorated with ``hints={"search_params": ...}``, as the decorator checked it.

    What a search of it reads: its name, hints, configs (hand-written in
    full, seeds, a base), operator class, ``early_config_prune``, and the
    parts of Triton's ``Autotuner`` that the adapter's launch functions use.
    Launching is the subclass's (:mod:`~kerneltune.plugins.triton.search_params.kernel`).
    """

    def __init__(
        self,
        fn: Any,
        hints: Mapping[str, Any],
        configs: Sequence[Any] | None = None,
        key: Sequence[str] | None = None,
        prune_configs_by: Mapping[str, Any] | None = None,
        reset_to_zero: Sequence[str] | None = None,
        restore_value: Sequence[str] | None = None,
        pre_hook: Callable[..., Any] | None = None,
        post_hook: Callable[..., Any] | None = None,
    ) -> None:
        base = python_function(fn)
        if base is None or not hasattr(fn, "arg_names"):
            raise TypeError(f"triton.autotune with search_params decorates a @triton.jit kernel, got {fn!r}")
        self.fn = fn
        self.base_fn = base
        self.arg_names: list[str] = list(fn.arg_names)
        self.__name__ = name = base.__name__
        self.hints: SearchHints = parse_hints(hints, name)
        check_params(self.hints, base, name)
        self.keys: list[str] = list(key or ())
        for what, names in (
            ("key", self.keys),
            ("reset_to_zero", reset_to_zero),
            ("restore_value", restore_value),
        ):
            unknown = [n for n in names or () if n not in self.arg_names]
            if unknown:
                raise ValueError(
                    f"{name}: {what} names {', '.join(unknown)}, which are not kernel arguments "
                    f"(arguments: {', '.join(self.arg_names)})"
                )
        #: ``prune_configs_by``'s ``early_config_prune``, ``None`` without one.
        self.early_prune = self._pruner(prune_configs_by)
        self.configs: list[Any] = list(configs or ())
        self._given = bool(self.configs) and all(
            all(p in c.kwargs for p in self.hints.params) for c in self.configs
        )
        partial = [] if self._given else self.configs
        bases = [c for c in partial if c.kwargs and not any(p in c.kwargs for p in self.hints.params)]
        if len(bases) > 1:
            raise ValueError(
                f"{name}: {len(bases)} configs give none of the search params; at most one may, as the "
                "base that fixes the other meta-parameters of every generated candidate"
            )
        #: meta-parameters every generated candidate takes (from a config that gives no search param).
        self._base: dict[str, Any] = dict(bases[0].kwargs) if bases else {}
        self._seeds = [self._seed(c) for c in partial if c not in bases]
        #: the operator class and why (:func:`.classify.operator_class`).
        self.operator, self.operator_reason = operator_class(fn)
        self._install_hooks(list(reset_to_zero or ()), list(restore_value or ()), pre_hook, post_hook)

    def _pruner(self, prune_configs_by: Mapping[str, Any] | None) -> Callable[..., Any] | None:
        if not prune_configs_by:
            return None
        unsupported = sorted(set(prune_configs_by) - {"early_config_prune"})
        if unsupported:
            raise ValueError(
                f"{self.__name__}: prune_configs_by {', '.join(unsupported)} cannot be combined with "
                "search_params (the search decides what to measure); early_config_prune is supported"
            )
        return prune_configs_by.get("early_config_prune")

    def _seed(self, config: Any) -> dict[str, int]:
        others = sorted(set(config.kwargs) - set(self.hints.params))
        if others:
            raise ValueError(
                f"{self.__name__}: a config that gives only some search params is a seed and may give "
                f"nothing else, but one gives {', '.join(others)}; put those in a config that gives no "
                "search param (the base), or pass them at launch"
            )
        return dict(config.kwargs)

    def _install_hooks(
        self,
        reset_to_zero: list[str],
        restore_value: list[str],
        pre_hook: Callable[..., Any] | None,
        post_hook: Callable[..., Any] | None,
    ) -> None:
        """Triton's hook semantics: a user hook replaces the reset/restore default."""
        # Read by adapter.in_place_problem, as on Triton's own autotuner.
        self.reset_to_zero, self.restore_value = reset_to_zero, restore_value
        saved: dict[str, Any] = {}

        def reset_and_save(named: dict[str, Any], reset_only: bool = False) -> None:
            for name in reset_to_zero:
                if named.get(name) is not None:
                    named[name].zero_()
            if not reset_only:
                saved.clear()
                saved.update({n: named[n].clone() for n in restore_value if named.get(n) is not None})

        def restore(named: dict[str, Any], exception: BaseException | None) -> None:
            for name, value in saved.items():
                named[name].copy_(value)
            saved.clear()

        self.pre_hook: Callable[..., Any] = pre_hook or reset_and_save
        self.post_hook: Callable[..., Any] = post_hook or restore
