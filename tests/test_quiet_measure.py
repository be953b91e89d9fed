"""Nothing of kerneltune's own runs beside a timed run: no warm-up, no compile, no import of Triton.

The compile stage itself is covered in tests/test_compile.py
(``test_no_candidate_is_measured_while_a_compile_runs``); these are the
cases a user meets first, where the tuned work launches no Triton kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from kerneltune.plugins.triton import compile_device, compiler, warming

from triton_dist.tune import autotune

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

WORKER = Path(__file__).with_name("quiet_worker.py")
#: Fresh processes in the pick test: the defect picked wrongly in 4 of 10 on a two-core host.
PROCESSES = 20


def _fresh_environment() -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELTUNE_", "TRITON"))}
    # The defaults a user has: precompile on, Triton's interpreter off, nothing cached.
    return environment | {"KERNELTUNE_CACHE": "memory"}


def _host_work_environment() -> dict[str, str]:
    """The fresh defaults, with the objective docs/measuring.md has a user choose for host work on a GPU host.

    With a GPU the default timer is its event timer, and the device objective
    times NumPy work as nothing at all (see the test after this one).
    """
    environment = _fresh_environment()
    return environment | {"KERNELTUNE_OBJECTIVE": "wall"} if torch.cuda.is_available() else environment


def test_numpy_work_picks_its_least_work_in_fresh_processes_with_nothing_beside_it():
    outcomes = []
    for _ in range(PROCESSES):
        done = subprocess.run(
            [sys.executable, str(WORKER)],
            env=_host_work_environment(),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        outcomes.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [o["beside"] for o in outcomes] == [[]] * PROCESSES, "a thread ran beside a candidate"
    assert not any(o["triton"] for o in outcomes), "Triton was imported for work that never imported it"
    assert [o["pick"] for o in outcomes] == [0] * PROCESSES


@pytest.mark.gpu
def test_numpy_work_timed_by_the_gpus_events_is_told_it_runs_on_the_host():
    """In a program that imported torch, ``auto`` takes the GPU's event timer, which reads host work as
    nothing: the warning says so. (One that never imported torch gets the wall clock: the next test.)"""
    done = subprocess.run(
        [sys.executable, "-W", "always::RuntimeWarning", str(WORKER), "--import-torch"],
        env=_fresh_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "summed: every candidate's timed runs read about" in done.stderr, done.stderr
    assert 'objective = "wall"' in done.stderr


def test_numpy_work_in_a_program_without_torch_is_timed_by_the_wall_clock_with_no_warning():
    """``auto`` asks no torch timer where torch was never imported, GPU or not (issue 38, item 7)."""
    done = subprocess.run(
        [sys.executable, "-W", "always::RuntimeWarning", str(WORKER)],
        env=_fresh_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "summed:" not in done.stderr, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["pick"] == 0


@pytest.fixture
def compiling(monkeypatch):
    """Precompile on, as outside the suite, with Triton imported and not interpreting (as on a GPU)."""
    monkeypatch.setenv("KERNELTUNE_PRECOMPILE", "1")
    monkeypatch.setattr(compiler.adapter, "interpreting", lambda: False)
    monkeypatch.setattr(warming, "_warm", warming._WarmUp())
    return warming._warm


def test_a_launcher_that_launches_no_kernel_starts_no_compiler_work(compiling, quick):
    beside: list[list[str]] = []
    before = set(threading.enumerate())  # other tests' servers may still be winding down

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda: "k")
    def host_work(n):
        beside.append([t.name for t in set(threading.enumerate()) - before])
        return sum(range(n))

    host_work()
    assert not compiling.tried, "the compiler's warm-up started for work that compiles nothing"
    # One recording run per candidate, then the measured runs: nothing else alive in any of them.
    assert beside and all(names == [] for names in beside), beside


def test_the_first_recorded_launch_starts_the_warm_up(compiling, monkeypatch):
    from triton.runtime.jit import JITFunction

    started: list[str] = []
    monkeypatch.setattr(warming, "warm_up", lambda: started.append("warm-up"))
    monkeypatch.setattr(compile_device, "device_binding", lambda: lambda: None)
    with compiler.recording() as compiles:
        assert started == [], "opening a recording starts nothing"
        JITFunction.run(object(), 1, BLOCK=8)
    assert started == ["warm-up"] and len(compiles) == 1


def test_recording_is_not_offered_while_triton_is_not_imported(compiling, monkeypatch):
    from kerneltune.plugins.triton.interceptor import TritonInterceptor

    assert TritonInterceptor().recording() is not None
    monkeypatch.delitem(sys.modules, "triton")
    assert TritonInterceptor().recording() is None


def test_the_contextual_interceptor_patches_nothing_while_triton_is_not_imported(monkeypatch):
    import triton
    from kerneltune.plugins.triton.interceptor import TritonInterceptor

    original = triton.runtime.autotuner.Autotuner.run
    monkeypatch.delitem(sys.modules, "triton")
    interceptor = TritonInterceptor()
    interceptor.install(lambda launch: None)
    try:
        assert triton.runtime.autotuner.Autotuner.run is original
    finally:
        interceptor.uninstall()
