"""Setting parsers: each turns a TOML value, or a variable's text, into a setting's value.

A parser is called as ``parse(value, where)`` and raises
:class:`~kerneltune.core.errors.ConfigError` naming ``where`` (the file and
key, or the variable) for a value it refuses. Core's settings and the
plugins' declared ones (``SettingSpec.parse``) use the same ones;
``kerneltune.core`` exports the public ones.
"""

from __future__ import annotations

import contextlib
import math
import re
import reprlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kerneltune.core.errors import ConfigError

#: The longest timeout, in whole seconds, that this platform's waits take (about 24.8 days).
#: The isolation worker is waited for through poll(), whose timeout is a C int of
#: milliseconds, and lock waits stop at threading.TIMEOUT_MAX: a longer timeout would make
#: every wait raise OverflowError, failing every candidate.
MAX_TIMEOUT_S = int(min(threading.TIMEOUT_MAX, (2**31 - 1) / 1000))


def plugin_name(value: Any, where: str) -> str:
    """``value`` as a plugin's name (or ``auto``), stripped."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected a plugin name or 'auto', got {_shown(value)}")
    return value.strip()


# ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
_INTEGER = re.compile(r"-?[0-9]+")


def _shown(value: Any) -> str:
    """``value`` for a message: its repr, cut short when long or deeply nested."""
    return reprlib.repr(value)


def integer(minimum: int = 0, maximum: int | None = None, limit: str = "") -> Callable[[Any, str], int]:
    """A parser to an integer of at least ``minimum`` and at most ``maximum``, which ``limit`` explains."""

    def convert(value: Any, where: str) -> int:
        if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
            # More digits than int() converts is not a count either: said below.
            with contextlib.suppress(ValueError):
                value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ConfigError(f"{where}: expected an integer >= {minimum}, got {_shown(value)}")
        if maximum is not None and value > maximum:
            raise ConfigError(
                f"{where}: expected an integer from {minimum} to {maximum} ({limit}), got {_shown(value)}"
            )
        return value

    return convert


def boolean(value: Any, where: str) -> bool:
    """``value`` as a flag: a TOML boolean, or 1/0, true/false, yes/no, on/off."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{where}: expected a boolean (0/1, true/false), got {_shown(value)}")


def one_of(*options: str) -> Callable[[Any, str], str]:
    """A parser to one of ``options``, compared without case."""
    listed = ", ".join(f"'{option}'" for option in options[:-1]) + f" or '{options[-1]}'"

    def parse(value: Any, where: str) -> str:
        text = value.strip().lower() if isinstance(value, str) else value
        if text not in options:
            raise ConfigError(f"{where}: expected {listed}, got {_shown(value)}")
        return text

    return parse


def seconds(value: Any, where: str) -> float:
    """``value`` as a number of seconds >= 0 (0: no limit)."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < math.inf:
        raise ConfigError(f"{where}: expected a number of seconds >= 0 (0: no limit), got {_shown(value)}")
    return float(value)


def directory(value: Any, where: str) -> Path:
    """``value`` as a directory's path, not expanded."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a directory path, got {_shown(value)}")
    return Path(value)


def text(value: Any, where: str) -> str:
    """``value`` as a string, stripped."""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {_shown(value)}")
    return value.strip()


def plugin_names(value: Any, where: str) -> tuple[str, ...]:
    """``value`` as plugin names: a TOML array, or a variable's names separated by commas or spaces."""
    if isinstance(value, str):
        value = [part for part in value.replace(",", " ").split() if part]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of plugin names, got {_shown(value)}")
    return tuple(value)
