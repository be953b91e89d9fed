"""The backends' compile processes as COMPILE sees them: several as one, their guesses, what they can do."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator

import attrs
from kerneltune.core.plugin_system.contracts import (
    CompileProcess,
    ProbingCompileProcess,
    WeighingCompileProcess,
    provides,
)


def can_fork() -> bool:
    """Whether this platform can compile in forked processes."""
    return hasattr(os, "fork") and hasattr(os, "waitpid")


@attrs.frozen
class CompileProcesses:
    """Several backends' :class:`~kerneltune.core.plugin_system.contracts.CompileProcess` as one.

    A launcher's kernels may come from several backends.
    """

    parts: tuple[CompileProcess, ...]

    def ready(self) -> None:
        """Every part ready."""
        for part in self.parts:
            part.ready()

    def prepare(self) -> None:
        """Every part's preparation, in order."""
        for part in self.parts:
            part.prepare()

    @contextlib.contextmanager
    def probing(self) -> Iterator[None]:
        """Every part probing; only where every part can (:func:`probes`)."""
        with contextlib.ExitStack() as stack:
            for part in self.parts:
                assert provides(part, ProbingCompileProcess)
                stack.enter_context(part.probing())
            yield

    def effort(self, config: object) -> float:
        """The sum of the parts' guesses (:func:`effort`)."""
        return sum(effort(part, config) for part in self.parts)


def effort(child: CompileProcess, config: object) -> float:
    """``child``'s guess at how long ``config`` takes to compile (``WeighingCompileProcess``).

    0 where it makes none, raises, or answers with anything but a finite
    number: a hint never fails a tuning.
    """
    if not provides(child, WeighingCompileProcess):
        return 0.0
    try:
        guess = float(child.effort(config))
    except Exception:
        return 0.0
    return guess if math.isfinite(guess) else 0.0


def probes(child: CompileProcess) -> bool:
    """Whether ``child`` can tell a cached program from one to compile: every part of it can."""
    if isinstance(child, CompileProcesses):
        return all(provides(part, ProbingCompileProcess) for part in child.parts)
    return provides(child, ProbingCompileProcess)
