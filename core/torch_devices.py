"""Where torch keeps a device type's module (``torch.cuda``, ``torch.npu``), imported only when asked for.

The device plugins and the event timers both ask for it; it lives in core
because a plugin never imports another plugin. A package that is installed
but cannot be imported (torch_npu without CANN's libraries on the loader's
path) is not an error of the tuning: the module reads as absent, and the
host's devices and timers take over.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from typing import Any, ClassVar

from kerneltune.core.notices import warn_once

#: The package that gives torch a device type's module on import, where torch alone lacks it.
REGISTERED_BY = {"npu": "torch_npu"}
#: What makes an Ascend toolkit's libraries visible to the loader.
CANN_ENVIRONMENT = "source CANN's set_env.sh (/usr/local/Ascend/ascend-toolkit/set_env.sh by default)"

#: Why a device type's module is missing here, by device type, once asked.
_problems: dict[str, str] = {}


def torch_device_module(device_type: str) -> Any:
    """``torch.<device_type>``, or ``None`` where torch or the package registering it is missing.

    Looked up at each call, never kept, so a process (or a test) that
    replaces the module is heard. A registering package that fails to
    import warns once, naming a missing shared library and how to load it.
    """
    package = REGISTERED_BY.get(device_type, "torch")
    if importlib.util.find_spec(package) is None:
        _problems[device_type] = f"{package} is not installed"
        return None
    import torch

    if package != "torch":
        try:
            importlib.import_module(package)
        except (ImportError, OSError) as exc:
            _problems[device_type] = _import_problem(package, exc)
            warn_once(
                ("device module", device_type),
                f"kerneltune: {_problems[device_type]}; its {device_type} timer and device are not "
                "available, tuning runs with what the host has",
            )
            return None
    _problems.pop(device_type, None)
    return getattr(torch, device_type, None)


class TorchDeviceType:
    """A device or timer plugin's class for the device type ``torch.<device_type>`` serves:
    its availability, and why not, from that module."""

    #: torch's device type (``tensor.device.type``, ``torch.ones(..., device=...)``).
    device_type: ClassVar[str] = ""

    @classmethod
    def device_module(cls) -> Any:
        """:func:`torch_device_module` of its device type."""
        return torch_device_module(cls.device_type)

    @classmethod
    def is_available(cls) -> bool:
        """Whether the device module exists and sees a device (without starting one)."""
        module = cls.device_module()
        return module is not None and bool(module.is_available())

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why it cannot run here: its torch module is missing (and why), or sees no device."""
        module = cls.device_module()
        if module is None:
            return _problems.get(cls.device_type) or f"torch has no {cls.device_type} module"
        if not module.is_available():
            return f"torch.{cls.device_type}.is_available() is false: no device of the kind is visible"
        return None


def _import_problem(package: str, exc: BaseException) -> str:
    library = re.search(r"lib[\w.+-]*\.so[\w.]*", str(exc))
    if library is None:
        return f"{package} is installed but failed to import ({type(exc).__name__}: {exc})"
    hint = f"; {CANN_ENVIRONMENT} first" if package == "torch_npu" else ""
    return f"{package} is installed but cannot load {library.group(0)} ({exc}){hint}"
