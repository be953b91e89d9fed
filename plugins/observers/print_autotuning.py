"""``TRITON_PRINT_AUTOTUNING=1``: Triton's message after each fresh tuning of a host function.

The function-level tuner prints what stock ``triton.autotune`` (3.4 on)
prints after benchmarking a new key, with the pick's label as the config;
Triton kernels print their own release's message themselves
(:func:`kerneltune.plugins.triton.adapter.autotuning_message`). As with
Triton, a pick served from a cache prints nothing, and every rank prints.
"""

from __future__ import annotations

import os

from kerneltune.core import TuningFinished, hookimpl

VARIABLE = "TRITON_PRINT_AUTOTUNING"
# What Triton's own flag variables accept as on.
_ON = ("1", "true", "yes", "on")


@hookimpl
def kerneltune_tuning_finished(event: TuningFinished) -> None:
    if event.driver != "function" or event.best is None:
        return
    if os.environ.get(VARIABLE, "").strip().lower() not in _ON:
        return
    print(
        f"Triton autotuning for function {event.function},\n"
        f"with key as {event.key!r},\n"
        f"finished after {event.seconds:.2f}s,\n"
        f"best config selected: {event.best.label};",
        flush=True,
    )
