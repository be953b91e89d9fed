"""Triton-distributed's documented autotuning API, served by kerneltune.

* :func:`triton_dist.tune.autotune`: tune a whole host launcher.
* :func:`triton_dist.autotuner.contextual_autotune`: tune the
  ``triton.autotune`` kernels an outer function launches, in that context.
"""
