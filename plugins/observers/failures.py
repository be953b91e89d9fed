"""One warning for each candidate that fails, once per tuning.

A candidate that raises is timed as infinity and tuning goes on, which is
right for a config the device cannot run and wrong to do silently for a
real bug: the pick would quietly be another config, or every candidate
would fail at once with nothing seen before. Each candidate's first failure
in a tuning (the engine marks it by sending its traceback) gets one
:class:`~kerneltune.core.errors.CandidateFailedWarning` naming the function,
the key, the candidate and the exception; the tuning logs keep the
traceback. Candidates dropped on purpose (pruned, or too large for the
device in a search) are not failures and get none.
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
