"""Facts about this machine beyond its device: the architecture, and the software versions."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path

from kerneltune.core import hookimpl

# torch is read from the module: its local build tag (+cu130, +cpu) is not in
# the distribution metadata and changes which kernels run.
_PACKAGES = ("triton", "triton-ascend", "torch_npu", "kerneltune")


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
    # The device's own facts (its type, name, count) come from the session's device plugin.
    return {"machine": platform.machine()}


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
