"""Checks for plain data read back from a file that anyone might have edited.

Each takes the value and a readable place (``"candidates[2].samples_ms[0]"``)
and returns the value, or raises :class:`~kerneltune.core.errors.CacheReadError`
naming both. :class:`~kerneltune.core.values.records.TuningRecord` reads its
stored form through them.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

from kerneltune.core.errors import CacheReadError

#: The last second of the year 9999: later dates cannot be written as ISO-8601 by iso_date.
LATEST = 253402300799.0
#: Encoded keys and hardware facts are a few levels deep; a file nesting thousands of levels
#: is hostile, and rejecting it early keeps comparisons from recursing.
MAX_DEPTH = 100


def show(value: Any) -> str:
    """``value`` as an error message shows it: a short repr and its type."""
    return f"{reprlib.repr(value)} ({type(value).__name__})"


def text(value: Any, where: str) -> str:
    """``value``, checked to be a string."""
    if not isinstance(value, str):
        raise CacheReadError(f"{where} is {show(value)}, not a string")
    return value


def count(value: Any, where: str) -> int:
    """``value``, checked to be an integer >= 0 (not a bool, not a float)."""
    # bool is an int to Python; a stored 0.9 or true is not a count.
    if type(value) is not int or value < 0:
        raise CacheReadError(f"{where} is {show(value)}, not an integer >= 0")
    return value


def index(value: Any, size: int, where: str) -> int:
    """``value``, checked to be an index below ``size``."""
    if type(value) is not int or not 0 <= value < size:
        raise CacheReadError(f"{where} is {show(value)}, not an index below {size}")
    return value


def finite(value: Any, where: str, low: float = 0.0, high: float = math.inf) -> float:
    """``value`` as a float, checked to be a finite number in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CacheReadError(f"{where} is {show(value)}, not a number")
    try:
        number = float(value)
    except OverflowError:
        raise CacheReadError(f"{where} is an integer too large for a float") from None
    if not (math.isfinite(number) and low <= number <= high):
        raise CacheReadError(f"{where} is {show(value)}, not a finite number in [{low}, {high}]")
    return number


def time_or_inf(value: Any, where: str) -> float:
    """A stored time: ``inf`` for ``None`` (a failed candidate), else :func:`finite`."""
    return math.inf if value is None else finite(value, where)


def rows(value: Any, where: str) -> list[Any]:
    """``value``, checked to be a list."""
    if not isinstance(value, list):
        raise CacheReadError(f"{where} is a {type(value).__name__}, not a list")
    return value


def mapping(value: Any, where: str) -> dict[str, Any]:
    """``value``, checked to be a mapping."""
    if not isinstance(value, dict):
        raise CacheReadError(f"{where} is a {type(value).__name__}, not a mapping")
    return value


def plain(value: Any, where: str) -> Any:
    """``value`` itself once it is checked to be shallow plain data: what a cache can round-trip."""
    pending = [(value, where, 0)]
    while pending:
        item, place, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise CacheReadError(f"{place} is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, list):
            pending.extend((v, f"{place}[{i}]", depth + 1) for i, v in enumerate(item))
        elif isinstance(item, dict):
            for k, v in item.items():
                pending.append((v, f"{place}.{text(k, f'a key in {place}')}", depth + 1))
        elif isinstance(item, float):
            finite(item, place, -math.inf)
        elif item is not None and not isinstance(item, str | int):
            raise CacheReadError(f"{place} is a {type(item).__name__}, not plain data")
    return value
