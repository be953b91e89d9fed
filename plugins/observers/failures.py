"""One warning for each candidate that fails unexpectedly; one line per tuning for those dropped as expected.

A candidate that raises is timed as infinity and tuning goes on: right for
a config the device cannot run, wrong to do silently for a real bug. Each
candidate's first failure in a tuning (the engine sends its traceback then)
gets one :class:`~kerneltune.core.errors.CandidateFailedWarning`; the
tuning logs keep the traceback. Candidates left out as expected (pruned,
out of the device's resources, past the ``compile_deadline``) get no
warning: a tuning that left any out says how many in one line, a WARNING
record on the ``kerneltune`` logger where any was dropped for more than
pruning, INFO where pruning alone left them out (docs/guide.md, "Dropped configs").
"""

from __future__ import annotations

import logging
import warnings
from collections import Counter

from kerneltune.core import (
    PRUNED,
    CandidateFailedWarning,
    CandidateMeasured,
    TuningFinished,
    hookimpl,
    user_stacklevel,
    verbose_line,
)

logger = logging.getLogger("kerneltune")


@hookimpl
def kerneltune_candidate_measured(event: CandidateMeasured) -> None:
    if event.traceback is None:
        return
    candidate = event.candidate
    warnings.warn(
        f"kerneltune: {event.function}: candidate [{candidate.index}] {candidate.label} failed for key "
        f"{event.key!r} with {event.measurement.error}; it counts as infinitely slow and tuning goes on",
        CandidateFailedWarning,
        stacklevel=user_stacklevel(),
    )


@hookimpl
def kerneltune_tuning_finished(event: TuningFinished) -> None:
    if not event.dropped:
        return
    reasons = [_reason(event.errors[i] if i < len(event.errors) else None) for i in event.dropped]
    counted = ", ".join(f"{count} {reason}" for reason, count in Counter(reasons).items())
    line = (
        f"{event.function}: {len(event.dropped)} of {len(event.candidates)} configs dropped "
        f"for key {event.key!r} ({counted})"
    )
    if event.verbose:
        verbose_line(line)
    else:
        level = logging.INFO if all(reason == PRUNED for reason in reasons) else logging.WARNING
        logger.log(level, f"kerneltune: {line}; verbose lines name each")


def _reason(error: str | None) -> str:
    """A drop's kind from its recorded text: ``pruned``, or the exception's name (``OutOfResources``)."""
    if error is None or error == PRUNED:
        return PRUNED
    return error.removeprefix("CandidateDropped: ").partition(":")[0]
