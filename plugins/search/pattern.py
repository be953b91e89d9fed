"""The ``pattern`` search strategy, the default: a walk whose moves change tiles and options together.

docs/search_params.md ("`pattern`") describes the walk, why it is not
staged, and what it measured; "Effort and budget" what each effort spends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
from kerneltune.core import Measure, Point, SearchBudget, SearchGeometry, SearchLedger, hookimpl
from kerneltune.plugins.search.moves import (
    axis_neighbours,
    changed_options,
    coarse_shapes,
    diagonal_neighbours,
    profile_neighbours,
    profile_pairs,
)

#: A poll moves the walk only to a point faster than this fraction below the current one.
MIN_GAIN = 0.01
#: How many of a stalled poll's small gains are repeated once more (:meth:`PatternSearch._stretch`).
STRETCHES = 2


@attrs.frozen
class Effort:
    """What one effort level spends.

    :ivar share: the most points measured, as a share of the space, rounded
        down (never fewer than the start and the single moves and pairs
        around one point, so a small space is polled at least once).
    :ivar starts: walks begun, from the best distinct start shapes.
    :ivar final_pass: whether the search ends with a full-neighbourhood pass.
    """

    share: float
    starts: int
    final_pass: bool


EFFORTS = {
    "quick": Effort(share=0.08, starts=1, final_pass=False),
    "default": Effort(share=0.15, starts=1, final_pass=True),
    "full": Effort(share=0.5, starts=3, final_pass=True),
}


class Neighbourhood:
    """The moves of one geometry: which points lie one single or one pair of moves from a point."""

    def __init__(self, geometry: SearchGeometry) -> None:
        self.sizes = geometry.sizes
        self.profiles = geometry.profiles
        self.steps = profile_neighbours(geometry.profiles)
        self.option_steps = profile_pairs(geometry.profiles, self.steps)

    def singles(self, point: Point) -> list[Point]:
        """One block size or one option one step away."""
        shape, profile = point
        return [(s, profile) for s in axis_neighbours(shape, self.sizes)] + [
            (shape, q) for q in self.steps[profile]
        ]

    def pairs(self, point: Point) -> list[Point]:
        """A block move with an option move, then two block moves: the pairs the walk polls."""
        shape, profile = point
        moved = axis_neighbours(shape, self.sizes)
        crossed = [(s, q) for s in moved for q in self.steps[profile]]
        return crossed + [(s, profile) for s in diagonal_neighbours(shape, self.sizes)]

    def option_pairs(self, point: Point) -> list[Point]:
        """Two options one step each, the block sizes kept."""
        shape, profile = point
        return [(shape, q) for q in self.option_steps[profile]]

    def full(self, point: Point) -> list[Point]:
        """Every single and every pair."""
        return [*self.singles(point), *self.pairs(point), *self.option_pairs(point)]

    def repeat(self, before: Point, after: Point) -> Point | None:
        """The point one more of the move ``before -> after`` away, or ``None`` where it leaves the space.

        Block sizes repeat their steps. A profile repeats its change only
        when one option changed and another step along it in the same
        direction exists; otherwise the profile stays.
        """
        (old_shape, old_profile), (shape, profile) = before, after
        moved = tuple(2 * b - a for a, b in zip(old_shape, shape, strict=True))
        if not all(0 <= i < n for i, n in zip(moved, self.sizes, strict=True)):
            return None
        next_profile = profile
        if old_profile != profile:
            next_profile = self._repeat_profile(old_profile, profile)
        candidate = (moved, next_profile)
        return None if candidate == after else candidate

    def _repeat_profile(self, old: int, new: int) -> int:
        p, q = self.profiles[old], self.profiles[new]
        if changed_options(p, q) != 1 or p.keys() != q.keys():
            return new
        (name,) = [k for k in p if p[k] != q[k]]
        for r in self.steps[new]:
            further = self.profiles[r]
            if (
                changed_options(q, further) == 1
                and further.get(name) != q[name]
                and _beyond(p, q, further, name)
            ):
                return r
        return new


def _beyond(p: Mapping[str, Any], q: Mapping[str, Any], r: Mapping[str, Any], name: str) -> bool:
    """Whether ``r``'s value of ``name`` lies past ``q``'s, seen from ``p``'s (numeric options only)."""
    values = (p[name], q[name], r.get(name))
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return False
    a, b, c = values
    return (b - a) * (c - b) > 0


class PatternSearch:
    """One run of the walk over one space; :meth:`run` returns the finalists.

    :param geometry: the space.
    :param budget: effort, caps and how many finalists to return.
    :param say: receives one line per step, for ``debug``.
    """

    def __init__(
        self,
        geometry: SearchGeometry,
        budget: SearchBudget,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.geometry = geometry
        self.budget = budget
        self.say = say
        self.effort = EFFORTS[budget.effort]
        self.moves = Neighbourhood(geometry)
        self.ledger: SearchLedger | None = None

    def run(self, measure: Measure) -> list[Point]:
        """Seed, walk, pass over the last neighbourhood; the fastest points measured, fastest first."""
        ledger = self.ledger = SearchLedger(measure, self.budget, cap=self._cap())
        geometry = self.geometry
        self.say(
            f"pattern: {geometry.space_size} points, {self.budget.describe()}, "
            f"at most {ledger.cap} points measured"
        )
        ends = [self._walk(start) for start in self._start() if not ledger.spent]
        incumbent = min(ends, key=lambda p: (ledger.time(p), p), default=None)
        if self.effort.final_pass and incumbent is not None:
            self._final_passes(incumbent)
        reason = ledger.why_spent()
        if reason is not None:
            self.say(f"pattern: stopped early: {reason}")
        best = ledger.best()
        if best is not None:
            self.say(
                f"pattern: {len(ledger)} of {geometry.space_size} points measured in {ledger.rounds} rounds; "
                f"best {geometry.label(best)} at {ledger.time(best):.4f} ms"
            )
        return ledger.ranked()[: self.budget.finalists]

    def _cap(self) -> int:
        geometry = self.geometry
        start = len(geometry.probes) * len(set(geometry.seeds) | set(coarse_shapes(geometry.sizes)))
        centre = (tuple(n // 2 for n in geometry.sizes), 0)
        floor = start + len(self.moves.singles(centre)) + len(self.moves.pairs(centre))
        return max(math.floor(self.effort.share * geometry.space_size), floor)

    def _measure(self, points: Sequence[Point]) -> list[Point]:
        assert self.ledger is not None
        return self.ledger.measure(points)

    def _start(self) -> list[Point]:
        """Measure the seeds and the spread at the probes; the points to walk from, best first."""
        assert self.ledger is not None
        geometry = self.geometry
        shapes = list(dict.fromkeys([*geometry.seeds, *coarse_shapes(geometry.sizes)]))
        seeded = f" and {len(geometry.seeds)} seed(s)" if geometry.seeds else ""
        self.say(
            f"pattern: start: {len(shapes) - len(geometry.seeds)} spread shape(s){seeded} "
            f"at {len(geometry.probes)} probe profile(s)"
        )
        points = [(shape, probe) for shape in shapes for probe in geometry.probes]
        self._measure(points)
        if self.ledger.best(points) is None:
            self._find_any()
        starts: list[Point] = []
        for point in self.ledger.ranked():
            if point[0] not in {s for s, _ in starts}:
                starts.append(point)
            if len(starts) == self.effort.starts:
                break
        return starts

    def _find_any(self) -> None:
        """Nothing in the start ran (tiles too large, say): shapes from the smallest up until one runs."""
        assert self.ledger is not None
        geometry = self.geometry
        self.say("pattern: no start ran; trying shapes from the smallest up")
        order = sorted(geometry.shapes(), key=lambda s: (sum(s), s))
        batch = max(2, len(geometry.sizes))
        for at in range(0, len(order), batch):
            if self.ledger.spent:
                return
            points = [(shape, probe) for shape in order[at : at + batch] for probe in geometry.probes]
            self._measure(points)
            if self.ledger.best(points) is not None:
                return

    def _walk(self, start: Point) -> Point:
        """Walk from ``start`` until no poll beats the current point; where it ended."""
        assert self.ledger is not None
        current, last = start, None
        self.say(f"pattern: walking from {self.geometry.label(start)} at {self.ledger.time(start):.4f} ms")
        while not self.ledger.spent:
            moved = self._poll(current, last)
            if moved is None:
                break
            last, current = current, moved
        return current

    def _poll(self, current: Point, last: Point | None) -> Point | None:
        """The first poll's fastest point that beats ``current`` by more than the noise, or ``None``."""
        assert self.ledger is not None
        polls: list[tuple[str, list[Point]]] = []
        if last is not None:
            repeated = self.moves.repeat(last, current)
            if repeated is not None:
                polls.append(("the last move again", [repeated]))
        polls.append(("single moves", self.moves.singles(current)))
        polls.append(("pairs of moves", self.moves.pairs(current)))
        # Each poll's points compile ahead while the one before compiles; after the last, the final pass's.
        later = [points for _, points in polls[1:]]
        later.append(self.moves.option_pairs(current) if self.effort.final_pass else [])
        for (kind, points), following in zip(polls, later, strict=True):
            self.ledger.ahead(following)
            new = self._measure(points)
            better = self._better(points, current)
            if new:
                self.say(f"pattern: {kind} around {self.geometry.label(current)}: {len(new)} measured")
            if better is not None:
                self.say(
                    f"pattern: moved to {self.geometry.label(better)} at {self.ledger.time(better):.4f} ms"
                )
                return better
            if self.ledger.spent:
                return None
        return self._stretch(current, [p for _, points in polls for p in points])

    def _stretch(self, current: Point, polled: Sequence[Point]) -> Point | None:
        """Repeat the moves that gained too little to trust; the first repeat that gains enough, or ``None``.

        On a ridge (block size and warps rising together, say) every step
        gains less than the noise allows to act on, yet a few steps gain
        more; a step that is repeated gains twice, noise does not.
        """
        assert self.ledger is not None
        close = (1 + MIN_GAIN) * self.ledger.time(current)
        gaining = [p for p in self.ledger.ranked(polled) if self.ledger.time(p) < close][:STRETCHES]
        further = [q for q in (self.moves.repeat(current, p) for p in gaining) if q is not None]
        new = self._measure(further)
        if new:
            self.say(
                f"pattern: small gains around {self.geometry.label(current)} repeated: {len(new)} measured"
            )
        better = self._better(further, current)
        if better is not None:
            self.say(f"pattern: moved to {self.geometry.label(better)} at {self.ledger.time(better):.4f} ms")
        return better

    def _better(self, points: Sequence[Point], current: Point) -> Point | None:
        assert self.ledger is not None
        best = self.ledger.best(points)
        if best is None or not self.ledger.time(best) < (1 - MIN_GAIN) * self.ledger.time(current):
            return None
        return best

    def _final_passes(self, current: Point) -> None:
        """Every single and pair around the walk's end; from a better point there, walk on and pass again.

        Around the walk's end, not the fastest point measured: that may lead
        by noise alone, and is a finalist anyway.
        """
        assert self.ledger is not None
        while not self.ledger.spent:
            around = self.moves.full(current)
            new = self._measure(around)
            self.say(f"pattern: final pass around {self.geometry.label(current)}: {len(new)} measured")
            better = self._better(around, current)
            if better is None:
                return
            current = self._walk(better)


class PatternStrategy:
    """``pattern``: the default; see the module docstring."""

    name: ClassVar[str] = "pattern"
    auto_priority = 10

    @classmethod
    def is_available(cls) -> bool:
        """Always: it needs nothing but the times it is handed."""
        return True

    def search(
        self, geometry: SearchGeometry, measure: Measure, budget: SearchBudget, say: Callable[[str], None]
    ) -> list[Point]:
        """Walk ``geometry`` (:class:`PatternSearch`); the ``budget.finalists`` fastest points measured."""
        return PatternSearch(geometry, budget, say).run(measure)


@hookimpl
def kerneltune_register_search_strategies(register):
    register(PatternStrategy)
