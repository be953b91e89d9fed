"""A pending mark: a key served without measuring, stored in the key's own cache entry until it is tuned.

Under ``tune = "nearest"`` (or ``"pending"``) a key without a stored pick
runs a config nobody measured for it; its entry then holds a mark instead of
a record (which key's pick served it, when, how often), so that
``tune = "pending"`` later tunes exactly these keys. The record a tuning
stores replaces the mark. docs/guide.md ("Serving unseen shapes") explains it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from kerneltune.core.errors import CacheReadError
from kerneltune.core.values import checked

#: The field a cache entry holding a mark has, and no record has.
PENDING = "pending"


@attrs.frozen
class PendingMark:
    """A key served without measuring, not yet tuned."""

    function: str
    #: the key, encoded.
    key: Any
    #: the tuned code's source digest, as a record's ``source``.
    source: str
    #: the encoded key whose stored pick served it; ``None``: nothing was stored, the first config ran.
    served_by: Any
    #: the label of the config that served it.
    config: str
    #: when a process first and last served it (seconds since the epoch).
    first: float
    last: float
    #: how many times a process served it (once per process: then it is one of its picks).
    count: int = 1

    def to_data(self) -> dict[str, Any]:
        """Plain data for the cache entry."""
        return {PENDING: attrs.asdict(self)}

    @classmethod
    def from_data(cls, data: Any) -> PendingMark:
        """Read :meth:`to_data`'s output.

        :raises CacheReadError: for a mark with a field missing or of the wrong type.
        """
        given = checked.mapping(checked.mapping(data, "entry").get(PENDING), PENDING)
        missing = [name for name in _READERS if name not in given]
        if missing:
            raise CacheReadError(f"{PENDING} lacks {', '.join(missing)}")
        return cls(**{name: read(given[name], f"{PENDING}.{name}") for name, read in _READERS.items()})

    def again(self, later: PendingMark) -> PendingMark:
        """This mark served once more, as ``later`` says: by whom and when last."""
        return attrs.evolve(
            later, first=min(self.first, later.first), last=max(self.last, later.last), count=self.count + 1
        )


def _date(value: Any, where: str) -> float:
    return checked.finite(value, where, 0.0, checked.LATEST)


#: How each field of a stored mark is checked, by name.
_READERS: dict[str, Callable[[Any, str], Any]] = {
    "function": checked.text,
    "key": checked.plain,
    "source": checked.text,
    "served_by": checked.plain,
    "config": checked.text,
    "first": _date,
    "last": _date,
    "count": checked.count,
}


def is_pending(data: Any) -> bool:
    """Whether a cache entry's plain data is a pending mark rather than a record."""
    return isinstance(data, dict) and PENDING in data
