"""Timers: the host clock, and the CUDA / NPU event timers against a double of the device event API."""

from __future__ import annotations

import importlib.machinery
import sys
import time
import types

import pytest
import torch
from kerneltune.core import Session, load_settings
from kerneltune.plugins.caches.files import JsonCache
from kerneltune.plugins.reducers.local import LocalReducer
from kerneltune.plugins.timers.events import CudaEventTimer, NpuEventTimer
from kerneltune.plugins.timers.wallclock import WallclockTimer
from tuning_doubles import FakeClock, install_session, stored_records

from triton_dist.tune import autotune


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


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def fake_cuda(monkeypatch, clock):
    device = FakeDeviceModule("cuda", clock)
    monkeypatch.setattr(torch, "cuda", device)
    return device


def install_fake_npu(monkeypatch, clock: FakeClock) -> FakeDeviceModule:
    """What ``import torch_npu`` provides: a ``torch_npu`` module and ``torch.npu``."""
    torch_npu = types.ModuleType("torch_npu")
    torch_npu.__spec__ = importlib.machinery.ModuleSpec("torch_npu", loader=None)
    monkeypatch.setitem(sys.modules, "torch_npu", torch_npu)
    device = FakeDeviceModule("npu", clock)
    monkeypatch.setattr(torch, "npu", device, raising=False)
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
    timer = cls()
    costs = [1.5, 0.25, 4.0, 2.0]

    for cost in costs:
        timer.sample(lambda cost=cost: clock.advance(cost))
    assert device.synchronize_calls == 0, "sampling must not wait for the device"
    assert len(device.events) == 2 * len(costs)
    assert len({id(e) for e in device.events}) == 2 * len(costs), "fresh events for every sample"
    assert all(e.enable_timing for e in device.events)
    assert all(e.stream is None for e in device.events), "recorded on the current stream"

    assert timer.collect() == costs
    assert device.synchronize_calls == 1

    assert timer.collect() == []
    assert device.synchronize_calls == 1, "nothing outstanding, nothing to wait for"

    timer.sample(lambda: clock.advance(3.0))
    assert timer.collect() == [3.0]
    assert device.synchronize_calls == 2


def test_event_timer_records_around_the_call(device_timer, clock):
    cls, device = device_timer
    timer = cls()
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
    timer = timer_class()
    order = []

    def flush():
        order.append(("flush", len(device.events), len(device.pending)))
        clock.advance(5.0)

    timer.sample(lambda: clock.advance(1.5), before=flush)

    assert order == [("flush", 2, 0)], "both events exist and neither is recorded when the flush runs"
    assert timer.collect() == [1.5], "the flush stays outside the timed region"


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


# -- a whole tuning on the fake NPU --------------------------------------------------------------


def test_tuning_on_the_fake_npu_times_with_npu_events(monkeypatch, fake_npu, clock, isolated):
    install_session(monkeypatch)
    calls = []

    @autotune(config_space=[{"cost": 3.0}, {"cost": 0.5}, {"cost": 1.0}], key_fn=lambda x: x)
    def on_npu(x, cost):
        calls.append(cost)
        clock.advance(cost)
        return cost

    assert on_npu(1) == 0.5

    assert fake_npu.synchronize_calls == 3, "one synchronize per candidate"
    assert len(fake_npu.events) == 2 * 10 * 3, "an event pair per timed run, none for warm-ups"
    (record,) = stored_records(isolated, "on_npu")
    assert [row["samples_ms"] for row in record["candidates"]] == [[3.0] * 10, [0.5] * 10, [1.0] * 10]
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
