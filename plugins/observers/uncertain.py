"""One warning when a tuning's pick is uncertain.

A stored pick is served everywhere, forever: when SELECT cannot tell it
apart from a rival within their noise (:mod:`kerneltune.core.machine.confidence`),
one :class:`~kerneltune.core.errors.UncertainPickWarning` per function and
key names the rivals, how far behind the pick they may be and what happens next.
"""

from __future__ import annotations

import math

from kerneltune.core import (
    TOLERANCE,
    Settings,
    TuningFinished,
    UncertainPickWarning,
    format_ms,
    hookimpl,
    warn_once,
)


def how_far(margin: float) -> str:
    """How much faster than the pick its rivals may be, from the verdict's ``margin``."""
    if not math.isfinite(margin):
        return "by any amount"
    if margin >= -TOLERANCE:
        # Only rivals the re-timing's cap left out, which the first pass puts within the tolerance
        # of the final pick, though not of the first pass's best.
        return f"by up to {max(-margin, 0.0):.1%} by the first pass, which the re-timing's cap left them to"
    return f"by up to {-margin:.1%}"


@hookimpl
def kerneltune_tuning_finished(event: TuningFinished, settings: Settings) -> None:
    if event.best is None or event.confidence != "uncertain":
        return
    best = event.best
    rivals = ", ".join(f"[{i}] {event.candidates[i].label}" for i in event.rivals)
    if event.driver == "contextual" and settings.get("contextual_cache") != "disk":
        then = "contextual picks live in this process, and the next one tunes again"
    else:
        again = "re-checked, it stays uncertain" if event.recheck else "it is stored marked uncertain"
        then = (
            f"{again}; the next process that loads it re-checks it head to head "
            "(KERNELTUNE_TUNE=never serves it as it is)"
        )
    pick = f"[{best.index}] {best.label} at {format_ms(event.times[best.index])}"
    if event.descheduled:
        named = ", ".join(f"[{i}]" for i in event.descheduled)
        why = (
            f"against {rivals}: most samples of {named} were taken while this process was not running "
            "(a busy machine), which tells nothing of the work"
        )
    else:
        why = (
            f"{rivals} may be faster {how_far(event.margin)} (the tolerance is {TOLERANCE:.0%}), and "
            f"the samples spread by {event.noise:.0%} (a busy machine?)"
        )
    warn_once(
        ("uncertain pick", event.function, repr(event.key)),
        f"kerneltune: {event.function}: the pick for key {event.key!r}, {pick}, is uncertain: {why}; {then}",
        UncertainPickWarning,
    )
