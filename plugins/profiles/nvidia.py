"""Profile families for NVIDIA GPUs: warps and pipeline stages.

``nvidia-matrix`` (``tl.dot`` kernels) crosses ``num_warps`` with
``num_stages`` and probes with 8 warps too; ``nvidia-vector`` tries more
warp counts and fewer stages. ``num_ctas`` and ``maxnreg`` are left out of
both (see the comment above :class:`NvidiaMatrixProfiles`).
docs/search_params.md ("Operator classes and profile families") says why.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kerneltune.core import CompileTarget, hookimpl, option_grid

# Left out of both families:
#
# * ``num_ctas`` (Hopper clusters): Triton's CTA planning fails plain ``tl.dot``
#   kernels with it (docs/benchmark-history.md, "Figures behind choices in the code"), and
#   clusters pay only for kernels written for them (TMA multicast), whose
#   authors fix ``num_ctas`` at launch.
# * ``maxnreg``, which Triton accepts: capping registers trades spills for
#   occupancy, which rarely pays for tiled kernels and would double every
#   family. A caller who wants it fixes it at launch.


class NvidiaMatrixProfiles:
    """``num_warps`` x ``num_stages`` for ``tl.dot`` kernels.

    The software pipeline of the K loop and the warps sharing a tile decide
    these kernels' speed. Every shape is probed with 8 warps as well as the
    default 4 (:meth:`probe_profiles`).
    """

    name: ClassVar[str] = "nvidia-matrix"
    operator: ClassVar[str] = "matrix"
    backends: ClassVar[tuple[str, ...]] = ("cuda",)

    @classmethod
    def is_available(cls) -> bool:
        """Always: the profiles depend only on the target handed in."""
        return True

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """Triton's defaults (4 warps, 3 stages) first, then the rest of the grid."""
        choices = {"num_warps": [4, 2, 8], "num_stages": [3, 2, 4, 5]}
        return option_grid(choices, target.options)

    def probe_profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """The default and 8 warps, both at 3 stages: the shape search scores a tile by the better.

        A ``BLOCK_M x BLOCK_N`` tile keeps its fp32 accumulator in registers
        split over the warps, so at 4 warps a 128x256 tile needs 256 per
        thread for the accumulator alone and spills, so the largest tiles
        run several times slower at 4 warps than at 8, where they are the
        fastest, and without the probe the shape search ranks them out
        (docs/benchmark-history.md, "Figures behind choices in the code"). A probe only
        ever lowers a shape's score, so small tiles, which 8 warps slows,
        keep their 4-warp score. 2 warps would rescue nothing worth it: the
        tiles it suits are small ones, far from the best. Stages shape
        the pipeline rather than what fits, and are left to the profile
        search.
        """
        return option_grid({"num_warps": [4, 8], "num_stages": [3]}, target.options)


class NvidiaVectorProfiles:
    """``num_warps`` 1..16 x ``num_stages`` 1..3 for element-wise and reduction kernels.

    More warp counts and fewer stages than the matrix family: these kernels
    have short or no loops to pipeline, and their speed is mostly how many
    threads stream each block. Probed with the base alone: they are ranked
    well enough there (docs/benchmark-history.md), and a second probe would add a
    measurement per shape to the stage that is most of their cost.
    """

    name: ClassVar[str] = "nvidia-vector"
    operator: ClassVar[str] = "vector"
    backends: ClassVar[tuple[str, ...]] = ("cuda",)

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
