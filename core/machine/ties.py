"""Near ties: which candidates MEASURE re-times side by side before SELECT.

Conditions change between candidates measured apart (clocks, caches, other
work), which the samples' spread does not show, so the candidates within
the noise of the best, and on a noisy machine every one within reach of it
(:mod:`kerneltune.core.machine.confidence`), are re-timed in interleaved
rounds, and the pick is made among them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
from kerneltune.core.machine.confidence import NOISY, TOLERANCE, Confidence, Evidence, first_pass_lead, judge
from kerneltune.core.machine.timing import standard_error
from kerneltune.core.values.records import Candidate, Measurement, spread

#: Near ties: a candidate is re-timed with the best one when its mean lies
#: within this many combined standard errors of the best mean...
TIE_SIGMAS = 2.0
#: ...or within this fraction of it, since conditions that change between
#: candidates measured apart (clocks, caches, other work) are not in the spread...
TIE_FLOOR = 0.02
#: ...at most this many candidates, the best included.
TIE_MAX = 4
#: With a timer for the re-timing rounds alone (a CUDA graph's), a first pass whose best mean (ms)
#: is under this is launch-bound: its timer read the launch as much as the work, so every candidate
#: within :data:`LAUNCH_BOUND_REACH` times the best is re-timed, however many.
LAUNCH_BOUND_MS = 0.010
LAUNCH_BOUND_REACH = 2.0


def near_ties(means: Sequence[float], errors: Sequence[float]) -> list[int]:
    """The positions whose means lie within the noise of the lowest, lowest first.

    A mean ties with the best when it exceeds it by at most
    :data:`TIE_SIGMAS` combined standard errors (``errors``), or by at most
    :data:`TIE_FLOOR` of the best mean; at most :data:`TIE_MAX` positions,
    the best's included. Non-finite means never tie.
    """
    finite = [i for i, m in enumerate(means) if math.isfinite(m)]
    if not finite:
        return []
    best = min(finite, key=lambda i: (means[i], i))

    def margin(i: int) -> float:
        return max(TIE_SIGMAS * math.hypot(errors[best], errors[i]), TIE_FLOOR * means[best])

    close = sorted((i for i in finite if means[i] - means[best] <= margin(i)), key=lambda i: (means[i], i))
    return close[:TIE_MAX]


@attrs.frozen
class Finalists:
    """What the first pass leaves to the interleaved rounds.

    :param indices: the candidates to re-time, lowest mean first, the best
        included; empty when fewer than two.
    :param left_out: candidates within reach of the best that the cap
        (:data:`TIE_MAX`) kept out of the rounds: the first pass cannot rule them out.
    :param noise: the first pass's noise (the median spread of its measured candidates).
    :param times: every candidate's first-pass mean as the ranks agree on it (``inf``: failed somewhere).
    """

    indices: tuple[int, ...] = ()
    left_out: tuple[int, ...] = ()
    noise: float = 0.0
    times: tuple[float, ...] = ()


def finalists(
    means: Sequence[float], errors: Sequence[float], spreads: Sequence[float], *, precise: bool = False
) -> Finalists:
    """The near ties (:func:`near_ties`) and the rivals within reach of the best, at most :data:`TIE_MAX`.

    A rival is within reach when its first-pass lead over the best, less
    the noise, might be below the tolerance
    (:func:`~kerneltune.core.machine.confidence.first_pass_lead`).

    :param precise: the rounds are timed by a precise timer (a ``PreciseTimer``): a launch-bound
        first pass (:data:`LAUNCH_BOUND_MS`) leaves them every candidate within
        :data:`LAUNCH_BOUND_REACH` times its best.
    """
    finite = [i for i, m in enumerate(means) if math.isfinite(m)]
    if not finite:
        return Finalists(times=tuple(means))
    noise = statistics.median(spreads[i] for i in finite)
    best = min(finite, key=lambda i: (means[i], i))
    if precise and means[best] < LAUNCH_BOUND_MS:
        within = (i for i in finite if means[i] <= LAUNCH_BOUND_REACH * means[best])
        bound = sorted(within, key=lambda i: (means[i], i))
        return Finalists(tuple(bound) if len(bound) > 1 else (), (), noise, tuple(means))

    def error(i: int) -> float:
        return errors[i] if math.isfinite(errors[i]) else 0.0

    reach = {
        i
        for i in finite
        if first_pass_lead(means[best], means[i], (error(best), error(i)), noise) < -TOLERANCE
    }
    ordered = sorted(set(near_ties(means, errors)) | reach | {best}, key=lambda i: (means[i], i))
    chosen = tuple(ordered[:TIE_MAX]) if len(ordered) > 1 else ()
    left_out = tuple(sorted(i for i in ordered[TIE_MAX:] if i in reach))
    return Finalists(chosen, left_out, noise, tuple(means))


def agreed_finalists(
    measurements: Sequence[Measurement], reducer: Any, *, precise: bool = False
) -> Finalists:
    """:func:`finalists` of the candidates' means, spreads and errors as every rank agrees on them.

    With several ranks, one ``max`` over the three together, so every rank
    re-times the same candidates and judges the noise alike.
    """
    count = len(measurements)
    local = [m.mean for m in measurements]
    local += [standard_error(m.samples) for m in measurements]
    local += [spread(m.samples) if m.error is None else math.inf for m in measurements]
    agreed = list(reducer.max(local)) if reducer.world_size > 1 else local
    return finalists(agreed[:count], agreed[count : 2 * count], agreed[2 * count :], precise=precise)


@attrs.define
class NearTies:
    """One tuning's near ties: what its first pass left to re-time, and the noise it showed.

    :ivar finalists: the candidates SELECT chooses among once they are re-timed (``None``: none were).
    :ivar left_out: rivals within reach of the best that the re-timing's cap left out.
    :ivar noise: the first pass's noise, once the first pass is over (``None`` before).
    """

    finalists: tuple[Candidate, ...] | None = None
    left_out: tuple[int, ...] = ()
    noise: float | None = None

    def take(self, chosen: Finalists, candidates: Sequence[Candidate]) -> tuple[Candidate, ...]:
        """Keep what the agreed first pass says; the finalists to re-time (empty: none)."""
        self.noise = chosen.noise
        if not chosen.indices:
            return ()
        self.left_out = chosen.left_out
        self.finalists = tuple(candidates[i] for i in chosen.indices)
        return self.finalists

    @property
    def noisy(self) -> bool:
        """Whether the first pass was noisy enough that re-timing takes its runs one by one."""
        return self.noise is not None and self.noise > NOISY

    def verdict(self, evidence: Evidence, best: int, compared: Iterable[int]) -> Confidence:
        """SELECT's verdict on ``best`` over the other candidates SELECT chose among.

        Finalists are judged round by round, candidates measured apart by
        their first pass (and its noise); rivals within reach that the
        re-timing left out stay undecided. Every rank judges the same
        evidence (the slowest rank's numbers), so every rank reaches the
        same verdict without a collective of its own.
        """
        noise = self.noise if self.noise is not None else evidence.noise()
        return judge(evidence, best, compared, noise, self.left_out)
