"""Short labels for ``triton.Config`` values, and their plain data for the pick's snippet."""

from __future__ import annotations

import sys
from typing import Any

from kerneltune.core import hookimpl
from kerneltune.plugins.triton import configs


def _config_class() -> Any:
    # A Config exists only once Triton is imported; nothing here imports it.
    return getattr(sys.modules.get("triton"), "Config", None)


@hookimpl
def kerneltune_describe_value(value: Any) -> str | None:
    """``BLOCK=1024, num_warps=8`` for a ``triton.Config``: what it sets, not every default."""
    config = _config_class()
    if config is None or not isinstance(value, config):
        return None
    return configs.config_label(value)


@hookimpl
def kerneltune_plain_value(value: Any) -> dict[str, Any] | None:
    """``{"triton.Config": {"kwargs": {...}, "num_warps": 8, ...}}``: kwargs and compile options.

    ``None`` for a config plain data cannot say whole (:func:`configs.config_values`).
    """
    config = _config_class()
    if config is None or not isinstance(value, config):
        return None
    values = configs.config_values(value)
    return None if values is None else {"triton.Config": values}
