"""A bench's scratch folders: fresh caches and results, removed when the process that made them exits."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path


def scratch(prefix: str) -> Path:
    """A new empty folder under the system's temporary one, removed with what was written in it
    when this process exits (not when a process forked from it does)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(_remove, path, os.getpid())
    return path


def _remove(path: Path, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)
