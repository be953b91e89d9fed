"""A tuned host function for processes that serve one unseen key at the same moment.

Run by tests/test_serving_nearest.py: ``serve`` waits at a barrier with its
siblings, then calls the function once under the ``tune`` setting its
environment holds, and reports which config ran.
"""

from __future__ import annotations

from typing import Any

from triton_dist.tune import autotune

SIZES = (1, 2, 3)


@autotune(config_space=[{"size": size} for size in SIZES], key_fn=lambda m: m)
def work(m: int, size: int) -> int:
    return size


def serve(start: Any, key: int, results: Any) -> None:
    """Call ``work(key)`` once all siblings are ready, and put which config ran on ``results``."""
    start.wait()
    results.put(work(key))
