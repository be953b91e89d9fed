"""``TRITON_PRINT_AUTOTUNING=1``: Triton's lines after each fresh tuning, for every tuner.

Stock ``triton.autotune`` prints, after benchmarking a new key::

    Triton autotuning for function <name>,
    with key as <key>,
    finished after <seconds>s,
    best config selected: <config>;

Users turn the variable on to see what was picked; under kerneltune they
see the same for the function-level tuner (the host function) and the
contextual tuner (each kernel it tunes, where Triton's own autotuner never
gets to print), with the pick's time added. ``search_params`` kernels print
their own version, which also says how much of the space was measured
(:mod:`kerneltune.plugins.triton.search_params.summary`). As with Triton, a pick served
from a cache prints nothing, and every rank prints.
"""

from __future__ import annotations

import os

from kerneltune.core import TuningFinished, format_ms, hookimpl

VARIABLE = "TRITON_PRINT_AUTOTUNING"
# What Triton's own flag variables accept as on.
_ON = ("1", "true", "yes", "on")
#: How the tuners name themselves in the first line, by driver.
_TUNERS = {"function": "autotune", "contextual": "contextual_autotune"}


@hookimpl
def kerneltune_tuning_finished(event: TuningFinished) -> None:
    tuner = _TUNERS.get(event.driver)
    if tuner is None or event.best is None or os.environ.get(VARIABLE, "").strip().lower() not in _ON:
        return
    print(
        f"Triton autotuning (kerneltune {tuner}) for function {event.function},\n"
        f"with key as {event.key!r},\n"
        f"finished after {event.seconds:.2f}s,\n"
        f"best config selected: {event.best.label} at {format_ms(event.times[event.best.index])};",
        flush=True,
    )
