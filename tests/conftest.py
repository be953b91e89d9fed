"""Shared test set-up: every test gets its own cache directory and working directory."""

from __future__ import annotations

import os

import ascend_stand_in
import pytest

#: Variables plugins read themselves, outside the settings they declare.
_PLUGIN_VARIABLES = ("TRITON_PRINT_AUTOTUNING", "TRITON_PRINT_AUTOTUNING_TIMINGS")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """A private cache dir and cwd, none of the user's kerneltune variables, and no
    once-per-process warning already spent by an earlier test.

    Near ties are not re-timed (``tie_rounds = 0``), host launchers are not
    run once more to record their launches for COMPILE (``precompile =
    false``; on a GPU machine it would run), and an uncertain stored pick is
    not re-checked when it is loaded (``recheck = false``: candidates timed
    on the host's clock often tie within its noise), so that tests can count
    a candidate's runs; the tests of those turn them on.
    """
    from kerneltune.core import notices
    from kerneltune.core.plugin_system import settings
    from kerneltune.core.plugin_system.loading import core_settings

    # Plugins' settings read KERNELTUNE_* variables of their own.
    plugins = [name for name in os.environ if name.startswith(settings.PLUGIN_VARIABLE_PREFIX)]
    for name in (
        *settings.core_variables(core_settings()),
        *plugins,
        *_PLUGIN_VARIABLES,
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KERNELTUNE_TIE_ROUNDS", "0")
    monkeypatch.setenv("KERNELTUNE_PRECOMPILE", "0")
    monkeypatch.setenv("KERNELTUNE_RECHECK", "0")
    monkeypatch.setattr(notices, "_issued", set())
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    return cache


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
