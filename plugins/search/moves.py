"""Steps through a generated space: where a search starts, and what lies one move away.

A point is ``(shape, profile)`` (:mod:`kerneltune.core.values.geometry`). Shapes step
along their axes, one index at a time. Profiles step by changing one
compile option: a numeric option to the next value the family uses, any
other option to another of its values, or an option set or cleared.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from kerneltune.core import Shape

#: Above this many parameters the coarse lattice becomes a star around the centre.
LATTICE_MAX_PARAMS = 3


def coarse_levels(size: int) -> list[int]:
    """Inner indices to start from on an axis of ``size`` values.

    Two or three levels at the centres of equal slices of the axis: the
    extremes are rarely best, and a walk reaches them when they are.
    """
    if size <= 2:
        return list(range(size))
    count = 3 if size >= 6 else 2
    return sorted({min(size - 1, int((size - 1) * (2 * i + 1) / (2 * count) + 0.5)) for i in range(count)})


def coarse_shapes(sizes: Sequence[int]) -> list[Shape]:
    """The starting lattice: every combination of levels, or a star when there are many axes."""
    levels = [coarse_levels(n) for n in sizes]
    if len(sizes) <= LATTICE_MAX_PARAMS:
        return [tuple(shape) for shape in itertools.product(*levels)]
    centre = tuple(axis[len(axis) // 2] for axis in levels)
    star = [centre]
    for axis, axis_levels in enumerate(levels):
        for level in (axis_levels[0], axis_levels[-1]):
            star.append((*centre[:axis], level, *centre[axis + 1 :]))
    return list(dict.fromkeys(star))


def axis_neighbours(shape: Shape, sizes: Sequence[int]) -> list[Shape]:
    """Shapes one index away along one parameter."""
    found = []
    for axis, index in enumerate(shape):
        for step in (-1, 1):
            moved = index + step
            if 0 <= moved < sizes[axis]:
                found.append((*shape[:axis], moved, *shape[axis + 1 :]))
    return found


def diagonal_neighbours(shape: Shape, sizes: Sequence[int]) -> list[Shape]:
    """Shapes one index away along each of two parameters (trading one tile side for another)."""
    found = []
    for first, second in itertools.combinations(range(len(shape)), 2):
        for a, b in itertools.product((-1, 1), repeat=2):
            moved = list(shape)
            moved[first] += a
            moved[second] += b
            if 0 <= moved[first] < sizes[first] and 0 <= moved[second] < sizes[second]:
                found.append(tuple(moved))
    return found


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def changed_options(p: Mapping[str, Any], q: Mapping[str, Any]) -> int:
    """How many options differ between two profiles; setting or clearing one counts as one."""
    return sum(1 for k in p.keys() & q.keys() if p[k] != q[k]) + len(p.keys() ^ q.keys())


def profile_neighbours(profiles: Sequence[Mapping[str, Any]], *, adjacent: bool = True) -> list[list[int]]:
    """For each profile, the profiles that change exactly one option.

    Setting or clearing one option counts as one change. With ``adjacent``,
    a numeric option moves only to the next larger or smaller value the
    family uses, so a walk over ``num_stages`` goes 2, 3, 4 rather than
    jumping; without it, every value of that option is a neighbour (a line
    search along the option).
    """
    domains: dict[str, list[Any]] = {}
    for profile in profiles:
        for name, value in profile.items():
            domains.setdefault(name, [])
            if value not in domains[name]:
                domains[name].append(value)
    for name, values in domains.items():
        if all(_numeric(v) for v in values):
            domains[name] = sorted(values)
    neighbours: list[list[int]] = [[] for _ in profiles]
    for i, p in enumerate(profiles):
        for j, q in enumerate(profiles):
            if i == j or changed_options(p, q) != 1:
                continue
            changed = [k for k in p.keys() & q.keys() if p[k] != q[k]]
            if changed:
                name = changed[0]
                values = domains[name]
                ordered = all(_numeric(v) for v in values)
                if adjacent and ordered and abs(values.index(p[name]) - values.index(q[name])) != 1:
                    continue
            neighbours[i].append(j)
    return neighbours


def profile_pairs(
    profiles: Sequence[Mapping[str, Any]], neighbours: Sequence[Sequence[int]]
) -> list[list[int]]:
    """For each profile, those two steps of ``neighbours`` away that change two different options.

    Warps and stages together, say: two steps along one option (2 to 8
    warps) are not a pair of moves but a longer one.
    """
    pairs: list[list[int]] = []
    for i, profile in enumerate(profiles):
        reached = dict.fromkeys(k for j in neighbours[i] for k in neighbours[j])
        pairs.append([k for k in reached if changed_options(profile, profiles[k]) == 2])
    return pairs
