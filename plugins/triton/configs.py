"""``triton.Config`` as kerneltune names, stores and makes it.

Only what every row of the adapter's version table shares is read:
``kwargs``, ``all_kwargs()``, the constructor's fields, the attributes a
default config holds, and the active driver's target.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping
from typing import Any, TypeGuard

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


#: Compile options a config's plain values always name, default or not: every release's
#: ``Config`` has them, and their defaults differ between releases and backends.
PINNED_OPTIONS = ("num_warps", "num_stages")


def config_values(config: Any) -> dict[str, Any] | None:
    """A config's kwargs and compile options as plain data, for the snippet that hard-codes a pick.

    ``triton.Config({"BLOCK_M": 64}, num_warps=8)`` gives ``{"kwargs":
    {"BLOCK_M": 64}, "num_warps": 8, "num_stages": 3}``: the options of
    :data:`PINNED_OPTIONS` always, the others where they differ from the
    defaults. ``None`` for a config that plain data cannot say whole (a
    ``pre_hook``, a kwarg or option that is an object): a snippet without
    that part would make another config.
    """

    def plain(value: Any) -> bool:
        return value is None or isinstance(value, bool | int | float | str)

    defaults = type(config)({}).all_kwargs()
    meta = dict(config.kwargs)
    given = config.all_kwargs()
    if getattr(config, "pre_hook", None) is not None or not all(plain(v) for v in given.values()):
        return None
    options = {
        name: value
        for name, value in given.items()
        if name not in meta and (name in PINNED_OPTIONS or defaults.get(name) != value)
    }
    return {"kwargs": meta, **options}


def config_fields() -> frozenset[str]:
    """Compile options ``triton.Config``'s constructor names as parameters (``num_warps``, ...)."""
    from triton import Config

    parameters = inspect.signature(Config.__init__).parameters
    return frozenset(name for name in parameters if name not in ("self", "kwargs", "pre_hook"))


def config_attributes() -> frozenset[str]:
    """Compile options a ``triton.Config`` holds as attributes of its own.

    The constructor's fields (:func:`config_fields`) and the attributes a
    release sets from its other keywords: triton-ascend 3.2's ``Config``
    keeps ``multibuffer`` and the NPU's other options from ``**bishengir_options``
    so, and passes them to the launch in ``all_kwargs()``.
    """
    from triton import Config

    made = vars(Config({}))
    extra = {name for name in made if not name.startswith("_") and name not in ("kwargs", "pre_hook")}
    return config_fields() | frozenset(extra)


def _lay_over(config: Any, options: Mapping[str, Any], attributes: frozenset[str]) -> Any:
    """Set each option as ``config``'s attribute where it has one, else in its kwargs; ``config``.

    An attribute that ``all_kwargs()`` would not pass on with the value goes
    into the kwargs too, so every option reaches the launch whatever the
    release does with its attributes.
    """
    extra: dict[str, Any] = {}
    for name, value in options.items():
        if name in attributes:
            setattr(config, name, value)
            if name in config.all_kwargs() and config.all_kwargs()[name] == value:
                continue
        extra[name] = value
    if extra:
        config.kwargs = {**config.kwargs, **extra}
    return config


def make_config(kwargs: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """A ``triton.Config`` of meta-parameters ``kwargs`` and compile ``options``.

    ``Config`` fields go to its constructor; other options are laid over it
    (:func:`_lay_over`), so ``best_config.multibuffer`` reads the searched value.
    """
    from triton import Config

    fields = config_fields()
    own = {k: v for k, v in options.items() if k in fields}
    rest = {k: v for k, v in options.items() if k not in fields}
    return _lay_over(Config(dict(kwargs), **own), rest, config_attributes())


def config_with_options(config: Any, options: Mapping[str, Any]) -> Any:
    """A copy of ``config`` with compile ``options`` laid over it, as :func:`make_config` places them."""
    changed = copy.copy(config)
    changed.kwargs = {k: v for k, v in config.kwargs.items() if k not in options}
    return _lay_over(changed, options, config_attributes())


def compile_target() -> Any:
    """The :class:`kerneltune.core.values.profiles.CompileTarget` kernels compile for now.

    Under the interpreter the backend is ``"interpreter"`` and the options are
    those ``triton.Config`` holds (:func:`config_attributes`), which the
    interpreter accepts and ignores; otherwise the target and the option
    names come from the active driver and its backend's option dataclass.
    """
    from kerneltune.core import CompileTarget

    if adapter.interpreting():
        return CompileTarget(backend="interpreter", arch="", warp_size=0, options=config_attributes())
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


def compile_effort(config: Any) -> float:
    """A rough guess at how long ``config`` takes to compile, only to fork the longest compiles first:
    the product of its block sizes (meta-parameters named ``BLOCK...``) times its ``num_stages``.

    Side by side, a matmul's configs compile in about the order of this
    product, and a batch waits for its longest. Reads what :func:`_meta_of`
    reads; 0 where it names no block size, so those keep the order handed over.
    """
    meta = _meta_of(config)
    blocks = [
        value
        for name, value in meta.items()
        if isinstance(name, str) and name.upper().startswith("BLOCK") and _positive(value)
    ]
    if not blocks:
        return 0.0
    stages = meta.get("num_stages")
    volume = float(stages) if _positive(stages) else 1.0
    for size in blocks:
        volume *= size
    return volume


def _positive(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _meta_of(config: Any) -> dict[Any, Any]:
    """``config``'s meta-parameters and options by name, those of any ``triton.Config`` among a
    mapping's values included; empty for anything else."""
    if callable(getattr(config, "all_kwargs", None)):
        return dict(config.all_kwargs())
    if not isinstance(config, Mapping):
        return {}
    meta = dict(config)
    for value in config.values():
        if callable(getattr(value, "all_kwargs", None)):
            meta.update(value.all_kwargs())
    return meta
