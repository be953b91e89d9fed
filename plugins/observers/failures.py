"""One warning for each candidate that fails, once per tuning.

A candidate that raises is timed as infinity and tuning goes on: right for
a config the device cannot run, wrong to do silently for a real bug. Each
candidate's first failure in a tuning (the engine sends its traceback then)
gets one :class:`~kerneltune.core.errors.CandidateFailedWarning`; the
tuning logs keep the traceback. Pruned or dropped candidates get none.
"""

from __future__ import annotations

import warnings

from kerneltune.core import CandidateFailedWarning, CandidateMeasured, hookimpl, user_stacklevel


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
