"""Near ties: which candidates MEASURE re-times side by side before SELECT.

Ten samples decide clear winners but not near ties, and conditions change
between candidates measured apart (clocks, caches, other work), which the
samples' spread does not show. So a tuning re-times, in interleaved rounds,
the candidates whose means lie within the noise of the best one's, and
picks among them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kerneltune.core.machine.measure import standard_error
from kerneltune.core.machine.records import Measurement

#: Near ties: a candidate is re-timed with the best one when its mean lies
#: within this many combined standard errors of the best mean...
TIE_SIGMAS = 2.0
#: ...or within this fraction of it, since conditions that change between
#: candidates measured apart (clocks, caches, other work) are not in the spread...
TIE_FLOOR = 0.02
#: ...at most this many candidates, the best included...
TIE_MAX = 4
#: ...each given this many untimed runs at the start of every round.
TIE_WARMUP = 1


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


def agreed_near_ties(measurements: Sequence[Measurement], reducer: Any) -> list[int]:
    """:func:`near_ties` of the candidates' means and spreads as every rank agrees on them.

    With several ranks, one ``max`` over the means and standard errors
    together, so every rank re-times the same candidates.
    """
    local = [m.mean for m in measurements] + [standard_error(m.samples) for m in measurements]
    agreed = list(reducer.max(local)) if reducer.world_size > 1 else local
    return near_ties(agreed[: len(measurements)], agreed[len(measurements) :])
