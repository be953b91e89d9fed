"""Timers: the host clock, and the CUDA / NPU event timers against a double of the device event API."""

from __future__ import annotations

import contextlib
import importlib.machinery
import sys
import time
import types
import warnings

import pytest
import torch
from kerneltune.cli.views import timed_text
from kerneltune.core import Session, hookimpl, load_settings
from kerneltune.core.driving import TuningRecord
from kerneltune.plugins.caches.files import JsonCache
from kerneltune.plugins.devices.accelerators import CudaDevice, NpuDevice
from kerneltune.plugins.reducers.local import LocalReducer
from kerneltune.plugins.timers.events import (
    CALIBRATION_CYCLES,
    CALIBRATION_SPINS,
    FLUSH_BYTES,
    FLUSHES_TIMED,
    GRAPH_FILL_US,
    HOLDS_TIMED_EVERY,
    CudaEventTimer,
    CudaGraphTimer,
    DeviceEventTimer,
    NpuEventTimer,
    TorchDeviceTimer,
)
from kerneltune.plugins.timers.wallclock import WallclockTimer
from tuning_doubles import FakeClock, install_session, stored_records

from triton_dist.tune import autotune

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

SPIN_CYCLES_PER_US = 2000


class FakeDeviceModule(types.ModuleType):
    """The part of ``torch.cuda`` / ``torch.npu`` that timers and hardware facts use.

    Events take their time from a :class:`FakeClock`; like real device events,
    ``elapsed_time`` refuses events that were never recorded, were made without
    ``enable_timing=True``, or have not been completed by ``synchronize()``.
    """

    def __init__(self, name: str, clock: FakeClock) -> None:
        super().__init__(name)
        self.clock = clock
        self.available = True
        self.events: list[object] = []
        self.pending: list[object] = []
        self.synchronize_calls = 0
        device = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.enable_timing = enable_timing
                self.time: float | None = None
                self.stream = "never recorded"
                self.complete = False
                device.events.append(self)

            def record(self, stream=None) -> None:
                self.stream = stream
                self.time = device.clock.now
                self.complete = False
                device.pending.append(self)

            def synchronize(self) -> None:
                device.synchronize()

            def elapsed_time(self, end: Event) -> float:
                for event in (self, end):
                    if not event.enable_timing:
                        raise RuntimeError("event was created without enable_timing=True")
                    if event.time is None:
                        raise RuntimeError("event was never recorded")
                    if not event.complete:
                        raise RuntimeError("event has not completed: synchronize first")
                return end.time - self.time

        self.Event = Event
        self.device = 0
        #: how many times the current stream was looked up.
        self.stream_lookups = 0
        #: the size of every flush, in bytes, in order.
        self.flushes: list[int] = []
        #: the cycles of every ``_sleep`` spin enqueued.
        self.spins: list[int] = []
        #: cycles per microsecond the spin runs at now (the device's clock).
        self.spin_rate = SPIN_CYCLES_PER_US
        if name == "cuda":
            # torch.cuda._sleep: a kernel spinning for so many device clock cycles (2 GHz here).
            def _sleep(cycles: int) -> None:
                self.spins.append(cycles)
                self.clock.advance(cycles / self.spin_rate / 1000.0)

            self._sleep = _sleep

    def current_device(self) -> int:
        return self.device

    def current_stream(self, device: int | None = None) -> str:
        """A token for the current stream of ``device`` (default: the current one)."""
        self.stream_lookups += 1
        return f"stream of {self.__name__}:{self.device if device is None else device}"

    def buffer(self, nbytes: int) -> object:
        """What the timer allocates to flush with: writing it takes the device 0.06 ms."""
        device = self

        class Buffer:
            def zero_(self) -> None:
                device.flushes.append(nbytes)
                device.clock.advance(0.06)

        return Buffer()

    def is_available(self) -> bool:
        return self.available

    def synchronize(self) -> None:
        self.synchronize_calls += 1
        for event in self.pending:
            event.complete = True
        self.pending.clear()

    def device_count(self) -> int:
        return 2

    def get_device_name(self, index: int = 0) -> str:
        return f"Fake {self.__name__} device"

    def get_device_capability(self, index: int = 0) -> tuple[int, int]:
        return (9, 0)


def on_its_device(cls: type[DeviceEventTimer]) -> DeviceEventTimer:
    """A timer constructed as the session constructs it: with its device plugin's instance."""
    return cls(device={"cuda": CudaDevice, "npu": NpuDevice}[cls.device]())


@pytest.fixture
def clock(monkeypatch):
    # Spin rates are learnt once per process; every test starts with none learnt.
    monkeypatch.setattr(DeviceEventTimer, "_cycles_per_us", {})
    monkeypatch.setattr(DeviceEventTimer, "_flush_us", {})
    monkeypatch.setattr(DeviceEventTimer, "_flushes_timed", {})
    monkeypatch.setattr(TorchDeviceTimer, "_sizes", {})  # and L2 sizes
    return FakeClock()


@pytest.fixture
def fake_cuda(monkeypatch, clock):
    device = FakeDeviceModule("cuda", clock)
    monkeypatch.setattr(torch, "cuda", device)
    monkeypatch.setattr(DeviceEventTimer, "_allocate", lambda timer, nbytes: device.buffer(nbytes))
    return device


def install_fake_npu(monkeypatch, clock: FakeClock) -> FakeDeviceModule:
    """What ``import torch_npu`` provides: a ``torch_npu`` module and ``torch.npu``."""
    torch_npu = types.ModuleType("torch_npu")
    torch_npu.__spec__ = importlib.machinery.ModuleSpec("torch_npu", loader=None)
    monkeypatch.setitem(sys.modules, "torch_npu", torch_npu)
    device = FakeDeviceModule("npu", clock)
    monkeypatch.setattr(torch, "npu", device, raising=False)
    monkeypatch.setattr(DeviceEventTimer, "_allocate", lambda timer, nbytes: device.buffer(nbytes))
    return device


@pytest.fixture
def fake_npu(monkeypatch, clock):
    return install_fake_npu(monkeypatch, clock)


@pytest.fixture(params=["cuda", "npu"])
def device_timer(request, clock):
    """An event timer class with its fake device module installed."""
    device = request.getfixturevalue(f"fake_{request.param}")
    return {"cuda": CudaEventTimer, "npu": NpuEventTimer}[request.param], device


# -- the host clock ------------------------------------------------------------------------


def test_wallclock_keeps_one_sample_per_call_and_collect_resets():
    timer = WallclockTimer()
    assert WallclockTimer.is_available()
    timer.sample(lambda: time.sleep(0.002))
    timer.sample(lambda: None)
    first, second = timer.collect()
    assert first >= 2.0, "a sleep of 2 ms lasts at least 2 ms"
    assert second >= 0.0
    assert timer.collect() == []


# -- event timers over the double -------------------------------------------------------------


def test_event_timer_uses_one_event_pair_per_sample_and_syncs_once(device_timer, clock):
    cls, device = device_timer
    assert cls.is_available()
    timer = on_its_device(cls)
    costs = [1.5, 0.25, 4.0, 2.0]

    for cost in costs:
        timer.sample(lambda cost=cost: clock.advance(cost))
    assert device.synchronize_calls == 0, "sampling must not wait for the device"
    assert len(device.events) == 2 * len(costs)
    assert len({id(e) for e in device.events}) == 2 * len(costs), "fresh events for every sample"
    assert all(e.enable_timing for e in device.events)
    assert all(e.stream == f"stream of {device.__name__}:0" for e in device.events), "the current stream"
    assert device.stream_lookups == len(costs), "looked up once per sample, not per event"

    assert timer.collect() == costs
    assert device.synchronize_calls == 1

    assert timer.collect() == []
    assert device.synchronize_calls == 1, "nothing outstanding, nothing to wait for"

    timer.sample(lambda: clock.advance(3.0))
    assert timer.collect() == [3.0]
    assert device.synchronize_calls == 2


def test_event_timer_records_around_the_call(device_timer, clock):
    cls, device = device_timer
    timer = on_its_device(cls)
    clock.advance(10.0)

    def run():
        assert len(device.events) == 2 and device.events[0].time == 10.0 and device.events[1].time is None
        clock.advance(0.5)

    timer.sample(run)
    start, end = device.events
    assert (start.time, end.time) == (10.0, 10.5)
    assert timer.collect() == [0.5]


def test_event_timer_runs_before_after_making_events_and_ahead_of_the_start_mark(device_timer, clock):
    timer_class, device = device_timer
    timer = on_its_device(timer_class)
    order = []

    def flush():
        order.append(("flush", len(device.events), len(device.pending)))
        clock.advance(5.0)

    timer.sample(lambda: clock.advance(1.5), before=flush)

    assert order == [("flush", 2, 0)], "both events exist and neither is recorded when the flush runs"
    assert timer.collect() == [1.5], "the flush stays outside the timed region"


def test_cuda_timer_holds_the_device_with_a_spin_sized_by_a_calibration_made_once_per_device(
    fake_cuda, clock
):
    timer = on_its_device(CudaEventTimer)
    timer.hold(100.0)
    # Calibration spins (the last one timed), then 100 µs worth of cycles.
    assert fake_cuda.spins == [CALIBRATION_CYCLES] * CALIBRATION_SPINS + [100 * SPIN_CYCLES_PER_US]
    del fake_cuda.spins[:]
    timer.hold(25.0)
    on_its_device(CudaEventTimer).hold(25.0)
    assert fake_cuda.spins == [25 * SPIN_CYCLES_PER_US] * 2, "the rate is learnt once per device"
    del fake_cuda.spins[:]
    fake_cuda.device = 1
    timer.hold(25.0)
    assert fake_cuda.spins == [CALIBRATION_CYCLES] * CALIBRATION_SPINS + [25 * SPIN_CYCLES_PER_US]
    timer.hold(0.0)
    assert len(fake_cuda.spins) == CALIBRATION_SPINS + 1


def test_a_rate_learnt_on_a_slow_clock_rises_with_the_clock_but_never_falls(fake_cuda, clock):
    timer = on_its_device(CudaEventTimer)
    fake_cuda.spin_rate = SPIN_CYCLES_PER_US / 4  # an idle device's clock
    timer.hold(100.0)
    assert fake_cuda.spins[-1] == 100 * SPIN_CYCLES_PER_US // 4
    timer.collect()
    fake_cuda.spin_rate = SPIN_CYCLES_PER_US  # under load
    timer.hold(100.0)
    timer.collect()  # the timed hold teaches the higher rate
    timer.hold(100.0)
    assert fake_cuda.spins[-1] == 100 * SPIN_CYCLES_PER_US
    fake_cuda.spin_rate = SPIN_CYCLES_PER_US / 2  # throttled: a longer hold is harmless, a shorter one not
    timer.hold(100.0)
    timer.collect()
    timer.hold(100.0)
    assert fake_cuda.spins[-1] == 100 * SPIN_CYCLES_PER_US


def test_the_first_hold_after_a_collect_and_every_few_after_it_are_timed_and_every_hold_spins(
    fake_cuda, clock
):
    timer = on_its_device(CudaEventTimer)
    timer.hold(10.0)  # calibrates the device
    timer.collect()
    events = len(fake_cuda.events)
    runs = HOLDS_TIMED_EVERY + 2
    for _ in range(runs):
        timer.sample(lambda: clock.advance(0.01), before=lambda: timer.hold(50.0))
    assert fake_cuda.spins[-runs:] == [50 * SPIN_CYCLES_PER_US] * runs, "every run is held"
    assert len(fake_cuda.events) == events + runs * 2 + 2 * 2, "a pair per sample; the 1st and 9th hold's"
    timer.collect()
    fake_cuda.spin_rate = SPIN_CYCLES_PER_US * 2  # the clock rose: the next timed hold teaches it
    timer.sample(lambda: clock.advance(0.01), before=lambda: timer.hold(50.0))
    assert len(fake_cuda.events) == events + (runs + 1) * 2 + 3 * 2, "after a collect, timed again"
    timer.collect()
    timer.hold(50.0)
    assert fake_cuda.spins[-1] == 50 * SPIN_CYCLES_PER_US * 2


def test_a_sample_records_its_events_holds_and_flush_on_the_current_units_stream(fake_cuda, clock):
    fake_cuda.device = 1
    timer = on_its_device(CudaEventTimer)
    timer.hold(10.0)
    timer.collect()
    first = len(fake_cuda.events)
    lookups = fake_cuda.stream_lookups

    def before() -> None:
        timer.hold(50.0)
        timer.flush()

    timer.sample(lambda: clock.advance(0.01), before=before)
    assert fake_cuda.stream_lookups == lookups + 1, "one lookup for the sample, its hold and its flush"
    recorded = fake_cuda.events[first:]
    assert len(recorded) == 6, "the sample's pair, the hold's and the first flush's"
    assert {e.stream for e in recorded} == {"stream of cuda:1"}


def test_a_batchs_shared_timer_looks_the_stream_up_only_for_the_events_it_records(fake_cuda, clock):
    shared, own = on_its_device(CudaEventTimer), on_its_device(CudaEventTimer)
    shared.hold(10.0)  # calibrates the device (a timed spin)
    shared.flush()  # its first flush is timed
    shared.collect()

    def before() -> None:  # a later candidate of a batch: the first timer holds and flushes
        shared.hold(50.0)
        shared.flush()

    own.sample(lambda: clock.advance(0.01), before=before)  # the first hold after a collect: timed
    lookups = fake_cuda.stream_lookups
    for _ in range(3):
        own.sample(lambda: clock.advance(0.01), before=before)
    assert fake_cuda.stream_lookups == lookups + 3, "the samples' own; untimed holds and flushes need none"
    assert fake_cuda.spins[-3:] == [50 * SPIN_CYCLES_PER_US] * 3


def test_a_hold_given_as_before_stays_outside_the_timed_region(fake_cuda, clock):
    timer = on_its_device(CudaEventTimer)
    timer.sample(lambda: clock.advance(0.04), before=lambda: timer.hold(150.0))
    assert fake_cuda.spins[-1] == 150 * SPIN_CYCLES_PER_US
    assert timer.collect() == [pytest.approx(0.04)]


def test_a_timer_times_its_first_flush_on_a_device_and_keeps_the_shortest_seen(fake_cuda, clock):
    timer = on_its_device(CudaEventTimer)
    timer.flush()
    assert timer.flush_microseconds() is None, "known once collected"
    timer.flush()  # a timer times its first flush on a device only
    timer.sample(lambda: clock.advance(0.04), before=timer.flush)
    assert timer.collect() == [pytest.approx(0.04)], "the flush stays out of the samples"
    assert timer.flush_microseconds() == pytest.approx(60.0), "the fake device's flush: 60 us"
    later = on_its_device(CudaEventTimer)
    buffer = later._allocate(FLUSH_BYTES)
    buffer.zero_ = lambda: clock.advance(0.02)
    later._flush_buffers[0] = buffer
    later.flush()
    later.collect()
    assert timer.flush_microseconds() == pytest.approx(20.0), "a shorter flush on that device lowers it"
    fake_cuda.device = 1
    assert timer.flush_microseconds() is None, "by device"


MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("l2", "flushed"),
    [(60 * MIB, 120 * MIB), (192 * MIB, FLUSH_BYTES), (0, FLUSH_BYTES), (None, FLUSH_BYTES)],
    ids=["twice-an-H200s", "at-most-256-MiB", "zero-said", "not-said"],
)
def test_a_flush_writes_twice_the_l2_the_device_says_it_has(monkeypatch, fake_cuda, clock, l2, flushed):
    asked = []

    def get_device_properties(unit: int) -> object:
        asked.append(unit)
        return types.SimpleNamespace(name="Fake", **({} if l2 is None else {"L2_cache_size": l2}))

    monkeypatch.setattr(fake_cuda, "get_device_properties", get_device_properties, raising=False)
    for _ in range(3):
        timer = on_its_device(CudaEventTimer)
        timer.flush()
        timer.flush()
    assert fake_cuda.flushes == [flushed] * 6
    assert asked == [0], "asked once per device and process"
    fake_cuda.device = 1
    on_its_device(CudaEventTimer).flush()
    assert asked == [0, 1]


def test_a_device_module_that_cannot_say_its_l2_gets_the_flush_that_evicts_any(monkeypatch, fake_cuda, clock):
    def get_device_properties(unit: int) -> object:
        raise RuntimeError("no such device")

    monkeypatch.setattr(fake_cuda, "get_device_properties", get_device_properties, raising=False)
    on_its_device(CudaEventTimer).flush()
    assert fake_cuda.flushes == [FLUSH_BYTES]


def test_only_the_first_few_timers_on_a_device_time_a_flush(fake_cuda, clock):
    for _ in range(FLUSHES_TIMED):
        on_its_device(CudaEventTimer).flush()
    events = len(fake_cuda.events)
    later = on_its_device(CudaEventTimer)
    later.flush()
    assert len(fake_cuda.events) == events, "no events around it: only the flush goes ahead of the start mark"
    later.collect()
    assert later.flush_microseconds() is None, "the earlier timers' flushes are read by their own collect"


def test_a_device_without_a_spin_kernel_times_no_flush(fake_npu, clock):
    timer = on_its_device(NpuEventTimer)
    timer.flush()
    timer.collect()
    assert timer.flush_microseconds() is None and fake_npu.events == []


def test_a_device_module_without_a_spin_kernel_holds_nothing(fake_npu, clock):
    assert not hasattr(fake_npu, "_sleep")
    timer = on_its_device(NpuEventTimer)
    assert timer.hold(100.0) is False, "it says it could not hold"
    assert fake_npu.spins == [] and fake_npu.events == []


def test_wallclock_runs_before_off_the_clock():
    timer = WallclockTimer()
    timer.sample(lambda: None, before=lambda: time.sleep(0.05))
    (sample,) = timer.collect()
    assert sample < 50.0


def test_event_timer_is_unavailable_without_a_device(device_timer):
    cls, device = device_timer
    device.available = False
    assert not cls.is_available()


def test_npu_timer_needs_torch_npu():
    assert not NpuEventTimer.is_available()
    assert NpuEventTimer.device_module() is None


# -- automatic selection ----------------------------------------------------------------------


def test_auto_on_cpu_is_wallclock(cpu_host):
    session = Session.create(load_settings())
    assert type(session.make_timer()) is WallclockTimer
    assert session.hardware["device"] == "cpu"


def test_auto_on_cuda_is_cuda_event(fake_cuda):
    session = Session.create(load_settings())
    assert type(session.make_timer()) is CudaEventTimer
    assert session.hardware["device"] == "cuda"
    assert session.hardware["name"] == "Fake cuda device"


def test_auto_on_an_npu_is_the_ascend_default_set(fake_npu):
    session = Session.create(load_settings())
    assert type(session.make_timer()) is NpuEventTimer
    assert type(session.cache) is JsonCache
    assert type(session.make_reducer()) is LocalReducer, "world-max needs torch.distributed initialised"
    assert session.hardware["device"] == "npu"
    assert (session.hardware["name"], session.hardware["count"]) == ("Fake npu device", 2)


def test_auto_prefers_the_npu_when_both_are_present(fake_cuda, fake_npu):
    assert type(Session.create(load_settings()).make_timer()) is NpuEventTimer


def test_a_session_chooses_its_timer_once(fake_cuda, monkeypatch):
    # Every measurement makes a timer: asking each timer whether it can run, each time, cost 0.1 ms.
    session = Session.create(load_settings())
    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append(1) or True)
    timers = [session.make_timer() for _ in range(3)]
    assert [type(t) for t in timers] == [CudaEventTimer] * 3 and len({id(t) for t in timers}) == 3
    assert session.timer is CudaEventTimer and not asked


# -- a whole tuning on the fake NPU --------------------------------------------------------------


def host_work():
    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def on_host(x, n):
        return sum(range(x * n))  # nothing between the events: they read what empty runs read

    return on_host


def test_work_that_leaves_the_gpu_idle_is_told_to_use_the_wall_objective(monkeypatch, fake_cuda, isolated):
    install_session(monkeypatch)
    with pytest.warns(RuntimeWarning, match="on_host: every candidate.*device time cannot rank it"):
        host_work()(10)
    # The record says so too: its times are no device work's, and `cache show` and `report` say what they are.
    (record,) = stored_records(isolated, "on_host")
    assert record["measured_with"]["timed"] == "idle device"
    shown = timed_text(TuningRecord.from_data(record))
    assert shown.startswith("device time of an idle device (every candidate read what an empty run"), shown


def test_without_a_hold_the_device_is_not_called_idle(monkeypatch, fake_npu, isolated):
    # No spin kernel: an empty run's marks span the host's launch too, as a tiny kernel's do.
    install_session(monkeypatch)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*runs on the host")
        host_work()(10)


def test_tuning_on_the_fake_npu_times_with_npu_events(monkeypatch, fake_npu, clock, isolated):
    install_session(monkeypatch)
    calls = []

    @autotune(config_space=[{"cost": 3.0}, {"cost": 0.5}, {"cost": 1.0}], key_fn=lambda x: x)
    def on_npu(x, cost):
        calls.append(cost)
        clock.advance(cost)
        return cost

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*runs on the host")  # it ran on the device
        assert on_npu(1) == 0.5
    assert stored_records(isolated, "on_npu")[0]["measured_with"]["timed"] == "device", "device work"

    # No spin kernel, so no empty runs for measure.IdleDevice either.
    assert fake_npu.synchronize_calls == 3, "one synchronize per candidate"
    assert len(fake_npu.events) == 2 * 10 * 3, "an event pair per timed run, none for warm-ups"
    (record,) = stored_records(isolated, "on_npu")
    samples = [row["samples_ms"] for row in record["candidates"]]
    assert samples == [pytest.approx([cost] * 10) for cost in (3.0, 0.5, 1.0)]
    assert fake_npu.flushes == [FLUSH_BYTES] * 30, "the L2 is flushed before every timed run"
    assert record["best"]["index"] == 1
    assert record["hardware"]["device"] == "npu"


def test_a_pick_made_on_the_cpu_is_not_reused_on_an_npu(cpu_host, monkeypatch, clock, isolated):
    calls = []

    def build():
        @autotune(config_space=[{"cost": 3.0}, {"cost": 0.5}], key_fn=lambda x: x)
        def moved(x, cost):
            calls.append(cost)
            clock.advance(cost)

        return moved

    install_session(monkeypatch, warmup=0, repeat=1)
    build()(1)
    assert len(calls) == 3

    install_fake_npu(monkeypatch, clock)
    install_session(monkeypatch, warmup=0, repeat=1)
    build()(1)
    assert len(calls) == 6, "another device: a miss"
    assert sorted(r["hardware"]["device"] for r in stored_records(isolated, "moved")) == ["cpu", "npu"]


def precise_timers(coarse_ms, fine_ms, seen, ran, expected=None):
    """A coarse first-pass timer and a fine one for the re-timing rounds, each reading a table.

    The fine one appends to ``expected`` what each of its instances is told to expect.
    """
    told = [] if expected is None else expected

    def timer(name, times, **members):
        def sample(self, fn, *, before=None):
            fn()
            seen[name].append(ran[-1])
            self.taken.append(times[ran[-1]])

        def collect(self):
            taken, self.taken = self.taken, []
            return taken

        cls = type(
            name,
            (),
            {
                "name": name,
                "auto_priority": -1,
                "is_available": classmethod(lambda cls: True),
                "__init__": lambda self: setattr(self, "taken", []),
                "sample": sample,
                "collect": collect,
                **members,
            },
        )
        plugin = types.ModuleType(f"tests_{name}_timer")

        @hookimpl
        def kerneltune_register_timers(register):
            register(cls)

        plugin.kerneltune_register_timers = kerneltune_register_timers
        return plugin

    return timer("coarse", coarse_ms), timer(
        "fine", fine_ms, first_pass="coarse", expect=lambda self, milliseconds: told.append(milliseconds)
    )


def test_a_precise_timer_takes_the_near_tie_rounds_and_its_first_pass_timer_the_rest(monkeypatch):
    # The first pass ("coarse") cannot tell configs 1 and 2 apart; the re-timing rounds ("fine") can.
    seen, ran = {"coarse": [], "fine": []}, []
    plugins = precise_timers({0: 5.0, 1: 1.0, 2: 1.0}, {0: 5.0, 1: 1.2, 2: 0.8}, seen, ran)
    install_session(monkeypatch, extra=plugins, timer="fine", warmup=0, repeat=3, tie_rounds=2, cache="none")

    @autotune(config_space=[{"c": c} for c in (0, 1, 2)], key_fn=lambda c=None: 0)
    def which(c):
        ran.append(c)
        return c

    assert which() == 2, "the fine timer's rounds decide"
    assert sorted(set(seen["coarse"])) == [0, 1, 2], "every candidate's first pass by the coarse timer"
    assert sorted(set(seen["fine"])) == [1, 2], "the near-tie rounds, and only they, by the fine one"


def test_a_launch_bound_first_pass_leaves_every_candidate_within_twice_its_best_to_the_precise_timer(
    monkeypatch,
):
    # Launches of a few us: the first pass reads the launch's jitter, and orders the configs otherwise
    # than the kernel-only timer; none is a near tie of its best (3) by its own measure.
    coarse = {0: 0.0050, 1: 0.0046, 2: 0.0058, 3: 0.0040, 4: 0.0075, 5: 0.0300}
    fine = {0: 0.0012, 1: 0.0031, 2: 0.0010, 3: 0.0020, 4: 0.0015, 5: 0.0250}
    seen, ran, expected = {"coarse": [], "fine": []}, [], []
    plugins = precise_timers(coarse, fine, seen, ran, expected)
    install_session(monkeypatch, extra=plugins, timer="fine", warmup=0, repeat=3, tie_rounds=2, cache="none")

    @autotune(config_space=[{"c": c} for c in coarse], key_fn=lambda c=None: 0)
    def which(c):
        ran.append(c)
        return c

    assert which() == 2, "the kernel-only rounds decide among every launch-bound candidate"
    assert sorted(set(seen["fine"])) == [0, 1, 2, 3, 4], "all within twice the best (8 us), not 5 (30 us)"
    # Every fine timer of every round is told the first pass's fastest mean, not its own candidate's
    # nor one the rounds lowered: the runs a graph holds are sized alike for all of them.
    assert len(expected) >= 5 * 2 and all(e == pytest.approx(0.0040) for e in expected), expected


def test_a_first_pass_that_is_not_launch_bound_keeps_its_near_ties(monkeypatch):
    # The same order, a thousand times slower: the first pass's near ties alone are re-timed.
    seen, ran = {"coarse": [], "fine": []}, []
    coarse = {0: 5.0, 1: 4.6, 2: 5.8, 3: 4.0}
    plugins = precise_timers(coarse, {0: 1.2, 1: 3.1, 2: 1.0, 3: 2.0}, seen, ran)
    install_session(monkeypatch, extra=plugins, timer="fine", warmup=0, repeat=3, tie_rounds=2, cache="none")

    @autotune(config_space=[{"c": c} for c in coarse], key_fn=lambda c=None: 0)
    def which(c):
        ran.append(c)
        return c

    assert which() == 3 and seen["fine"] == [], "no near tie: the first pass's best stands"


# -- the cuda-graph timer, against a double of CUDA graphs -------------------------------------

RUN_MS = 0.002  # what one run of the work below takes the fake device


@pytest.fixture
def fake_graphs(monkeypatch, fake_cuda):
    """CUDA graphs on the fake device: a capture records the runs made in it, a replay makes them."""
    monkeypatch.setattr(CudaGraphTimer, "_sides", {})
    state = types.SimpleNamespace(capturing=None, refuse=False)

    class Stream:
        def wait_stream(self, other) -> None:
            pass

    class Graph:
        def __init__(self) -> None:
            self.runs = 0

        def capture_begin(self) -> None:
            state.capturing = self

        def capture_end(self) -> None:
            state.capturing = None

        def replay(self) -> None:
            fake_cuda.clock.advance(self.runs * RUN_MS)

    def run() -> None:
        if state.capturing is None:
            fake_cuda.clock.advance(RUN_MS)
        elif state.refuse:
            raise RuntimeError("operation not permitted when stream is capturing")
        else:
            state.capturing.runs += 1

    monkeypatch.setattr(fake_cuda, "Stream", lambda unit: Stream(), raising=False)
    monkeypatch.setattr(fake_cuda, "current_stream", lambda unit=None: Stream())
    monkeypatch.setattr(fake_cuda, "stream", lambda side: contextlib.nullcontext(), raising=False)
    monkeypatch.setattr(fake_cuda, "CUDAGraph", Graph, raising=False)
    state.run = run
    return state


@pytest.mark.parametrize(("expected_ms", "runs"), [(0.004, int(GRAPH_FILL_US // 4)), (0.5, 1), (None, 1)])
def test_a_cuda_graph_holds_a_short_run_back_to_back_and_each_sample_is_one_runs_time(
    fake_graphs, expected_ms, runs
):
    timer = CudaGraphTimer(CudaDevice())
    if expected_ms is not None:
        timer.expect(expected_ms)
    for _ in range(3):
        timer.sample(fake_graphs.run)
    assert timer.runs == runs and timer._graph.runs == runs, "captured as many runs as the replay holds"
    assert timer.collect() == pytest.approx([RUN_MS] * 3), "a replay's time over the runs it holds"


def test_work_a_cuda_graph_cannot_capture_is_timed_one_run_a_sample(fake_graphs):
    fake_graphs.refuse = True
    timer = CudaGraphTimer(CudaDevice())
    timer.expect(0.004)  # sized for 37 runs back to back, then refused
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            fake_graphs.refuse = timer._graph is None  # the capture refuses; the runs as they are do not
            timer.sample(fake_graphs.run)
    assert timer._graph is False and timer.runs == 1
    assert timer.collect() == pytest.approx([RUN_MS] * 3), "each run's own time, not over 37"
    assert any("cannot capture" in str(w.message) for w in caught)
