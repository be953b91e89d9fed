"""On-disk caches: one file per entry, JSON (readable) or msgpack (compact).

Files live at ``<root>/<folder>/<digest>.<suffix>`` (:func:`folder_name`:
no namespace escapes the root or exceeds a file name's length). Writes are
atomic, private to the user and under a file lock; a folder or file another
user could change is not used. docs/storage.md ("What is read, and what a bad file
does") says the rules; only plain data is stored, nothing read back is executed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import msgpack
from kerneltune.core import (
    AlwaysAvailable,
    CacheReadError,
    NotPrivateError,
    check_folder,
    check_root,
    hookimpl,
    make_private_dirs,
    read_private,
    warn_once,
)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
# A writer killed between mkstemp and rename leaves one of these; a live writer's is
# seconds old, so only ones older than this are removed.
_STALE_SECONDS = 600


def folder_name(namespace: str) -> str:
    """The folder a namespace's files live in, directly under the cache root."""
    if _PLAIN.fullmatch(namespace):
        return namespace
    readable = _UNSAFE.sub("_", namespace).lstrip(".-")[:40] or "_"
    tag = hashlib.sha256(namespace.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{readable}-{tag}"


def _locked(path: Path) -> contextlib.AbstractContextManager[object]:
    """The file lock beside ``path``'s record, with an explicit mode (filelock would take the umask's)."""
    # Imported here, not with the module: every session loads this plugin, and most
    # never store (contextual picks live in the process); filelock is dozens of modules.
    import filelock

    return filelock.FileLock(str(path) + ".lock", mode=0o600)


class FileCache(AlwaysAvailable):
    """The shared file handling; subclasses say how to encode and decode."""

    name: ClassVar[str] = ""
    suffix = ""
    auto_priority = 0

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        #: folders whose stale temporary files this object has looked for (on its first write there).
        self._swept: set[Path] = set()
        #: by namespace, the folders found present and private, not checked again before a read (a
        #: write checks again, and each file read is checked for its owner and mode).
        self._private: dict[str, Path] = {}

    def directory(self, namespace: str) -> Path | None:
        """The namespace's folder (not created until something is written).

        ``None`` when the folder, or a root without the sticky bit, could be
        changed by another user: then nothing is read from it or written to it.
        """
        folder = self._private.get(namespace)
        if folder is not None:
            return folder
        folder = self.root / folder_name(namespace)
        return folder if self._usable(folder, namespace) else None

    def _usable(self, folder: Path, namespace: str | None = None) -> bool:
        try:
            check_root(self.root)
            if check_folder(folder) and namespace is not None:
                self._private[namespace] = folder
        except NotPrivateError as exc:
            warn_once(
                ("cache folder", exc.filename),
                f"kerneltune: not using {exc.filename}: {exc.strerror}; tuning without the disk cache "
                "there (picks serve this process only)",
            )
            return False
        except OSError:
            # Not a question of ownership (say, a root that cannot be searched): the read or
            # write itself reports it.
            pass
        return True

    def _path(self, folder: Path, digest: str) -> Path:
        return folder / f"{_UNSAFE.sub('_', digest)}.{self.suffix}"

    def load(self, namespace: str, digest: str) -> Any:
        """The stored data, ``None`` when absent or not this user's own.

        :raises CacheReadError: for a file that cannot be read or decoded: a
            symbolic link, FIFO or other non-regular file, one over
            :data:`~kerneltune.core.private_files.MAX_READ` bytes, or bad content.
        """
        folder = self.directory(namespace)
        if folder is None:
            return None
        path = self._path(folder, digest)
        try:
            payload = read_private(path)
        except FileNotFoundError:
            return None
        except NotPrivateError as exc:
            warn_once(
                ("cache file", str(path)),
                f"kerneltune: not reading {path}: {exc.strerror}; retuning, and the new pick replaces it",
            )
            return None
        except OSError as exc:
            raise CacheReadError(f"{path}: {exc.strerror or exc}") from exc
        try:
            return self.decode(payload)
        except Exception as exc:
            # Some decoders' errors carry no message (msgpack's FormatError): the type says what it is.
            raise CacheReadError(f"{path}: cannot decode: {str(exc) or type(exc).__name__}") from exc

    def store(self, namespace: str, digest: str, data: Any) -> None:
        """Write atomically under a file lock; nothing when the folder is not this user's own."""
        folder = self.directory(namespace)
        if folder is None:
            return
        make_private_dirs(folder)
        # Another user may have created the folder since directory() looked.
        if not self._usable(folder):
            return
        path = self._path(folder, digest)
        payload = self.encode(data)
        with _locked(path):
            self._replace(folder, path, payload)

    def update(self, namespace: str, digest: str, change: Callable[[Any], Any]) -> bool:
        """Read, change and write one record under its file lock: a record stored meanwhile is not lost.

        :param change: given the stored data, the data to write, or ``None`` to write nothing.
        :returns: whether it wrote; an absent or unreadable record is left as it is.
        """
        return self._change(
            namespace, digest, lambda data: None if data is None else change(data), make=False
        )

    def amend(self, namespace: str, digest: str, change: Callable[[Any], Any]) -> bool:
        """As :meth:`update`, but an absent or unreadable entry is changed too: ``change`` gets ``None``."""
        return self._change(namespace, digest, change, make=True)

    def _change(self, namespace: str, digest: str, change: Callable[[Any], Any], *, make: bool) -> bool:
        folder = self.directory(namespace)
        if folder is None:
            return False
        if make:
            make_private_dirs(folder)
        if not self._usable(folder):
            return False
        path = self._path(folder, digest)
        with _locked(path):
            try:
                current = self.load(namespace, digest)
            except CacheReadError:
                current = None
            changed = change(current)
            if changed is None:
                return False
            self._replace(folder, path, self.encode(changed))
        return True

    def _replace(self, folder: Path, path: Path, payload: bytes) -> None:
        """Write ``payload`` as ``path`` whole (a temporary file renamed); the caller holds the lock."""
        if folder not in self._swept:  # a scan per write grew with the folder: once is enough
            self._remove_stale_temporaries(folder)
            self._swept.add(folder)
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

    def _remove_stale_temporaries(self, folder: Path) -> None:
        pattern = re.compile(rf".+\.{re.escape(self.suffix)}[a-z0-9_]{{8}}\.tmp")
        cutoff = time.time() - _STALE_SECONDS
        for entry in os.scandir(folder):
            try:
                if pattern.fullmatch(entry.name) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
            except FileNotFoundError:
                # Another writer removed or renamed it first.
                continue

    def encode(self, data: Any) -> bytes:
        """Plain data to bytes."""
        raise NotImplementedError

    def decode(self, payload: bytes) -> Any:
        """Bytes to plain data."""
        raise NotImplementedError

    def entries(self, namespace: str | None = None) -> Iterator[tuple[str, str, Path]]:
        """``(folder name, digest, path)`` of every record stored, or of one namespace's.

        A namespace's folder is its name made safe (:func:`folder_name`); the
        records themselves name their function. A folder that lookups would
        not use (a link, or one another user could change) is left out with
        the same warning, so nothing reached through a link is listed.
        """
        if namespace is None:
            try:
                found = sorted(self.root.iterdir())
            except (FileNotFoundError, NotADirectoryError):
                found = []
            # is_dir() follows links: ask about links first, and let _usable refuse them.
            folders = [p for p in found if (p.is_symlink() or p.is_dir()) and self._usable(p)]
        else:
            folder = self.directory(namespace)
            folders = [] if folder is None else [folder]
        ending = f".{self.suffix}"
        for folder in folders:
            # Names, not Paths, sorted: a warm start lists the folder at every new key.
            try:
                with os.scandir(folder) as scan:
                    names = sorted(entry.name for entry in scan if entry.name.endswith(ending))
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue  # as a glob would: nothing listed
            for name in names:
                if len(name) > len(ending):
                    yield folder.name, name[: -len(ending)], folder / name


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=False)


class JsonCache(FileCache):
    """Indented JSON: a person can read a pick and its timings."""

    name = "json"
    suffix = "json"
    auto_priority = 10

    def encode(self, data: Any) -> bytes:
        """A record's fields a line each, and each mapping in a list field (a candidate) a line of its own.

        ``json.dumps(indent=...)`` would take the pure-Python encoder on every
        store; the C encoder, called per line, takes about a third of its time.
        A list of other items (the key index's rankings and row lists) is one
        line: encoded per item, a large index's rows cost more than the rest
        of its store.
        """
        if not isinstance(data, dict) or not all(isinstance(name, str) for name in data):
            return json.dumps(data, sort_keys=True, allow_nan=False).encode()
        lines = []
        for name in sorted(data):
            value = data[name]
            field = json.dumps(name)
            if isinstance(value, list) and value and isinstance(value[0], dict):
                items = ",\n".join(f"    {_compact(item)}" for item in value)
                lines.append(f"  {field}: [\n{items}\n  ]")
            else:
                lines.append(f"  {field}: {_compact(value)}")
        return ("{\n" + ",\n".join(lines) + "\n}\n").encode()

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
