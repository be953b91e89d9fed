"""Facts about this machine beyond its device: the architecture, and the software versions."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import platform
import sys
from pathlib import Path

from kerneltune.core import hookimpl

# torch is read from the module: its local build tag (+cu130, +cpu) is not in
# the distribution metadata and changes which kernels run.
_PACKAGES = ("triton", "triton-ascend", "torch_npu", "kerneltune")


def _torch_version() -> str:
    """``torch.__version__``, read without importing torch where the program has not.

    torch's import costs seconds, and a program of host work may never
    need it. torch's ``__init__`` takes ``__version__`` from
    ``torch/version.py``, a file of plain assignments, so the same string
    is read from there; where it cannot be, torch is imported after all.
    """
    imported = sys.modules.get("torch")
    if imported is not None:
        return str(imported.__version__)
    spec = importlib.util.find_spec("torch")
    folders = spec.submodule_search_locations if spec is not None else None
    for folder in folders or ():
        version = _assigned_text(Path(folder) / "version.py", "__version__")
        if version is not None:
            return version
    import torch

    return str(torch.__version__)


def _assigned_text(path: Path, name: str) -> str | None:
    """The string a module's file assigns to ``name`` at its top level, ``None`` where it assigns none."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(target, "id", None) for target in node.targets] == [name]
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


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
    versions = {"python": platform.python_version(), "torch": _torch_version()}
    for package in _PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    cann = _cann_version()
    if cann:
        versions["cann"] = cann
    return versions
