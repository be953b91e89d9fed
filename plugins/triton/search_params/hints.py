"""The ``search_params`` hint of ``triton.autotune``: parsing and validation.

docs/search_params.md lists the options. Everything is checked when the
kernel is decorated, so a typo fails at import time, not at the first
launch; only the strategy's name waits for the first tuning, where the
strategies registered then are known.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

import attrs
from kerneltune.core.driving import SEARCH_EFFORTS, CheckOptions

DEFAULT_VALUES = (16, 32, 64, 128, 256, 512, 1024, 2048)
DEFAULT_TOP_K = 3
OPTIONS = (
    "params",
    "values",
    "shape_final_top_k",
    "strategy",
    "effort",
    "budget_s",
    "max_points",
    "debug",
    "reference_fn",
    "check_outputs",
    "rtol",
    "atol",
)

# Compile options the tuner decides itself; as search params they would only
# be mistaken for tile sizes (the Ascend guide says the same of unit_flag).
RESERVED = frozenset({"unit_flag", "num_warps", "num_stages", "num_ctas", "maxnreg"})


@attrs.frozen
class SearchHints:
    """A validated ``search_params`` hint (docs/search_params.md lists the options); ``values`` ascending.

    ``None`` for ``strategy``, ``effort``, ``budget_s`` or ``max_points`` leaves it to its setting.
    """

    params: tuple[str, ...]
    values: tuple[int, ...] = DEFAULT_VALUES
    shape_final_top_k: int = DEFAULT_TOP_K
    strategy: str | None = None
    effort: str | None = None
    budget_s: float | None = None
    max_points: int | None = None
    debug: bool = False
    reference_fn: Callable[..., Any] | None = None
    #: ``check_outputs``, ``rtol`` and ``atol``, as the function-level tuner takes them.
    checking: CheckOptions = attrs.field(
        factory=lambda: CheckOptions.of("search_params", None, None, None, None), eq=False
    )


def wants_search(hints: object) -> TypeGuard[Mapping[str, Any]]:
    """Whether a ``hints`` argument asks for the search_params path."""
    return isinstance(hints, Mapping) and "search_params" in hints


def parse_hints(hints: Mapping[str, Any], kernel: str) -> SearchHints:
    """Validate ``hints`` (which holds ``search_params``) for the kernel named ``kernel``.

    :raises ValueError: for an unknown option (listing the valid ones), other
        hints beside ``search_params``, or a bad value; the message names the
        kernel and the option.
    :raises TypeError: for a value of the wrong type.
    """
    others = sorted(str(k) for k in hints if k != "search_params")
    if others:
        raise ValueError(
            f"{kernel}: hints {', '.join(others)} cannot be combined with search_params; "
            "search_params decides tiles and compile options itself"
        )
    spec = hints["search_params"]
    if not isinstance(spec, Mapping):
        raise TypeError(f"{kernel}: hints['search_params'] must be a dict, got {type(spec).__name__}")
    unknown = sorted(str(k) for k in spec if k not in OPTIONS)
    if unknown:
        raise ValueError(
            f"{kernel}: unknown search_params option(s) {', '.join(unknown)} "
            f"(valid options: {', '.join(OPTIONS)})"
        )
    if "params" not in spec:
        raise ValueError(f"{kernel}: search_params needs 'params', the tl.constexpr tile sizes to search")
    return SearchHints(
        params=_params(spec["params"], kernel),
        values=_values(spec.get("values", DEFAULT_VALUES), kernel),
        shape_final_top_k=_top_k(spec.get("shape_final_top_k", DEFAULT_TOP_K), kernel),
        strategy=_strategy(spec.get("strategy"), kernel),
        effort=_effort(spec.get("effort"), kernel),
        budget_s=_budget(spec.get("budget_s"), kernel),
        max_points=_max_points(spec.get("max_points"), kernel),
        debug=_flag(spec.get("debug", False), kernel),
        reference_fn=_reference(spec.get("reference_fn"), kernel),
        checking=CheckOptions.of(
            f"{kernel}: search_params", None, spec.get("check_outputs"), spec.get("rtol"), spec.get("atol")
        ),
    )


def _params(value: Any, kernel: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{kernel}: search_params 'params' must be a list of parameter names, got {value!r}")
    names = tuple(value)
    if not names:
        raise ValueError(f"{kernel}: search_params 'params' is empty; name at least one tile size")
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                f"{kernel}: search_params 'params' holds {name!r}, which is not a parameter name"
            )
        if name in RESERVED:
            raise ValueError(
                f"{kernel}: {name} is a compile option the tuner handles itself; leave it out of "
                "search_params 'params' (fix it at launch if it must not change)"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"{kernel}: search_params 'params' names a parameter twice: {list(names)}")
    return names


def _values(value: Any, kernel: str) -> tuple[int, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{kernel}: search_params 'values' must be a non-empty list of ints, got {value!r}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or item <= 0:
            raise ValueError(f"{kernel}: search_params 'values' holds {item!r}; use positive ints")
    return tuple(sorted(set(value)))


def _top_k(value: Any, kernel: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{kernel}: search_params 'shape_final_top_k' must be an int >= 1, got {value!r}")
    return value


def _strategy(value: Any, kernel: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise TypeError(f"{kernel}: search_params 'strategy' must be a strategy's name, got {value!r}")
    return None if value is None else value.strip()


def _effort(value: Any, kernel: str) -> str | None:
    if isinstance(value, str):
        value = value.strip().lower()
    if value is not None and value not in SEARCH_EFFORTS:
        raise ValueError(
            f"{kernel}: search_params 'effort' must be one of {', '.join(SEARCH_EFFORTS)}, got {value!r}"
        )
    return value


def _budget(value: Any, kernel: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ValueError(f"{kernel}: search_params 'budget_s' must be a number of seconds > 0, got {value!r}")
    return float(value)


def _max_points(value: Any, kernel: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{kernel}: search_params 'max_points' must be an int >= 1, got {value!r}")
    return value


def _flag(value: Any, kernel: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{kernel}: search_params 'debug' must be True or False, got {value!r}")
    return value


def _reference(value: Any, kernel: str) -> Callable[..., Any] | None:
    if value is not None and not callable(value):
        raise TypeError(f"{kernel}: search_params 'reference_fn' must be callable, got {value!r}")
    return value


def constexpr_parameters(fn: Callable[..., Any]) -> list[str]:
    """Names of the parameters of a kernel's Python function annotated ``tl.constexpr``.

    Works from the signature alone (the annotation object, or its text under
    ``from __future__ import annotations``), so it needs neither a compiler
    nor Triton's own parameter records.
    """
    names = []
    for parameter in inspect.signature(fn).parameters.values():
        annotation = parameter.annotation
        text = (
            annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
        )
        if "constexpr" in str(text):
            names.append(parameter.name)
    return names


def check_params(hints: SearchHints, fn: Callable[..., Any], kernel: str) -> None:
    """Every searched name must be a ``tl.constexpr`` parameter of the kernel.

    :raises ValueError: naming the offenders and the constexpr parameters there are.
    """
    constexprs = constexpr_parameters(fn)
    missing = [name for name in hints.params if name not in constexprs]
    if missing:
        known = ", ".join(constexprs) or "none"
        raise ValueError(
            f"{kernel}: search_params 'params' {', '.join(missing)} must be tl.constexpr parameters of "
            f"the kernel (its tl.constexpr parameters: {known})"
        )
