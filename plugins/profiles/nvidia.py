"""Profile families for NVIDIA GPUs: warps and pipeline stages.

docs/search_params.md ("Operator classes and profile families") says what
each family holds and why.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kerneltune.core import AlwaysAvailable, CompileTarget, hookimpl, option_grid

# Left out of both families: ``num_ctas`` (Triton's CTA planning fails plain ``tl.dot`` kernels
# with it, and clusters pay only for kernels written for them) and ``maxnreg`` (capping registers
# rarely pays for tiled kernels and would double every family); a caller fixes either at launch.


class NvidiaMatrixProfiles(AlwaysAvailable):
    """``num_warps`` x ``num_stages`` for ``tl.dot`` kernels.

    The software pipeline of the K loop and the warps sharing a tile decide
    these kernels' speed. Every shape is probed with 8 warps as well as the
    default 4 (:meth:`probe_profiles`).
    """

    name: ClassVar[str] = "nvidia-matrix"
    operator: ClassVar[str] = "matrix"
    backends: ClassVar[tuple[str, ...]] = ("cuda",)

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """Triton's defaults (4 warps, 3 stages) first, then the rest of the grid."""
        choices = {"num_warps": [4, 2, 8], "num_stages": [3, 2, 4, 5]}
        return option_grid(choices, target.options)

    def probe_profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """The default and 8 warps, both at 3 stages: the shape search scores a tile by the better.

        At 4 warps a 128x256 tile's fp32 accumulator alone needs 256 registers
        per thread and spills, so the largest tiles, the fastest at 8 warps,
        would be ranked out. A probe only ever lowers a shape's score, so small
        tiles keep their 4-warp score. Stages are left to the profile search.
        """
        return option_grid({"num_warps": [4, 8], "num_stages": [3]}, target.options)


class NvidiaVectorProfiles(AlwaysAvailable):
    """``num_warps`` 1..16 x ``num_stages`` 1..3 for element-wise and reduction kernels.

    These kernels have short or no loops to pipeline, and their speed is
    mostly how many threads stream each block. Probed with the base alone: a
    second probe would add a measurement per shape to their costliest stage.
    """

    name: ClassVar[str] = "nvidia-vector"
    operator: ClassVar[str] = "vector"
    backends: ClassVar[tuple[str, ...]] = ("cuda",)

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """Triton's defaults (4 warps, 3 stages) first, then the rest of the grid."""
        choices = {"num_warps": [4, 1, 2, 8, 16], "num_stages": [3, 1, 2]}
        return option_grid(choices, target.options)


@hookimpl
def kerneltune_register_profile_families(register):
    register(NvidiaMatrixProfiles)
    register(NvidiaVectorProfiles)
