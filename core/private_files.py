"""Files and folders only this user can change, checked as ssh checks ``~/.ssh``.

Cache folders may sit in a shared root (``/scratch/autotune``), where another
user could create a folder first, plant a link, or leave a FIFO. Files are
therefore opened without following a final symbolic link and without
blocking, must be regular files, and, like the folders holding them, must
belong to this user and be writable by nobody else; a file is removed under
the same checks, through its folder opened without following a link. A
folder or file that fails is a :class:`NotPrivateError`; the caller decides
whether that is a warning or a miss.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from kerneltune.core.background import in_background

# A record is a few kilobytes; anything near this is not one, and reading it whole
# (a link to /dev/zero) would exhaust memory.
MAX_READ = 16 * 1024 * 1024

_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class NotPrivateError(PermissionError):
    """A path that another user could change: owned by them, or writable by group or others."""


def _check_private(status: os.stat_result, path: Path) -> None:
    """Raise :class:`NotPrivateError` naming ``path`` where another user could change it (``status``)."""
    if status.st_uid != os.geteuid():
        reason = f"owned by uid {status.st_uid}, not by you (uid {os.geteuid()})"
    elif status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        reason = f"writable by group or others (mode {stat.S_IMODE(status.st_mode):#o})"
    else:
        return
    raise NotPrivateError(errno.EACCES, reason, str(path))


def check_root(root: Path) -> None:
    """Accept a folder that holds private folders: an absent one, one nobody else may
    write to, or one with the sticky bit (as ``/tmp``), where nobody can rename another's folder.

    :raises NotPrivateError: for a root others may write to without the sticky bit.
    """
    try:
        status = root.stat()
    except (FileNotFoundError, NotADirectoryError):
        return
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not status.st_mode & stat.S_ISVTX:
        raise NotPrivateError(
            errno.EACCES,
            f"writable by group or others without the sticky bit (mode {stat.S_IMODE(status.st_mode):#o})",
            str(root),
        )


def check_folder(folder: Path) -> bool:
    """Accept an absent folder or a real (not linked) folder of this user's that only they may write to.

    :returns: whether the folder exists.
    :raises NotPrivateError: naming the folder and why not.
    """
    try:
        status = folder.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    if stat.S_ISLNK(status.st_mode):
        raise NotPrivateError(errno.EACCES, "a symbolic link, not a folder", str(folder))
    if not stat.S_ISDIR(status.st_mode):
        raise NotPrivateError(errno.EACCES, "not a folder", str(folder))
    _check_private(status, folder)
    return True


def make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and any missing parents with mode 0700."""
    # mkdir(parents=True) would give the parents default permissions, not 0700.
    if not folder.is_dir():
        make_private_dirs(folder.parent)
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
        except FileExistsError:
            # A file (or a link to one) holds the name: say so, not "File exists".
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(folder)) from None


def _open(path: Path, flags: int, mode: int = 0o600) -> int:
    try:
        descriptor = os.open(path, flags | _OPEN, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a symbolic link, not followed", str(path)) from None
        raise
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        _check_private(status, path)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def read_private(path: Path) -> bytes:
    """The whole content of a private regular file of at most :data:`MAX_READ` bytes.

    :raises FileNotFoundError: when there is no such file.
    :raises NotPrivateError: for a file another user could change.
    :raises OSError: for a symbolic link, a FIFO, a device or another
        non-regular file, a file too large, or a failed read.
    """
    descriptor = _open(path, os.O_RDONLY)
    with os.fdopen(descriptor, "rb") as handle:
        # A read of MAX_READ + 1 bytes would allocate that much for every file: ask for the size
        # the file has and a byte more, and for the rest only where that byte came (it grew).
        size = min(os.fstat(descriptor).st_size, MAX_READ) + 1
        payload = handle.read(size)
        if len(payload) == size:
            payload += handle.read(MAX_READ + 1 - size)
    if len(payload) > MAX_READ:
        raise OSError(errno.EFBIG, f"larger than {MAX_READ} bytes", str(path))
    return payload


def remove_private(root: Path, path: Path) -> None:
    """Remove ``path``, a private regular file in a private folder directly under ``root``.

    Nothing below ``root`` is followed: the folder is opened without
    following a link, and the file is checked and removed through that open
    folder, so a folder swapped for a link in between cannot send the
    removal elsewhere.

    :raises FileNotFoundError: when there is no such file or folder.
    :raises NotPrivateError: for a folder or file another user could change.
    :raises OSError: for a path that is not ``root/<folder>/<file>``, a
        folder that is a link or not a folder, or a file that is not regular.
    """
    folder = path.parent
    if folder.parent != root or folder.name in ("", ".", "..") or path.name in ("", ".", ".."):
        raise OSError(errno.EINVAL, f"not a file in a folder directly under {root}", str(path))
    root_descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        descriptor = os.open(folder.name, os.O_RDONLY | os.O_DIRECTORY | _OPEN, dir_fd=root_descriptor)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(exc.errno, "a symbolic link or not a folder, not followed", str(folder)) from None
        raise
    finally:
        os.close(root_descriptor)
    try:
        _check_private(os.fstat(descriptor), folder)
        status = os.stat(path.name, dir_fd=descriptor, follow_symlinks=False)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        _check_private(status, path)
        os.unlink(path.name, dir_fd=descriptor)
    finally:
        os.close(descriptor)


def open_private_append(path: Path) -> TextIO:
    """Open (creating it with mode 0600) a private regular file to append text to.

    :raises NotPrivateError: for a file another user could change.
    :raises OSError: for a symbolic link or a non-regular file, or when it cannot be opened.
    """
    return os.fdopen(_open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8")


class PrivateAppender:
    """Private files appended to line by line, each kept open between writes, a few at a time.

    Opening a file as :func:`open_private_append` does (the folder made and
    checked, the file opened without following a link and checked) took
    about 35 us on a 2-core host, and a tuning log takes a line per
    candidate. An appender opens each path once; before each later write one
    ``lstat`` checks that the path still names the file it holds (not
    removed, renamed or replaced by a link), and where it does not, the path
    is opened anew with every check. Writes go to the descriptor unbuffered
    (``O_APPEND``), so a crash loses no line written. Safe across threads.

    :param keep: how many files stay open at most; the one written longest ago closes first.
    :param private_folders: make missing folders 0700 and refuse a folder another user could
        change; ``False``: make them as ``mkdir`` does and take them as they are (a folder other
        programs share), the file itself still checked.
    """

    def __init__(self, keep: int = 8, *, private_folders: bool = True) -> None:
        self._keep = keep
        self._private_folders = private_folders
        #: by path: the descriptor, and the (device, inode) it was opened on.
        self._open: OrderedDict[Path, tuple[int, tuple[int, int]]] = OrderedDict()
        self._lock = threading.Lock()

    def write(self, path: Path, text: str) -> None:
        """Append ``text`` to ``path``, making its folders (0700, or see ``private_folders``) and the file
        (0600) where missing.

        :raises NotPrivateError: for a folder or file another user could change.
        :raises OSError: for a symbolic link or a non-regular file, or when it cannot be written.
        """
        data = text.encode("utf-8")
        with self._lock:
            descriptor = self._descriptor(path)
            try:
                while data:
                    data = data[os.write(descriptor, data) :]
            except OSError:
                self._drop(path)
                raise

    def write_later(self, path: Path, text: str, failed: Callable[[OSError], None]) -> None:
        """:meth:`write` on the process's background thread (:mod:`kerneltune.core.background`), after
        what was queued there before; ``failed`` is called there with the error where it fails."""

        def write() -> None:
            try:
                self.write(path, text)
            except OSError as exc:
                failed(exc)

        in_background(write)

    def close(self) -> None:
        """Close every file held; a later write opens its file again."""
        with self._lock:
            for path in list(self._open):
                self._drop(path)

    def _descriptor(self, path: Path) -> int:
        held = self._open.get(path)
        if held is not None:
            try:
                status = os.lstat(path)
                same = (status.st_dev, status.st_ino) == held[1]
            except OSError:
                same = False
            if same:
                self._open.move_to_end(path)
                return held[0]
            self._drop(path)
        if self._private_folders:
            make_private_dirs(path.parent)
            check_folder(path.parent)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = _open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        status = os.fstat(descriptor)
        self._open[path] = (descriptor, (status.st_dev, status.st_ino))
        while len(self._open) > self._keep:
            self._drop(next(iter(self._open)))
        return descriptor

    def _drop(self, path: Path) -> None:
        descriptor, _ = self._open.pop(path)
        with contextlib.suppress(OSError):
            os.close(descriptor)
