"""COMPILE and ISOLATE for a tuning: what must hold before a candidate runs.

A candidate runs once it is compiled (here, or by a neighbour on its host,
through Triton's cache) and, with isolation, once a worker ran it without
a crash; :class:`Readiness` answers what, if anything, keeps it from running.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kerneltune.core.compiling.options import COMPILE_AHEAD
from kerneltune.core.compiling.stage import CompileStage
from kerneltune.core.isolation.options import ISOLATE
from kerneltune.core.isolation.parent import ScreenedOut, merge_ranks, screen_all, warn_unscreened
from kerneltune.core.machine.failed_configs import RememberedFailure
from kerneltune.core.machine.schedule import share
from kerneltune.core.machine.twins import TwinDropped, Twins
from kerneltune.core.plugin_system.contracts import CompileProcess, Reducer
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.events import Header
from kerneltune.core.values.records import Candidate


class Readiness:
    """One tuning's compiling and screening.

    :ivar neighbours: the ranks on this rank's host, which split the compiling (LOOKUP sets them).
    """

    def __init__(
        self, session: Session, reducer: Reducer, header: Header, *, sharded: bool, beside: bool = False
    ) -> None:
        """:param beside: the timer holds the device: loads may go on beside a measurement
        (:meth:`~kerneltune.core.compiling.stage.CompileStage.wait`)."""
        self._session = session
        self._beside = beside
        self._reducer = reducer
        self._header = header
        self._sharded = sharded
        self.neighbours: tuple[int, ...] = (reducer.rank,)
        self._compiling: CompileStage | None = None
        #: why each candidate screened out must not run; ``None`` until the tuning screens.
        self._screened: dict[int, ScreenedOut] | None = None
        #: sharded, every rank's compiles have ended (:meth:`settle`).
        self._quiet = False
        #: the programs measured so far, where the backend tells them (:meth:`twins`).
        self.twins: Twins | None = None
        #: the candidates that failed for every key before, failed at once unrun (:mod:`~.failed_configs`).
        self.remembered: dict[int, RememberedFailure] = {}

    @property
    def screened(self) -> dict[int, BaseException]:
        """The candidates screened out so far, and those remembered to fail, by index: none of them is
        compiled, screened or run."""
        return {**self.remembered, **(self._screened or {})}

    def compile(
        self,
        compile_one: Callable[[Candidate], object],
        listed: list[Candidate],
        child: CompileProcess | None,
    ) -> None:
        """Compile this rank's share of ``listed`` on a pool (see ``Tuning.compile``)."""
        # Sharded, the queue holds this rank's share already.
        rank = self._reducer.rank
        group = (rank,) if self._sharded else self.neighbours
        mine = share(listed, group.index(rank), len(group))
        if self._compiling is not None:
            return self._compiling.add(mine, compile_one)
        settings, observers = self._session.settings, self._session.observers
        self._compiling = CompileStage.configured(
            settings, observers, compile_one, mine, self._header, child, beside=self._beside
        )

    def ahead(
        self,
        compile_one: Callable[[Candidate], object],
        listed: list[Candidate],
        child: CompileProcess | None,
    ) -> None:
        """This rank's share of ``listed`` compiled ahead where ``compile_ahead`` is on (``Tuning.round``)."""
        if not listed or not self._session.settings[COMPILE_AHEAD]:
            return
        if self._compiling is None:
            self.compile(compile_one, [], child)
        assert self._compiling is not None
        rank = self._reducer.rank
        group = (rank,) if self._sharded else self.neighbours
        self._compiling.ahead(share(listed, group.index(rank), len(group)), compile_one)

    def isolate(
        self, screen_one: Callable[[Candidate], object], listed: Iterable[Candidate]
    ) -> dict[int, str]:
        """Screen ``listed`` in isolation workers; with several ranks, one gather shares the failures."""
        failed = screen_all(screen_one, listed)
        if self._reducer.world_size > 1:
            failed = merge_ranks(self._reducer.gather(sorted(failed.items())), self._reducer.rank)
        self._screened = {**(self._screened or {}), **{i: ScreenedOut(why) for i, why in failed.items()}}
        return failed

    def begin_measuring(self, function: str) -> None:
        """Before a candidate is handed out: warn if isolation is on but nothing was screened.

        Sharded ranks skip the barrier before each candidate: the first time,
        one barrier here keeps a rank from measuring while another on its
        host still compiles.
        """
        if self._screened is None and self._session.settings[ISOLATE] != "none":
            warn_unscreened(function)
        if self._sharded and not self._quiet:
            self._quiet = True
            if self._compiling is not None:
                self._compiling.settle()
            self._reducer.barrier()

    def timing_begins(self) -> None:
        """A candidate's timed runs begin: no load beside them (:meth:`CompileStage.timing_begins`)."""
        if self._compiling is not None:
            self._compiling.timing_begins()

    def timing_ends(self) -> None:
        """A candidate's timed runs are launched: loads go on (:meth:`CompileStage.timing_ends`)."""
        if self._compiling is not None:
            self._compiling.timing_ends()

    def problem(self, candidate: Candidate) -> BaseException | None:
        """What keeps ``candidate`` from running: its compile error, why it screened out, or that an
        earlier candidate launches its program (a twin); else ``None``.

        Waits for its compile to end first.
        """
        if candidate.index in self.remembered:
            return self.remembered[candidate.index]  # never handed to COMPILE: nothing to wait for
        problem = None if self._compiling is None else self._compiling.wait(candidate)
        problem = self.screened.get(candidate.index, problem)
        if problem is None and self.twins is not None:
            problem = self.twins.twin_of(candidate)
        return problem

    def barrier_with_twins(
        self, candidate: Candidate, problem: BaseException | None, reducer: Reducer
    ) -> BaseException | None:
        """The barrier ranks measuring alike take before each candidate, carrying the twin verdict.

        With twins, one ``max`` of each rank's verdict: a twin only where every rank says so,
        standing for the lowest index any rank named.
        """
        if self.twins is None:
            reducer.barrier()
            return problem
        mine = problem.twin if isinstance(problem, TwinDropped) else -1
        # max of the negated verdicts: any rank's -1 (measure it) wins; else the lowest index named.
        (negated,) = reducer.max([-float(mine)])
        agreed = int(-negated)
        if not isinstance(problem, TwinDropped):
            return problem
        if agreed < 0:
            self.twins.keep(candidate)
            return None
        return problem if agreed == problem.twin else self.twins.stands_for(candidate, agreed)

    def close(self) -> None:
        """End the compiles still running."""
        if self._compiling is not None:
            self._compiling.close()
