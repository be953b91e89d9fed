"""``triton_dist.tune``: function-level autotuning of host launchers."""

from kerneltune.core.driving import AutoTuner, autotune

__all__ = ["AutoTuner", "autotune"]
