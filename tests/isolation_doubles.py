"""Module-level functions for the isolation tests: the isolation worker imports them by name.

Each run appends ``<pid> <block>`` to the file ``log`` so a test can tell
where every candidate ran, and leaves its cost in :data:`last_cost`, which
the tests' timer reads.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

COSTS = {64: 3.0, 128: 1.0, 256: 2.0}
#: the cost of the latest run in this process, in milliseconds.
last_cost = [0.0]


def work(
    x: int,
    log: str,
    crash: int | None = None,
    hang: int | None = None,
    fail: int | None = None,
    *,
    block: int,
) -> int:
    """``x * block``; the block equal to ``crash`` segfaults, ``hang`` sleeps a minute, ``fail`` raises."""
    with open(log, "a") as handle:
        handle.write(f"{os.getpid()} {block}\n")
    if block == crash:
        ctypes.string_at(0)
    if block == hang:
        time.sleep(60)
    if block == fail:
        raise ValueError(f"block {block} is not supported")
    last_cost[0] = COSTS[block]
    return x * block


def layout(x: Any, y: Any, log: str, *, block: int) -> None:
    """Note how the view ``x`` lies (strides, offset, a storage shared with ``y``) and its sum; add 1."""
    shared = x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    with open(log, "a") as handle:
        handle.write(f"{os.getpid()} {block} {x.stride()} {x.storage_offset()} {shared} {float(x.sum())}\n")
    x.add_(1)
    last_cost[0] = COSTS[block]


def add_one(x: Any, log: str, *, block: int) -> None:
    """Add 1 to the tensor ``x`` in place, noting the sum it found."""
    with open(log, "a") as handle:
        handle.write(f"{os.getpid()} {block} {float(x.sum())}\n")
    x.add_(1)
    last_cost[0] = COSTS[block]


#: Milliseconds a run of :func:`on_toy` sleeps, by block: far enough apart for a wall clock.
TOY_SLEEP_MS = {64: 40.0, 128: 1.0, 256: 5.0}


def on_toy(x: Any, log: str, crash: int | None = None, fault: int | None = None, *, block: int) -> Any:
    """``x * block`` on the example's toy device, noting ``<pid> <block> <toy unit>``.

    The block equal to ``crash`` segfaults; the one equal to ``fault`` breaks
    the toy unit it runs on (``kerneltune_example_device.fault``).
    """
    import kerneltune_example_device as toy

    with open(log, "a") as handle:
        handle.write(f"{os.getpid()} {block} {toy.current_unit()}\n")
    if block == crash:
        ctypes.string_at(0)
    if block == fault:
        toy.fault()
    time.sleep(TOY_SLEEP_MS[block] / 1000)
    return x * block


class FaultyUnitDevice:
    """The host, as a device whose ``set_current`` fails in the isolation worker.

    ``ISOLATION_DOUBLE_FAULT`` says how: ``raise`` or ``hang`` (sleeps a minute).
    In the tuning process it behaves as the host does, but with ``owns``,
    where ``owns`` raises.
    """

    name = "faulty-unit"
    auto_priority = 50
    shares_memory = False

    @classmethod
    def is_available(cls) -> bool:
        return True

    def owns(self, tensor: Any) -> bool:
        if os.environ.get("ISOLATION_DOUBLE_FAULT") == "owns":
            raise RuntimeError("cannot tell")
        return False

    def index_of(self, tensor: Any) -> int:
        return 0

    def in_use(self) -> bool:
        return True

    def current(self) -> int:
        return 0

    def set_current(self, index: int) -> None:
        import multiprocessing

        if multiprocessing.parent_process() is None:
            return
        if os.environ.get("ISOLATION_DOUBLE_FAULT") == "hang":
            time.sleep(60)
        raise RuntimeError(f"unit {index} is gone")

    def synchronize(self) -> None:
        pass

    def check_health(self) -> None:
        pass

    def release(self) -> None:
        pass

    def facts(self) -> dict[str, Any]:
        return {"device": "faulty-unit", "count": 1}
