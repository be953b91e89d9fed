"""Python's garbage collector held off while a key is tuned, as ``timeit`` holds it off for its loop.

A full collection in a process holding torch and Triton walks millions of
objects for tens of milliseconds, landing in whichever candidate runs. With
``pause_gc`` (on by default) :func:`hold_off` turns automatic collection off
when a tuning begins and :func:`let_go` back on when the last one ends
(``Tuner.begin`` leaves the contextual tuner out); a program that turned
the collector off itself keeps it off.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
#: tunings that hold the collector off now (tunings of several threads or keys can overlap).
_holding = 0
#: whether :func:`hold_off` turned it off, so that :func:`let_go` turns it back on.
_turned_off = False


def hold_off() -> None:
    """A tuning begins: turn automatic collection off, if it is on and no other tuning holds it off."""
    global _holding, _turned_off
    with _lock:
        if _holding == 0 and gc.isenabled():
            gc.disable()
            _turned_off = True
        _holding += 1


def let_go() -> None:
    """A tuning ends: once none holds it off, turn collection back on where :func:`hold_off` turned it off."""
    global _holding, _turned_off
    with _lock:
        if _holding == 0:
            raise RuntimeError("let_go() without a hold_off()")
        _holding -= 1
        if _holding == 0 and _turned_off:
            _turned_off = False
            gc.enable()
