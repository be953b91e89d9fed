"""Devices: the contract, the built-in cpu, cuda and npu plugins, and how the engine chooses one.

The CUDA and NPU plugins run here against a double of the device module
(``torch.cuda``, ``torch.npu``); the CUDA one runs against the real module in
the ``gpu`` tests at the end. Isolation's choice of the worker's device is
checked with a device registered at run time, whose tensors are the host
tensors of one dtype.
"""

from __future__ import annotations

import types

import pytest
import torch
from kerneltune.core import (
    PluginError,
    Session,
    add_plugin,
    hookimpl,
    load_settings,
    remove_plugin,
)
from kerneltune.core.driving import current_session
from kerneltune.core.isolation.targets import worker_device
from kerneltune.core.plugin_system.contracts import Device
from kerneltune.core.torch_devices import torch_device_module
from kerneltune.plugins.devices.accelerators import CudaDevice, NpuDevice
from kerneltune.plugins.devices.host import CpuDevice
from kerneltune.plugins.timers.events import CudaEventTimer
from test_timers import install_fake_npu


class FakeDeviceModule(types.ModuleType):
    """What the device plugins call on ``torch.cuda`` / ``torch.npu``, with every call noted."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.calls: list[tuple[str, object]] = []
        self.initialized = False
        self.device = 0

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def current_device(self) -> int:
        return self.device

    def set_device(self, index: int) -> None:
        self.calls.append(("set_device", index))
        self.device = index
        self.initialized = True

    def synchronize(self) -> None:
        self.calls.append(("synchronize", None))

    def empty_cache(self) -> None:
        self.calls.append(("empty_cache", None))

    def device_count(self) -> int:
        return 4

    def get_device_name(self, index: int = 0) -> str:
        return f"Fake {self.__name__} {index}"

    def get_device_capability(self, index: int = 0) -> tuple[int, int]:
        return (9, 0)


class Lent:
    """A registered device whose tensors are the host's float64 tensors, on unit 3."""

    name = "lent"
    auto_priority = 50
    shares_memory = False
    used = False

    @classmethod
    def is_available(cls) -> bool:
        return True

    def owns(self, tensor):
        return tensor.dtype == torch.float64

    def index_of(self, tensor):
        return 3

    def in_use(self):
        return self.used

    def current(self):
        return 1

    def set_current(self, index):
        pass

    def synchronize(self):
        pass

    def check_health(self):
        pass

    def release(self):
        pass

    def facts(self):
        return {"device": "lent", "name": "lent", "count": 4}


@pytest.fixture
def lent(monkeypatch):
    plugin = types.ModuleType("tests_lent_device")

    @hookimpl
    def kerneltune_register_devices(register):
        register(Lent)

    plugin.kerneltune_register_devices = kerneltune_register_devices
    add_plugin(plugin)
    yield Lent
    remove_plugin(plugin)


def test_the_built_ins_follow_the_contract():
    for cls in (CpuDevice, CudaDevice, NpuDevice):
        assert isinstance(cls(), Device), cls
    session = Session.create(load_settings())
    assert {"cpu", "cuda", "npu"} <= set(session.registries.devices.names())
    assert [session.registries.devices.owners[name] for name in ("cpu", "cuda", "npu")] == [
        "kerneltune.plugins.devices.host",
        "kerneltune.plugins.devices.accelerators",
        "kerneltune.plugins.devices.accelerators",
    ]


def test_on_a_cpu_host_the_session_runs_on_the_host(cpu_host):
    session = Session.create(load_settings())
    assert type(session.device) is CpuDevice
    assert [type(device) for device in session.placement][:1] == [CpuDevice]
    assert session.hardware["device"] == "cpu"
    host = CpuDevice()
    assert host.owns(torch.zeros(1)) and host.index_of(torch.zeros(1)) == 0
    assert host.in_use() and host.current() == 0


def test_the_device_plugins_and_timers_find_one_module_by_device_type(monkeypatch):
    cuda = FakeDeviceModule("cuda")
    monkeypatch.setattr(torch, "cuda", cuda)
    assert torch_device_module("cuda") is cuda, "looked up at each call, so a replaced module is heard"
    assert CudaDevice.device_module() is cuda and CudaEventTimer.device_module() is cuda
    # torch.npu exists only once torch_npu is imported, and torch_npu is not installed here.
    assert torch_device_module("npu") is None and NpuDevice.device_module() is None
    assert torch_device_module("no-such-device") is None


def test_the_cuda_plugin_asks_the_device_module(monkeypatch):
    cuda = FakeDeviceModule("cuda")
    monkeypatch.setattr(torch, "cuda", cuda)
    device = CudaDevice()
    assert not device.in_use()
    device.check_health()
    device.release()
    assert cuda.calls == [], "a device never used here is neither checked nor emptied"
    device.set_current(2)
    assert device.in_use() and device.current() == 2
    device.synchronize()
    device.release()
    assert cuda.calls == [("set_device", 2), ("synchronize", None), ("empty_cache", None)]
    assert device.facts() == {"device": "cuda", "name": "Fake cuda 0", "count": 4, "capability": [9, 0]}
    assert not device.owns(torch.zeros(1))
    assert device.owns(types.SimpleNamespace(device=torch.device("cuda", 1)))
    assert device.index_of(types.SimpleNamespace(device=torch.device("cuda", 1))) == 1


def test_the_npu_plugin_is_the_ascend_default(monkeypatch):
    from tuning_doubles import FakeClock

    install_fake_npu(monkeypatch, FakeClock())
    session = Session.create(load_settings())
    assert type(session.device) is NpuDevice
    assert session.hardware["device"] == "npu"
    assert NpuDevice().owns(types.SimpleNamespace(device=torch.device("meta"))) is False


def test_a_timer_names_its_device_and_is_given_it(monkeypatch, tmp_path):
    cuda = FakeDeviceModule("cuda")
    monkeypatch.setattr(torch, "cuda", cuda)
    (tmp_path / "kerneltune.toml").write_text('timer = "wallclock"\n')
    assert type(Session.create(load_settings()).device) is CudaDevice, "wallclock names none: auto"
    (tmp_path / "kerneltune.toml").write_text('timer = "cuda-event"\n')
    session = Session.create(load_settings())
    timer = session.make_timer()
    assert type(timer) is CudaEventTimer and timer._device is session.device


def test_a_timer_naming_a_device_nobody_registered_fails_the_session(tmp_path):
    class Orphan:
        name = "orphan-timer"
        device = "nowhere"

        @classmethod
        def is_available(cls):
            return True

    plugin = types.ModuleType("tests_orphan_timer")
    plugin.kerneltune_register_timers = hookimpl(lambda register: register(Orphan))
    (tmp_path / "kerneltune.toml").write_text('timer = "orphan-timer"\n')
    with pytest.raises(
        PluginError,
        match=r"device 'nowhere' is not available \(installed: .*cpu.*\); "
        r"set by the device attribute of timer 'orphan-timer'",
    ):
        Session.create(load_settings(), extra=(plugin,))


def test_isolation_runs_where_the_tensors_are(lent, cpu_host):
    def where(*args):
        return worker_device(args, {}, current_session())

    assert where(torch.zeros(2, dtype=torch.float64)) == "lent:3"
    assert where(torch.zeros(2), [torch.zeros(2, dtype=torch.float64)]) == "lent:3", "any tensor it owns"
    assert where(torch.zeros(2)) == "cpu:0", "a device that owns nothing and is not in use is passed by"
    assert where(2) == "cpu:0"
    Lent.used = True
    try:
        assert where(2) == "lent:1", "in use: its current unit"
    finally:
        Lent.used = False


@pytest.mark.gpu
def test_the_cuda_plugin_on_a_gpu():
    device = CudaDevice()
    assert CudaDevice.is_available()
    x = torch.ones(4, device=f"cuda:{torch.cuda.device_count() - 1}")
    assert device.owns(x) and not device.owns(x.cpu())
    assert device.index_of(x) == torch.cuda.device_count() - 1
    assert device.in_use() and device.current() == torch.cuda.current_device()
    device.set_current(0)
    assert torch.cuda.current_device() == 0
    device.synchronize()
    device.check_health()
    device.release()
    assert device.facts()["capability"] == list(torch.cuda.get_device_capability(0))
    assert worker_device((x,), {}, current_session()) == f"cuda:{device.index_of(x)}"
    assert worker_device((2,), {}, current_session()) == "cuda:0", "CUDA in use: the current GPU"
