"""The npu-profiler timer against a double of torch_npu's profiler (tests/npu_profiler_double.py).

What is tested is what the double reaches: the calls the timer makes, in
which steps it puts the set-up and the timed runs, how it reads the
profile's ``kernel_details.csv``, how timers share the process's one
profiler, and when ``auto`` takes it. Whether torch_npu files kernels
under steps as its documentation says is not: that needs an NPU.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import warnings

import npu_profiler_double as double
import pytest
from kerneltune.core import PluginError, Session, load_settings
from kerneltune.plugins.devices.accelerators import NpuDevice
from kerneltune.plugins.timers import npu_profiler
from kerneltune.plugins.timers.events import NpuEventTimer
from kerneltune.plugins.timers.npu_profiler import FLUSH_BYTES, NpuProfilerTimer, ProfilingRun
from kerneltune.plugins.timers.wallclock import WallclockTimer
from tuning_doubles import install_session, stored_records

from triton_dist.tune import autotune

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")


@pytest.fixture(params=["launch", "device"])
def npu(request, monkeypatch):
    """The double, filing kernels under the step that launched them, or the step they ran in."""
    monkeypatch.delenv(npu_profiler.BENCH_METHOD, raising=False)
    monkeypatch.setattr(ProfilingRun, "current", None)
    monkeypatch.setattr(NpuProfilerTimer, "_sizes", {})  # the L2 size, asked once per process
    device = double.install(monkeypatch, request.param)
    monkeypatch.setattr(NpuProfilerTimer, "_allocate", lambda timer, nbytes: device.buffer(nbytes))
    return device


def make_timer() -> NpuProfilerTimer:
    """The timer as the session makes it: with the ``npu`` device plugin's instance."""
    return NpuProfilerTimer(device=NpuDevice())


def flushed(timer: NpuProfilerTimer):
    """The set-up the engine gives a timed run under the device objective: the hold, then the flush."""

    def before() -> None:
        timer.hold(200.0)
        timer.flush()

    return before


# -- what a sample is ------------------------------------------------------------------------------


def test_a_sample_is_the_kernel_time_of_its_timed_run_alone(npu):
    timer = make_timer()
    npu.launch("before_tuning", 500.0)  # the program's own work, before the profiler starts
    timer.sample(lambda: npu.launch("triton_add", 12.5), before=flushed(timer))
    npu.launch("rest_of_the_outer_function", 300.0)  # between timed runs: in no timed step
    timer.sample(lambda: (npu.launch("triton_add", 10.0), npu.launch("triton_sum", 4.0)))
    timer.sample(lambda: None, before=flushed(timer))  # host work: nothing on the device
    assert timer.collect() == pytest.approx([0.0125, 0.014, 0.0])
    assert npu.flush_buffers == [FLUSH_BYTES], "one buffer per unit while the timer lives"
    assert [k.name for k in npu.ran].count("ZerosLike") == 2, "the L2 was flushed before both runs"
    assert timer.collect() == [], "collect resets"


def test_the_profiler_is_set_up_as_triton_ascends_do_bench_npu_sets_it_up(npu):
    timer = make_timer()
    timer.sample(lambda: npu.launch("triton_add", 8.0))
    (profile,) = npu.profiles
    assert npu.profiler is profile, "it records until the timer collects"
    assert double.ProfilerActivity.NPU in profile.activities
    assert double.ProfilerActivity.CPU in profile.activities, "the host's side records the steps"
    assert profile.experimental_config.options == {
        "aic_metrics": double.AiCMetrics.PipeUtilization,
        "profiler_level": double.ProfilerLevel.Level1,
        "l2_cache": False,
        "data_simplification": False,
    }
    assert not any(profile.options.values()), "no shapes, memory, stacks, flops or modules"
    assert (profile.schedule.wait, profile.schedule.warmup, profile.schedule.repeat) == (0, 1, 1)
    assert timer.collect() == pytest.approx([0.008])
    assert profile.stopped and npu.profiler is None
    (written,) = double.WRITTEN
    assert not written.parent.exists(), "the profile's folder is removed once read"


def test_every_step_ends_with_a_synchronize(npu):
    timer = make_timer()
    timer.sample(lambda: npu.launch("triton_add", 8.0), before=flushed(timer))
    # Start: leaving the warm-up step. Sample: after the flush's step, after the timed step.
    assert npu.synchronize_calls == 3
    assert not npu.pending


def test_a_run_that_raises_still_closes_its_step(npu):
    timer = make_timer()

    def fails() -> None:
        npu.launch("triton_add", 8.0)
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="launch failed"):
        timer.sample(fails)
    timer.sample(lambda: npu.launch("triton_add", 3.0))
    assert timer.collect() == pytest.approx([0.003])


def test_a_profile_without_step_numbers_fails_each_timer_in_it_saying_why(npu, monkeypatch):
    monkeypatch.setattr(sys.modules["torch_npu"].profiler, "profile", _without_schedule(double.profile))
    timers = make_timer(), make_timer()
    for timer in timers:
        timer.sample(lambda: npu.launch("triton_add", 8.0))
    for timer in timers:
        with pytest.raises(
            RuntimeError, match=r"kernel_details\.csv has no Step Id column .*cannot tell the timed"
        ):
            timer.collect()
    assert npu.profiler is None


def _without_schedule(cls):
    """A profile class that drops its schedule, as a profile made without one has no step numbers."""

    class Unscheduled(cls):
        def __init__(self, *args, schedule=None, **kwargs):
            super().__init__(*args, **kwargs)

    return Unscheduled


# -- timers that share the process's profiler ----------------------------------------------------


def test_timers_sampling_in_turn_share_one_profiler_and_each_reads_its_own_runs(npu):
    first, second = make_timer(), make_timer()
    # Two kernels' candidates timed in turn within each execution of an outer function.
    for cost in (10.0, 11.0):
        first.sample(lambda cost=cost: npu.launch("first_kernel", cost), before=flushed(first))
        npu.launch("between", 100.0)
        second.sample(lambda cost=cost: npu.launch("second_kernel", 2 * cost), before=flushed(second))
    assert len(npu.profiles) == 1, "one profiler at a time in a process"
    assert first.collect() == pytest.approx([0.010, 0.011])
    assert npu.profiler is None, "the first read stops the run"
    second.sample(lambda: npu.launch("second_kernel", 30.0))
    assert len(npu.profiles) == 2, "a later sample starts a new run"
    assert second.collect() == pytest.approx([0.020, 0.022, 0.030])
    assert npu.profiler is None


def test_a_run_whose_timers_were_dropped_unread_stops_without_writing(npu):
    timer = make_timer()
    timer.sample(lambda: npu.launch("triton_add", 8.0))
    (profile,) = npu.profiles
    del timer  # its candidate failed: the engine never collects it
    assert profile.stopped and npu.profiler is None
    assert double.WRITTEN == [], "nothing is written or analysed for nobody"
    assert ProfilingRun.current is None


# -- choosing it -------------------------------------------------------------------------------------


def test_auto_on_an_npu_keeps_npu_event_unless_triton_bench_method_asks_for_the_profiler(npu, monkeypatch):
    assert type(Session.create(load_settings()).make_timer()) is NpuEventTimer
    for value in ("npu", "NPU"):  # triton-ascend lower-cases it
        monkeypatch.setenv("TRITON_BENCH_METHOD", value)
        session = Session.create(load_settings())
        assert type(session.make_timer()) is NpuProfilerTimer
        assert session.device.name == "npu"
    monkeypatch.setenv("TRITON_BENCH_METHOD", "default")
    assert type(Session.create(load_settings()).make_timer()) is NpuEventTimer


def test_a_session_follows_triton_bench_method_set_after_it_was_made(npu, monkeypatch):
    # The session chooses its timer once, but the variable changes the choice's priorities.
    monkeypatch.delenv("TRITON_BENCH_METHOD", raising=False)
    session = Session.create(load_settings())
    assert type(session.make_timer()) is NpuEventTimer
    monkeypatch.setenv("TRITON_BENCH_METHOD", "npu")
    assert type(session.make_timer()) is NpuProfilerTimer
    monkeypatch.setenv("TRITON_BENCH_METHOD", "default")
    assert type(session.make_timer()) is NpuEventTimer


def test_triton_bench_method_without_an_npu_leaves_auto_as_it_was(npu, monkeypatch, cpu_host):
    npu.available = False
    monkeypatch.setenv("TRITON_BENCH_METHOD", "npu")
    assert type(Session.create(load_settings()).make_timer()) is WallclockTimer


def test_named_it_is_taken_without_the_variable(npu, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_TIMER", "npu-profiler")
    session = Session.create(load_settings())
    assert type(session.make_timer()) is NpuProfilerTimer
    assert session.device.name == "npu"


def test_priority_follows_the_variable_when_auto_chooses(monkeypatch):
    monkeypatch.delenv("TRITON_BENCH_METHOD", raising=False)
    assert NpuProfilerTimer.auto_priority < 0
    monkeypatch.setenv("TRITON_BENCH_METHOD", "npu")
    assert NpuProfilerTimer.auto_priority > NpuEventTimer.auto_priority


def test_without_torch_npu_it_cannot_run_and_says_why(monkeypatch):
    if importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("torch_npu is installed here")
    monkeypatch.setenv("TRITON_BENCH_METHOD", "npu")
    assert not NpuProfilerTimer.is_available()
    monkeypatch.setenv("KERNELTUNE_TIMER", "npu-profiler")
    with pytest.raises(PluginError, match=r"'npu-profiler' .*cannot run here \(torch_npu is not installed\)"):
        Session.create(load_settings())


# -- a whole tuning -------------------------------------------------------------------------------------


@pytest.fixture
def profiled(npu, monkeypatch):
    monkeypatch.setenv("TRITON_BENCH_METHOD", "npu")
    install_session(monkeypatch)
    return npu


def test_a_tuning_picks_by_kernel_time_whatever_the_host_spends(profiled, isolated):
    @autotune(config_space=[{"us": 30.0, "host": 0.0}, {"us": 5.0, "host": 2.0}], key_fn=lambda x: x)
    def on_npu(x, us, host):
        time.sleep(host / 1000.0)  # launch overhead that an event pair would count
        profiled.launch("triton_kernel", us)
        return us

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*runs on the host")  # it ran on the device
        assert on_npu(1) == 5.0
    (record,) = stored_records(isolated, "on_npu")
    samples = [row["samples_ms"] for row in record["candidates"]]
    assert samples == [pytest.approx([0.030] * 10), pytest.approx([0.005] * 10)]
    assert record["best"]["index"] == 1
    # Flushed before every timed run, and before the five empty runs that tell host work apart.
    assert [k.name for k in profiled.ran].count("ZerosLike") == 2 * 10 + 5


@pytest.mark.expected_warning(RuntimeWarning, match="on_host: every candidate.*device time cannot rank it")
def test_work_with_no_kernel_is_told_to_use_the_wall_objective(profiled, isolated):
    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def on_host(x, n):
        return sum(range(x * n))

    on_host(10)
