"""Warnings a process needs to see once, not once per tuning, and where a warning should point."""

from __future__ import annotations

import inspect
import threading
import warnings
from collections.abc import Hashable

_issued: set[Hashable] = set()
_issued_lock = threading.Lock()

#: Packages between the user's call and a warning kerneltune issues; :func:`user_stacklevel` points past them.
PASSED = ("kerneltune", "triton_dist", "pluggy", "triton")


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued here point at the user's own code.

    Counted from the caller of this function: the first frame outside
    :data:`PASSED` (kerneltune, its facade, pluggy, Triton), so a warning
    raised deep in a tuning names the line that called the tuned function.
    """
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in PASSED:
        frame = frame.f_back
        level += 1
    return level


def warn_once(topic: Hashable, message: str, category: type[Warning] = RuntimeWarning) -> None:
    """Issue ``message`` as a ``category`` warning the first time ``topic`` comes up in this process.

    For conditions that every later tuning would meet again (a refused cache
    folder, an unwritable log): one warning says it, a hundred hide the rest.
    The warning points at the user's code (:func:`user_stacklevel`).
    """
    with _issued_lock:
        if topic in _issued:
            return
        _issued.add(topic)
    warnings.warn(message, category, stacklevel=user_stacklevel())
