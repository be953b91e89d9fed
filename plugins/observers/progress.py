"""A progress bar on stderr for tunings that take a while.

The candidates measured out of those kept, the time spent and left, the
compiles while COMPILE runs, and the best candidate so far. It draws only
when stderr is a terminal, on rank 0, with ``progress = true`` (the
default), and once a tuning has run for :data:`DRAW_AFTER_S` seconds.
"""

from __future__ import annotations

import functools
import math
import sys
import threading
from typing import Any

from kerneltune.core import (
    CandidateMeasured,
    CompileFinished,
    Settings,
    TuningFinished,
    TuningStarted,
    hookimpl,
)

#: Seconds a tuning runs before its bar appears.
DRAW_AFTER_S = 1.0

_LABEL_WIDTH = 48


@functools.cache
def _quiet_tqdm() -> type[Any]:
    """tqdm's bar without its monitor thread, which would wake beside the measurements.

    tqdm is imported here, at the first bar: a process that draws none
    (its picks stored, or stderr no terminal) never loads it.
    """
    from tqdm import tqdm

    class QuietTqdm(tqdm):
        monitor_interval = 0

    return QuietTqdm


class _Bar:
    def __init__(self, event: TuningStarted) -> None:
        self.best = math.inf
        self.best_text = ""
        self.compiling = ""
        # Compile events come from COMPILE's pool threads.
        self.lock = threading.Lock()
        self.total = len(event.candidates)
        self.bar = _quiet_tqdm()(
            total=self.total,
            desc=event.function,
            file=sys.stderr,
            delay=DRAW_AFTER_S,
            leave=True,
            bar_format="{desc}: {n_fmt}/{total_fmt} candidates |{bar:16}| [{elapsed}<{remaining}{postfix}]",
        )

    def measured(self, event: CandidateMeasured) -> None:
        mean = event.measurement.mean
        if mean < self.best:
            self.best = mean
            label = event.candidate.label
            if len(label) > _LABEL_WIDTH:
                label = label[: _LABEL_WIDTH - 3] + "..."
            with self.lock:
                self.best_text = f"best {label}: {mean:.4f} ms"
                self._show()
        # An adaptive search may measure a candidate twice; never run past the total.
        if self.bar.n < self.total:
            self.bar.update(1)

    def compiled(self, event: CompileFinished) -> None:
        with self.lock:
            self.compiling = "" if event.done >= event.total else f"compiling {event.done}/{event.total}"
            self._show()
            # While compiling no candidate finishes to draw the bar: a zero step draws it, but, unlike
            # a forced refresh, not before the delay (a bar drawn earlier is never finished by close()).
            self.bar.update(0)

    def _show(self) -> None:
        self.bar.set_postfix_str(", ".join(p for p in (self.compiling, self.best_text) if p), refresh=False)

    def close(self) -> None:
        self.bar.close()


# One bar per tuning under way; nested tunings (a tuned function calling
# another while it is measured) each get their own.
_bars: dict[tuple[str, str], _Bar] = {}


def _slot(function: str, key: object) -> tuple[str, str]:
    return function, repr(key)


def _wanted(event: TuningStarted, settings: Settings) -> bool:
    stream = sys.stderr
    is_terminal = stream is not None and getattr(stream, "isatty", lambda: False)()
    return event.rank == 0 and is_terminal and settings.get("progress")


@hookimpl
def kerneltune_tuning_started(event: TuningStarted, settings: Settings) -> None:
    # A tuning that raised out of its driver never finished: drop its bar.
    stale = _bars.pop(_slot(event.function, event.key), None)
    if stale is not None:
        stale.close()
    if _wanted(event, settings):
        _bars[_slot(event.function, event.key)] = _Bar(event)


@hookimpl
def kerneltune_candidate_measured(event: CandidateMeasured) -> None:
    bar = _bars.get(_slot(event.function, event.key))
    if bar is not None:
        bar.measured(event)


@hookimpl
def kerneltune_compile_finished(event: CompileFinished) -> None:
    bar = _bars.get(_slot(event.function, event.key))
    if bar is not None:
        bar.compiled(event)


@hookimpl
def kerneltune_tuning_finished(event: TuningFinished) -> None:
    bar = _bars.pop(_slot(event.function, event.key), None)
    if bar is not None:
        bar.close()
