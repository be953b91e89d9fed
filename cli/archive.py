"""Archives of stored picks: one JSON file that carries records to another machine.

An archive is plain data and nothing else::

    {"format": "kerneltune-archive", "version": 1, "kerneltune": "0.1.0",
     "created_at": "2026-12-01T10:00:00+00:00",
     "records": [{"digest": "<cache entry>", "sha256": "<of the record>", "record": {...}}]}

Each ``record`` is what a cache plugin stores and ``sha256`` the hash of
its canonical JSON. Reading checks every entry before returning any, and
takes only a regular file or a pipe of at most :data:`MAX_BYTES`, nested at
most :data:`MAX_DEPTH` levels deep (docs/cli.md, "kerneltune cache export").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
from kerneltune import __version__
from kerneltune.core import CacheReadError, KernelTuneError
from kerneltune.core.driving import TuningRecord, iso_date

FORMAT = "kerneltune-archive"
VERSION = 1

#: The largest archive read. A record is a few kilobytes, so this holds tens of thousands;
#: parsing takes several times it in memory.
MAX_BYTES = 256 * 1024 * 1024
#: How deep an archive may nest: three levels to a record, a few in it, and its key and
#: hardware facts at most 100 more (what TuningRecord.from_data accepts).
MAX_DEPTH = 128

# Cache entries are named by keys.digest: lowercase hex.
_DIGEST = re.compile(r"[0-9a-f]{8,64}")


class ArchiveError(KernelTuneError):
    """An archive that cannot be read, or whose content is not what kerneltune writes."""


@attrs.frozen
class ArchivedRecord:
    """One entry of an archive: the cache entry's digest, its record, and the record's plain data."""

    digest: str
    record: TuningRecord
    data: dict[str, Any] = attrs.field(repr=False)


def _checksum(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def write_archive(path: Path, entries: Iterable[tuple[str, dict[str, Any]]]) -> int:
    """Write ``(digest, record data)`` pairs to ``path``, atomically; returns how many.

    :raises ValueError: for record data that JSON cannot hold.
    """
    records = [{"digest": digest, "sha256": _checksum(data), "record": data} for digest, data in entries]
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "kerneltune": __version__,
        "created_at": iso_date(time.time()),
        "records": records,
    }
    text = json.dumps(payload, indent=1, sort_keys=True, allow_nan=False)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=path.name, suffix=".tmp")
    except OSError as exc:
        # Named by the path asked for: the temporary file's name means nothing to the user.
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return len(records)


def read_archive(path: Path) -> list[ArchivedRecord]:
    """Every record of the archive at ``path``, each checked.

    :raises ArchiveError: naming the first entry that is malformed, altered
        (its checksum differs) or not a valid record; nothing is returned then.
    """
    try:
        payload = json.loads(_read(path))
    except ValueError as exc:
        raise ArchiveError(f"{path}: not a kerneltune archive (not JSON: {exc})") from exc
    except RecursionError:
        raise ArchiveError(_too_deep(path)) from None
    _check_depth(path, payload)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ArchiveError(f"{path}: not a kerneltune archive")
    if payload.get("version") != VERSION:
        version = payload.get("version")
        raise ArchiveError(f"{path}: archive version {version!r}; this kerneltune reads version {VERSION}")
    entries = payload.get("records")
    if not isinstance(entries, list):
        raise ArchiveError(f"{path}: 'records' is not a list")
    return [_checked(path, number, entry) for number, entry in enumerate(entries, start=1)]


def _read(path: Path) -> bytes:
    """The archive's bytes: a regular file, a pipe (``<(...)``, a FIFO) or, for ``-``, standard input."""
    if str(path) == "-":
        try:
            payload = sys.stdin.buffer.read(MAX_BYTES + 1)
        except OSError as exc:
            raise ArchiveError(f"standard input: cannot read: {exc.strerror or exc}") from exc
        return _within_limit(path, payload)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (without one, it reads as empty).
        handle = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb")
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        try:
            mode = os.fstat(handle.fileno()).st_mode
            if stat.S_ISFIFO(mode):
                # A pipe's writer may not have written yet: wait for it, as a shell reader would.
                os.set_blocking(handle.fileno(), True)
            elif not stat.S_ISREG(mode):
                raise ArchiveError(f"{path}: not a regular file or a pipe")
            payload = handle.read(MAX_BYTES + 1)
        except OSError as exc:
            raise ArchiveError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return _within_limit(path, payload)


def _within_limit(path: Path, payload: bytes) -> bytes:
    if len(payload) > MAX_BYTES:
        raise ArchiveError(f"{path}: larger than {MAX_BYTES} bytes, more than an archive may hold")
    return payload


def _too_deep(path: Path) -> str:
    return f"{path}: not a kerneltune archive (nested more than {MAX_DEPTH} levels deep)"


def _check_depth(path: Path, payload: Any) -> None:
    # Without recursion: what would check the nesting must not be what it overflows.
    pending = [(payload, 0)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise ArchiveError(_too_deep(path))
        if isinstance(value, list):
            pending.extend((item, depth + 1) for item in value)
        elif isinstance(value, dict):
            pending.extend((item, depth + 1) for item in value.values())


def _checked(path: Path, number: int, entry: Any) -> ArchivedRecord:
    where = f"{path}: record {number}"
    if not isinstance(entry, dict) or set(entry) != {"digest", "sha256", "record"}:
        raise ArchiveError(f"{where}: expected the fields digest, sha256 and record")
    digest, data = entry["digest"], entry["record"]
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ArchiveError(f"{where}: digest {digest!r} is not a cache entry name")
    try:
        altered = _checksum(data) != entry["sha256"]
    except (TypeError, ValueError) as exc:
        raise ArchiveError(f"{where}: not plain data: {exc}") from exc
    if altered:
        raise ArchiveError(f"{where}: checksum mismatch: the record was altered or damaged")
    try:
        record = TuningRecord.from_data(data)
    except CacheReadError as exc:
        raise ArchiveError(f"{where}: not a valid record: {exc}") from exc
    return ArchivedRecord(digest=digest, record=record, data=data)
