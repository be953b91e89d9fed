"""On-disk caches: one file per entry, JSON (readable) or msgpack (compact).

Files live at ``<root>/<namespace>/<digest>.<suffix>``. Writes go to a
temporary file in the same directory and are renamed into place under a file
lock, so readers see the old record or the new one, never half of one.
Directories are created private to the user (mode 0700). Only plain data is
stored; nothing read back is ever executed or imported.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import filelock
import msgpack
from kerneltune.core import CacheReadError, hookimpl

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _make_private_dirs(folder: Path) -> None:
    # mkdir(parents=True) would give the parents default permissions, not 0700.
    if not folder.is_dir():
        _make_private_dirs(folder.parent)
        folder.mkdir(mode=0o700, exist_ok=True)


class FileCache:
    """The shared file handling; subclasses say how to encode and decode."""

    name = ""
    suffix = ""
    auto_priority = 0

    @classmethod
    def is_available(cls) -> bool:
        """Always: the encoders are dependencies of kerneltune."""
        return True

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def directory(self, namespace: str) -> Path:
        """The namespace's folder (not created until something is written)."""
        safe = _UNSAFE.sub("_", namespace) or "_"
        return self.root / safe

    def _path(self, namespace: str, digest: str) -> Path:
        return self.directory(namespace) / f"{_UNSAFE.sub('_', digest)}.{self.suffix}"

    def load(self, namespace: str, digest: str) -> Any:
        """The stored data, ``None`` when absent; :class:`CacheReadError` when unreadable."""
        path = self._path(namespace, digest)
        try:
            payload = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CacheReadError(f"{path}: {exc}") from exc
        try:
            return self.decode(payload)
        except Exception as exc:
            raise CacheReadError(f"{path}: cannot decode: {exc}") from exc

    def store(self, namespace: str, digest: str, data: Any) -> None:
        """Write atomically under a file lock."""
        path = self._path(namespace, digest)
        _make_private_dirs(path.parent)
        payload = self.encode(data)
        with filelock.FileLock(str(path) + ".lock"):
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(payload)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise

    def encode(self, data: Any) -> bytes:
        """Plain data to bytes."""
        raise NotImplementedError

    def decode(self, payload: bytes) -> Any:
        """Bytes to plain data."""
        raise NotImplementedError

    def entries(self, namespace: str | None = None) -> Iterator[tuple[str, str, Path]]:
        """``(namespace, digest, path)`` of every record stored, or of one namespace's."""
        folders = [self.directory(namespace)] if namespace is not None else sorted(self.root.glob("*"))
        for folder in folders:
            for path in sorted(folder.glob(f"*.{self.suffix}")):
                yield folder.name, path.stem, path


class JsonCache(FileCache):
    """Indented JSON: a person can read a pick and its timings."""

    name = "json"
    suffix = "json"
    auto_priority = 10

    def encode(self, data: Any) -> bytes:
        return json.dumps(data, indent=2, sort_keys=True, allow_nan=False).encode()

    def decode(self, payload: bytes) -> Any:
        return json.loads(payload)


class MsgpackCache(FileCache):
    """msgpack: smaller and faster to read, not human-readable."""

    name = "msgpack"
    suffix = "msgpack"
    auto_priority = 5

    def encode(self, data: Any) -> bytes:
        return msgpack.packb(data, use_bin_type=True)

    def decode(self, payload: bytes) -> Any:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False)


@hookimpl
def kerneltune_register_caches(register):
    register(JsonCache)
    register(MsgpackCache)
