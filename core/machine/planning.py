"""What a tuning measures, in what order: the plan's candidates queued, then near ties or a fall back.

A :class:`MeasurePlanner` fills a tuning's
:class:`~kerneltune.core.machine.queue.MeasureQueue`, every count of runs
taken from its :class:`~kerneltune.core.machine.schedule.Schedule`.
"""

from __future__ import annotations

from collections.abc import Hashable

from kerneltune.core.machine.following import Following
from kerneltune.core.machine.queue import MeasureQueue
from kerneltune.core.machine.reuse import Plan, explain
from kerneltune.core.machine.samples import Samples
from kerneltune.core.machine.schedule import Job, Schedule, share
from kerneltune.core.machine.ties import NearTies, agreed_finalists
from kerneltune.core.machine.warm_start import screen_finalists
from kerneltune.core.plugin_system.contracts import Reducer
from kerneltune.core.values.records import Candidate, TuningRecord


class MeasurePlanner:
    """A tuning's queue and what it plans onto it.

    At the start, the first pass, a plan's candidates head to head, a
    re-check or a warm start's screen; once those are measured, the rest of
    the kept list where a plan's candidates all failed, else the near ties
    (or a screen's finalists) in interleaved rounds.

    :ivar queue: the jobs still to run.
    :ivar ties: the near ties the first pass left, once it is over.
    """

    def __init__(
        self,
        schedule: Schedule,
        follow: Following,
        measurements: Samples,
        reducer: Reducer,
        *,
        host_clock: bool,
        warm_budget: int,
        precise: bool = False,
    ) -> None:
        """:param measurements: the tuning's samples, which the planner reads once the first pass is over.

        :param host_clock: samples are host time, so the first pass is split in two rounds.
        :param precise: a precise timer takes the near-tie rounds (:func:`~.ties.finalists`).
        :param warm_budget: how many configs a warm start's screen leaves to its finalists at most.
        """
        self.schedule = schedule
        self.queue = MeasureQueue(schedule)
        self.ties = NearTies()
        self._follow = follow
        self._measurements = measurements
        self._reducer = reducer
        self._host_clock = host_clock
        self._warm_budget = warm_budget
        self._precise = precise
        # An adaptive driver plans its own rounds: nothing is planned after the first pass.
        self._planned = schedule.adaptive

    def start(
        self, plan: Plan | None, shared: TuningRecord | None, kept: tuple[int, ...], key: Hashable
    ) -> tuple[Candidate, ...]:
        """Queue what LOOKUP's plan (or, without one, every kept candidate) says to measure first; those.

        :param shared: the stored record every rank goes by, if any.
        """
        schedule, follow, queue = self.schedule, self._follow, self.queue
        measured = follow.follow(plan, shared, kept)
        if plan is not None:
            explain(
                follow.space.name,
                key,
                rechecked=follow.rechecked,
                rounds=schedule.recheck_rounds,
                warm_start=follow.warm_start,
                carried=len(follow.carried),
                scoped=bool(follow.scope),
                measuring=len(measured),
                kept=len(kept),
            )
        # An adaptive driver queues candidates itself, round by round (a re-check too: see rechecking).
        if schedule.shard:
            self._planned = True
            queue.request(share(measured, self._reducer.rank, self._reducer.world_size))
        elif follow.rechecked is not None:
            if not schedule.adaptive:
                rounds = schedule.recheck_rounds
                queue.head_to_head(measured, rounds=rounds, purpose="re-check", one_by_one=True)
        elif follow.scope is not None:
            queue.head_to_head(measured)
        elif follow.screening is not None:
            queue.request(
                measured,
                warmup=schedule.screen_warmup,
                repeat=schedule.screen_repeat,
                purpose="warm-start screen",
                batched=True,
            )
        elif not schedule.adaptive:
            # On the host's clock in two rounds; tie_rounds = 0, which turns re-timing off, keeps it whole.
            split = len(measured) >= 2 and schedule.tie_rounds > 0 and self._host_clock
            queue.first_pass(measured, split=split)
        return measured

    def next_job(self, key: Hashable, candidates: tuple[Candidate, ...]) -> Job | None:
        """The next job; once the queue first runs dry, what the first pass leaves is planned first."""
        if not self.queue and not self._planned:
            self._planned = True
            self._after_first_pass(key, candidates)
        return self.queue.pop() if self.queue else None

    def _after_first_pass(self, key: Hashable, candidates: tuple[Candidate, ...]) -> None:
        """Fall back where a plan's candidates all failed, else plan near ties (or a screen's finalists).

        Both read the first pass as the ranks agree on it, from one ``max``
        (:func:`agreed_finalists`), taken where either needs it.
        """
        schedule, follow = self.schedule, self._follow
        ties = schedule.tie_rounds > 0 and len(self._measurements) >= 2
        check = follow.scope is not None and not follow.fell_back and not schedule.shard
        if not ties and not check and follow.screening is None:
            return
        chosen = agreed_finalists(
            [self._measurements.get(c.index) for c in candidates], self._reducer, precise=self._precise
        )
        rest = follow.fall_back(chosen.times, key) if check else None
        if rest is not None:
            self.queue.request(rest)
        if rest:
            self._planned = False  # planned once the rest is measured
            return
        if follow.screening is not None and len(self._measurements) >= 2:
            # A screened warm start: its fastest and the neighbours' pick, head to head.
            chosen = screen_finalists(chosen, follow.screening, self._warm_budget)
            follow.screened(chosen.indices)
            finalists = self.ties.take(chosen, candidates)
            if len(finalists) > 1:  # warmed up by the screen: a tie round's warm-up is enough
                # On a quiet machine launched as one batch, as the screen was: one wait, few holds.
                noisy = self.ties.noisy
                self.queue.interleave(
                    finalists,
                    2,
                    purpose="warm-start finalists",
                    one_by_one=noisy,
                    batched=not noisy,
                    per_round=schedule.finalist_per_round,
                )
        elif ties and (finalists := self.ties.take(chosen, candidates)):
            noisy = self.ties.noisy
            self.queue.interleave(
                finalists, schedule.tie_rounds, purpose="near-tie re-timing", one_by_one=noisy
            )
