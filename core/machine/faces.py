"""The two faces of a :class:`~kerneltune.core.machine.tuning.Tuning`, one per kind of driver.

A stepped driver (the function-level tuner, the contextual tuner) takes each
candidate the tuning hands out: :class:`SteppedTuning`. An adaptive driver
(the search_params run) decides each round from agreed times:
:class:`SearchTuning`. Each member is documented here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

from kerneltune.core.machine.schedule import Schedule
from kerneltune.core.machine.timing import Around, CandidateRuns
from kerneltune.core.plugin_system.contracts import CompileProcess, SearchStrategy
from kerneltune.core.plugin_system.settings import Settings
from kerneltune.core.values.events import Header
from kerneltune.core.values.records import Candidate


class SteppedTuning(Protocol):
    """What a stepped driver uses of its tuning: the next candidate, its runs, the pick."""

    #: after :meth:`finish`: each candidate's agreed time, and the seconds the tuning took
    #: (empty and ``None`` for a pick found without measuring).
    agreed: tuple[float, ...]
    seconds: float | None

    @property
    def header(self) -> Header:
        """What every event of this tuning says about it, a driver's own events included."""

    @property
    def hit(self) -> bool:
        """Whether a pick was found without measuring (in-process, disk or another rank)."""

    @property
    def world_size(self) -> int:
        """How many ranks tune this key together."""

    def next_candidate(self) -> Candidate | None:
        """The next candidate to measure, or ``None`` once the queue and the near-tie rounds are done.

        With several ranks this is a barrier, so every rank starts each candidate together.
        """

    def runs(self, candidate: Candidate) -> CandidateRuns:
        """The runs to take of the candidate handed out last (:meth:`Recorder.runs`)."""

    def measure(
        self, candidate: Candidate, run: Callable[[], object], *, around: Around | None = None
    ) -> None:
        """Call ``run`` for every run of ``candidate`` and record the samples (:meth:`Recorder.measure`)."""

    def record(self, candidate: Candidate, samples: Sequence[float], *, extend: bool | None = None) -> None:
        """Take back a candidate's samples, in milliseconds (:meth:`Recorder.record`)."""

    def fail(self, candidate: Candidate, error: BaseException) -> None:
        """Record that a candidate raised; it counts as infinitely slow (:meth:`Recorder.fail`)."""

    def mean(self, candidate: Candidate) -> float:
        """This rank's mean time of ``candidate`` so far; ``inf`` if it failed or was not measured."""

    def samples(self, candidate: Candidate) -> tuple[float, ...]:
        """This rank's samples of ``candidate``, in the order taken; empty if it failed."""

    def error(self, candidate: Candidate) -> str | None:
        """Why ``candidate`` failed here; ``None`` if it did not."""

    def queued(self) -> list[Candidate]:
        """The candidates waiting to be measured, each once, in order (not those screened out)."""

    def compile(
        self,
        compile_one: Callable[[Candidate], object],
        candidates: Iterable[Candidate] | None = None,
        *,
        child: CompileProcess | None = None,
    ) -> None:
        """COMPILE ``candidates`` (default: the queued ones) on a pool before they are measured.

        :param compile_one: compiles one candidate without running it, raising what makes it
            unusable; a :class:`~kerneltune.core.CompileMiss` from the backend's probe passes through.
        :param child: the backend's part in compiling in forked processes
            (:class:`~kerneltune.core.compiling.stage.CompileStage`).
        """

    def isolate(
        self, screen_one: Callable[[Candidate], object], candidates: Iterable[Candidate] | None = None
    ) -> dict[int, str]:
        """ISOLATE: screen ``candidates`` (default: the queued ones) in a worker process first.

        :param screen_one: runs one candidate in an isolation worker, raising
            :class:`~kerneltune.core.isolation.parent.ScreenedOut` for one that crashed or hung there.
        :returns: why each candidate screened out on any rank, by index (one gather with several
            ranks); :meth:`next_candidate` fails them.
        """

    def twins(
        self,
        program_of: Callable[[Candidate], Hashable | None],
        options: Callable[[Candidate], Mapping[str, object]] | None = None,
    ) -> None:
        """Measure each program once where the ``twins`` setting is on (:mod:`kerneltune.core.machine.twins`).

        :param program_of: the program a compiled candidate launches; a later candidate launching
            an earlier one's is dropped as its twin, where every rank's backend agrees.
        :param options: a candidate's options by name, for the notice naming what twins differ in.
        """

    def measured_as(self, candidate: Candidate) -> Candidate:
        """The candidate measured for ``candidate``: itself, or the one it is a twin of."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Let the per-key lock, the compile pool and the garbage collector go."""

    def finish(self, among: Iterable[Candidate] | None = None, *, persist: bool = True) -> Candidate:
        """REDUCE, SELECT and PERSIST; the pick.

        :param among: select only among these (a staged search's finalists); default: all.
        :param persist: ``False``: the pick is neither stored nor kept in the process (a search
            whose strategy failed), so that the next tuning of the key measures again.
        :raises NoValidConfigError: when no candidate (of ``among``) has a finite time on every
            rank; nothing is persisted then.
        """


class SearchTuning(SteppedTuning, Protocol):
    """What an adaptive search uses of its tuning: the stepped face and the round API.

    Every decision that every rank must share comes from :meth:`round`,
    :meth:`max_over_ranks` or :meth:`gather`; on one rank nothing is sent.
    """

    key: Hashable
    verbose: bool
    #: every count of runs the tuning takes, purpose by purpose (a re-check's, a stage 3's).
    schedule: Schedule

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every candidate of the tuned space; a candidate's ``index`` is its place here."""

    @property
    def settings(self) -> Settings:
        """The settings the tuning runs under."""

    @property
    def reused(self) -> dict[int, float]:
        """The stored time of each candidate an earlier tuning of this key measured and this one has not.

        Alike on every rank (``inf``: it failed; :mod:`kerneltune.core.machine.reuse`); a driver
        may take these instead of measuring, but :meth:`finish` selects among measured ones only.
        """

    @property
    def rechecking(self) -> tuple[Candidate, ...]:
        """The stored pick, then its rivals, where its record asked for a re-check; else empty.

        The driver re-times them in :attr:`Schedule.recheck_rounds` rounds and
        selects among them (``finish(among=...)``) instead of searching.
        """

    @property
    def twin_of(self) -> dict[int, int]:
        """Each candidate dropped as a twin so far -> the candidate measured for it."""

    def round(
        self,
        candidates: Sequence[Candidate],
        run: Callable[[Candidate], Callable[[], object]],
        *,
        failed: Mapping[int, BaseException] | None = None,
        compile_one: Callable[[Candidate], object] | None = None,
        child: CompileProcess | None = None,
        repeat: int | None = None,
        rounds: int = 1,
        purpose: str = "",
        ahead: Sequence[Candidate] = (),
        around: Callable[[Candidate], Around | None] | None = None,
    ) -> list[float]:
        """Measure a batch now; each candidate's time as every rank agrees on it, in order.

        Queues ``candidates`` (:meth:`Tuning.request`, whose ``repeat``, ``rounds`` and
        ``purpose`` these are), compiles those that may run and :meth:`isolate` did not
        screen out, and measures each with ``run(candidate)``'s thunk. Every rank calls it alike.

        :param failed: candidates known not to run, by index, with why: they fail unlaunched.
        :param ahead: candidates a later round will likely ask for: with ``compile_one``, compile
            processes and ``compile_ahead`` on, they compile meanwhile at a lower priority
            (:meth:`~kerneltune.core.compiling.stage.CompileStage.ahead`); nothing waits for them.
        :param around: gives each candidate's :meth:`measure` its ``around`` (``None``: none).
        """

    def max_over_ranks(self, values: Sequence[float]) -> list[float]:
        """The element-wise maximum of ``values`` over the ranks, in one collective.

        Every rank must call it at the same point with a vector of the same length.
        """

    def gather(self, value: Any) -> list[Any]:
        """Every rank's small plain-data ``value``, in rank order."""

    def strategy(self, hinted: str | None = None, where: str | None = None) -> SearchStrategy:
        """A new instance of ``hinted`` (a registered name), else of the ``search_strategy`` setting.

        :param where: what gave ``hinted``, for the error message.
        :raises PluginError: for a name no plugin registered, or a strategy that cannot run here.
        """

    def origin(self, strategy: SearchStrategy) -> str:
        """``plugin NAME (DISTRIBUTION VERSION)`` of the plugin that registered ``strategy``."""

    def fault(self, strategy: SearchStrategy, what: str, consequence: str) -> None:
        """Warn once, naming its plugin, that ``strategy`` misbehaved (``what``) and what is done instead."""
