"""What a tuning measured of each candidate, in the form a kernel keeps it after its pick."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class CandidateTiming:
    """One candidate's times, as a ``ReportingLaunch`` is told them after a tuning.

    :ivar config: the candidate's config, as the kernel declared it.
    :ivar time: the time the pick was chosen by, in milliseconds, as the
        ranks agreed on it (the slowest rank's); ``inf`` for a candidate
        that failed on any rank.
    :ivar samples: this rank's samples of it in milliseconds, sorted;
        empty where it failed here.
    """

    config: Any
    time: float
    samples: tuple[float, ...] = ()
