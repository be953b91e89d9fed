"""``triton_dist.autotuner``: tune the ``triton.autotune`` kernels of an outer function in context."""

from kerneltune.core.driving import ContextualAutoTuner, contextual_autotune

__all__ = ["ContextualAutoTuner", "contextual_autotune"]
