"""``TRITON_PRINT_AUTOTUNING=1``: Triton's message after each fresh tuning of a host function.

The function-level tuner prints what stock ``triton.autotune`` (3.4 on)
prints after benchmarking a new key, with the pick's label as the config;
Triton kernels print their own release's message themselves
(:func:`kerneltune.plugins.triton.adapter.autotuning_message`). As with
Triton, a pick served from a cache prints nothing, and every rank prints.
A key served without measuring under ``tune = "nearest"`` or ``"pending"``
prints what served it, whichever tuner met it (an intercepted kernel's too).
"""

from __future__ import annotations

import os

from kerneltune.core import PickLoaded, TuningFinished, hookimpl

VARIABLE = "TRITON_PRINT_AUTOTUNING"
# What Triton's own flag variables accept as on.
_ON = ("1", "true", "yes", "on")


def _on() -> bool:
    return os.environ.get(VARIABLE, "").strip().lower() in _ON


@hookimpl
def kerneltune_pick_loaded(event: PickLoaded) -> None:
    if event.tune not in ("nearest", "pending") or event.source not in ("default", "neighbour") or not _on():
        return
    by = (
        f"the pick of the nearest stored key {event.served_by!r}"
        if event.source == "neighbour"
        else "the first config (nothing stored near it)"
    )
    print(
        f"Triton autotuning for function {event.function},\n"
        f"with key as {event.key!r},\n"
        f"served without measuring by {by},\n"
        f"config selected: {event.best.label};",
        flush=True,
    )


@hookimpl
def kerneltune_tuning_finished(event: TuningFinished) -> None:
    if event.driver != "function" or event.best is None:
        return
    if not _on():
        return
    print(
        f"Triton autotuning for function {event.function},\n"
        f"with key as {event.key!r},\n"
        f"finished after {event.seconds:.2f}s,\n"
        f"best config selected: {event.best.label};",
        flush=True,
    )
