"""Profile families for NVIDIA GPUs: warps and pipeline stages.

Matrix kernels (``tl.dot``) get ``num_warps`` x ``num_stages``, since the
software pipeline of the K loop and the warps sharing a tile decide their
speed. Vector kernels get more warp counts and fewer stages: they have short
or no loops to pipeline, and their speed is mostly how many threads stream
each block.

``num_ctas`` (Hopper clusters) is left out: on an H200 with triton 3.6 a
plain ``tl.dot`` kernel with ``num_ctas=2`` fails in Triton's CTA-planning
pass (seen 2026-11-29), so half the family would be compile failures, and
clusters pay only for kernels written for them (TMA multicast), whose authors
fix ``num_ctas`` at launch.

``maxnreg`` is accepted by Triton but left out of both families: capping
registers trades spills for occupancy, which rarely pays for tiled kernels
and would double every family. A caller who wants it fixes it at launch.
"""

from __future__ import annotations

from typing import Any

from kerneltune.core import hookimpl
from kerneltune.core.profiles import CompileTarget, option_grid


class NvidiaMatrixProfiles:
    """``num_warps`` x ``num_stages`` for ``tl.dot`` kernels."""

    name = "nvidia-matrix"
    operator = "matrix"
    backends = ("cuda",)

    @classmethod
    def is_available(cls) -> bool:
        """Always: the profiles depend only on the target handed in."""
        return True

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """Triton's defaults (4 warps, 3 stages) first, then the rest of the grid."""
        choices = {"num_warps": [4, 2, 8], "num_stages": [3, 2, 4, 5]}
        return option_grid(choices, target.options)


class NvidiaVectorProfiles:
    """``num_warps`` 1..16 x ``num_stages`` 1..3 for element-wise and reduction kernels."""

    name = "nvidia-vector"
    operator = "vector"
    backends = ("cuda",)

    @classmethod
    def is_available(cls) -> bool:
        """Always: the profiles depend only on the target handed in."""
        return True

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """Triton's defaults (4 warps, 3 stages) first, then the rest of the grid."""
        choices = {"num_warps": [4, 1, 2, 8, 16], "num_stages": [3, 1, 2]}
        return option_grid(choices, target.options)


@hookimpl
def kerneltune_register_profile_families(register):
    register(NvidiaMatrixProfiles)
    register(NvidiaVectorProfiles)
