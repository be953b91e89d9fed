"""What MEASURE runs next: a tuning's queue of jobs, in order.

A :class:`MeasureQueue` holds the jobs a tuning hands out one by one, in the
shapes a queue takes (first pass, head to head, interleaved rounds, a
driver's requests); the :class:`~kerneltune.core.machine.planning.MeasurePlanner`
decides what goes on it.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from kerneltune.core.machine.schedule import Job, Schedule
from kerneltune.core.values.records import Candidate


class MeasureQueue:
    """The jobs still to run, and the most interleaved rounds any of them asked for.

    :ivar rounds: the most interleaved rounds queued so far, alike on every
        rank (SELECT's evidence is sized by it).
    """

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.jobs: list[Job] = []
        self.rounds = 0

    def __len__(self) -> int:
        return len(self.jobs)

    def pop(self) -> Job:
        """The next job, taken off the queue."""
        return self.jobs.pop(0)

    def batched_next(self) -> bool:
        """Whether the next job is batched (:attr:`Job.batched`)."""
        return bool(self.jobs) and self.jobs[0].batched

    def candidates(self, out: Container[int] = ()) -> list[Candidate]:
        """The candidates waiting, each once, in order, but those whose index is in ``out``."""
        return list(dict.fromkeys(job.candidate for job in self.jobs if job.candidate.index not in out))

    def request(
        self,
        listed: Sequence[Candidate],
        *,
        warmup: int | None = None,
        repeat: int | None = None,
        rounds: int = 1,
        purpose: str = "",
        batched: bool = False,
    ) -> None:
        """Queue ``listed`` in order, in ``rounds`` rounds each starting one candidate further on.

        The later rounds add to the first round's samples; see
        :meth:`~kerneltune.core.machine.tuning.Tuning.request`. ``batched``:
        the jobs are launched one after another without waiting for the
        device (:attr:`~kerneltune.core.machine.schedule.Job.batched`).
        """
        warmup = self.schedule.warmup if warmup is None else warmup
        repeat = self.schedule.repeat if repeat is None else repeat
        if rounds > 1:
            self.rounds = max(self.rounds, rounds)
        for round_ in range(rounds):
            shift = round_ % len(listed) if listed else 0
            said = f"{purpose}, round {round_ + 1} of {rounds}" if purpose and rounds > 1 else purpose
            for candidate in [*listed[shift:], *listed[:shift]]:
                self.jobs.append(
                    Job(candidate, warmup, repeat, extend=round_ > 0, purpose=said, batched=batched)
                )

    def first_pass(self, candidates: Sequence[Candidate], *, split: bool) -> None:
        """Queue the first pass: each candidate's runs together, or, with ``split``, in two rounds.

        On the host's clock a burst of other work makes all of a candidate's
        samples slow alike; split in two rounds (the second one candidate
        further on, without warm-up), such a spell shows as spread between
        them, and the rounds pair the candidates for SELECT's verdict. The
        runs are as many as in one pass.
        """
        repeat = self.schedule.repeat
        if not split or repeat < 2 or len(candidates) < 2:
            self.request(candidates)
            return
        first = self.schedule.per_round
        self.rounds = max(self.rounds, 2)
        for candidate in candidates:
            self.jobs.append(Job(candidate, self.schedule.warmup, first, round=1, reports=False))
        for candidate in [*candidates[1:], *candidates[:1]]:
            self.jobs.append(Job(candidate, 0, repeat - first, extend=True, round=2))

    def head_to_head(
        self,
        candidates: Sequence[Candidate],
        *,
        rounds: int = 2,
        purpose: str = "head to head",
        one_by_one: bool = False,
    ) -> None:
        """Queue a plan's few candidates in ``rounds`` interleaved rounds of half the timed runs each.

        They are compared with each other alone (:meth:`interleave`); the
        first round warms up as a first pass does. A re-check, there because
        a machine was noisy, takes the runs one by one.
        """
        if len(candidates) < 2:
            self.request(candidates)
            return
        self.interleave(
            candidates, rounds, purpose=purpose, warmup=self.schedule.warmup, one_by_one=one_by_one
        )

    def interleave(
        self,
        candidates: Sequence[Candidate],
        rounds: int,
        *,
        purpose: str,
        warmup: int | None = None,
        one_by_one: bool = False,
        batched: bool = False,
        per_round: int | None = None,
    ) -> None:
        """Queue ``candidates`` in ``rounds`` interleaved rounds of half a first pass's timed runs each.

        Each round measures every candidate in turn, starting one candidate
        further on than the last, so that drift lands on each alike; a
        candidate warms up at the start of every round (``warmup`` runs in
        the first, the schedule's ``tie_warmup`` in the others and by
        default). ``one_by_one`` takes one timed run of each in turn
        (A B C A B C ...): on a noisy machine load comes and goes within
        milliseconds, but each run then costs a synchronise of its own. A
        candidate's samples of one round stay one group (``Measurement.rounds``)
        for SELECT's verdict; the first round replaces what it measured before.
        ``batched``: launched without waiting (:attr:`Job.batched`), never
        ``one_by_one``. ``per_round``: timed runs per round (default: the schedule's).
        """
        tie_warmup = self.schedule.tie_warmup
        warmup = tie_warmup if warmup is None else warmup
        per_round = self.schedule.per_round if per_round is None else per_round
        takes, each = (per_round, 1) if one_by_one else (1, per_round)
        self.rounds = max(self.rounds, rounds)
        for round_ in range(rounds):
            shift = round_ % len(candidates)
            order = [*candidates[shift:], *candidates[:shift]]
            said = f"{purpose}, round {round_ + 1} of {rounds}"
            first = warmup if round_ == 0 else tie_warmup
            for run in range(takes):
                for candidate in order:
                    self.jobs.append(
                        Job(
                            candidate,
                            0 if run else first,
                            each,
                            extend=round_ > 0 or run > 0,
                            purpose=said,
                            round=round_ + 1,
                            reports=run == takes - 1,
                            batched=batched and not one_by_one,
                        )
                    )
