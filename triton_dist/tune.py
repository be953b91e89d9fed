"""``triton_dist.tune``: function-level autotuning of host launchers."""

from kerneltune.core.drivers.function_tuner import AutoTuner, autotune

__all__ = ["AutoTuner", "autotune"]
