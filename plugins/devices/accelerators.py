"""CUDA GPUs and Ascend NPUs as kerneltune devices: one implementation, two modules.

``torch.cuda`` and ``torch.npu`` (which torch_npu registers on import) share
every call a device needs, so the two classes differ only in their module,
device type and facts.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kerneltune.core import TorchDeviceType, hookimpl


class TorchDevice(TorchDeviceType):
    """A device behind a torch device module (``torch.cuda``, ``torch.npu``)."""

    name: ClassVar[str] = ""
    auto_priority: ClassVar[int] = 0
    #: A program that never imported torch has no tensor on the device: ``auto`` does not ask.
    auto_requires_import: ClassVar[str] = "torch"
    shares_memory: ClassVar[bool] = True

    @property
    def _module(self) -> Any:
        return self.device_module()

    def owns(self, tensor: Any) -> bool:
        """Whether the tensor's device type is this device's."""
        return getattr(getattr(tensor, "device", None), "type", None) == self.device_type

    def index_of(self, tensor: Any) -> int:
        """The tensor's device index."""
        return int(tensor.device.index)

    def in_use(self) -> bool:
        """Whether torch has made this process's context on the device."""
        return bool(self._module.is_initialized())

    def current(self) -> int:
        """The device module's current device."""
        return int(self._module.current_device())

    def set_current(self, index: int) -> None:
        """``set_device(index)``."""
        self._module.set_device(index)

    def synchronize(self) -> None:
        """Wait for the current device."""
        self._module.synchronize()

    def check_health(self) -> None:
        """Synchronise, then run one tiny operation and read it back; both raise on a broken context."""
        if not self.in_use():
            return
        import torch

        self._module.synchronize()
        torch.ones(1, device=self.device_type).add_(1).item()

    def release(self) -> None:
        """``empty_cache()``, once the context exists."""
        if self.in_use():
            self._module.empty_cache()

    def facts(self) -> dict[str, Any]:
        """The type, the first device's name and how many there are."""
        module = self._module
        return {"device": self.name, "name": module.get_device_name(0), "count": module.device_count()}


class CudaDevice(TorchDevice):
    """NVIDIA (and ROCm) GPUs through ``torch.cuda``."""

    name = "cuda"
    auto_priority = 10
    device_type = "cuda"

    def facts(self) -> dict[str, Any]:
        """As for every torch device, and the first device's compute capability."""
        return {**super().facts(), "capability": list(self._module.get_device_capability(0))}


class NpuDevice(TorchDevice):
    """Ascend NPUs through ``torch.npu``: torch_npu registers the module and NPU tensor sharing on import."""

    name = "npu"
    auto_priority = 20
    device_type = "npu"


@hookimpl
def kerneltune_register_devices(register):
    register(CudaDevice)
    register(NpuDevice)
