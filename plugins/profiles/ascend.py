"""Profile families for Ascend NPUs (triton-ascend): ``mixcv`` and ``vector-safe``.

Every option is used only where the installed triton-ascend accepts it;
``unit_flag`` is never searched. None of this has run on Ascend hardware in
kerneltune's CI. docs/search_params.md ("Operator classes and profile
families") and docs/ascend.md list each family's options.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kerneltune.core import UNSET, AlwaysAvailable, CompileTarget, hookimpl, option_grid, unique_profiles

MULTIBUFFER_CHILDREN = (
    "limit_auto_multi_buffer_of_local_buffer",
    "limit_auto_multi_buffer_only_for_local_buffer",
)


class AscendMixCVProfiles(AlwaysAvailable):
    """Workspace x tile mix x multibuffer (with its children) for ``tl.dot`` kernels.

    These kernels (flash attention, matmul) run on the cube and vector cores
    together. The tile mix options say how many parts a tile's vector and
    cube work is split into; with multibuffer off its children
    (:data:`MULTIBUFFER_CHILDREN`) mean nothing, so no profile sets them.
    """

    name: ClassVar[str] = "ascend-mixcv"
    operator: ClassVar[str] = "matrix"
    backends: ClassVar[tuple[str, ...]] = ("npu",)

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """The compiler's defaults first; multibuffer children only with multibuffer on."""
        shared: dict[str, list[Any]] = {
            "set_workspace_multibuffer": [UNSET, 2, 4],
            "tile_mix_vector_loop": [UNSET, 2, 4],
            "tile_mix_cube_loop": [UNSET, 2, 4],
        }
        multibuffer_on = {
            **shared,
            "limit_auto_multi_buffer_of_local_buffer": [UNSET, "no-limit"],
            "limit_auto_multi_buffer_only_for_local_buffer": [UNSET, True],
        }
        multibuffer_off = {**shared, "multibuffer": [False]}
        return unique_profiles(
            option_grid(multibuffer_on, target.options) + option_grid(multibuffer_off, target.options)
        )


class AscendVectorSafeProfiles(AlwaysAvailable):
    """Multibuffer on/off (and UB saving) for kernels without ``tl.dot``.

    Only options that change buffering, never the tiling or the cube/vector
    split: ``multibuffer`` on or off and, where the installed triton-ascend
    has it, ``enable_ubuf_saving``.
    """

    name: ClassVar[str] = "ascend-vector-safe"
    operator: ClassVar[str] = "vector"
    backends: ClassVar[tuple[str, ...]] = ("npu",)

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """The compiler's defaults first."""
        return option_grid(
            {"multibuffer": [UNSET, False], "enable_ubuf_saving": [UNSET, True]}, target.options
        )


@hookimpl
def kerneltune_register_profile_families(register):
    register(AscendMixCVProfiles)
    register(AscendVectorSafeProfiles)
