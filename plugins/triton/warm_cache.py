"""What a filled Triton cache saves a restarted process: forking to compile, and Triton hashing itself.

:func:`probing` and :func:`peeking` stop a compile at (or before) Triton's
own cache lookup, so that COMPILE loads a cached program instead of forking
to find it; :func:`remember_triton_key` keeps Triton's hash of itself in a
file beside its cache while no file of the installed Triton changed. Both
wrap a Triton function (the compiler's ``get_cache_manager``, and
``triton_key``); outside a probe, and for a Triton whose files changed,
they do exactly what Triton does.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kerneltune.core import CompileMiss, read_private

#: The file, in Triton's cache folder, that keeps Triton's hash of itself.
KEY_FILE = Path("kerneltune") / "triton_key.json"
#: The modules that define ``triton_key``, by release: the runtime's cache (3.5 on) or the compiler.
KEY_MODULES = ("triton.runtime.cache", "triton.compiler.compiler")


class _Probe(threading.local):
    #: this thread's compiles are probes (:func:`probing`).
    active = False
    #: this thread's compiles are peeks (:func:`peeking`).
    peek = False


_probe = _Probe()
_lock = threading.Lock()
_probe_installed = False
_key_installed = False


class _ProbedCacheManager:
    """A cache manager whose lookup of a program that is not there raises :class:`CompileMiss`."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def get_group(self, filename: str) -> Any:
        group = self._real.get_group(filename)
        if not group or group.get(filename) is None:
            raise CompileMiss(f"{filename} is not in Triton's cache")
        return group

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _install_probe() -> bool:
    """Wrap the compiler's ``get_cache_manager`` once; outside a probe the wrapper is the same function."""
    global _probe_installed
    with _lock:
        if _probe_installed:
            return True
        try:
            from triton.compiler import compiler as triton_compiler
        except ImportError:
            return False
        original = getattr(triton_compiler, "get_cache_manager", None)
        if original is None:
            return False

        @functools.wraps(original)
        def get_cache_manager(key: str) -> Any:
            if _probe.peek:
                raise CompileMiss("not loaded in this process")
            manager = original(key)
            return _ProbedCacheManager(manager) if _probe.active else manager

        triton_compiler.get_cache_manager = get_cache_manager
        _probe_installed = True
        return True


@contextlib.contextmanager
def _flagged(flag: str) -> Iterator[None]:
    """Within the block, this thread's ``_probe.<flag>`` is set (the cache manager wrapped first)."""
    if not _install_probe():
        raise CompileMiss("this Triton release cannot be probed")
    outer = getattr(_probe, flag)
    setattr(_probe, flag, True)
    try:
        yield
    finally:
        setattr(_probe, flag, outer)


def probing() -> contextlib.AbstractContextManager[None]:
    """Within the block, this thread's compiles that Triton's on-disk cache cannot serve raise
    :class:`~kerneltune.core.CompileMiss` before compiling; a hit loads as usual.

    Triton's ``compile`` looks a program up by its cache key before it
    compiles anything: the probe wraps that lookup. Where a release has no
    such lookup, every compile under the probe is a miss.
    """
    return _flagged("active")


def peeking() -> contextlib.AbstractContextManager[None]:
    """Within the block, every compile on this thread raises :class:`~kerneltune.core.CompileMiss`
    before it looks anything up: a warm-up launch under it answers only from the programs this
    process has loaded (Triton's JIT finds those without compiling).
    """
    return _flagged("peek")


def fingerprint(root: Path) -> str:
    """A digest of every file under ``root`` by path, inode, size, modification and change time.

    Reading each file's metadata costs milliseconds where hashing its
    content (as ``triton_key`` does) costs a third of a second. Linked
    folders are followed once each, as Triton's own hash follows them;
    ``__pycache__`` is left out. The change time catches a rebuild that
    restores the modification time (``cp -p``), the inode a replaced file.
    """
    rows = []
    seen: set[tuple[int, int]] = set()
    for folder, subfolders, files in os.walk(root, followlinks=True):
        try:
            status = os.stat(folder)
        except OSError:
            subfolders[:] = []
            continue
        if (status.st_dev, status.st_ino) in seen:  # a link back up: walked already
            subfolders[:] = []
            continue
        seen.add((status.st_dev, status.st_ino))
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                status = os.stat(path)
                rows.append(
                    f"{os.path.relpath(path, root)}\0{status.st_ino}\0{status.st_size}"
                    f"\0{status.st_mtime_ns}\0{status.st_ctime_ns}"
                )
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def remembered(compute: Callable[[], str], root: Path, store: Path) -> str:
    """``compute()``'s value, read from ``store`` while nothing under ``root`` changed since it was kept.

    A missing, unreadable or stale ``store`` computes the value and keeps it
    (written whole, readable by this user only); a store that cannot be
    written leaves the value computed.
    """
    current = fingerprint(root)
    # Read as the record files are: no link followed, nothing but a regular file this user alone
    # may change, never blocking (a FIFO in a shared cache folder) and never read past the cap.
    with contextlib.suppress(OSError, ValueError):
        kept = json.loads(read_private(store))
        if isinstance(kept, dict) and kept.get("fingerprint") == current and isinstance(kept.get("key"), str):
            return str(kept["key"])
    value = compute()
    with contextlib.suppress(OSError):
        store.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=store.parent, suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as out:
                json.dump({"fingerprint": current, "key": value}, out)
            os.replace(temporary, store)
        except OSError:
            os.unlink(temporary)
    return value


def _triton_cache_dir() -> Path | None:
    try:
        from triton import knobs

        folder = knobs.cache.dir
    except (ImportError, AttributeError):
        try:
            from triton.runtime.cache import default_cache_dir

            folder = os.environ.get("TRITON_CACHE_DIR") or default_cache_dir()
        except ImportError:
            return None
    return Path(folder) if folder else None


def holds_triton_key() -> bool:
    """Whether Triton's cache folder keeps a record of Triton's hash: a cache this install has used.

    Only a hint of what the cache holds (the record may be stale, the
    programs gone), read without reading the record.
    """
    cache = _triton_cache_dir()
    return cache is not None and (cache / KEY_FILE).is_file()


def remember_triton_key() -> None:
    """Serve Triton's hash of itself from the file kept beside its cache, where nothing of Triton changed.

    Installed once per process, before the process's first compile or
    load: every module that holds Triton's ``triton_key`` gets a function
    that returns the kept value, computing it (with Triton's own function)
    and keeping it where the file is missing or stale.
    """
    global _key_installed
    with _lock:
        if _key_installed:
            return
        _key_installed = True
        import triton

        original = next(
            (
                getattr(sys.modules[name], "triton_key", None)
                for name in KEY_MODULES
                if name in sys.modules and getattr(sys.modules[name], "triton_key", None) is not None
            ),
            None,
        )
        cache = _triton_cache_dir()
        if original is None or cache is None:
            return
        root = Path(triton.__file__).parent
        store = cache / KEY_FILE
        kept: list[str] = []
        computing = threading.Lock()

        def triton_key() -> str:
            # Compiles on several threads ask at once: one computes, the others wait for it.
            if not kept:
                with computing:
                    if not kept:
                        kept.append(remembered(original, root, store))
            return kept[0]

        for name, module in list(sys.modules.items()):
            if (name == "triton" or name.startswith("triton.")) and getattr(
                module, "triton_key", None
            ) is original:
                module.triton_key = triton_key  # type: ignore[attr-defined]
