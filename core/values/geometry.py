"""What a search strategy is given, and how one is chosen.

A search strategy (a plugin, contract
:class:`kerneltune.core.plugin_system.contracts.SearchStrategy`) sees plain
data only: a :class:`SearchGeometry`, a measure function returning agreed
times (``inf`` for a point that failed) and a :class:`SearchBudget`; it
returns its finalists, fastest first. docs/search_params.md ("Writing a
strategy", "Effort and budget") describes each part.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import attrs

#: One index per searched parameter, into that parameter's sorted values.
Shape = tuple[int, ...]
#: A shape and the index of a compile-option profile (0 is the base profile).
Point = tuple[Shape, int]
#: Takes a batch of points, returns each one's agreed time in ms (``inf``: no usable time). The one
#: kerneltune hands a strategy also has ``ahead(points)``: the points it expects to measure next, which
#: the run may compile while the next batch is compiled (:meth:`SearchLedger.ahead
#: <kerneltune.core.search.ledger.SearchLedger.ahead>` calls it where it exists).
Measure = Callable[[list[Point]], Mapping[Point, float]]


class BudgetSpent(Exception):
    """Raised by the measure function a strategy is handed once the search's budget allows no more.

    The point cap (``SearchBudget.max_points``, distinct points) and the
    wall-clock budget bind there, whatever route a strategy takes; a
    strategy need not catch it (the search ends with what was measured), and
    one that measures through a :class:`~kerneltune.core.search.ledger.SearchLedger`
    never meets it.
    """


#: How hard a strategy tries, cheapest first (the ``search_effort`` setting's values).
EFFORTS = ("quick", "default", "full")


class SearchSettings(Protocol):
    """The settings a budget is resolved from: ``search_effort``, ``search_budget_s``, ``search_max_points``.

    :class:`kerneltune.core.Settings` is one; their specs sit on a floor above this one.
    """

    def get(self, name: str) -> Any: ...


def _axes(instance: Any, attribute: Any, axes: tuple[tuple[int, ...], ...]) -> None:
    for axis in axes:
        if not axis or list(axis) != sorted(set(axis)):
            raise ValueError(f"every axis must hold distinct values in ascending order, got {axis!r}")


@attrs.frozen
class SearchGeometry:
    """The shape of a generated space, as a strategy sees it.

    Every combination of one value per axis (a *shape*) with every profile
    is a candidate. Shapes are tuples of indices into :attr:`axes`, so a
    step along an axis is an index plus or minus one; profiles are indices
    into :attr:`profiles`.

    :ivar params: the searched parameters' names, one per axis.
    :ivar axes: each parameter's values, ascending.
    :ivar profiles: the compile-option profiles (dicts of options); the first
        is the base, the compiler's defaults.
    :ivar probes: profiles worth timing every shape with when shapes are
        compared (the family's choice; the base alone by default).
    :ivar seeds: shapes from hand-written partial configs, to measure first.
    :ivar family: the profile family's name, for messages (``None``: no family).
    """

    params: tuple[str, ...]
    axes: tuple[tuple[int, ...], ...] = attrs.field(validator=_axes)
    profiles: tuple[Mapping[str, Any], ...] = ({},)
    probes: tuple[int, ...] = (0,)
    seeds: tuple[Shape, ...] = ()
    family: str | None = None

    def __attrs_post_init__(self) -> None:
        if len(self.params) != len(self.axes):
            raise ValueError(f"{len(self.params)} params but {len(self.axes)} axes")
        if not self.profiles:
            raise ValueError("a geometry needs at least one profile (the base)")
        if not self.probes or not all(0 <= p < len(self.profiles) for p in self.probes):
            raise ValueError(f"probes {list(self.probes)} must index the {len(self.profiles)} profiles")
        for seed in self.seeds:
            if not self.holds_shape(seed):
                raise ValueError(f"seed {seed!r} is not a shape of axes sized {list(self.sizes)}")

    @property
    def sizes(self) -> tuple[int, ...]:
        """How many values each axis has."""
        return tuple(len(axis) for axis in self.axes)

    @property
    def shape_count(self) -> int:
        """Shapes in the space."""
        return math.prod(self.sizes)

    @property
    def space_size(self) -> int:
        """Points in the space: every shape with every profile."""
        return self.shape_count * len(self.profiles)

    def shapes(self) -> Iterator[Shape]:
        """Every shape, the last axis varying fastest."""
        return itertools.product(*(range(n) for n in self.sizes))

    def points(self) -> Iterator[Point]:
        """Every point, shape by shape, each with every profile in order."""
        return ((shape, profile) for shape in self.shapes() for profile in range(len(self.profiles)))

    def holds_shape(self, shape: Shape) -> bool:
        return len(shape) == len(self.axes) and all(
            0 <= i < n for i, n in zip(shape, self.sizes, strict=True)
        )

    def holds(self, point: Point) -> bool:
        """Whether ``point`` is a point of this space."""
        shape, profile = point
        return self.holds_shape(shape) and 0 <= profile < len(self.profiles)

    def fallback(self) -> list[Point]:
        """Points a search falls back to when nothing it measured ran: at the base profile, the seeds,
        then the shape at the middle of every axis, then the smallest."""
        middle = tuple(size // 2 for size in self.sizes)
        smallest = tuple(0 for _ in self.sizes)
        shapes = dict.fromkeys([*self.seeds, middle, smallest])
        return [(shape, 0) for shape in shapes if self.holds_shape(shape)]

    def values(self, shape: Shape) -> dict[str, int]:
        """A shape's parameter values, by name."""
        return {
            name: self.axes[axis][i] for axis, (name, i) in enumerate(zip(self.params, shape, strict=True))
        }

    def label(self, point: Point) -> str:
        """``"BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=3"``: the point as candidates are named."""
        shape, profile = point
        chosen = {**self.values(shape), **self.profiles[profile]}
        return ", ".join(f"{name}={value}" for name, value in chosen.items())


def _effort(instance: Any, attribute: Any, value: str) -> None:
    if value not in EFFORTS:
        raise ValueError(f"effort must be one of {', '.join(EFFORTS)}, got {value!r}")


def _optional_positive(instance: Any, attribute: Any, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"{attribute.name} must be positive or None, got {value!r}")


@attrs.frozen
class SearchBudget:
    """How much a strategy may spend, and how many finalists it hands back.

    :ivar effort: ``"quick"``, ``"default"`` or ``"full"``; each strategy
        says what it does with it (docs/search_params.md).
    :ivar max_points: at most this many distinct points measured (``None``: no cap).
    :ivar seconds: no new round of measurements starts after this many
        seconds from :attr:`started` (``None``: no limit); a round under way
        finishes.
    :ivar finalists: at most this many points returned for the final re-timing.
    :ivar clock: seconds, monotonic (tests pass their own).
    :ivar started: when the search began, on :attr:`clock`.
    """

    effort: str = attrs.field(default="default", validator=_effort)
    max_points: int | None = attrs.field(default=None, validator=_optional_positive)
    seconds: float | None = attrs.field(default=None, validator=_optional_positive)
    finalists: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    clock: Callable[[], float] = attrs.field(default=time.monotonic, eq=False, repr=False)
    started: float = attrs.field(
        default=attrs.Factory(lambda self: self.clock(), takes_self=True), eq=False, repr=False
    )

    @classmethod
    def resolve(
        cls,
        settings: SearchSettings,
        *,
        effort: str | None = None,
        seconds: float | None = None,
        max_points: int | None = None,
        finalists: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> SearchBudget:
        """The budget in force: what a kernel's hint gives wins; the settings fill in the rest.

        :param effort: the hint's effort, or ``None`` for the ``search_effort`` setting.
        :param seconds: the hint's budget, or ``None`` for ``search_budget_s`` (0 there: no limit).
        :param max_points: the hint's cap, or ``None`` for ``search_max_points`` (0 there: no cap).
        """
        if seconds is None and settings.get("search_budget_s") > 0:
            seconds = settings.get("search_budget_s")
        if max_points is None and settings.get("search_max_points") > 0:
            max_points = settings.get("search_max_points")
        return cls(
            effort=settings.get("search_effort") if effort is None else effort,
            max_points=max_points,
            seconds=seconds,
            finalists=finalists,
            clock=clock,
        )

    def elapsed(self) -> float:
        """Seconds since the search began."""
        return self.clock() - self.started

    def expired(self) -> bool:
        """Whether the wall-clock budget is spent (never, without one)."""
        return self.seconds is not None and self.elapsed() >= self.seconds

    def describe(self) -> str:
        """One line for ``debug``: the effort and the caps."""
        caps = [f"effort {self.effort}"]
        if self.max_points is not None:
            caps.append(f"at most {self.max_points} points")
        if self.seconds is not None:
            caps.append(f"{self.seconds:g} s")
        return ", ".join(caps)
