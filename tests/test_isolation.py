"""ISOLATE: candidates that crash or hang run first in a worker process, and only there.

The worker is one process per device for the whole test process, as for a
user's: these tests share it, and a test that kills it also checks that the
next screening starts another.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import isolation_doubles
import pytest
import rank_doubles
import torch
from kerneltune.core import (
    CandidateFailedWarning,
    ConfigError,
    IsolationError,
    NoValidConfigError,
    PluginError,
    load_settings,
)
from kerneltune.core.driving import Space, Tuner
from kerneltune.core.isolation import parent as isolation
from kerneltune.core.isolation.parent import ScreenedOut
from rank_doubles import ThreadGroup, plugin, run_ranks
from tuning_doubles import install_session, plugin_module, scripted_timer_plugin, stored_records

from triton_dist.tune import autotune

BLOCKS = [{"block": 64}, {"block": 128}, {"block": 256}]
HERE = os.getpid()
# Their tuned functions return which config ran (its block, its run count), on purpose: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")


def cost(fn) -> float:
    fn()
    return isolation_doubles.last_cost[0]


@pytest.fixture
def isolate(monkeypatch):
    """Isolation on, one timed run per candidate, timed by the cost the candidate names."""
    return install_session(
        monkeypatch,
        extra=(scripted_timer_plugin(cost), plugin),
        timer="scripted",
        warmup=0,
        repeat=1,
        isolate="subprocess",
        isolate_timeout=1,
    )


def tuned(fn=isolation_doubles.work, key_fn=lambda x, *args, **kwargs: x):
    return autotune(config_space=BLOCKS, key_fn=key_fn)(fn)


def runs(log: Path) -> list[tuple[int, int]]:
    """Each run as (pid, block), in order."""
    lines = (line.split() for line in log.read_text().splitlines())
    return [(int(pid), int(block)) for pid, block, *_ in lines]


def errors(cache: Path) -> list[str | None]:
    (record,) = stored_records(cache, "work")
    return [candidate["error"] for candidate in record["candidates"]]


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_candidate_that_segfaults_is_failed_and_never_runs_here(isolate, isolated, tmp_path):
    log = tmp_path / "runs"
    assert tuned()(2, str(log), crash=128) == 2 * 256
    assert errors(isolated) == [None, "ScreenedOut: crashed the isolation worker (signal 11)", None]
    here = [block for pid, block in runs(log) if pid == HERE]
    assert here == [64, 256, 256], "measured, then the pick; never the crashing candidate"
    worker = [(pid, block) for pid, block in runs(log) if pid != HERE]
    assert [block for _, block in worker] == [64, 128, 256]
    assert worker[0][0] == worker[1][0] != worker[2][0], "the crashed worker is replaced"


def test_without_isolation_the_same_candidate_kills_the_process(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import isolation_doubles
        from kerneltune.core.drivers.function_tuner import autotune
        work = autotune(config_space={BLOCKS!r}, key_fn=lambda x, *a, **k: x)(isolation_doubles.work)
        work(2, {str(tmp_path / "runs")!r}, crash=128)
        print("survived")
        """
    )
    env = {
        **os.environ,
        "TRITON_DIST_AUTOTUNE_CACHE_DIR": str(tmp_path / "cache"),
        "KERNELTUNE_ISOLATE": "none",
    }
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == -11, done.stdout + done.stderr
    assert "survived" not in done.stdout


def test_the_worker_serves_every_candidate_and_later_tunings(isolate, isolated, tmp_path):
    log = tmp_path / "runs"
    work = tuned()
    assert work(2, str(log)) == 2 * 128
    assert work(3, str(log)) == 3 * 128
    worker = [(pid, block) for pid, block in runs(log) if pid != HERE]
    assert [block for _, block in worker] == [64, 128, 256] * 2
    assert len({pid for pid, _ in worker}) == 1, "one worker for both tunings"


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_candidate_that_hangs_is_failed_as_hung(isolate, isolated, tmp_path):
    log = tmp_path / "runs"
    assert tuned()(2, str(log), hang=128) == 2 * 256
    assert errors(isolated)[1] == "ScreenedOut: hung for more than 1 s in the isolation worker"
    assert 128 not in [block for pid, block in runs(log) if pid == HERE]


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_candidate_that_raises_in_the_worker_fails_as_usual_here(isolate, isolated, tmp_path):
    log = tmp_path / "runs"
    assert tuned()(2, str(log), fail=128) == 2 * 256
    assert errors(isolated)[1] == "ValueError: block 128 is not supported"
    assert (HERE, 128) in runs(log), "not screened out: it failed where it is measured"


def test_tensors_reach_the_worker_as_fresh_copies(isolate, tmp_path):
    log = tmp_path / "runs"
    x = torch.zeros(4)
    tuned(isolation_doubles.add_one, key_fn=lambda x, log: tuple(x.shape))(x, str(log))
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [float(line[2]) for line in lines if int(line[0]) != HERE] == [0.0, 0.0, 0.0]
    # Three measured runs and the pick's: the worker's runs never reached the caller's tensor.
    assert x.tolist() == [4.0] * 4 and not x.is_shared()


def test_views_reach_the_worker_as_they_lie(isolate, tmp_path):
    # A kernel handed a view and its strides as numbers must read the copy as it would the original.
    log = tmp_path / "runs"
    buffer = torch.arange(64.0).reshape(8, 8)
    x, y = buffer[:, 2:6], buffer[:, :2]
    before = x.clone()
    tuned(isolation_doubles.layout, key_fn=lambda x, y, log: tuple(x.shape))(x, y, str(log))
    lines = [line.split(maxsplit=2) for line in log.read_text().splitlines()]
    worker = [rest for pid, _, rest in lines if int(pid) != HERE]
    assert worker == [f"(8, 1) 2 True {float(before.sum())}"] * 3, "each candidate on a copy of its own"
    assert torch.equal(x, before + 4), "three measured runs and the pick's; none of the worker's"


def test_a_function_defined_in_a_function_is_a_clear_error(isolate, tmp_path):
    @autotune(config_space=BLOCKS, key_fn=lambda x: x)
    def local(x, block):
        return x

    with pytest.raises(
        IsolationError,
        match=r"test_isolation\..*<locals>\.local is defined inside another "
        r"function; define it at module level, or turn isolation off \(isolate = 'none'",
    ):
        local(1)


def test_an_argument_that_cannot_be_pickled_is_a_clear_error(isolate, tmp_path):
    with pytest.raises(IsolationError, match=r"keyword argument 'log' \(function\) can be neither shared"):
        tuned()(1, log=lambda: None)


def test_the_settings_and_their_variables():
    assert (load_settings(environ={}).get("isolate"), load_settings(environ={}).get("isolate_timeout")) == (
        "none",
        60,
    )
    settings = load_settings(environ={"KERNELTUNE_ISOLATE": "Subprocess", "KERNELTUNE_ISOLATE_TIMEOUT": "5"})
    assert (settings.get("isolate"), settings.get("isolate_timeout")) == ("subprocess", 5)
    with pytest.raises(ConfigError, match="expected 'none' or 'subprocess', got 'fork'"):
        load_settings(environ={"KERNELTUNE_ISOLATE": "fork"})


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_crash_on_one_rank_fails_the_candidate_on_every_rank(isolate, isolated, tmp_path, monkeypatch):
    # Screening is serial through the one CPU worker and a crash restarts it: more than the double's default.
    monkeypatch.setattr(rank_doubles, "HANG_SECONDS", 30.0)
    group = ThreadGroup(2)
    log = tmp_path / "runs"

    def rank(r: int) -> int:
        return tuned()(2, str(log), crash=128 if r == 1 else None, autotune_pg=group.member(r))

    assert run_ranks(2, rank) == [2 * 256, 2 * 256]
    assert errors(isolated)[1] == "ScreenedOut: crashed the isolation worker (signal 11) on rank 1"
    assert 128 not in [block for pid, block in runs(log) if pid == HERE]
    for counts in group.counts:
        assert counts == {"gather": 2, "max": 1, "barrier": 3}, "the agreement, the screening, the times"


def test_a_worker_started_by_a_thread_outlives_that_thread(isolate, tmp_path):
    # Linux's parent-death signal follows the thread that started a worker, not its process.
    isolation._stop_all()
    log = tmp_path / "runs"
    starter = threading.Thread(target=lambda: tuned()(2, str(log)))
    starter.start()
    starter.join()
    (first,) = {pid for pid, _ in runs(log) if pid != HERE}
    time.sleep(0.2)
    tuned()(3, str(log))
    assert {pid for pid, _ in runs(log) if pid != HERE} == {first}, "the same worker served both"


# -- a parent killed while a candidate hangs in the worker ---------------------------------------------

HANGS = """
import os
import sys
import time
from pathlib import Path

from kerneltune.core.isolation import worker as isolation_worker

from triton_dist.tune import autotune

# The worker imports this script too, as spawned processes do, before it serves: there this
# leaves it one way to end with its parent.
if sys.argv[2] == "signal only":
    isolation_worker._watch_lifeline = lambda lifeline: None
elif sys.argv[2] == "lifeline only":
    isolation_worker._ask_for_parent_death_signal = lambda: None


def hangs(x, marker, block):
    Path(marker).write_text(str(os.getpid()))
    time.sleep(600)


tuned = autotune(config_space=[{"block": 64}], key_fn=lambda x, marker: x)(hangs)

if __name__ == "__main__":
    tuned(1, sys.argv[1])
"""


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command's name: state, parent, ..."""
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    # A zombie has ended; where no init reaps orphans (a container), it stays listed.
    try:
        return _stat(pid)[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _children(pid: int) -> dict[int, str]:
    """The command line of each process whose parent is ``pid``."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int(_stat(int(entry.name))[1]) == pid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="finds processes through /proc")
@pytest.mark.parametrize(
    ("way", "ending"),
    [("signal only", signal.SIGKILL), ("lifeline only", signal.SIGTERM)],
)
def test_the_worker_and_its_resource_tracker_end_with_a_killed_parent(tmp_path, way, ending):
    if way == "signal only" and not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    script = tmp_path / "hangs.py"
    script.write_text(HANGS)
    marker = tmp_path / "worker-pid"
    env = {**os.environ, "KERNELTUNE_ISOLATE": "subprocess", "KERNELTUNE_ISOLATE_TIMEOUT": "600"}
    with (tmp_path / "stderr").open("w") as stderr:
        tuning = subprocess.Popen(
            [sys.executable, str(script), str(marker), way], env=env, cwd=tmp_path, stderr=stderr
        )
    spawned: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 60
        while not (marker.is_file() and marker.read_text().isdigit()):
            assert tuning.poll() is None, (tmp_path / "stderr").read_text()
            assert time.monotonic() < deadline, "the candidate never ran in the worker"
            time.sleep(0.05)
        spawned = _children(tuning.pid)
        worker = int(marker.read_text())
        assert worker in spawned
        assert any("resource_tracker" in command for command in spawned.values()), spawned

        tuning.send_signal(ending)
        assert tuning.wait(timeout=10) == -ending
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in spawned):
            assert time.monotonic() < deadline, {pid: spawned[pid] for pid in spawned if _alive(pid)}
            time.sleep(0.05)
    finally:
        tuning.kill()
        tuning.wait()
        for pid in spawned:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


# -- the engine's stage, with screenings played in-process ------------------------------------------------


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_screened_out_candidates_are_failed_with_their_reason_and_never_compiled(monkeypatch, isolated):
    session = install_session(
        monkeypatch, extra=(scripted_timer_plugin(lambda fn: fn() or 1.0),), timer="scripted"
    )
    tuner = Tuner(Space.build("work", BLOCKS, "def work(block): ..."))
    compiled: list[int] = []
    measured: list[int] = []

    def screen_one(candidate):
        if candidate.index == 0:
            raise ScreenedOut("hung for more than 60 s in the isolation worker")
        if candidate.index == 1:
            raise OSError("no more processes")

    with tuner.begin(session, "key") as tuning:
        tuning.isolate(screen_one)
        tuning.compile(lambda candidate: compiled.append(candidate.index))
        while (candidate := tuning.next_candidate()) is not None:
            tuning.measure(candidate, lambda index=candidate.index: measured.append(index))
        assert tuning.finish().index == 2
    assert compiled == sorted(set(measured)) == [2]
    assert errors(isolated)[:2] == [
        "ScreenedOut: hung for more than 60 s in the isolation worker",
        "ScreenedOut: could not be screened in the isolation worker: OSError: no more processes",
    ]


def test_a_tuner_that_does_not_screen_warns_once_that_isolation_is_not_applied(monkeypatch):
    session = install_session(monkeypatch, isolate="subprocess")
    tuner = Tuner(Space.build("kernel", BLOCKS, "def kernel(block): ..."))
    with pytest.warns(RuntimeWarning) as caught:
        for key in (1, 2):
            with tuner.begin(session, key) as tuning:
                while (candidate := tuning.next_candidate()) is not None:
                    tuning.record(candidate, [1.0])
                tuning.finish()
    assert [str(w.message) for w in caught] == [
        "kerneltune: kernel: isolate = 'subprocess' does not reach this tuner (it screens function-level "
        "tuners, and the Triton kernels of contextual_autotune and search_params); its candidates run "
        "unscreened in this process"
    ]


# A device that fails in the worker fails the candidates screened on it (not so the one that cannot tell).
FAILS_CANDIDATES = pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        pytest.param(
            "raise",
            r"set_current\(0\) raised RuntimeError: unit 0 is gone in the isolation worker",
            marks=FAILS_CANDIDATES,
        ),
        pytest.param(
            "hang",
            r"set_current\(0\) in the isolation worker took longer than isolate_timeout = 1 s",
            marks=FAILS_CANDIDATES,
        ),
        ("owns", r"raised RuntimeError: cannot tell while the isolation worker's device was chosen"),
    ],
)
def test_a_device_failing_in_the_worker_is_named_as_such_within_the_timeout(
    isolate, monkeypatch, tmp_path, fault, why
):
    monkeypatch.setenv("ISOLATION_DOUBLE_FAULT", fault)
    device = plugin_module(
        "faulty_unit_device",
        kerneltune_register_devices=lambda register: register(isolation_doubles.FaultyUnitDevice),
    )
    # The tuning's session, which the worker's device is looked up in.
    install_session(
        monkeypatch,
        extra=(scripted_timer_plugin(cost), plugin, device),
        timer="scripted",
        warmup=0,
        repeat=1,
        isolate="subprocess",
        isolate_timeout=1,
    )
    started = time.monotonic()
    with pytest.raises((NoValidConfigError, PluginError)) as info:
        tuned(key_fn=lambda x, *args, **kwargs: 2)(torch.zeros(2), str(tmp_path / "runs"))
    assert time.monotonic() - started < 30, "isolate_timeout, not the 120 s start-up wait"
    message = str(info.value)
    named = r"plugin faulty_unit_device \(added in the program\): device 'faulty-unit': "
    assert re.search(named + why, message), message
    assert "__main__" not in message
