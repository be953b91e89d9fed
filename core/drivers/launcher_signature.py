"""A function-level tuner's launcher as its signature sees it: which keywords it takes, where its
config fields go, and how a call's own arguments and a config's fields come together."""

from __future__ import annotations

import difflib
import inspect
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from kerneltune.core.notices import user_stacklevel, warn_once

#: The call-time controls, by keyword (``triton_dist.tune.autotune``'s docstring).
CONTROLS = ("autotune", "autotune_verbose", "autotune_allow_arg_overwrite", "autotune_pg")


@attrs.frozen
class LauncherSignature:
    """What :func:`signature_of` found of a launcher against its ``config_space``."""

    name: str
    #: the parameters a keyword may name, and whether ``**kwargs`` takes any other.
    keywords: frozenset[str]
    open_ended: bool
    #: the parameters a positional argument may fill, in order.
    positional: tuple[str, ...]
    #: every field of every config.
    fields: frozenset[str]

    @property
    def positional_limit(self) -> int:
        """How many positional arguments a call may pass before one lands on a config field."""
        return min(
            (self.positional.index(f) for f in self.fields if f in self.positional), default=sys.maxsize
        )

    def accepts(self, kwargs: Mapping[str, Any]) -> bool:
        """Whether a call's keyword arguments leave every config field to the tuner and name parameters."""
        return self.fields.isdisjoint(kwargs) and (self.open_ended or kwargs.keys() <= self.keywords)

    def refuse_unknown_controls(self, kwargs: Mapping[str, Any]) -> None:
        """Refuse a misspelt call-time control before any candidate runs (unless the function takes it).

        A function taking ``**kwargs`` gets it, with one warning where it is close to a control.
        """
        for name in kwargs:
            if name.startswith("autotune") and name not in self.keywords:
                close = difflib.get_close_matches(name, CONTROLS, n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                if self.open_ended:
                    if close:
                        warn_once(
                            ("autotune-control", self.name, name),
                            f"{self.name}: {name}={kwargs[name]!r} goes to the function's **kwargs, "
                            f"not to the tuner{hint}",
                        )
                    continue
                raise TypeError(
                    f"{self.name}: unknown call-time control {name}={kwargs[name]!r}{hint} "
                    f"(the controls are {', '.join(CONTROLS)}; {self.name} takes no parameter {name})"
                )

    def merge(
        self, config: Mapping[str, Any], args: tuple[Any, ...], kwargs: Mapping[str, Any], allow: bool
    ) -> dict[str, Any]:
        """The keyword arguments of a call with ``config``: its fields, then the call's own.

        :param allow: let an argument the call passes win over a field of the same name, with a
            warning; else such a clash raises.
        """
        clashes = sorted(
            {f for f in config if f in kwargs} | {f for f in config if f in self.positional[: len(args)]}
        )
        if clashes:
            where = ", ".join(clashes)
            if not allow:
                raise ValueError(
                    f"{self.name}: argument(s) {where} are config fields chosen by the tuner; "
                    "don't pass them, or pass autotune_allow_arg_overwrite=True to let yours win"
                )
            warnings.warn(
                f"{self.name}: your argument(s) {where} override the tuned config field(s); "
                "those fields are not tuned for this call",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        merged = {k: v for k, v in config.items() if k not in clashes}
        merged.update(kwargs)
        return merged


def signature_of(
    name: str, fn: Callable[..., Any], config_space: Sequence[Mapping[str, Any]]
) -> LauncherSignature:
    """``fn``'s signature against ``config_space``, which must be a non-empty list of dicts whose
    fields are keyword parameters of ``fn`` (any name, where it takes ``**kwargs``), none a control.

    :raises TypeError, ValueError: naming the config and field at fault.
    """
    if isinstance(config_space, Mapping | str) or not isinstance(config_space, Sequence):
        raise TypeError(f"{name}: config_space must be a list of dicts, got {type(config_space).__name__}")
    if not config_space:
        raise ValueError(f"{name}: config_space is empty; give at least one config dict")
    parameters = inspect.signature(fn).parameters.values()
    keywords = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    open_ended = any(p.kind is p.VAR_KEYWORD for p in parameters)
    positional = tuple(p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    fields: set[str] = set()
    for index, config in enumerate(config_space):
        if not isinstance(config, Mapping):
            raise TypeError(
                f"{name}: config_space[{index}] must be a dict of keyword arguments, "
                f"got {type(config).__name__}"
            )
        for field in config:
            if not isinstance(field, str) or not field.isidentifier():
                raise ValueError(f"{name}: config_space[{index}] has a field {field!r} that is not a name")
            if field in CONTROLS:
                raise ValueError(f"{name}: config field {field!r} is reserved for the tuner's own controls")
            if field not in keywords and not open_ended:
                raise ValueError(
                    f"{name}: config_space[{index}] field {field!r} is not a keyword parameter of "
                    f"{name}{inspect.signature(fn)}"
                )
        fields.update(config)
    return LauncherSignature(name, frozenset(keywords), open_ended, positional, frozenset(fields))
