"""A brood: compile processes forked as a tree, each reported through its own pipe."""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import time
from pathlib import Path

import pytest
from kerneltune.core.machine import brood

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="a brood needs fork")


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")} if Path("/proc/self/fd").is_dir() else set()


def _dead(pid: int, limit: float = 5.0) -> bool:
    """Whether ``pid`` is gone, or only a zombie, within ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def _wait_all(hatchlings: list[brood.Hatchling], limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    pending = list(hatchlings)
    while pending:
        assert time.monotonic() < deadline, "a compile process never said it ended"
        pending = [h for h in pending if not h.ended(0.01)]


def test_each_compile_runs_in_its_own_process_forked_below_this_one_and_says_how_it_ended(tmp_path):
    before = _open_fds()
    parent = os.getpid()

    def compile_one(i: int):
        (tmp_path / f"{i}").write_text(f"{os.getpid()} {os.getppid()}")
        if i == 3:
            end = time.process_time() + 0.2
            while time.process_time() < end:  # busy: its processor time is reported
                pass
        os._exit(i % 3)

    _, hatchlings = brood.hatch(9, compile_one)
    _wait_all(hatchlings)
    for i, hatchling in enumerate(hatchlings):
        pid, forker = (int(word) for word in (tmp_path / f"{i}").read_text().split())
        assert hatchling.pid == pid
        assert forker not in (parent, pid), "forked by a forker of the brood, not by this process"
        assert os.WIFEXITED(hatchling.status) and os.WEXITSTATUS(hatchling.status) == i % 3
    assert hatchlings[3].processor_seconds >= 0.15
    assert len({int((tmp_path / f"{i}").read_text().split()[1]) for i in range(9)}) >= 4, "a tree of forkers"
    for hatchling in hatchlings:
        hatchling.release()
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # the root forker reaped: no child left behind
    assert _open_fds() == before, "every pipe closed"


def test_a_compile_that_crashes_is_reported_with_its_signal():
    def compile_one(i: int):
        if i == 1:
            faulthandler.disable()  # no traceback dump over the test's output
            ctypes.string_at(0)
        os._exit(0)

    _, hatchlings = brood.hatch(3, compile_one)
    _wait_all(hatchlings)
    assert os.WIFSIGNALED(hatchlings[1].status) and os.WTERMSIG(hatchlings[1].status) == signal.SIGSEGV
    assert all(os.WIFEXITED(hatchlings[i].status) for i in (0, 2))
    for hatchling in hatchlings:
        hatchling.release()


def test_a_compile_killed_from_here_ends_killed_and_its_siblings_go_on(tmp_path):
    def compile_one(i: int):
        if i == 0:
            time.sleep(60)
        time.sleep(0.3)
        (tmp_path / f"{i}").touch()
        os._exit(0)

    _, hatchlings = brood.hatch(4, compile_one)
    deadline = time.monotonic() + 10
    while hatchlings[0].pid is None:
        assert time.monotonic() < deadline
        hatchlings[0].ended(0.01)
    hatchlings[0].kill()
    _wait_all(hatchlings)
    assert os.WIFSIGNALED(hatchlings[0].status) and os.WTERMSIG(hatchlings[0].status) == signal.SIGKILL
    assert sorted(path.name for path in tmp_path.iterdir()) == ["1", "2", "3"]
    for hatchling in hatchlings:
        hatchling.release()


def test_killing_the_brood_stops_every_process_of_it(tmp_path):
    def compile_one(i: int):
        time.sleep(60)
        os._exit(0)

    made, hatchlings = brood.hatch(6, compile_one)
    deadline = time.monotonic() + 10
    while any(h.pid is None for h in hatchlings):
        assert time.monotonic() < deadline
        for hatchling in hatchlings:
            hatchling.ended(0.01)
    pids = [h.pid for h in hatchlings]
    started = time.monotonic()
    made.kill()
    _wait_all(hatchlings)
    assert time.monotonic() - started < 5
    for pid in pids:
        assert pid is not None
        assert _dead(pid), "killed (and reaped by its forker or, its forker killed too, by init)"
    for hatchling in hatchlings:
        hatchling.release()
    with pytest.raises(ChildProcessError):
        os.waitpid(made.root, os.WNOHANG)  # the root forker reaped (its compiles went to init, or to the
        # test run, the subreaper of its descendants)


def test_a_pipe_closed_without_an_ending_reads_as_killed():
    read, write = os.pipe()
    os.close(write)
    made = brood.Brood(1)
    made._reaped = True  # no root forker to reap in this test
    hatchling = brood.Hatchling(made, read)
    assert hatchling.ended(1.0)
    assert os.WIFSIGNALED(hatchling.status) and os.WTERMSIG(hatchling.status) == signal.SIGKILL
    hatchling.release()


def test_a_pipe_numbered_past_selects_limit_is_still_read():
    # A process with many files open (a training job) hands out descriptors past select's 1024.
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"this host allows {hard} open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    try:
        read, write = os.pipe()
        high = os.dup2(read, 1500)
        os.close(read)
        os.write(write, brood._MESSAGE.pack(b"E", 3 << 8, 0.5))
        made = brood.Brood(1)
        made._reaped = True  # no root forker to reap in this test
        hatchling = brood.Hatchling(made, high)
        assert hatchling.ended(1.0)
        assert os.WIFEXITED(hatchling.status) and os.WEXITSTATUS(hatchling.status) == 3
        assert hatchling.processor_seconds == 0.5
        hatchling.release()
        os.close(write)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
