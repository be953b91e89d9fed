"""What a fresh search leaves its user: ``kernel.last_search``, its verbose account and Triton's message."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from kerneltune.core import CandidateTiming, format_ms
from kerneltune.core.driving import Candidate, SearchTuning
from kerneltune.plugins.triton import adapter

_TRUE = ("1", "true", "yes", "on")


@attrs.frozen
class SearchSummary:
    """What the last fresh tuning of a kernel did (``SearchParamsKernel.last_search``)."""

    key: Any
    #: candidates in the space (every shape times every profile).
    space: int
    #: candidates launched and timed at least once.
    measured: int
    #: candidates dropped before launching (pruned, or too large for the device).
    dropped: int
    seconds: float
    #: the pick's label.
    pick: str
    #: the search strategy's name; ``"given"`` for hand-written configs, which the ``exhaustive``
    #: strategy measures as they are.
    strategy: str
    #: each measured candidate's time by label, ms: the search's last value for it (stage 3's where it
    #: was re-timed); ``inf`` for one that failed to compile or launch, timed out, or was dropped.
    times: dict[str, float] = attrs.field(factory=dict)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def describe(summary: SearchSummary, best: Candidate, outcomes: Mapping[int, float]) -> str:
    """kerneltune's own account of a search, for the verbose lines: what was measured, and the pick."""
    _, fixed = summary.key
    fixed_text = f"; fixed at launch: {', '.join(f'{k}={v}' for k, v in fixed)}" if fixed else ""
    return (
        f"searched in {summary.seconds:.2f}s ({summary.strategy}): {summary.measured} of {summary.space} "
        f"candidates measured, {summary.dropped} dropped; picked {best.label} at "
        f"{format_ms(outcomes[best.index])}{fixed_text}"
    )


def print_autotuning(
    kernel: str,
    summary: SearchSummary,
    best: Candidate,
    candidates: Sequence[Candidate],
    outcomes: Mapping[int, float],
    failures: Mapping[int, str],
) -> None:
    """``TRITON_PRINT_AUTOTUNING``: the running Triton's own message; ``..._TIMINGS``: each candidate too.

    The message is the installed release's (:func:`~kerneltune.plugins.triton.adapter.autotuning_message`),
    with Triton's key and the pick's config as Triton shows it.

    :param outcomes: each measured candidate's latest agreed time, by index (``inf``: failed or dropped).
    :param failures: why a candidate failed or was dropped, by index.
    """
    if not adapter.prints_autotuning():
        return
    triton_key, _ = summary.key
    layout = adapter.release_layout()
    print(adapter.autotuning_message(layout, kernel, triton_key, summary.seconds, best.config), flush=True)
    if _env_flag("TRITON_PRINT_AUTOTUNING_TIMINGS"):
        for index, value in sorted(outcomes.items(), key=lambda item: (item[1], item[0])):
            outcome = failures.get(index) if not math.isfinite(value) else None
            print(f"  {candidates[index].label}: {outcome or format_ms(value)}", flush=True)


def configs_timings(tuning: SearchTuning, outcomes: Mapping[int, float]) -> dict[Any, list[float]]:
    """The search's ``configs_timings`` in Triton's form, for Triton's autotune listener.

    Each candidate measured or dropped, by its config: its latest agreed
    time, then the 20th and 80th percentiles of this rank's samples (``inf``
    three times for one that failed or was dropped).
    """
    candidates = tuning.candidates
    return adapter.triton_timings(
        [
            CandidateTiming(candidates[i].config, time, tuple(sorted(tuning.samples(candidates[i]))))
            for i, time in sorted(outcomes.items())
        ]
    )
