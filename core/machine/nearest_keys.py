"""The stored keys nearest a new one, by the default distance, without measuring the way to each.

:func:`~.warm_start.default_distance` adds the log-scaled differences of two
keys' numeric parts and puts keys whose other parts differ infinitely far
apart. So a key is split once into its *shape* (everything but the numbers)
and its scaled numbers; only keys of one shape can be near, and their
distance is the sum of the numbers' differences, at least the difference of
the first. :class:`NearestKeys` keeps each shape's keys sorted by their first
number and walks outwards from a new key's place until that first difference
alone exceeds the best distance found: at 1,000 stored keys a few are
measured, not all. A ``kerneltune_key_distance`` plugin's distance knows no
shapes: with one, every stored key is measured.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from operator import itemgetter
from typing import Any, Generic, TypeVar, overload

from kerneltune.core.machine.warm_start import key_number, log_scale
from kerneltune.core.values.keys import digest

T = TypeVar("T")
#: Ints of smaller magnitude are floats (:func:`~.warm_start.key_number` gives larger ones no number).
_LARGE = 2**1000


def features(key: Any) -> tuple[Hashable, tuple[float, ...]]:
    """An encoded key's shape (its parts but the numbers) and its numbers, log-scaled, in order."""
    if type(key) is int and -_LARGE < key < _LARGE:  # the commonest key of all
        return "#", (log_scale(key),)
    numbers: list[float] = []

    def shape(part: Any) -> Hashable:
        if type(part) is int and -_LARGE < part < _LARGE:  # the usual part, without key_number's checks
            numbers.append(log_scale(part))
            return "#"
        number = key_number(part)
        if number is not None:
            numbers.append(log_scale(number))
            return "#"
        if isinstance(part, list):
            return ("[", *[shape(item) for item in part])
        if isinstance(part, dict) and len(part) == 1:
            ((tag, value),) = part.items()
            return ("{", tag, shape(value))
        return ("=", type(part).__name__, json.dumps(part, sort_keys=True))

    return shape(key), tuple(numbers)


class NearestKeys(Generic[T]):
    """Stored encoded keys, each with a value, searched nearest first by the default distance."""

    def __init__(self, rows: list[tuple[Any, T]]) -> None:
        #: by shape: each key's first number (0 for none), its numbers, the key and its value, sorted.
        self._shapes: dict[Hashable, Sequence[tuple[float, tuple[float, ...], Any, T]]] = {}
        # The commonest keys, ints, are sorted as they are (log_scale keeps their order) and scaled
        # only where a search looks: a search looks at a few of them.
        if rows and set(map(type, map(itemgetter(0), rows))) == {int}:
            ordered = sorted(rows, key=itemgetter(0))  # a test per key cost more than the sort
            if ordered[0][0] > -_LARGE and ordered[-1][0] < _LARGE:
                self._shapes["#"] = _ScaledInts(ordered)
                return
        shapes: dict[Hashable, list[tuple[float, tuple[float, ...], Any, T]]] = {}
        for key, value in rows:
            shape, numbers = features(key)
            first = numbers[0] if numbers else 0.0
            shapes.setdefault(shape, []).append((first, numbers, key, value))
        for found in shapes.values():
            found.sort(key=itemgetter(0))
        self._shapes.update(shapes)

    def __len__(self) -> int:
        return sum(len(found) for found in self._shapes.values())

    def nearest(
        self, key: Any, distance: Callable[[Any, Any], float] | None = None
    ) -> Iterator[tuple[float, Any, T]]:
        """The stored keys at a finite distance from ``key``, nearest first, with their distances and values.

        Keys at one distance come in the order of their digests, as
        :func:`~.warm_start.nearest` gives them; ``key`` itself is skipped.
        The nearest come from a bounded walk; asking for more measures the rest.

        :param distance: a distance to use instead of the default one (a
            ``kerneltune_key_distance`` plugin's): then every key is measured.
        """
        if distance is not None:
            measured = []
            for rows in self._shapes.values():
                for row in rows:
                    if row[2] != key and math.isfinite(far := distance(key, row[2])):
                        measured.append((far, digest(row[2]), row))
            measured.sort(key=lambda entry: entry[:2])
            for far, _, row in measured:
                yield far, row[2], row[3]
            return
        shape, numbers = features(key)
        found = self._shapes.get(shape)
        if not found:
            return
        first = numbers[0] if numbers else 0.0
        best, tied = self._closest(found, first, numbers, key)
        yield from self._in_order(best, tied)
        rest = [
            (sum(abs(a - b) for a, b in zip(row[1], numbers, strict=True)), digest(row[2]), row)
            for row in found
            if row[2] != key and all(row is not other for other in tied)
        ]
        rest.sort(key=lambda entry: entry[:2])
        for far, _, row in rest:
            yield far, row[2], row[3]

    @staticmethod
    def _closest(
        found: Sequence[tuple[float, tuple[float, ...], Any, T]],
        first: float,
        numbers: tuple[float, ...],
        key: Any,
    ) -> tuple[float, list[tuple[float, tuple[float, ...], Any, T]]]:
        """The least distance to ``key`` among ``found`` and the rows at it: outwards from its place."""
        best, tied = float("inf"), []
        right = bisect.bisect_left(found, first, key=lambda row: row[0])
        left = right - 1
        while left >= 0 or right < len(found):
            gap_left = first - found[left][0] if left >= 0 else float("inf")
            gap_right = found[right][0] - first if right < len(found) else float("inf")
            if min(gap_left, gap_right) > best:
                break
            if gap_left <= gap_right:
                row, left = found[left], left - 1
            else:
                row, right = found[right], right + 1
            if row[2] == key:
                continue
            distance = sum(abs(a - b) for a, b in zip(row[1], numbers, strict=True))
            if distance < best:
                best, tied = distance, [row]
            elif distance == best:
                tied.append(row)
        return best, tied

    @staticmethod
    def _in_order(
        best: float, tied: list[tuple[float, tuple[float, ...], Any, T]]
    ) -> Iterator[tuple[float, Any, T]]:
        if len(tied) > 1:
            tied.sort(key=lambda row: digest(row[2]))
        for row in tied:
            yield best, row[2], row[3]


class _ScaledInts(Sequence[tuple[float, tuple[float, ...], Any, T]]):
    """Int keys sorted, each row made (its key log-scaled) when first looked at."""

    def __init__(self, rows: list[tuple[int, T]]) -> None:
        self._rows = rows
        self._made: dict[int, tuple[float, tuple[float, ...], Any, T]] = {}

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> tuple[float, tuple[float, ...], Any, T]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[float, tuple[float, ...], Any, T]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self._rows)
        row = self._made.get(index)
        if row is None:
            key, value = self._rows[index]
            scaled = log_scale(key)
            row = self._made[index] = (scaled, (scaled,), key, value)
        return row
