"""``triton.Config`` as kerneltune names, stores and makes it.

A config's label (how logs and records name a candidate) and its plain
values (what a record keeps of the pick) serve every Triton tuner; making a
config from meta-parameters and compile options, and the compile target
whose options a profile family offers, serve search_params. They read only
what ``triton.Config`` offers in every release (``kwargs``, ``all_kwargs()``,
its constructor's fields) and the active driver's target, which all rows of
the adapter's version table share.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping
from typing import Any

from kerneltune.plugins.triton import adapter


def config_label(config: Any) -> str:
    """A short one-line form of a config: its kwargs, then the options that differ from the defaults.

    ``triton.Config({"BLOCK_M": 64}, num_warps=8)`` reads ``"BLOCK_M=64,
    num_warps=8"``; the defaults are those of ``type(config)({})``, so a
    subclass with options of its own (triton-ascend's) is compared with its
    own defaults. A config with nothing to say reads ``"defaults"``; anything
    that is not a Config reads as ``str(config)``.
    """
    try:
        defaults = type(config)({}).all_kwargs()
        given = config.all_kwargs()
        meta = config.kwargs
    except Exception:
        return str(config)
    shown = {name: value for name, value in given.items() if name in meta or defaults.get(name) != value}
    return ", ".join(f"{name}={value}" for name, value in shown.items()) or "defaults"


def config_values(config: Any) -> dict[str, Any]:
    """A config's kwargs and the plain options that differ from the defaults, as plain data.

    ``triton.Config({"BLOCK_M": 64}, num_warps=8)`` gives ``{"kwargs":
    {"BLOCK_M": 64}, "num_warps": 8}``; what is not plain (a ``pre_hook``)
    is left out.
    """

    def plain(value: Any) -> bool:
        return value is None or isinstance(value, bool | int | float | str)

    defaults = type(config)({}).all_kwargs()
    meta = dict(config.kwargs)
    options = {
        name: value
        for name, value in config.all_kwargs().items()
        if name not in meta and defaults.get(name) != value and plain(value)
    }
    return {"kwargs": {name: value for name, value in meta.items() if plain(value)}, **options}


def config_fields() -> frozenset[str]:
    """Compile options ``triton.Config`` takes as its own fields (``num_warps``, ...)."""
    from triton import Config

    parameters = inspect.signature(Config.__init__).parameters
    return frozenset(name for name in parameters if name not in ("self", "kwargs", "pre_hook"))


def make_config(kwargs: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """A ``triton.Config`` of meta-parameters ``kwargs`` and compile ``options``.

    Options that are ``Config`` fields (:func:`config_fields`) become fields;
    any other (a backend's own option, such as triton-ascend's multibuffer)
    joins the kwargs, where the launch passes it on.
    """
    from triton import Config

    fields = config_fields()
    own = {k: v for k, v in options.items() if k in fields}
    extra = {k: v for k, v in options.items() if k not in fields}
    return Config({**kwargs, **extra}, **own)


def config_with_options(config: Any, options: Mapping[str, Any]) -> Any:
    """A copy of ``config`` with compile ``options`` laid over it, as :func:`make_config` places them."""
    fields = config_fields()
    changed = copy.copy(config)
    changed.kwargs = {**config.kwargs, **{k: v for k, v in options.items() if k not in fields}}
    for name, value in options.items():
        if name in fields:
            setattr(changed, name, value)
    return changed


def compile_target() -> Any:
    """The :class:`kerneltune.core.values.profiles.CompileTarget` kernels compile for now.

    Under the interpreter the backend is ``"interpreter"`` and the options are
    the compile fields of ``triton.Config``, which the interpreter accepts and
    ignores; otherwise the target and the option names come from the active
    driver and its backend's option dataclass.
    """
    from kerneltune.core import CompileTarget

    if adapter.interpreting():
        return CompileTarget(backend="interpreter", arch="", warp_size=0, options=config_fields())
    from triton.compiler import make_backend
    from triton.runtime import driver

    target = driver.active.get_current_target()
    options = make_backend(target).parse_options({})
    return CompileTarget(
        backend=str(target.backend),
        arch=target.arch,
        warp_size=int(target.warp_size or 0),
        options=frozenset(vars(options)),
    )
