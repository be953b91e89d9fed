"""A tuning's measurements so far: each candidate's samples, its rounds, and the failures to report."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kerneltune.core.errors import CandidateDropped, describe_error, failure_report, format_failure
from kerneltune.core.machine.schedule import Job
from kerneltune.core.values.records import NOT_MEASURED, PRUNED, Candidate, Measurement


class Samples:
    """Each candidate's :class:`Measurement` in one tuning, by index.

    A measurement taken in interleaved rounds keeps its samples grouped by
    round (``Measurement.rounds``), however many jobs took one round. The
    first failure of each candidate is kept with its traceback for the
    observers, and the first failure of all for ``NoValidConfigError``.
    """

    def __init__(self) -> None:
        self.by_index: dict[int, Measurement] = {}
        #: the interleaved round of each candidate's last samples (``Job.round``).
        self._rounds_of: dict[int, int] = {}
        self._failed: set[int] = set()
        #: the candidates dropped as expected, for the tuning's one line of drops.
        self.dropped: set[int] = set()
        #: the first exception any candidate raised, until the tuning succeeds.
        self.first_failure: BaseException | None = None

    def __len__(self) -> int:
        return len(self.by_index)

    def __contains__(self, index: object) -> bool:
        return index in self.by_index

    def get(self, index: int) -> Measurement:
        """Candidate ``index``'s measurement (``NOT_MEASURED`` before it has one)."""
        return self.by_index.get(index) or Measurement(index, error=NOT_MEASURED)

    def error(self, index: int) -> str | None:
        """Why candidate ``index`` failed; ``None`` if it did not (or was not measured)."""
        return self.by_index.get(index, Measurement(index)).error

    def pruned(self, index: int) -> bool:
        """Whether PRUNE dropped candidate ``index``."""
        previous = self.by_index.get(index)
        return previous is not None and previous.error == PRUNED

    def prune(self, candidates: Iterable[Candidate], kept: Iterable[int]) -> None:
        """Mark every candidate but ``kept`` pruned."""
        keep = set(kept)
        for candidate in candidates:
            if candidate.index not in keep:
                self.by_index[candidate.index] = Measurement(candidate.index, error=PRUNED)

    def left_out(self) -> tuple[int, ...]:
        """The candidates left out as expected: pruned, or dropped (:attr:`dropped`), in index order."""
        return tuple(sorted(self.dropped | {i for i, m in self.by_index.items() if m.error == PRUNED}))

    def measured(self) -> list[int]:
        """The candidates measured (or failed), in index order, without the pruned ones."""
        return sorted(i for i, m in self.by_index.items() if m.error != PRUNED)

    def put(self, measurement: Measurement) -> None:
        """Keep ``measurement`` as its candidate's."""
        self.by_index[measurement.index] = measurement

    def take(
        self, index: int, samples: Sequence[float], job: Job | None, extend: bool, untrusted: int = 0
    ) -> Measurement | None:
        """Candidate ``index``'s measurement with ``samples`` taken in; ``None`` for one that failed.

        :param job: the job the samples were taken for (``None``: a driver's own measurement).
        :param extend: add to the samples held instead of replacing them; a
            later job of the same interleaved round adds to that round's group.
        :param untrusted: how many of ``samples`` were taken while the thread was not running.
        """
        new = tuple(float(s) for s in samples)
        rounds: tuple[int, ...] = ()
        if extend and (previous := self.by_index.get(index)) is not None:
            if previous.error is not None:
                return None
            rounds = previous.rounds or (len(previous.samples),)
            same_round = job is not None and job.round and self._rounds_of.get(index) == job.round
            rounds = (*rounds[:-1], rounds[-1] + len(new)) if same_round else (*rounds, len(new))
            new = previous.samples + new
            untrusted += previous.untrusted
        if job is not None:
            self._rounds_of[index] = job.round
        return Measurement(index, samples=new, rounds=rounds if len(rounds) > 1 else (), untrusted=untrusted)

    def failure(
        self, index: int, error: BaseException, *, expected: bool = False
    ) -> tuple[Measurement, str | None]:
        """Candidate ``index``'s failed measurement, and the traceback if this is its first failure.

        A :class:`~kerneltune.core.errors.CandidateDropped`, or an ``expected``
        drop, is recorded alone, with no traceback.
        """
        trace = None
        if expected or isinstance(error, CandidateDropped):
            if getattr(error, "counted", True):
                self.dropped.add(index)
        elif index not in self._failed:
            self._failed.add(index)
            self.first_failure = self.first_failure or error
            trace = format_failure(error)
        return Measurement(index, error=describe_error(error)), trace

    def report(
        self, name: str, key: object, candidates: Iterable[Candidate], allowed: Iterable[int] | None
    ) -> str:
        """``NoValidConfigError``'s message: why each (allowed) candidate failed.

        Where none of them was allowed (a plan that measured nothing it could
        choose), every failure met is listed instead, so the message never
        ends with its heading.
        """
        candidates = tuple(candidates)
        among = None if allowed is None else set(allowed)
        rows = [
            (c, self.get(c.index).error or "failed on another rank")
            for c in candidates
            if among is None or c.index in among
        ]
        if not rows:
            rows = [(c, self.get(c.index).error or "failed on another rank") for c in candidates]
        return failure_report(name, key, rows)
