"""Choosing a portfolio: at most K configs that keep every stored key near its own best time.

A key's loss under a set of configs is how much slower the fastest of them
is than the key's best config, over that best. :func:`choose_portfolio` finds the
set of at most K configs with the lowest worst loss over the stored keys (then
the lowest mean loss), and the fewest configs whose worst loss is within a
tolerance. :func:`leave_one_out` estimates the loss on keys never measured.
docs/guide.md ("Portfolio") says both in words.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from typing import Any

import attrs
from kerneltune.core.values.records import NOT_MEASURED, TuningRecord

#: Beyond this many sets of at most K configs, :func:`choose_portfolio` is greedy rather than exact.
EXACT_LIMIT = 200_000
#: Losses this close to the tolerance count as within it (rounding of stored times).
_SLACK = 1e-12


@attrs.frozen
class TimeTable:
    """Each stored key's time for each config of one candidate list, in ms.

    ``times[k][c]`` is key ``k``'s time of config ``c``: ``inf`` where the
    config failed for that key or was pruned for it. Every key has a finite best.
    """

    keys: tuple[Any, ...]
    times: tuple[tuple[float, ...], ...]

    @property
    def size(self) -> int:
        """How many configs the list holds."""
        return len(self.times[0]) if self.times else 0

    def columns(self, keys: Sequence[int]) -> list[tuple[float, ...]]:
        """Per config, each of ``keys``' time over that key's best (1.0: the key's best config)."""
        best = [min(self.times[k]) for k in keys]
        return [
            tuple(self.times[k][c] / b for k, b in zip(keys, best, strict=True)) for c in range(self.size)
        ]


def tuned_fully(record: TuningRecord, fingerprints: Sequence[str]) -> tuple[float, ...] | None:
    """The record's time of each config of ``fingerprints``, or ``None`` unless every one has one.

    A config with a time, a failure (on any rank) or pruned for the key
    counts (the last two as ``inf``); one the tuning passed over (a warm
    start, a staged search, a portfolio) or that the record does not hold
    does not. ``None`` too where the key has no best time above 0, which no
    loss could be measured against.
    """
    rows = {fingerprint: row for row, fingerprint in enumerate(record.fingerprints)}
    times = []
    for fingerprint in fingerprints:
        row = rows.get(fingerprint)
        if row is None:
            return None
        measurement = record.measurements[row]
        unmeasured = measurement.error == NOT_MEASURED or (
            measurement.error is None and not measurement.samples
        )
        if math.isinf(record.times[row]) and unmeasured:
            return None
        times.append(record.times[row])
    finite = [t for t in times if math.isfinite(t)]
    return tuple(times) if finite and min(finite) > 0 else None


@attrs.frozen
class PortfolioChoice:
    """The chosen configs (list indices, those serving the most keys first) and each key's loss.

    ``losses[k]`` is a fraction (0.02: 2 % slower than the key's best),
    ``inf`` where every chosen config fails for the key.
    """

    configs: tuple[int, ...]
    losses: tuple[float, ...]
    #: per key, the chosen config that serves it (its fastest).
    served_by: tuple[int, ...]
    #: how the set was found, in words.
    method: str
    #: whether every set was tried (else configs were added greedily).
    exact: bool
    #: the fewest configs whose worst loss is within the tolerance (``None``: no set of K is).
    needed: int | None

    @property
    def worst(self) -> float:
        """The worst loss over the stored keys."""
        return max(self.losses)

    @property
    def mean(self) -> float:
        """The mean loss over the stored keys."""
        return math.fsum(self.losses) / len(self.losses)


def _method_for(table: TimeTable, most: int) -> tuple[bool, int, int]:
    """Whether an exact search suits ``table``, how many sets it tries, and how many configs count."""
    considered = len(_undominated(table.columns(range(len(table.keys)))))
    sets = sum(math.comb(considered, size) for size in range(1, min(most, considered) + 1))
    return sets <= EXACT_LIMIT, sets, considered


def choose_portfolio(
    table: TimeTable, most: int, tolerance: float, *, exact: bool | None = None
) -> PortfolioChoice:
    """At most ``most`` configs of ``table`` for its keys; ``tolerance`` a fraction.

    The set with the lowest worst loss; ties go to the lower mean loss, then
    the smaller set, then the lower indices. So configs beyond the fewest
    that keep every key within ``tolerance`` (the choice's ``needed``) are
    added while they lower the keys' mean loss: a new key measures every
    chosen config, and each one that is some stored key's better choice makes
    a key between them likelier to find its own. Configs that another config
    beats or equals on every key are left out first: the choice is the same
    without them.

    :param exact: enumerate every set (``True``) or add configs greedily
        (``False``); ``None``: exact where :func:`_method_for` allows.
    """
    if most < 1 or not table.keys:
        raise ValueError("a portfolio needs at least one config and one key")
    allowed, sets, considered = _method_for(table, most)
    exact = allowed if exact is None else exact
    keys = range(len(table.keys))
    columns = table.columns(keys)
    chosen, needed = (_exact if exact else _greedy)(columns, _undominated(columns), most, tolerance)
    if exact:
        method = (
            f"exact: every set of at most {most} of the {considered} configs that no other config "
            f"beats on every key ({sets} sets)"
        )
    else:
        method = "greedy: configs added one at a time, each lowering the worst (then mean) loss most"
        if not allowed:
            method += (
                f" (the {sets} sets of at most {most} of the {considered} configs that no other config "
                f"beats on every key exceed {EXACT_LIMIT} for an exact search)"
            )
    return _describe(columns, chosen, method, exact, needed)


def leave_one_out(
    table: TimeTable, choice: PortfolioChoice, most: int, tolerance: float
) -> tuple[float, ...] | None:
    """Per key, its loss under the set chosen from the other keys alone; ``None`` for a table of one key.

    Each key left out, the choice is made as ``choice`` was (same ``most``,
    ``tolerance`` and method, exact or greedy) over the rest, and the key's
    loss is measured under it: an estimate of the loss on a key never measured.
    """
    count = len(table.keys)
    if count < 2:
        return None
    if choice.exact:
        # One pass over the sets serves every key left out.
        chosen = _exact_left_out(table.columns(range(count)), most, tolerance)
    else:
        chosen = []
        for out in range(count):
            columns = table.columns([k for k in range(count) if k != out])
            chosen.append(_greedy(columns, _undominated(columns), most, tolerance)[0])
    return tuple(
        min(table.times[out][c] for c in chosen[out]) / min(table.times[out]) - 1.0 for out in range(count)
    )


def _undominated(columns: Sequence[tuple[float, ...]]) -> list[int]:
    """The configs no other config beats or equals on every key (of equal ones, the lowest index)."""

    def covers(d: int, c: int) -> bool:
        return all(a <= b for a, b in zip(columns[d], columns[c], strict=True)) and (
            columns[d] != columns[c] or d < c
        )

    usable = [c for c, column in enumerate(columns) if any(math.isfinite(x) for x in column)]
    return [c for c in usable if not any(d != c and covers(d, c) for d in usable)]


def _per_key(columns: Sequence[tuple[float, ...]], chosen: Sequence[int]) -> Sequence[float]:
    """Each key's time under ``chosen`` (its fastest of them), over the key's best."""
    return columns[chosen[0]] if len(chosen) == 1 else list(map(min, *(columns[c] for c in chosen)))


def _score(columns: Sequence[tuple[float, ...]], chosen: Sequence[int]) -> tuple[float, float]:
    per_key = _per_key(columns, chosen)
    return max(per_key), math.fsum(per_key) / len(per_key)


def _exact(
    columns: Sequence[tuple[float, ...]], configs: Sequence[int], most: int, tolerance: float
) -> tuple[tuple[int, ...], int | None]:
    """Every set of 1, then 2, ... ``most`` configs: the best, and the fewest configs within ``tolerance``."""
    best: tuple[float, float, tuple[int, ...]] | None = None
    needed = None
    for size in range(1, min(most, len(configs)) + 1):
        for combination in itertools.combinations(configs, size):
            per_key = _per_key(columns, combination)
            worst = max(per_key)
            if best is not None and worst > best[0]:
                continue
            mean = math.fsum(per_key) / len(per_key)
            if best is None or (worst, mean) < best[:2]:
                best = (worst, mean, combination)
        if needed is None and _held(best)[0] - 1.0 <= tolerance + _SLACK:
            needed = size
    return _held(best)[2], needed


def _exact_left_out(
    columns: Sequence[tuple[float, ...]], most: int, tolerance: float
) -> list[tuple[int, ...]]:
    """Per key, the set :func:`_exact` chooses over the other keys, all in one pass over the sets.

    A key's ratios do not depend on the other keys, so each key left out
    sees ``columns`` without its row; each considers only the configs that
    no other config beats on the remaining keys, as :func:`_exact` would.
    """
    count = len(columns[0])
    allowed = [
        frozenset(_undominated([column[:out] + column[out + 1 :] for column in columns]))
        for out in range(count)
    ]
    best: list[tuple[float, float, tuple[int, ...]] | None] = [None] * count
    configs = sorted(frozenset().union(*allowed))
    for size in range(1, min(most, len(configs)) + 1):
        for combination in itertools.combinations(configs, size):
            per_key = _per_key(columns, combination)
            top, second = heapq.nlargest(2, per_key)
            at = per_key.index(top)
            for out in range(count):
                worst = second if out == at else top
                held = best[out]
                if (held is not None and worst > held[0]) or not allowed[out].issuperset(combination):
                    continue
                mean = math.fsum(v for k, v in enumerate(per_key) if k != out) / (count - 1)
                if held is None or (worst, mean) < held[:2]:
                    best[out] = (worst, mean, combination)
    return [_held(held)[2] for held in best]


def _held(held: tuple[float, float, tuple[int, ...]] | None) -> tuple[float, float, tuple[int, ...]]:
    assert held is not None
    return held


def _greedy(
    columns: Sequence[tuple[float, ...]], configs: Sequence[int], most: int, tolerance: float
) -> tuple[tuple[int, ...], int | None]:
    """Configs added one at a time, each the one that gives the lowest worst (then mean) loss.

    Adding stops at ``most`` configs or where no config lowers either; the
    second value is how many were chosen when the worst loss first came within
    ``tolerance``.
    """
    chosen: list[int] = []
    score, needed = (math.inf, math.inf), None
    while len(chosen) < min(most, len(configs)):
        rest = [c for c in configs if c not in chosen]
        pick = min(rest, key=lambda c: (*_score(columns, [*chosen, c]), c))
        if chosen and _score(columns, [*chosen, pick]) >= score:
            break
        chosen.append(pick)
        score = _score(columns, chosen)
        if needed is None and score[0] - 1.0 <= tolerance + _SLACK:
            needed = len(chosen)
    return tuple(sorted(chosen)), needed


def _describe(
    columns: Sequence[tuple[float, ...]], chosen: Sequence[int], method: str, exact: bool, needed: int | None
) -> PortfolioChoice:
    keys = range(len(columns[0]))
    # Of the fastest chosen configs of a key, the lowest index serves it.
    served_by = tuple(min((columns[c][k], c) for c in chosen)[1] for k in keys)
    losses = tuple(columns[served_by[k]][k] - 1.0 for k in keys)
    order = sorted(chosen, key=lambda c: (-served_by.count(c), c))
    return PortfolioChoice(
        configs=tuple(order), losses=losses, served_by=served_by, method=method, exact=exact, needed=needed
    )
