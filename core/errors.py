"""Exceptions the engine raises to users and plugins."""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from typing import Any, ClassVar

#: The failure kind (``kerneltune_failure_kind``) of a config the device cannot run: remembered
#: across keys, and dropped quietly, as stock ``triton.autotune`` drops it.
OUT_OF_RESOURCES = "out of resources"


class KernelTuneError(Exception):
    """Base class of every error kerneltune raises on purpose."""


class ConfigError(KernelTuneError, ValueError):
    """A configuration file or variable holds a bad value; the message names where."""


class PluginError(KernelTuneError):
    """A plugin name is unknown, unavailable, or claimed twice."""


class CacheReadError(KernelTuneError):
    """A cache entry exists but cannot be read; the engine treats it as a miss."""


class NoValidConfigError(KernelTuneError, RuntimeError):
    """Every candidate failed; the message lists each failure.

    Its ``__cause__`` is the first exception a candidate raised on this
    rank, so the traceback shows where it came from.
    """


class CandidateDropped(KernelTuneError):
    """A candidate left out on purpose: a pruner removed it, or the device cannot run it.

    Handed to :meth:`~kerneltune.core.Tuning.fail`, it is recorded as the
    candidate's reason like any failure, but it is no failure to report: it
    gets no warning and no traceback in the log, only its count in the
    tuning's one line of drops (docs/guide.md, "Dropped configs").
    """

    #: whether that line counts it (not a wrong output, which has its own warning, nor a twin).
    counted: ClassVar[bool] = True


class CandidateFailedWarning(UserWarning):
    """A candidate raised while it was compiled or run; it counts as infinitely slow and tuning goes on.

    Issued once per candidate and tuning. Filter it like any warning, e.g.
    ``warnings.filterwarnings("ignore", category=CandidateFailedWarning)``.
    """


class WrongOutput(CandidateDropped):
    """A candidate's outputs differ from the reference's; it is dropped as a failed one is, never picked.

    Its text, kept as the candidate's error in the record, names the output
    and the largest absolute and relative errors (docs/guide.md, "Checked outputs").
    """

    counted = False


class WrongOutputWarning(UserWarning):
    """Candidates whose outputs differ from the reference's were dropped; one warning per tuning names them.

    Import it from :mod:`kerneltune.core.errors` (or the drivers' door,
    :mod:`kerneltune.core.driving`) to filter or catch it.
    """


class UncheckedOutputsError(KernelTuneError, RuntimeError):
    """``check_outputs = "strict"``: a tuning's outputs could not be checked (nothing comparable came out)."""


class UncertainPickWarning(UserWarning):
    """A tuning's pick could not be told apart from a rival within the noise; it is stored marked uncertain.

    Issued once per function and key in a process. The next process that
    loads the record re-checks it (docs/guide.md, "Uncertain picks").
    """


class NoStoredPickError(KernelTuneError, RuntimeError):
    """``tune = "fail"``: a key has no stored pick and may not be tuned; every rank raises alike."""


class RankMismatchError(KernelTuneError, RuntimeError):
    """Ranks disagree about what to tune; raised on every rank alike."""


class IsolationError(KernelTuneError, TypeError):
    """With ``isolate = "subprocess"``, the tuned function or an argument cannot reach the worker process."""


class TunerBusyError(KernelTuneError, RuntimeError):
    """A contextual tuner was entered while another one is active (nested or in another thread)."""


class CompileMiss(KernelTuneError):
    """A compile that the backend's on-disk cache cannot serve, raised instead of compiling while probing.

    A :class:`~kerneltune.core.plugin_system.contracts.ProbingCompileProcess`
    raises it from a compile run under its ``probing()``: COMPILE then forks
    a compile process for that candidate, where a hit needed none.
    """


class UserFunctionError(KernelTuneError, RuntimeError):
    """A function the user handed to a tuner (``key_fn``, ``prune_fn``) raised.

    The message names the role and the function (its qualified name); the
    exception it raised is the ``__cause__``, and :attr:`role` and
    :attr:`function` say which one it was.
    """

    def __init__(self, message: str, *, role: str = "", function: object = None) -> None:
        super().__init__(message)
        self.role = role
        self.function = function

    @property
    def who(self) -> str:
        """``role`` and the function's qualified name, as messages name them: ``key_fn my_key``."""
        name = getattr(self.function, "__qualname__", None) or getattr(self.function, "__name__", None)
        return f"{self.role} {name or self.function!r}"


class StalledTuningError(KernelTuneError, RuntimeError):
    """A contextual tuning cannot finish: the outer function stopped launching what it measures.

    Raised when executions of the outer function keep launching kernels that
    wait for a pick but none launches the (kernel, key) being measured,
    typically because a kernel's key holds a value that changes between
    executions (a counter, a pointer); the message names the kernel and keys.
    """


def describe_error(exc: BaseException) -> str:
    """One line naming the exception type and its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def format_failure(exc: BaseException) -> str:
    """``exc`` with its traceback (and the exceptions chained to it), as Python prints them."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def failure_report(function: str, key: object, rows: Iterable[tuple[Any, str]]) -> str:
    """The message of :class:`NoValidConfigError`: each candidate (``index``, ``label``) and why it failed."""
    lines = [f"cannot find valid config for {function} with key {key!r}; every candidate failed:"]
    lines += [f"  [{candidate.index}] {candidate.label}: {reason}" for candidate, reason in rows]
    return "\n".join(lines)
