"""Warnings a process needs to see once, not once per tuning."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Hashable

_issued: set[Hashable] = set()
_issued_lock = threading.Lock()


def warn_once(topic: Hashable, message: str) -> None:
    """Issue ``message`` as a :class:`RuntimeWarning` the first time ``topic`` comes up in this process.

    For conditions that every later tuning would meet again (a refused cache
    folder, an unwritable log): one warning says it, a hundred hide the rest.
    """
    with _issued_lock:
        if topic in _issued:
            return
        _issued.add(topic)
    warnings.warn(message, RuntimeWarning, stacklevel=3)
