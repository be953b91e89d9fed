"""Twins: candidates that launch the same program, measured once.

Two configs can compile to one program (Triton's interpreter ignores
``num_warps`` and ``num_stages``; a row sum at 1, 2 and 3 stages can be one
binary). The backend says what program a candidate launches
(:class:`~kerneltune.core.plugin_system.contracts.ProgramLaunch`); the first
candidate of each program is measured, each later twin dropped with
:class:`TwinDropped`, naming the one that stands for it, alike on every rank
(:meth:`~kerneltune.core.machine.readiness.Readiness.barrier_with_twins`).
docs/compiling.md ("Twins") says what a user sees.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

from kerneltune.core.errors import CandidateDropped
from kerneltune.core.notices import warn_once
from kerneltune.core.values.records import Candidate

#: What a backend answers for a candidate: its program's identity, or ``None`` where it cannot tell.
ProgramOf = Callable[[Candidate], "Hashable | None"]


class TwinDropped(CandidateDropped):
    """A candidate left out because an earlier one launches the same program (its ``twin``)."""

    counted = False

    def __init__(self, message: str, twin: int) -> None:
        super().__init__(message)
        #: the index of the candidate measured for both.
        self.twin = twin


class Twins:
    """One tuning's programs so far: which candidate stands for each.

    :param name: the tuned function's name, for the notice.
    :param program_of: the backend's answer for a candidate; an exception counts as ``None``.
    :param labels: a candidate's options by name, to say which ones the twins differ in.
    """

    def __init__(
        self,
        name: str,
        program_of: ProgramOf,
        labels: Callable[[Candidate], Mapping[str, object]] | None = None,
    ) -> None:
        self._name = name
        self._program_of = program_of
        self._labels = labels
        self._first: dict[Hashable, Candidate] = {}
        self._programs: dict[int, Hashable | None] = {}
        #: each dropped twin's index -> the index measured for it.
        self.dropped: dict[int, int] = {}

    def twin_of(self, candidate: Candidate) -> TwinDropped | None:
        """Why ``candidate`` is not measured (an earlier candidate launches its program), or ``None``.

        The first candidate of a program is kept for it; asking again about
        a kept candidate (a later round) keeps it.
        """
        if candidate.index not in self._programs:  # asked once: a later round asks again
            try:
                self._programs[candidate.index] = self._program_of(candidate)
            except Exception:
                self._programs[candidate.index] = None
        program = self._programs[candidate.index]
        if program is None:
            return None
        first = self._first.setdefault(program, candidate)
        if first.index == candidate.index:
            return None
        self.dropped[candidate.index] = first.index
        differs = self._differences(first, candidate)
        options = ", ".join(differs) if differs else "nothing the launch passes"
        warn_once(
            ("twins", self._name, differs),
            f"kerneltune: {self._name}: configs that differ only in {options} compile to the same program "
            "here; each program is measured once, for the first of its configs",
        )
        return TwinDropped(f"the same program as [{first.index}] (differs only in {options})", first.index)

    def keep(self, candidate: Candidate) -> None:
        """Measure ``candidate`` after all (another rank's backend sees a program of its own)."""
        self.dropped.pop(candidate.index, None)

    def stands_for(self, candidate: Candidate, twin: int) -> TwinDropped:
        """``candidate`` dropped for candidate ``twin``, the one the ranks agreed on."""
        self.dropped[candidate.index] = twin
        return TwinDropped(f"the same program as [{twin}] (on every rank)", twin)

    def _differences(self, first: Candidate, other: Candidate) -> tuple[str, ...]:
        if self._labels is None:
            return ()
        a, b = self._labels(first), self._labels(other)
        return tuple(sorted(name for name in {*a, *b} if a.get(name) != b.get(name)))
