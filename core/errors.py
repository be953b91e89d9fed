"""Exceptions the engine raises to users and plugins."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class KernelTuneError(Exception):
    """Base class of every error kerneltune raises on purpose."""


class ConfigError(KernelTuneError, ValueError):
    """A configuration file or variable holds a bad value; the message names where."""


class PluginError(KernelTuneError):
    """A plugin name is unknown, unavailable, or claimed twice."""


class CacheReadError(KernelTuneError):
    """A cache entry exists but cannot be read; the engine treats it as a miss."""


class NoValidConfigError(KernelTuneError, RuntimeError):
    """Every candidate failed; the message lists each failure."""


class RankMismatchError(KernelTuneError, RuntimeError):
    """Ranks disagree about what to tune; raised on every rank alike."""


class IsolationError(KernelTuneError, TypeError):
    """With ``isolate = "subprocess"``, the tuned function or an argument cannot reach the worker process."""


class TunerBusyError(KernelTuneError, RuntimeError):
    """A contextual tuner was entered while another one is active (nested or in another thread)."""


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


def failure_report(function: str, key: object, rows: Iterable[tuple[Any, str]]) -> str:
    """The message of :class:`NoValidConfigError`: each candidate (``index``, ``label``) and why it failed."""
    lines = [f"cannot find valid config for {function} with key {key!r}; every candidate failed:"]
    lines += [f"  [{candidate.index}] {candidate.label}: {reason}" for candidate, reason in rows]
    return "\n".join(lines)
