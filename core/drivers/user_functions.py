"""The user's ``key_fn`` and ``prune_fn``, called for the function-level tuner: what they raise names them.

An error of theirs surfaces as a :class:`~kerneltune.core.errors.UserFunctionError`
naming which one and what raised; a signature that cannot take the tuned
function's arguments is refused as such.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence, Set
from typing import Any

from kerneltune.core.errors import UserFunctionError, describe_error
from kerneltune.core.values.records import Candidate


def call_key_fn(
    name: str, key_fn: Callable[..., Hashable], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Hashable:
    """KEY: ``key_fn(*args, **kwargs)``; whatever it raises comes back naming it.

    :param name: the tuned function's name, for messages.
    """
    try:
        return key_fn(*args, **kwargs)
    except Exception as exc:
        _check_arguments(name, "key_fn", key_fn, args, kwargs)
        raise _user_error(name, "key_fn", key_fn, exc) from exc


def prune_predicate(
    name: str, prune_fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[[Candidate], bool]:
    """PRUNE's predicate: the user's ``prune_fn``, its errors and wrong answers named as its own."""

    def keep(candidate: Candidate) -> bool:
        try:
            answer = prune_fn(candidate.config, *args, **kwargs)
        except Exception as exc:
            _check_arguments(name, "prune_fn", prune_fn, (candidate.config, *args), kwargs)
            raise _user_error(name, "prune_fn", prune_fn, exc) from exc
        if answer is None or isinstance(answer, Sequence | Set | Mapping):
            what = "None" if answer is None else f"a {type(answer).__name__}"
            raise TypeError(
                f"{name}: prune_fn {_named(prune_fn)} returned {what} for config {candidate.config!r}; "
                "it judges one config at a time and must return True to keep it or False to drop it"
            )
        return bool(answer)

    return keep


def _named(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _user_error(name: str, role: str, fn: Any, exc: BaseException) -> UserFunctionError:
    """``exc``, raised by the user's ``key_fn`` or ``prune_fn``, as an error naming which one."""
    return UserFunctionError(
        f"{name}: {role} {_named(fn)} raised {describe_error(exc)}", role=role, function=fn
    )


def _check_arguments(name: str, role: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse, naming ``role``, a ``fn`` whose signature cannot take ``args`` and ``kwargs``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin without a signature: its own call reports a mismatch
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        shown = ["config"] if role == "prune_fn" else []
        shown += [f"<{type(a).__name__}>" for a in args[len(shown) :]] + [f"{k}=..." for k in kwargs]
        raise TypeError(
            f"{name}: {role} {_named(fn)}{signature} cannot be called as {role}({', '.join(shown)}) "
            f"({exc}); it is called as {role}("
            + ("config, " if role == "prune_fn" else "")
            + "*args, **kwargs) with the tuned function's arguments"
        ) from exc
