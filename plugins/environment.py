"""Facts about this machine: the hardware digest and the software versions."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
from pathlib import Path
from typing import Any

from kerneltune.core import hookimpl

# torch is read from the module: its local build tag (+cu130, +cpu) is not in
# the distribution metadata and changes which kernels run.
_PACKAGES = ("triton", "triton-ascend", "torch_npu", "kerneltune")


def _device_facts() -> dict[str, Any]:
    import torch

    if importlib.util.find_spec("torch_npu") is not None:
        import torch_npu  # noqa: F401  (registers torch.npu)

        npu = getattr(torch, "npu", None)
        if npu is not None and npu.is_available():
            return {"device": "npu", "name": npu.get_device_name(0), "count": npu.device_count()}
    if torch.cuda.is_available():
        return {
            "device": "cuda",
            "name": torch.cuda.get_device_name(0),
            "count": torch.cuda.device_count(),
            "capability": list(torch.cuda.get_device_capability(0)),
        }
    return {
        "device": "cpu",
        "name": platform.processor() or platform.machine(),
        "count": os.cpu_count(),
    }


def _cann_version() -> str | None:
    home = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    if not home:
        return None
    for candidate in ("version.cfg", "compiler/version.info", "version.info"):
        path = Path(home) / candidate
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if "version" in line.lower() and "=" in line:
                    return line.split("=", 1)[1].strip()
    return None


@hookimpl
def kerneltune_hardware_info():
    return {"machine": platform.machine(), **_device_facts()}


@hookimpl
def kerneltune_software_versions():
    import torch

    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for package in _PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    cann = _cann_version()
    if cann:
        versions["cann"] = cann
    return versions
