"""Profile families for Ascend NPUs (triton-ascend): ``mixcv`` and ``vector-safe``.

``mixcv`` serves ``tl.dot`` kernels (workspace x tile mix x multibuffer);
``vector-safe`` the others (buffering only). Every option is used only where
the installed triton-ascend accepts it; ``unit_flag`` is never searched
(callers that need it fix it at launch, and a fixed option overrides every
profile). None of this has run on Ascend hardware in kerneltune's CI.
docs/search_params.md ("Operator classes and profile families") says why.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kerneltune.core import UNSET, CompileTarget, hookimpl, option_grid, unique_profiles

MULTIBUFFER_CHILDREN = (
    "limit_auto_multi_buffer_of_local_buffer",
    "limit_auto_multi_buffer_only_for_local_buffer",
)


class AscendMixCVProfiles:
    """Workspace x tile mix x multibuffer (with its children) for ``tl.dot`` kernels.

    These kernels (flash attention, matmul) run on the cube and vector cores
    together. Three groups of triton-ascend compile options:

    * workspace: ``set_workspace_multibuffer`` (compiler default, 2 or 4);
    * tile mix: ``tile_mix_vector_loop`` and ``tile_mix_cube_loop`` (default,
      2 or 4), how many parts the vector and cube work of a tile is split into;
    * multibuffer: ``multibuffer`` on (the default) or off; while it is on, its
      children (:data:`MULTIBUFFER_CHILDREN`: default or ``"no-limit"``, and
      default or on) refine it. With multibuffer off the children mean
      nothing, so no profile sets them.
    """

    name: ClassVar[str] = "ascend-mixcv"
    operator: ClassVar[str] = "matrix"
    backends: ClassVar[tuple[str, ...]] = ("npu",)

    @classmethod
    def is_available(cls) -> bool:
        """Always: the profiles depend only on the target handed in."""
        return True

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


class AscendVectorSafeProfiles:
    """Multibuffer on/off (and UB saving) for kernels without ``tl.dot``.

    Only options that change buffering, never the tiling or the cube/vector
    split: ``multibuffer`` on or off and, where the installed triton-ascend
    has it, ``enable_ubuf_saving``.
    """

    name: ClassVar[str] = "ascend-vector-safe"
    operator: ClassVar[str] = "vector"
    backends: ClassVar[tuple[str, ...]] = ("npu",)

    @classmethod
    def is_available(cls) -> bool:
        """Always: the profiles depend only on the target handed in."""
        return True

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """The compiler's defaults first."""
        return option_grid(
            {"multibuffer": [UNSET, False], "enable_ubuf_saving": [UNSET, True]}, target.options
        )


@hookimpl
def kerneltune_register_profile_families(register):
    register(AscendMixCVProfiles)
    register(AscendVectorSafeProfiles)
