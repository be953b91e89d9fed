"""How sure a pick is: whether its lead over every rival is larger than their noise.

The pick is *confident* when every rival it was compared with is behind it
beyond their noise, or within :data:`TOLERANCE`; otherwise *uncertain*,
naming the rivals. Rivals re-timed with it in interleaved rounds are judged
round by round (:func:`paired_lead`); the others by their first-pass lead,
less :data:`SIGMAS` combined standard errors and, on a noisy machine (the
median spread over :data:`NOISY`), :data:`REACH` times that noise, which a
burst of other work during one candidate's samples does not show in its
own spread (:func:`first_pass_lead`). Samples taken while the measuring
thread was not running are not evidence: where more of a candidate's are
such than its trimmed mean leaves out (:func:`descheduled`), the pick is
uncertain against it. docs/measuring.md ("Uncertain picks") says what a
user sees.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

import attrs
from kerneltune.core.machine.timing import standard_error
from kerneltune.core.values.records import TRIM, Measurement, spread, trimmed

CONFIDENT = "confident"
UNCERTAIN = "uncertain"

#: A rival within this fraction of the pick's time is as good as the pick.
TOLERANCE = 0.02
#: How many combined standard errors a first-pass lead must clear.
SIGMAS = 2.0
#: How many times the tuning's noise a rival measured apart may be off by, on a noisy machine...
REACH = 3.0
#: ...one whose noise exceeds this.
NOISY = 0.05


def drift(noise: float) -> float:
    """How far a candidate measured apart may be off, beyond its own samples' standard error.

    :data:`REACH` times the noise where it exceeds :data:`NOISY`, else 0.
    """
    return REACH * noise if noise > NOISY else 0.0


def untrusted_share(measurement: Measurement) -> float:
    """The fraction of a measurement's samples taken while the thread was not running (0 for none)."""
    count = len(measurement.samples)
    return measurement.untrusted / count if measurement.error is None and count else 0.0


def descheduled(share: float) -> bool:
    """Whether a candidate's samples are not evidence: more were taken off the CPU than trimming leaves out.

    Such a sample reads long, and the trimmed mean drops the highest
    :data:`~kerneltune.core.values.records.TRIM` of a candidate's samples.
    """
    return share > TRIM


def error(samples: Sequence[float]) -> float:
    """The standard error of the samples' trimmed mean; 0 with fewer than two.

    Fewer than two trimmed samples show no noise: one timed run per
    candidate is taken at its word.
    """
    value = standard_error(samples)
    return value if math.isfinite(value) else 0.0


def first_pass_lead(best: float, rival: float, errors: tuple[float, float], noise: float) -> float:
    """A lower bound on how far behind ``best`` a rival measured apart is, as a fraction of ``best``.

    :param best, rival: their means.
    :param errors: their standard errors.
    :param noise: the tuning's :func:`noise`.
    :returns: negative where the rival may be faster; ``inf`` for a rival
        with no finite time (it cannot win).
    """
    if not math.isfinite(rival):
        return math.inf
    if not math.isfinite(best) or best <= 0:
        return -math.inf
    return (rival - best - SIGMAS * math.hypot(*errors)) / best - drift(noise)


def round_means(measurement: Measurement, count: int) -> list[float]:
    """The trimmed mean of each of a measurement's first ``count`` interleaved rounds, ``inf`` past its last.

    A measurement taken in one pass has no rounds: every entry is ``inf``.
    """
    means, start = [], 0
    if measurement.error is None:
        for size in measurement.rounds:
            kept = trimmed(list(measurement.samples[start : start + size]))
            start += size
            means.append(sum(kept) / len(kept) if kept else math.inf)
    return (means + [math.inf] * count)[:count]


def paired_lead(best: Sequence[float], rival: Sequence[float]) -> float | None:
    """The rival's lowest lead over the pick in any round both were timed in (their :func:`round_means`).

    A fraction of the pick's time in that round (negative: the rival was
    faster there). ``None`` unless both have finite times in two or more
    of the same rounds.
    """
    pairs = [
        (b, r) for b, r in zip(best, rival, strict=True) if math.isfinite(b) and math.isfinite(r) and b > 0
    ]
    if len(pairs) < 2:
        return None
    return min(r / b - 1 for b, r in pairs)


@attrs.frozen
class Evidence:
    """What SELECT judges a pick by, per candidate, as every rank agrees on it (the slowest rank's).

    :param times: each candidate's time (``inf``: failed or not measured).
    :param errors: each candidate's standard error (:func:`error`).
    :param spreads: each candidate's spread.
    :param rounds: each candidate's :func:`round_means` (all alike long; empty without rounds).
    :param untrusted: each candidate's :func:`untrusted_share` (empty: none).
    """

    times: tuple[float, ...]
    errors: tuple[float, ...]
    spreads: tuple[float, ...]
    rounds: tuple[tuple[float, ...], ...]
    untrusted: tuple[float, ...] = ()

    @classmethod
    def of(cls, measurements: Sequence[Measurement], rounds: int) -> Evidence:
        """This rank's evidence from its measurements, with ``rounds`` round means each."""
        return cls(
            times=tuple(m.mean for m in measurements),
            errors=tuple(error(m.samples) if m.error is None else 0.0 for m in measurements),
            spreads=tuple(spread(m.samples) if m.error is None else 0.0 for m in measurements),
            rounds=tuple(tuple(round_means(m, rounds)) for m in measurements),
            untrusted=tuple(untrusted_share(m) for m in measurements),
        )

    def to_vector(self) -> list[float]:
        """The evidence as one vector (times first), for one reducer collective."""
        count = len(self.times)
        untrusted = self.untrusted or (0.0,) * count
        columns = (*self.times, *self.errors, *self.spreads, *untrusted)
        return [*columns, *(v for row in self.rounds for v in row)]

    @classmethod
    def from_vector(cls, vector: Sequence[float], count: int) -> Evidence:
        """Read :meth:`to_vector`'s layout back for ``count`` candidates."""
        width = (len(vector) - 4 * count) // count if count else 0
        rows = vector[4 * count :]
        return cls(
            times=tuple(vector[:count]),
            errors=tuple(vector[count : 2 * count]),
            spreads=tuple(vector[2 * count : 3 * count]),
            rounds=tuple(tuple(rows[i * width : (i + 1) * width]) for i in range(count)),
            untrusted=tuple(vector[3 * count : 4 * count]),
        )

    def noise(self) -> float:
        """The median spread of the candidates with a finite time."""
        kept = [s for s, t in zip(self.spreads, self.times, strict=True) if math.isfinite(t)]
        return statistics.median(kept) if kept else 0.0

    def lead(self, best: int, rival: int, noise: float) -> float:
        """A lower bound on ``rival``'s lead over ``best``: paired by round where both have rounds."""
        if not math.isfinite(self.times[rival]):
            return math.inf
        paired = paired_lead(self.rounds[best], self.rounds[rival])
        if paired is not None:
            return paired
        errors = (self.errors[best], self.errors[rival])
        return first_pass_lead(self.times[best], self.times[rival], errors, noise)


@attrs.frozen
class Confidence:
    """SELECT's verdict on a pick.

    :param level: :data:`CONFIDENT` or :data:`UNCERTAIN`.
    :param rivals: the candidates the pick could not be told apart from, by index.
    :param margin: the lowest bound on a rival's lead, as a fraction of the
        pick's time (below ``-TOLERANCE`` for an uncertain pick; ``inf``
        without rivals).
    :param noise: the tuning's :func:`noise`.
    :param descheduled: the pick and rivals whose samples are not evidence (:func:`descheduled`):
        why the pick is uncertain, where they are.
    """

    level: str
    rivals: tuple[int, ...] = ()
    margin: float = math.inf
    noise: float = 0.0
    descheduled: tuple[int, ...] = ()


def judge(
    evidence: Evidence, best: int, compared: Iterable[int], noise: float, left_out: Iterable[int] = ()
) -> Confidence:
    """SELECT's verdict on ``best`` over the ``compared`` candidates.

    :param noise: the first pass's noise, for rivals measured apart.
    :param left_out: rivals within reach that were not re-timed (a cap), which stay undecided.

    A rival is undecided too where its samples, or the pick's, are mostly
    not evidence (:func:`descheduled`): such samples read long, so a rival's
    lead is not shown, and a pick's stretched samples tell nothing of it.
    """
    capped = set(left_out)
    # A rival the cap left out is bounded by its first pass: the margin must cover it too.
    leads = {j: evidence.lead(best, j, noise) for j in {*compared, *capped} if j != best}
    off_cpu = tuple(
        i for i, share in enumerate(evidence.untrusted) if descheduled(share) and i in {best, *leads}
    )
    rivals = {j for j, lead in leads.items() if lead < -TOLERANCE} | capped
    rivals |= set(leads) if best in off_cpu else set(off_cpu) - {best}
    margin = min(leads.values(), default=math.inf)
    return Confidence(UNCERTAIN if rivals else CONFIDENT, tuple(sorted(rivals)), margin, noise, off_cpu)
