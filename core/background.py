"""Work a served call hands off: one thread per process runs it in order, and nothing of it is lost.

A key served without measuring (``tune = "nearest"``) leaves a pending mark
in the cache and a line in the tuning log; neither is worth a millisecond of
the call that served it. :func:`in_background` queues such work;
:func:`wait_for_background` waits until all of it has run, as a tuning does
before it measures (no write beside a timed run) and the process does at exit.
"""

from __future__ import annotations

import _thread
import atexit
import logging
import os
import queue
import threading
from collections.abc import Callable

logger = logging.getLogger("kerneltune")

_queue: queue.Queue[Callable[[], object]] = queue.Queue()
#: The process whose thread runs the queue (0: none yet).
_pid = 0
_lock = threading.Lock()


def in_background(work: Callable[[], object]) -> None:
    """Run ``work`` on this process's background thread, after what was queued before it (its result dropped).

    The thread starts at the first call, and again in a forked child. An
    exception ``work`` raises is logged on the ``kerneltune`` logger: work that
    can fail in a way the user must hear of warns by itself.
    """
    global _pid
    with _lock:
        if _pid != os.getpid():
            if not _pid:
                atexit.register(wait_for_background)
            _pid = os.getpid()
            # A daemon thread the caller does not wait to see start (threading's start() does);
            # the wait at exit runs what is queued.
            _thread.start_new_thread(_run, ())
    _queue.put(work)


def wait_for_background() -> None:
    """Return once every piece of work this process queued has run."""
    _queue.join()


def _run() -> None:
    while True:
        work = _queue.get()
        try:
            work()
        except Exception:
            logger.exception("kerneltune: background work failed")
        finally:
            _queue.task_done()
