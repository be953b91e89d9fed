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

import inspect
import warnings

from kerneltune.core import CandidateMeasured, hookimpl
from kerneltune.core.errors import CandidateFailedWarning

#: Packages between the user's call and this hook; the warning points past them.
_PASSED = ("kerneltune", "triton_dist", "pluggy", "triton")


def _user_level() -> int:
    """The ``stacklevel`` of the first caller outside :data:`_PASSED`: where the user's code called."""
    frame = inspect.currentframe()
    level = 0
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in _PASSED:
        frame = frame.f_back
        level += 1
    return max(level, 1)


@hookimpl
def kerneltune_candidate_measured(event: CandidateMeasured) -> None:
    if event.traceback is None:
        return
    candidate = event.candidate
    warnings.warn(
        f"kerneltune: {event.function}: candidate [{candidate.index}] {candidate.label} failed for key "
        f"{event.key!r} with {event.measurement.error}; it counts as infinitely slow and tuning goes on",
        CandidateFailedWarning,
        stacklevel=_user_level(),
    )
