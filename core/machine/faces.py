"""The two faces of a :class:`~kerneltune.core.machine.tuning.Tuning`, one per kind of driver.

A stepped driver (the function-level tuner, the contextual tuner) lets the
tuning plan what is measured, and takes each candidate it hands out:
:class:`SteppedTuning`. An adaptive driver (the search_params run, a search
strategy's rounds) decides what to measure next from agreed times, and
measures a batch with ``round`` (request, compile, measure, agree, in one
call): :class:`SearchTuning`. Every decision it takes that every rank must
share comes from ``times``, ``max_over_ranks`` or ``gather``; on one rank
the collectives are the identity, and nothing is sent. A driver is typed by
its face, and each member is documented here.
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

    key: Hashable
    verbose: bool
    #: the pick, once there is one (found without measuring, or by :meth:`finish`).
    best: Candidate | None
    #: after :meth:`finish`: each candidate's agreed time, and the seconds the tuning took.
    agreed: tuple[float, ...]
    seconds: float | None

    @property
    def header(self) -> Header:
        """What every event of this tuning says about it: a driver's own events are made from it too."""

    @property
    def hit(self) -> bool:
        """Whether a pick was found without measuring (in-process, disk or another rank)."""

    @property
    def world_size(self) -> int:
        """How many ranks tune this key together (1: this process alone)."""

    def next_candidate(self) -> Candidate | None:
        """The next candidate to measure, or ``None`` when there is none left.

        Once the queued candidates are measured, a tuning that is not
        adaptive re-times its near ties (:func:`near_ties`) in
        ``tie_rounds`` interleaved rounds before it says there is none left;
        with several ranks deciding which ones is one collective. With
        several ranks this is also a barrier, so every rank starts each
        candidate together.
        """

    def runs(self, candidate: Candidate) -> CandidateRuns:
        """The runs to take of the candidate :meth:`next_candidate` handed out (:meth:`Recorder.runs`)."""

    def measure(
        self, candidate: Candidate, run: Callable[[], object], *, around: Around | None = None
    ) -> None:
        """Call ``run`` for every run of ``candidate``, and record the samples (:meth:`Recorder.measure`)."""

    def record(self, candidate: Candidate, samples: Sequence[float], *, extend: bool | None = None) -> None:
        """Take back a candidate's timing samples, in milliseconds (:meth:`Recorder.record`)."""

    def fail(self, candidate: Candidate, error: BaseException) -> None:
        """Record that a candidate raised; it counts as infinitely slow (:meth:`Recorder.fail`)."""

    def mean(self, candidate: Candidate) -> float:
        """This rank's mean time of ``candidate`` so far; ``inf`` if it failed or was not measured."""

    def samples(self, candidate: Candidate) -> tuple[float, ...]:
        """This rank's samples of ``candidate`` in milliseconds, in the order taken; empty if it failed."""

    def error(self, candidate: Candidate) -> str | None:
        """Why ``candidate`` failed here (compiling, screening or running); ``None`` if it did not."""

    def queued(self) -> list[Candidate]:
        """The candidates waiting to be measured, each once, in order (not those screened out)."""

    def compile(
        self,
        compile_one: Callable[[Candidate], object],
        candidates: Iterable[Candidate] | None = None,
        *,
        child: CompileProcess | None = None,
    ) -> None:
        """COMPILE: compile candidates on a pool; measuring starts once none of them runs.

        :param compile_one: compiles one candidate without running it, on pool threads, raising what
            makes it unusable (a compile error, a kernel too big for the device); a
            :class:`~kerneltune.core.CompileMiss` from the backend's probe must pass through it.
        :param candidates: what to compile, in the order it will be measured (default: every queued
            candidate); an adaptive driver calls this for each round. Ranks on one host each compile
            their share; the others load it from Triton's cache at their first run.
        :param child: the backend's part in compiling in forked processes (``compile_pool``; see
            :class:`~kerneltune.core.compiling.stage.CompileStage`, which reads the settings).
        """

    def isolate(
        self, screen_one: Callable[[Candidate], object], candidates: Iterable[Candidate] | None = None
    ) -> dict[int, str]:
        """ISOLATE: screen candidates where a crash cannot reach this process, before measuring them.

        :param screen_one: runs one candidate in an isolation worker
            (:class:`~kerneltune.core.isolation.parent.Screening`), raising
            :class:`~kerneltune.core.isolation.parent.ScreenedOut` for one that crashed or hung there
            (one that raised there fails as usual when measured).
        :param candidates: what to screen (default: the queued candidates; an adaptive driver's round).
        :returns: why each one screened out (or unscreenable) on any rank must not run, by index; with
            several ranks one gather makes every rank fail the same. :meth:`next_candidate` fails them.
        """

    def twins(
        self,
        program_of: Callable[[Candidate], Hashable | None],
        options: Callable[[Candidate], Mapping[str, object]] | None = None,
    ) -> None:
        """Measure each program once: a candidate whose program (``program_of``, once compiled) an
        earlier one launches is dropped as its twin (:mod:`kerneltune.core.machine.twins`).

        Where the ``twins`` setting is on. With several ranks measuring alike, the
        barrier before each candidate becomes a ``max`` that carries each rank's verdict: a
        twin is dropped only where every rank's backend says so, so ranks never split. Sharded
        ranks (``shard``) measure every candidate: a twin's first config may be another rank's.

        :param options: a candidate's options by name, for the notice naming what twins differ in.
        """

    def measured_as(self, candidate: Candidate) -> Candidate:
        """The candidate measured for ``candidate``: itself, or the one it is a twin of."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Let the per-key lock, the compile pool and the garbage collector go."""

    def finish(self, among: Iterable[Candidate] | None = None) -> Candidate:
        """Reduce, select and persist; the pick.

        :param among: select only among these candidates (a staged search's
            finalists, whose re-timed measurements are comparable); default:
            all of them.
        :raises NoValidConfigError: when no candidate (of ``among``) has a
            finite time on every rank; nothing is persisted then.
        """


class SearchTuning(SteppedTuning, Protocol):
    """What an adaptive search uses of its tuning: the stepped face, and the round API between rounds."""

    #: every count of runs the tuning takes, purpose by purpose (a re-check's, a stage 3's).
    schedule: Schedule

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every candidate of the tuned space, in order (a candidate's ``index`` is its place here)."""

    @property
    def settings(self) -> Settings:
        """The settings the tuning runs under (``repeat``, ``search_effort``, ...)."""

    @property
    def reused(self) -> dict[int, float]:
        """The stored time of each candidate an earlier tuning of this key measured, and this one has not.

        Filled when the key's record was made for another candidate list
        (:mod:`kerneltune.core.machine.reuse`), alike on every rank (``inf``: it
        failed). An adaptive driver may take these times instead of
        measuring; :meth:`finish` still selects among measured candidates only.
        """

    @property
    def rechecking(self) -> tuple[Candidate, ...]:
        """For an adaptive driver: the stored pick, then its rivals, to re-time head to head; else empty.

        The stored record asked for a re-check (its pick was uncertain, or
        ``kerneltune cache verify`` marked it): the driver measures these in
        :attr:`Schedule.recheck_rounds` interleaved rounds (:meth:`request`) and
        selects among them (``finish(among=...)``), instead of searching.
        """

    @property
    def twin_of(self) -> dict[int, int]:
        """Each candidate dropped as a twin so far -> the candidate measured for it."""

    def request(
        self,
        candidates: Iterable[Candidate],
        *,
        warmup: int | None = None,
        repeat: int | None = None,
        rounds: int = 1,
        purpose: str = "",
    ) -> None:
        """Queue candidates for :meth:`next_candidate`, in order.

        A candidate measured before is measured again; its first new
        measurement replaces the old one. With ``rounds`` above one the
        candidates are measured in that many interleaved rounds, each round
        starting one candidate further on, and the later rounds add to the
        first round's samples (a staged search re-times its finalists so).
        Every rank must request the same candidates in the same order.

        :param warmup: untimed runs per candidate and round (default: the tuning's).
        :param repeat: timed runs per candidate and round (default: the tuning's).
        :param purpose: what these measurements are for ("near-tie re-timing"), which the
            observers' events carry with the round ("near-tie re-timing, round 2 of 4").
        :raises ValueError: for a candidate that was pruned.
        """

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
    ) -> list[float]:
        """Measure a batch now (an adaptive driver's round); every rank's agreed time of each, in order.

        Queues ``candidates`` (:meth:`request`, whose ``repeat``, ``rounds`` and
        ``purpose`` these are), compiles those that may run (:meth:`compile`,
        with ``compile_one`` and ``child``), then hands each out and measures
        it with ``run(candidate)``'s thunk, and returns :meth:`times`. Screen
        with :meth:`isolate` first where isolation is on: what it screened
        out is neither compiled nor run. Every rank calls it with the same
        candidates, as :meth:`request` asks.

        :param failed: candidates known not to run, by index, with why: they fail unlaunched.
        :param ahead: candidates the driver expects to ask for in a later round: with ``compile_one``
            and compile processes, and where ``compile_ahead`` is on, they compile while this round's
            compiles do, at a lower priority and stopped while anything is measured
            (:meth:`~kerneltune.core.compiling.stage.CompileStage.ahead`); nothing waits for them.
        """

    def times(self, candidates: Sequence[Candidate]) -> list[float]:
        """REDUCE now: each candidate's mean time as every rank agrees on it.

        The maximum over ranks (:meth:`max_over_ranks`), ``inf`` for a candidate that
        failed on any rank or was not measured. An adaptive driver decides its
        next round from these, so every rank decides alike.
        """

    def max_over_ranks(self, values: Sequence[float]) -> list[float]:
        """The element-wise maximum of ``values`` over the ranks, in one collective; on one rank, ``values``.

        Every rank must call it, with a vector of the same length, at the same
        point of the tuning: a decision taken from what it returns is the same on every rank.
        """

    def gather(self, value: Any) -> list[Any]:
        """Every rank's small plain-data ``value``, in rank order (on one rank, ``[value]``)."""

    def strategy(self, hinted: str | None = None, where: str | None = None) -> SearchStrategy:
        """A new instance of the search strategy in force: ``hinted``, else the ``search_strategy`` setting.

        :param hinted: a strategy's registered name (a kernel's hint), which wins over the setting.
        :param where: what gave ``hinted``, for the error message.
        :raises PluginError: for a name no plugin registered, or a strategy that cannot run here.
        """

    def origin(self, strategy: SearchStrategy) -> str:
        """``plugin NAME (DISTRIBUTION VERSION)`` of the plugin that registered ``strategy``, for messages."""

    def fault(self, strategy: SearchStrategy, what: str, consequence: str) -> None:
        """Warn once, naming its plugin, that ``strategy`` misbehaved, and what is done instead.

        :param what: what was wrong ("search strategy 'walk' raised ValueError: ...").
        :param consequence: what the driver does instead ("k goes on with the best points measured").
        """
