"""Canonical, stable encodings of business keys and configurations.

A business key must mean the same thing in every process and on every rank,
so it is turned into plain tagged data (JSON-compatible) and then into bytes
whose hash names the cache entry. Supported: ``None``, ``bool``, ``int``,
``float``, ``str``, ``tuple``, ``torch.dtype`` and ``torch.Size`` (recognised
by type, without importing torch), plus types registered with
:func:`register_key_encoder`. Anything else is a :class:`TypeError` at the
first call, so nothing unreadable ever reaches a cache file.

Configurations are described more leniently (:func:`describe`): they come
from the user's own candidate list and only need a stable fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

_encoders: dict[type, tuple[str, Callable[[Any], Any]]] = {}

#: The tags kerneltune's own encodings store (floats, torch dtypes and sizes).
BUILTIN_TAGS = frozenset({"float", "torch.dtype", "torch.Size"})

# How deep tuples (and registered encoders) may nest in a key. Real keys are a few levels
# deep; the limit turns a runaway structure into a clear error instead of a RecursionError.
MAX_KEY_DEPTH = 32


def register_key_encoder(cls: type, tag: str, encode: Callable[[Any], Any]) -> None:
    """Allow instances of ``cls`` in business keys.

    :param cls: the exact type to accept (subclasses are not matched).
    :param tag: a short stable name stored with the value, e.g. ``"mylib.Layout"``;
        it must name this type alone, since keys are told apart by it.
    :param encode: returns a key-encodable value (ints, strs, tuples, ...)
        that is equal for values that should share a pick.
    :raises ValueError: for another tag for a type already registered, or a
        tag that another type (or a built-in encoding: ``float``,
        ``torch.dtype``, ``torch.Size``) uses: two types under one tag would
        share picks. Registering a type again under its own tag changes nothing, and a
        class of the same module and name defined again (a notebook cell run twice) takes
        its tag over.
    """
    if not isinstance(tag, str) or not tag:
        raise ValueError(f"a key encoder's tag must be a non-empty string, got {tag!r}")
    if cls in _encoders and _encoders[cls][0] != tag:
        raise ValueError(
            f"a key encoder for {cls.__qualname__} is already registered, under the tag {_encoders[cls][0]!r}"
        )
    if tag in BUILTIN_TAGS:
        raise ValueError(f"the key tag {tag!r} is kerneltune's own; choose another, such as 'mylib.{tag}'")
    owner = next(
        (other for other, (known, _) in _encoders.items() if known == tag and other is not cls), None
    )
    if owner is not None and (owner.__module__, owner.__qualname__) == (cls.__module__, cls.__qualname__):
        del _encoders[owner]
    elif owner is not None:
        raise ValueError(
            f"the key tag {tag!r} already names {owner.__module__}.{owner.__qualname__}; keys of "
            f"{cls.__module__}.{cls.__qualname__} under it would be served that type's picks"
        )
    _encoders[cls] = (tag, encode)


def _torch_kind(value: object) -> str | None:
    cls = type(value)
    if cls.__module__ == "torch":
        if cls.__name__ == "dtype":
            return "dtype"
        if cls.__name__ == "Size":
            return "Size"
    return None


def encode_key(value: object) -> Any:
    """Turn a business key into plain, JSON-compatible tagged data.

    :raises TypeError: for a value of an unsupported type, a NaN, or tuples
        nested deeper than :data:`MAX_KEY_DEPTH`, naming where in the key it sits.
    """
    return _encode(value, "key", 0)


def _encode(value: object, where: str, depth: int) -> Any:
    # TypeError, not ValueError: the engine reports a key that cannot be encoded to every rank.
    if depth > MAX_KEY_DEPTH:
        raise TypeError(f"{where} is nested more than {MAX_KEY_DEPTH} levels deep, too deep for a tuning key")
    if value is None or isinstance(value, bool | str):
        return value
    if type(value) is int:
        return value
    if type(value) is float:
        if math.isnan(value):
            raise TypeError(
                f"{where} is NaN, which cannot be part of a tuning key: NaN equals nothing, not even "
                "itself, so its pick could never be found again"
            )
        if math.isinf(value):
            return {"float": repr(value)}
        return {"float": value.hex()}
    kind = _torch_kind(value)
    if kind == "dtype":
        return {"torch.dtype": str(value)}
    if kind == "Size":
        return {"torch.Size": [int(d) for d in value]}  # type: ignore[attr-defined]
    if type(value) is tuple:
        return [_encode(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    registered = _encoders.get(type(value))
    if registered is not None:
        tag, encode = registered
        return {tag: _encode(encode(value), f"{where}<{tag}>", depth + 1)}
    raise TypeError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which cannot be "
        "part of a tuning key; use ints, floats, strs, bools, None, tuples, torch.dtype or "
        "torch.Size (e.g. tuple(x.shape), str(x.dtype)), or register an encoder with "
        "kerneltune.core.register_key_encoder"
    )


def digest(data: Any) -> str:
    """A short hex digest of plain data, stable across processes and platforms."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def plain_config(value: object, known: Callable[..., Any]) -> Any | None:
    """A config as plain data (JSON-able) for a record, or ``None`` where some part of it is not plain.

    Dicts with string keys, lists, tuples (as lists), strings, ints, finite
    floats, bools and ``None`` stay as they are; any other value is what
    ``known(value)`` (the ``kerneltune_plain_value`` hook, through ``Session.plain_value``) makes of it.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        items = [plain_config(item, known) for item in value]
        return None if any(p is None and i is not None for p, i in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return None
        plain = {k: plain_config(v, known) for k, v in value.items()}
        return None if any(plain[k] is None and v is not None for k, v in value.items()) else plain
    tagged = known(value)
    return tagged if isinstance(tagged, dict) else None


def describe(value: object) -> Any:
    """A stable, plain description of a configuration value, for fingerprints.

    Objects are described by their type and public attributes, callables by
    their qualified name; the result never contains memory addresses.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return repr(value)
    if _torch_kind(value) is not None:
        return str(value)
    if isinstance(value, dict):
        return {str(k): describe(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [describe(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted(repr(describe(item)) for item in value)
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    attributes = getattr(value, "__dict__", None)
    if attributes is not None:
        public = {k: v for k, v in attributes.items() if not k.startswith("_")}
        return {"type": type(value).__qualname__, "attrs": describe(public)}
    return f"{type(value).__qualname__}:{value!r}"
