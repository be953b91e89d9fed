"""Where torch keeps a device type's module (``torch.cuda``, ``torch.npu``), imported only when asked for.

The device plugins and the event timers both ask for it; it lives here, in
the core, because a plugin never imports another plugin. Nothing is
imported until it is asked for, and only what is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

#: The package that gives torch a device type's module on import, where torch alone lacks it.
REGISTERED_BY = {"npu": "torch_npu"}


def torch_device_module(device_type: str) -> Any:
    """``torch.<device_type>``, or ``None`` where torch or the package registering it is missing.

    Looked up at each call, never kept, so a process (or a test) that
    replaces the module is heard.
    """
    package = REGISTERED_BY.get(device_type, "torch")
    if importlib.util.find_spec(package) is None:
        return None
    import torch

    if package != "torch":
        importlib.import_module(package)
    return getattr(torch, device_type, None)
