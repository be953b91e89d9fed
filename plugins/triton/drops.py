"""Which of a candidate's exceptions mean the device cannot run its config: dropped quietly, as stock does."""

from __future__ import annotations

import sys

from kerneltune.core import hookimpl


@hookimpl
def kerneltune_expected_failure(error: BaseException) -> bool | None:
    """``True`` for Triton's ``OutOfResources`` (shared memory, registers, threads) and the adapter's
    ``CannotRun``; ``None`` for anything else, and while Triton is not imported (nothing of it ran)."""
    if "triton" not in sys.modules:
        return None
    from kerneltune.plugins.triton import compiler

    return isinstance(error, compiler.CannotRun) or compiler.out_of_resources(error) or None
