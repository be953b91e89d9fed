"""``TRITON_PRINT_AUTOTUNING=1``: Triton's message after each fresh tuning of a host function.

Stock ``triton.autotune`` (3.4 on) prints, after benchmarking a new key::

    Triton autotuning for function <name>,
    with key as <key>,
    finished after <seconds>s,
    best config selected: <config>;

The function-level tuner prints the same after each tuning that measured,
with the pick's label as the config. Triton kernels print their own
release's message themselves: the contextual tuner's Triton interceptor and
``search_params`` kernels, where Triton's own autotuner would have printed
it. kerneltune's own detail (the pick's time, the verdict, each
candidate) is in the verbose lines (``verbose=True``,
``KERNELTUNE_VERBOSE=1``), never here. As with Triton, a pick served from a
cache prints nothing, and every rank prints.
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
