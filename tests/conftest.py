"""Shared test set-up: every test gets its own cache directory and working directory."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import ascend_stand_in
import own_plugins
import pytest
from leftover_processes import adopt_orphans, leftover_children

#: Variables plugins read themselves, outside the settings they declare.
_PLUGIN_VARIABLES = ("TRITON_PRINT_AUTOTUNING", "TRITON_PRINT_AUTOTUNING_TIMINGS")


# The benches a test loads import their siblings (bench/ is no package), as they do when run.
sys.path.append(str(Path(__file__).resolve().parents[1] / "bench"))
own_plugins.hide_foreign_plugins()
own_plugins.isolate_children()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """A private cache dir and cwd, none of the user's kerneltune variables, and no
    once-per-process warning already spent by an earlier test.

    Near ties are not re-timed (``tie_rounds = 0``), host launchers are not
    run once more to record their launches for COMPILE (``precompile =
    false``; on a GPU machine it would run), and an uncertain stored pick is
    not re-checked when it is loaded (``recheck = false``: candidates timed
    on the host's clock often tie within its noise), and twins are measured
    each (``twins = false``: the interpreter ignores ``num_warps``, which
    many tests vary), and every timed run counts as taken while the process
    ran (none is re-taken after the scheduler took the CPU away), so that
    tests can count a candidate's runs; the tests of those turn them on.
    """
    from kerneltune.core import notices
    from kerneltune.core.machine import timing
    from kerneltune.core.plugin_system import settings

    # Plugins' settings read KERNELTUNE_* variables of their own.
    plugins = [name for name in os.environ if name.startswith(settings.PLUGIN_VARIABLE_PREFIX)]
    for name in (
        *settings.core_variables(),
        *plugins,
        *_PLUGIN_VARIABLES,
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KERNELTUNE_TIE_ROUNDS", "0")
    monkeypatch.setenv("KERNELTUNE_PRECOMPILE", "0")
    monkeypatch.setenv("KERNELTUNE_RECHECK", "0")
    monkeypatch.setenv("KERNELTUNE_TWINS", "0")
    monkeypatch.setattr(notices, "_issued", set())
    monkeypatch.setattr(timing, "running", lambda: None)
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    return cache


@pytest.fixture
def unchecked(monkeypatch):
    """``check_outputs = off``, for a test about something else whose tuned function returns what
    differs by config on purpose (the config's name, a count of calls): no candidate is wrong there."""
    monkeypatch.setenv("KERNELTUNE_CHECK_OUTPUTS", "off")


@pytest.fixture
def quick(tmp_path):
    """One warm-up-free timed run per candidate, for tests where the timing is not under test."""
    (tmp_path / "kerneltune.toml").write_text("warmup = 0\nrepeat = 1\n")


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    # A server whose wrapper a test ended would otherwise pass to init, out of the check below.
    adopt_orphans()
    # Triton kernels in CPU tests run in the interpreter; set before triton is imported.
    if not _has_cuda():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    # triton-ascend without an NPU stack: its real Python layer, with only the driver stood in.
    if ascend_stand_in.wanted():
        ascend_stand_in.install()
        ascend_stand_in.reach_spawned_processes()


@pytest.fixture
def cpu_host(monkeypatch):
    """Make a GPU machine look like a CPU-only host, for tests of CPU defaults."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_run():
    """Fail the run, as an error at the last test's teardown, when a process a test started
    (or a process that one started, whose parent then ended) still runs after every other
    fixture was torn down; end those processes, so that none outlives the run either way.
    """
    yield
    left = leftover_children()
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "processes left running by the tests (ended now):\n" + "\n".join(
        f"  {pid}: {command}" for pid, command in left.items()
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """``@pytest.mark.expected_warning(Category, match=...)``: the test must issue that warning
    (the test fails otherwise), and it is kept out of the run's summary; other warnings still show.

    For tests that cause it on purpose (candidates failing, a fake timer that reads host work),
    where it comes with what the test checks rather than being it. Always give ``match``: a mark
    called with one class and nothing else decorates that class, and the test is not collected.
    """
    marks = list(item.iter_markers("expected_warning"))
    with contextlib.ExitStack() as expected:
        for mark in marks:
            expected.enter_context(pytest.warns(*mark.args, **mark.kwargs))
        return (yield)
