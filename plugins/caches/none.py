"""A cache that keeps nothing: every tuning measures."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from kerneltune.core import AlwaysAvailable, hookimpl


class NoCache(AlwaysAvailable):
    """Keeps nothing: every tuning measures, and its pick lives only where the tuner keeps it.

    The contextual tuner's cache: its picks live in each kernel's own cache,
    so that kernel objects, even of the same source, never share them.
    """

    name: ClassVar[str] = "none"
    auto_priority = -100

    def __init__(self, root: Path) -> None:
        pass

    def directory(self, namespace: str) -> None:
        """No folder, and so no log files."""
        return None

    def load(self, namespace: str, digest: str) -> None:
        """Nothing is ever stored."""
        return None

    def store(self, namespace: str, digest: str, data: Any) -> None:
        """Keep nothing."""


@hookimpl
def kerneltune_register_caches(register):
    register(NoCache)
