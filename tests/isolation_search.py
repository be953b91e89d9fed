"""Module-level search_params kernels for the isolation tests, over tests/isolation_kernels.py's kernel.

Import it after ``triton_dist.autotune_hooks``. It does not enable
search_params itself: the isolation worker can import it only because it
enables search_params first, as this process had it (``Target.prepare``).

``searched`` measures the hand-written configs as they are, each noting its
launches; ``generated`` searches ``BLOCK`` over 16 and 32, noting every
launch through its kernel pre-hook. ``searched_rank0`` and ``searched_rank1``
are ``searched`` again, one kernel object per thread-rank (a tuning holds
its kernel's per-key lock while it waits for the other ranks).
"""

from __future__ import annotations

from typing import Any

import triton
from isolation_kernels import guarded_double, note, noted_configs


def search_over(values: list[int], **autotune: Any) -> Any:
    hints = {"search_params": {"params": ["BLOCK"], "values": values}}
    return triton.autotune(key=["n"], hints=hints, **autotune)(guarded_double)


searched = search_over([16], configs=noted_configs())
searched_rank0 = search_over([16], configs=noted_configs())
searched_rank1 = search_over([16], configs=noted_configs())
generated = search_over([16, 32], configs=[], pre_hook=note)
