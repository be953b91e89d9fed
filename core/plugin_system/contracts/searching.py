"""Generated-space contracts: compile-profile families, features and search strategies."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from kerneltune.core.values.geometry import Measure, Point, SearchBudget, SearchGeometry
    from kerneltune.core.values.profiles import CompileTarget
from kerneltune.core.plugin_system.contracts.base import Registrable


class ProfileFamily(Registrable, Protocol):
    """Compile-option profiles for staged searches; registered by ``kerneltune_register_profile_families``.

    Constructed with no arguments. Among the available families serving one
    backend and operator, the highest class attribute ``priority`` (an int,
    0 where absent) wins; a tie for first place is an error naming both.
    """

    #: ``"matrix"`` (kernels that call ``tl.dot``) or ``"vector"`` (the others).
    operator: ClassVar[str]
    #: Triton backend names served: ``"cuda"``, ``"hip"``, ``"npu"``, ``"interpreter"``.
    backends: ClassVar[tuple[str, ...]]

    def __init__(self) -> None: ...

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """The profiles to search for ``target``; the first is the base profile.

        Each is a dict of compile options passed at launch, using only names
        in ``target.options``. Options that depend on another appear only in
        the profiles where they apply; :func:`kerneltune.core.values.profiles.option_grid`
        builds products.
        """
        ...


@runtime_checkable
class ProbingProfileFamily(ProfileFamily, Protocol):
    """A family that names its probe profiles (optional part of :class:`ProfileFamily`)."""

    def probe_profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """A few of its profiles (two or three) that the shape search times every shape with.

        For families where one option decides which shapes can run well at
        all (warps per tile for tiled matrix kernels). The base is always a
        probe, put first if left out; without this method it is the only one.
        """
        ...


class Feature(Registrable, Protocol):
    """An optional feature a user switches on by name; registered by ``kerneltune_register_features``."""

    def __init__(self) -> None: ...

    def enable(self) -> None:
        """Switch the feature on for the whole process; calling it again changes nothing."""
        ...


class SearchStrategy(Registrable, Protocol):
    """Which points of a generated space get measured.

    Registered by ``kerneltune_register_search_strategies``.

    Constructed with no arguments, once per search. Built-in priorities for
    ``auto``: pattern 10, staged 0, exhaustive -10. A strategy is pure
    decisions over plain data (:mod:`kerneltune.core.values.geometry`): it never sees
    a kernel, a device or another rank, only the times its measure function
    returns, which every rank agreed on.
    """

    def __init__(self) -> None: ...

    def search(
        self,
        geometry: SearchGeometry,
        measure: Measure,
        budget: SearchBudget,
        say: Callable[[str], None],
    ) -> list[Point]:
        """Measure what the strategy chooses and return its finalists.

        :param geometry: the space: the searched parameters' sorted values,
            the profiles (the base first), probes and seeds.
        :param measure: measures a batch of points (compiled in parallel,
            then timed) and returns each point's agreed time in ms; ``inf``
            marks a point that failed, was dropped, ran out of resources or
            timed out, which is information about the space, not noise.
            Larger batches compile more in parallel; each call is one round.
        :param budget: the effort asked for and the caps (distinct points,
            seconds from ``budget.started``) the strategy stays within.
        :param say: prints one line of progress under the hint's ``debug``.
        :returns: at most ``budget.finalists`` measured points, fastest
            first, for the caller to re-time head to head; empty when no
            point ran.
        """
        ...
