"""A fork tree: compile processes forked as a tree, each reported through its own pipe."""

from __future__ import annotations

import ctypes
import errno
import faulthandler
import os
import signal
import time
from pathlib import Path

import pytest
from kerneltune.core.compiling import fork_tree

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="a tree needs fork")


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


def _wait_all(compiles: list[fork_tree.TreeCompile], limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    pending = list(compiles)
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

    tree, compiles = fork_tree.fork(9, compile_one)
    _wait_all(compiles)
    for i, process in enumerate(compiles):
        pid, forker = (int(word) for word in (tmp_path / f"{i}").read_text().split())
        assert process.pid == pid
        assert forker not in (parent, pid), "forked by a forker of the tree, not by this process"
        assert os.WIFEXITED(process.status) and os.WEXITSTATUS(process.status) == i % 3
    assert compiles[3].processor_seconds >= 0.15
    assert len({int((tmp_path / f"{i}").read_text().split()[1]) for i in range(9)}) >= 4, "a tree of forkers"
    for process in compiles:
        process.release()
    with pytest.raises(ChildProcessError):
        os.waitpid(tree.root, os.WNOHANG)  # the root forker reaped once the last compile was released
    forkers = {int((tmp_path / f"{i}").read_text().split()[1]) for i in range(9)}
    assert all(_dead(pid) for pid in forkers), "every forker has exited"
    assert _open_fds() == before, "every pipe closed"


def test_a_compile_that_crashes_is_reported_with_its_signal():
    def compile_one(i: int):
        if i == 1:
            faulthandler.disable()  # no traceback dump over the test's output
            ctypes.string_at(0)
        os._exit(0)

    _, compiles = fork_tree.fork(3, compile_one)
    _wait_all(compiles)
    assert os.WIFSIGNALED(compiles[1].status) and os.WTERMSIG(compiles[1].status) == signal.SIGSEGV
    assert all(os.WIFEXITED(compiles[i].status) for i in (0, 2))
    for process in compiles:
        process.release()


def test_a_compile_killed_from_here_ends_killed_and_its_siblings_go_on(tmp_path):
    def compile_one(i: int):
        if i == 0:
            time.sleep(60)
        time.sleep(0.3)
        (tmp_path / f"{i}").touch()
        os._exit(0)

    _, compiles = fork_tree.fork(4, compile_one)
    deadline = time.monotonic() + 10
    while compiles[0].pid is None:
        assert time.monotonic() < deadline
        compiles[0].ended(0.01)
    compiles[0].kill()
    _wait_all(compiles)
    assert os.WIFSIGNALED(compiles[0].status) and os.WTERMSIG(compiles[0].status) == signal.SIGKILL
    assert sorted(path.name for path in tmp_path.iterdir()) == ["1", "2", "3"]
    for process in compiles:
        process.release()


def test_killing_the_tree_stops_every_process_of_it(tmp_path):
    def compile_one(i: int):
        time.sleep(60)
        os._exit(0)

    tree, compiles = fork_tree.fork(6, compile_one)
    deadline = time.monotonic() + 10
    while any(h.pid is None for h in compiles):
        assert time.monotonic() < deadline
        for process in compiles:
            process.ended(0.01)
    pids = [h.pid for h in compiles]
    started = time.monotonic()
    tree.kill()
    _wait_all(compiles)
    assert time.monotonic() - started < 5
    for pid in pids:
        assert pid is not None
        assert _dead(pid), "killed (and reaped by its forker or, its forker killed too, by init)"
    for process in compiles:
        process.release()
    with pytest.raises(ChildProcessError):
        os.waitpid(tree.root, os.WNOHANG)  # the root forker reaped (its compiles went to init, or to the
        # test run, the subreaper of its descendants)


def test_a_pipe_closed_without_an_ending_reads_as_killed():
    read, write = os.pipe()
    os.close(write)
    tree = fork_tree.ForkTree(1)
    tree._reaped = True  # no root forker to reap in this test
    process = fork_tree.TreeCompile(tree, read)
    assert process.ended(1.0)
    assert os.WIFSIGNALED(process.status) and os.WTERMSIG(process.status) == signal.SIGKILL
    process.release()


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
        os.write(write, fork_tree._MESSAGE.pack(b"E", 3 << 8, 0.5))
        tree = fork_tree.ForkTree(1)
        tree._reaped = True  # no root forker to reap in this test
        process = fork_tree.TreeCompile(tree, high)
        assert process.ended(1.0)
        assert os.WIFEXITED(process.status) and os.WEXITSTATUS(process.status) == 3
        assert process.processor_seconds == 0.5
        process.release()
        os.close(write)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_out_of_descriptors_it_raises_and_leaves_none_open(monkeypatch):
    before = _open_fds()
    made = []
    real_pipe = os.pipe

    def few_pipes():
        if len(made) == 3:
            raise OSError(errno.EMFILE, "Too many open files")
        made.append(real_pipe())
        return made[-1]

    monkeypatch.setattr(os, "pipe", few_pipes)
    with pytest.raises(OSError, match="Too many open files"):
        fork_tree.fork(5, lambda i: os._exit(0))
    monkeypatch.undo()
    assert _open_fds() == before, "the three pipes made were closed again"
