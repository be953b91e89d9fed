"""Short labels for ``triton.Config`` values of function-level configs."""

from __future__ import annotations

import sys
from typing import Any

from kerneltune.core import hookimpl
from kerneltune.plugins.triton import adapter


@hookimpl
def kerneltune_describe_value(value: Any) -> str | None:
    """``BLOCK=1024, num_warps=8`` for a ``triton.Config``: what it sets, not every default."""
    # A Config exists only once Triton is imported; nothing here imports it.
    triton = sys.modules.get("triton")
    config = getattr(triton, "Config", None)
    if config is None or not isinstance(value, config):
        return None
    return adapter.config_label(value)
