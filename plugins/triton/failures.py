"""Which of Triton's failures no key changes: the device's resources, a program that does not compile.

Answers ``kerneltune_failure_kind``, so that a config failing so is
remembered across keys instead of compiled or launched again for each
(docs/guide.md, "Configs that cannot run"). Imports nothing of Triton: an
error of Triton's comes from a module already imported.
"""

from __future__ import annotations

import sys

from kerneltune.core import hookimpl


def _is(error: BaseException, module: str, *names: str) -> bool:
    found = sys.modules.get(module)
    return found is not None and any(
        isinstance(error, cls) for name in names if isinstance(cls := getattr(found, name, None), type)
    )


@hookimpl
def kerneltune_failure_kind(error: BaseException) -> str | None:
    """``"out of resources"`` for ``OutOfResources`` (and a program the device cannot launch,
    ``CannotRun``), ``"compile error"`` for a ``CompilationError`` or ``PTXASError``; else ``None``."""
    if _is(error, "triton.runtime.errors", "OutOfResources") or _is(
        error, "kerneltune.plugins.triton.compiler", "CannotRun"
    ):
        return "out of resources"
    if _is(error, "triton.compiler.errors", "CompilationError") or _is(
        error, "triton.runtime.errors", "PTXASError"
    ):
        return "compile error"
    return None
