"""A cache that keeps picks in this process only: nothing touches the disk."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, ClassVar

from kerneltune.core import AlwaysAvailable, hookimpl


class MemoryCache(AlwaysAvailable):
    """A dict per session; gone when the process exits."""

    name: ClassVar[str] = "memory"
    auto_priority = 0

    def __init__(self, root: Path) -> None:
        self._entries: dict[tuple[str, str], Any] = {}

    def directory(self, namespace: str) -> None:
        """No folder: this cache writes no files, and tunings write no log files."""
        return None

    def load(self, namespace: str, digest: str) -> Any:
        """A copy of the stored data, or ``None``."""
        return copy.deepcopy(self._entries.get((namespace, digest)))

    def store(self, namespace: str, digest: str, data: Any) -> None:
        """Keep a copy, so later changes by the caller don't leak in."""
        self._entries[(namespace, digest)] = copy.deepcopy(data)


@hookimpl
def kerneltune_register_caches(register):
    register(MemoryCache)
