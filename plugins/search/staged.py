"""The ``staged`` search strategy: block shapes first, then compile-option profiles.

What ``search_params`` used before ``pattern`` became the default, kept
selectable by name for comparison. Pure decisions on the agreed times the
caller hands back, no Triton. docs/search_params.md ("The stages of
`staged`", and "Operator classes and profile families" for the probes)
describes the stages and why they are as they are.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from kerneltune.core import Measure, Point, SearchBudget, SearchGeometry, SearchLedger, Shape, hookimpl
from kerneltune.plugins.search.moves import (
    axis_neighbours,
    coarse_shapes,
    diagonal_neighbours,
    profile_neighbours,
)

#: Families up to this size are measured whole on the best shape; larger ones are searched...
FULL_PROFILE_SWEEP = 8
#: ...unless the whole family costs at most this fraction of the space.
SWEEP_SHARE = 0.1
#: A runner-up shape gets its own profile walk only when, with the leader's
#: profile, it is within this factor of the leader's time.
PROMISING = 1.1
#: The shape walk stops after the start plus this share of all shapes (at least 4 per param),
#: at the default effort; ``quick`` halves it and ``full`` doubles it.
WALK_SHARE = 0.25
EFFORT_WALK = {"quick": 0.5, "default": 1.0, "full": 2.0}
#: A profile walk moves only to a point faster than this fraction below where it
#: stands: smaller gains are measurement noise, and chasing them costs a whole
#: new neighbourhood (see ``_walk_profiles``).
MIN_GAIN = 0.01


class StagedSearch:
    """Stages 1 and 2 over one space; :meth:`run` returns the finalists.

    :param sizes: how many values each searched parameter has.
    :param profiles: the family's profiles; index 0 is the base.
    :param probes: indices of the profiles each stage-1 shape is measured
        with (its score is the best of them); the base alone by default.
    :param seeds: shapes to measure first (from hand-written partial configs).
    :param top_k: shapes that get a profile search; finalists returned.
    :param say: receives one line per step, for ``debug``.
    :param label: a readable form of a point, for those lines.
    :param budget: effort and caps (default: the default effort, no caps).
    """

    def __init__(
        self,
        sizes: Sequence[int],
        profiles: Sequence[Mapping[str, Any]],
        *,
        probes: Sequence[int] = (0,),
        seeds: Sequence[Shape] = (),
        top_k: int = 3,
        say: Callable[[str], None] = lambda line: None,
        label: Callable[[Point], str] = repr,
        budget: SearchBudget | None = None,
    ) -> None:
        self.sizes = tuple(sizes)
        self.profiles = list(profiles)
        self.probes = tuple(dict.fromkeys(probes))
        if not self.probes or not all(0 <= p < len(self.profiles) for p in self.probes):
            raise ValueError(f"probes {list(probes)} must index the {len(self.profiles)} profiles")
        self.seeds = list(dict.fromkeys(seeds))
        self.top_k = top_k
        self.say = say
        self.label = label
        self.budget = SearchBudget(finalists=top_k) if budget is None else budget
        #: every point measured, with its time (the ledger's, once :meth:`run` made one).
        self.times: dict[Point, float] = {}
        #: every shape stage 1 measured, with its score: its best time over the probes.
        self.scores: dict[Shape, float] = {}
        self._ledger: SearchLedger | None = None
        self._steps = profile_neighbours(self.profiles)
        self._lines = profile_neighbours(self.profiles, adjacent=False)

    @property
    def space_size(self) -> int:
        """Points in the whole space."""
        return math.prod(self.sizes) * len(self.profiles)

    def run(self, measure: Measure) -> list[Point]:
        """Run stages 1 and 2; the finalists, fastest first (empty when nothing ran)."""
        self._ledger = SearchLedger(measure, self.budget)
        self.times = self._ledger.times
        self._shape_stage()
        self._profile_stage()
        reason = self._ledger.why_spent()
        if reason is not None:
            self.say(f"stopped early: {reason}")
        return self.finalists()

    @property
    def _spent(self) -> bool:
        return self._ledger is not None and self._ledger.spent

    def _measure(self, points: Sequence[Point]) -> None:
        assert self._ledger is not None
        self._ledger.measure(points)

    def _time(self, point: Point) -> float:
        return self.times.get(point, math.inf)

    def _best(self, points: Iterable[Point]) -> Point | None:
        finite = [p for p in points if math.isfinite(self._time(p))]
        return min(finite, key=lambda p: (self.times[p], p)) if finite else None

    def ranked_shapes(self) -> list[Shape]:
        """Shapes by their best finite time so far, over every profile measured."""
        best: dict[Shape, float] = {}
        for (shape, _), time in self.times.items():
            if math.isfinite(time):
                best[shape] = min(time, best.get(shape, math.inf))
        return sorted(best, key=lambda s: (best[s], s))

    def finalists(self) -> list[Point]:
        """The best point of each of the ``top_k`` best shapes, fastest first."""
        points = []
        for shape in self.ranked_shapes()[: self.top_k]:
            point = self._best([p for p in self.times if p[0] == shape])
            if point is not None:
                points.append(point)
        return points

    def _probe(self, shapes: Sequence[Shape]) -> None:
        """Measure ``shapes`` with every probe profile and score them (inf: failed, or cut by the budget)."""
        self._measure([(s, p) for s in shapes for p in self.probes])
        for shape in shapes:
            # The best, not the mean: a probe that does not suit a shape (too many
            # threads for a small tile) must not push it down.
            self.scores[shape] = min(self._time((shape, p)) for p in self.probes)

    def _ranked_by_score(self, shapes: Iterable[Shape]) -> list[Shape]:
        """Those of ``shapes`` that ran under some probe, best score first."""
        return sorted((s for s in shapes if math.isfinite(self.scores[s])), key=lambda s: (self.scores[s], s))

    def _best_probe(self, shape: Shape) -> Point:
        """The probe point that gave a shape its score."""
        return min(((shape, p) for p in self.probes), key=lambda point: (self._time(point), point))

    def _shape_stage(self) -> None:
        start = self.seeds + [s for s in coarse_shapes(self.sizes) if s not in self.seeds]
        seeded = f" and {len(self.seeds)} seed(s)" if self.seeds else ""
        probed = "base profile" if len(self.probes) == 1 else f"best of {len(self.probes)} probe profiles"
        self.say(f"stage 1: {len(start) - len(self.seeds)} shapes of a coarse lattice{seeded}, {probed}")
        self._probe(start)
        if not self._ranked_by_score(start):
            self._find_any_shape()
        ranked = self._ranked_by_score(self.scores)
        if not ranked:
            self.say("stage 1: no shape ran; nothing to refine")
            return
        current = ranked[0]
        shapes = math.prod(self.sizes)
        share = WALK_SHARE * EFFORT_WALK[self.budget.effort]
        budget = len(start) + max(4 * len(self.sizes), math.ceil(share * shapes))
        diagonals_tried: set[Shape] = set()
        while len(self.scores) < budget and not self._spent:
            kind = "neighbour"
            around = [s for s in axis_neighbours(current, self.sizes) if s not in self.scores]
            if not around and current not in diagonals_tried:
                diagonals_tried.add(current)
                kind = "diagonal neighbour"
                around = [s for s in diagonal_neighbours(current, self.sizes) if s not in self.scores]
            if not around:
                break
            self.say(
                f"stage 1: refining around {self.label(self._best_probe(current))}: {len(around)} {kind}(s)"
            )
            self._probe(around)
            current = self._ranked_by_score([current, *around])[0]
        spent = " (budget spent)" if len(self.scores) >= budget else ""
        best = self._best_probe(current)
        self.say(
            f"stage 1: {len(self.scores)} of {shapes} shapes measured{spent}; best {self.label(best)} "
            f"at {self._time(best):.4f} ms"
        )

    def _find_any_shape(self) -> None:
        """Every start failed (too large, say): try shapes from the smallest up until one runs."""
        self.say("stage 1: no starting shape ran; trying shapes from the smallest up")
        order = sorted(itertools.product(*(range(n) for n in self.sizes)), key=lambda s: (sum(s), s))
        batch = max(2, len(self.sizes))
        pending = [s for s in order if s not in self.scores]
        while pending and not self._spent:
            chunk, pending = pending[:batch], pending[batch:]
            self._probe(chunk)
            if self._ranked_by_score(chunk):
                return

    def _profile_stage(self) -> None:
        shapes = self._ranked_by_score(self.scores)[: self.top_k]
        if not shapes or self._spent:
            return
        if len(self.profiles) == 1:
            self.say("stage 2: one profile only; no compile options to search")
            return
        self.say(f"stage 2: {len(self.profiles)} profiles for the best {len(shapes)} shape(s)")
        thorough = self.budget.effort == "full"
        for rank, shape in enumerate(shapes):
            if (rank == 0 or thorough) and self._sweep_best_shape():
                self._measure([(shape, i) for i in range(len(self.profiles))])
            elif rank == 0 or thorough:
                self._walk_profiles(shape, self._best_probe(shape)[1], self._lines)
            else:
                leader = self._best([p for p in self.times if p[0] in shapes[:rank]])
                start = 0 if leader is None else leader[1]
                self._measure([(shape, start)])
                if leader is None or self._time((shape, start)) <= PROMISING * self.times[leader]:
                    self._walk_profiles(shape, start, self._steps)
            best = self._best([p for p in self.times if p[0] == shape])
            if best is not None:
                self.say(f"stage 2: best for this shape {self.label(best)} at {self.times[best]:.4f} ms")

    def _sweep_best_shape(self) -> bool:
        count = len(self.profiles)
        return count <= FULL_PROFILE_SWEEP or count <= SWEEP_SHARE * self.space_size

    def _walk_profiles(self, shape: Shape, start: int, moves: list[list[int]]) -> None:
        self._measure([(shape, start)])
        current = (shape, start)
        while not self._spent:
            around = [(shape, j) for j in moves[current[1]] if (shape, j) not in self.times]
            if not around:
                return
            self._measure(around)
            better = self._best(around)
            if better is None or self.times[better] >= (1 - MIN_GAIN) * self._time(current):
                return
            current = better


class StagedStrategy:
    """``staged``: shapes ranked at the probes, then profiles for the best few (:class:`StagedSearch`)."""

    name: ClassVar[str] = "staged"
    auto_priority = 0

    @classmethod
    def is_available(cls) -> bool:
        """Always: it needs nothing but the times it is handed."""
        return True

    def search(
        self, geometry: SearchGeometry, measure: Measure, budget: SearchBudget, say: Callable[[str], None]
    ) -> list[Point]:
        """Stages 1 and 2 ; the best point of each of the ``budget.finalists`` best shapes."""
        staged = StagedSearch(
            geometry.sizes,
            geometry.profiles,
            probes=geometry.probes,
            seeds=geometry.seeds,
            top_k=budget.finalists,
            say=say,
            label=geometry.label,
            budget=budget,
        )
        return staged.run(measure)


@hookimpl
def kerneltune_register_search_strategies(register):
    register(StagedStrategy)
