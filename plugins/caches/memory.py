"""A cache that keeps picks in this process only: nothing touches the disk."""

from __future__ import annotations

import pickle
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
        held = self._entries.get((namespace, digest))
        return None if held is None else pickle.loads(held)

    def store(self, namespace: str, digest: str, data: Any) -> None:
        """Keep a copy, so later changes by the caller don't leak in: pickled (the stored data is
        plain), which copies in C what ``copy.deepcopy`` walked in Python."""
        self._entries[(namespace, digest)] = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)


@hookimpl
def kerneltune_register_caches(register):
    register(MemoryCache)
