"""torch_npu installed but CANN not loadable: one warning naming the library, then the host's devices.

No torch_npu release imports without CANN's shared libraries (``libhccl.so``
and others). A stand-in torch_npu whose import fails as theirs does shows
what a user without ``set_env.sh`` sourced meets.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings

import pytest
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import PluginError, Session, load_settings, notices

MISSING = "libhccl.so: cannot open shared object file: No such file or directory"
#: The timers of torch.npu's work: events, and torch_npu's profiler.
NPU_TIMERS = ("npu-event", "npu-profiler")


@pytest.fixture
def broken_torch_npu(tmp_path, monkeypatch):
    """A torch_npu on sys.path whose import fails as a CANN-less torch_npu's does."""
    package = tmp_path / "site" / "torch_npu"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"raise ImportError({MISSING!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    monkeypatch.setattr(notices, "_issued", set())


def test_a_tuning_session_warns_once_naming_the_library_and_runs_on_the_host(broken_torch_npu):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = Session.create(load_settings())
        Session.create(load_settings())
    about = [str(w.message) for w in caught if "torch_npu" in str(w.message)]
    assert len(about) == 1, about
    assert "libhccl.so" in about[0] and "set_env.sh" in about[0]
    assert session.device.name in ("cpu", "cuda")
    assert session.make_timer().name in ("wallclock", "cuda-event")


def test_triton_bench_method_npu_changes_nothing_without_cann(broken_torch_npu, monkeypatch):
    monkeypatch.setenv("TRITON_BENCH_METHOD", "npu")  # asks for the npu-profiler timer where an NPU is
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = Session.create(load_settings())
    assert len([w for w in caught if "torch_npu" in str(w.message)]) == 1
    assert session.make_timer().name in ("wallclock", "cuda-event")


@pytest.mark.parametrize("timer", NPU_TIMERS)
def test_an_explicit_npu_timer_says_cann_is_why_it_cannot_run(broken_torch_npu, monkeypatch, timer):
    monkeypatch.setenv("KERNELTUNE_TIMER", timer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(
            PluginError,
            match=rf"'{timer}' .* cannot run here \(torch_npu is installed but "
            r"cannot load libhccl\.so .*set_env\.sh .*first\)",
        ):
            Session.create(load_settings())


@pytest.mark.parametrize("timer", NPU_TIMERS)
def test_an_explicit_npu_timer_without_torch_npu_says_it_is_not_installed(monkeypatch, timer):
    if importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("torch_npu is installed here")
    monkeypatch.setenv("KERNELTUNE_TIMER", timer)
    with pytest.raises(PluginError, match=r"cannot run here \(torch_npu is not installed\)"):
        Session.create(load_settings())


def test_the_plugins_command_lists_with_one_warning(broken_torch_npu):
    result = CliRunner().invoke(cli.main, ["plugins"])
    assert result.exit_code == 0, result.output
    assert "npu-event        not available here" in result.output
    assert "npu-profiler     not available here" in result.output
    # The command prints warnings as its own lines: one says what is missing and how to load it.
    about = [line for line in result.output.splitlines() if "torch_npu" in line]
    assert len(about) == 1 and "libhccl.so" in about[0] and "set_env.sh" in about[0], about
