"""Compile-option profile families (NVIDIA, Ascend) and how one is chosen.

The Ascend families are checked for the options they produce and their
dependencies only; nothing here runs on Ascend hardware.
"""

from __future__ import annotations

import attrs
import pytest
from kerneltune.core import PluginError, Session, load_settings
from kerneltune.core.search.families import choose_family, family_probes, family_profiles
from kerneltune.core.values.profiles import UNSET, CompileTarget, option_grid
from kerneltune.plugins.profiles.ascend import (
    MULTIBUFFER_CHILDREN,
    AscendMixCVProfiles,
    AscendVectorSafeProfiles,
)
from kerneltune.plugins.profiles.nvidia import NvidiaMatrixProfiles, NvidiaVectorProfiles
from tuning_doubles import family_plugin

CUDA_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "debug"})
ASCEND_OPTIONS = frozenset(
    {
        "num_warps",
        "num_stages",
        "multibuffer",
        "unit_flag",
        "set_workspace_multibuffer",
        "tile_mix_vector_loop",
        "tile_mix_cube_loop",
        "limit_auto_multi_buffer_of_local_buffer",
        "limit_auto_multi_buffer_only_for_local_buffer",
        "enable_ubuf_saving",
    }
)


def cuda(arch):
    return CompileTarget(backend="cuda", arch=arch, warp_size=32, options=CUDA_OPTIONS)


def npu(options=ASCEND_OPTIONS):
    return CompileTarget(backend="npu", arch="Ascend910B", warp_size=0, options=options)


def session(*plugins):
    return Session.create(attrs.evolve(load_settings(), cache="memory"), extra=plugins)


def test_option_grid_puts_first_values_first_and_drops_what_the_target_lacks():
    grid = option_grid({"a": [1, 2], "b": [UNSET, True], "zz": [1, 2]}, {"a", "b"})
    assert grid == [{"a": 1}, {"a": 1, "b": True}, {"a": 2}, {"a": 2, "b": True}]


def test_nvidia_matrix_family_is_warps_by_stages_on_every_arch():
    ampere = NvidiaMatrixProfiles().profiles(cuda(80))
    hopper = NvidiaMatrixProfiles().profiles(cuda(90))
    assert ampere == hopper
    assert hopper[0] == {"num_warps": 4, "num_stages": 3}
    assert len(hopper) == 12
    assert {p["num_warps"] for p in hopper} == {2, 4, 8}
    assert {p["num_stages"] for p in hopper} == {2, 3, 4, 5}
    assert all("num_ctas" not in p and "maxnreg" not in p for p in hopper)


def test_nvidia_vector_family():
    profiles = NvidiaVectorProfiles().profiles(cuda(90))
    assert profiles[0] == {"num_warps": 4, "num_stages": 3}
    assert {p["num_warps"] for p in profiles} == {1, 2, 4, 8, 16}
    assert len(profiles) == 15


def test_ascend_mixcv_has_no_multibuffer_children_with_multibuffer_off():
    profiles = AscendMixCVProfiles().profiles(npu())
    assert profiles[0] == {}
    assert len(profiles) == 3 * 3 * 3 * (2 * 2 + 1)
    off = [p for p in profiles if p.get("multibuffer") is False]
    assert off and all(not set(MULTIBUFFER_CHILDREN) & set(p) for p in off)
    on = [p for p in profiles if "multibuffer" not in p]
    assert {p.get("limit_auto_multi_buffer_of_local_buffer") for p in on} == {None, "no-limit"}
    assert {p.get("limit_auto_multi_buffer_only_for_local_buffer") for p in on} == {None, True}
    assert {p.get("set_workspace_multibuffer") for p in profiles} == {None, 2, 4}
    assert {p.get("tile_mix_vector_loop") for p in profiles} == {None, 2, 4}
    assert {p.get("tile_mix_cube_loop") for p in profiles} == {None, 2, 4}
    assert all("unit_flag" not in p for p in profiles)


def test_ascend_families_use_only_options_the_installed_compiler_accepts():
    older = npu(frozenset({"multibuffer", "set_workspace_multibuffer"}))
    profiles = AscendMixCVProfiles().profiles(older)
    assert {frozenset(p.items()) for p in profiles} == {
        frozenset(),
        frozenset({("set_workspace_multibuffer", 2)}),
        frozenset({("set_workspace_multibuffer", 4)}),
        frozenset({("multibuffer", False)}),
        frozenset({("multibuffer", False), ("set_workspace_multibuffer", 2)}),
        frozenset({("multibuffer", False), ("set_workspace_multibuffer", 4)}),
    }
    vector = AscendVectorSafeProfiles().profiles(npu())
    assert vector == [
        {},
        {"enable_ubuf_saving": True},
        {"multibuffer": False},
        {"multibuffer": False, "enable_ubuf_saving": True},
    ]
    assert AscendVectorSafeProfiles().profiles(npu(frozenset({"multibuffer"}))) == [
        {},
        {"multibuffer": False},
    ]


@pytest.mark.parametrize(
    ("target", "operator", "name"),
    [
        (cuda(90), "matrix", "nvidia-matrix"),
        (cuda(90), "vector", "nvidia-vector"),
        (npu(), "matrix", "ascend-mixcv"),
        (npu(), "vector", "ascend-vector-safe"),
    ],
)
def test_the_family_is_chosen_by_backend_and_operator(target, operator, name):
    family = choose_family(session(), target, operator)
    assert family.name == name
    assert family_profiles(family, target)


def test_no_family_for_a_backend_means_none_and_a_bad_operator_is_an_error():
    hip = CompileTarget(backend="hip", arch="gfx942", warp_size=64, options=CUDA_OPTIONS)
    assert choose_family(session(), hip, "matrix") is None
    with pytest.raises(ValueError, match="matrix, vector"):
        choose_family(session(), hip, "cube")


class RivalMatrix:
    name = "rival-matrix"
    operator = "matrix"
    backends = ("cuda",)

    @classmethod
    def is_available(cls):
        return True

    def profiles(self, target):
        return [{"num_warps": 4}, {"bogus": 1}]


def test_the_nvidia_matrix_family_probes_shapes_at_4_and_8_warps_and_the_others_at_their_base():
    matrix = NvidiaMatrixProfiles()
    profiles = family_profiles(matrix, cuda(90))
    assert family_probes(matrix, cuda(90), profiles) == [
        {"num_warps": 4, "num_stages": 3},
        {"num_warps": 8, "num_stages": 3},
    ]
    vector = NvidiaVectorProfiles()
    profiles = family_profiles(vector, cuda(90))
    assert family_probes(vector, cuda(90), profiles) == [profiles[0]]


def test_probes_must_be_profiles_of_the_family_and_the_base_always_comes_first():
    def probing(*probes):
        return type("ProbingMatrix", (RivalMatrix,), {"probe_profiles": lambda self, target: list(probes)})()

    profiles = [{"num_warps": 4}, {"num_warps": 8}]
    assert family_probes(probing({"num_warps": 8}), cuda(90), profiles) == profiles
    assert family_probes(probing({"num_warps": 8}, {"num_warps": 4}), cuda(90), profiles) == profiles
    with pytest.raises(PluginError, match=r"rival-matrix.*probes with \{'num_warps': 16\}"):
        family_probes(probing({"num_warps": 16}), cuda(90), profiles)


def test_two_families_tying_for_one_backend_name_both():
    with pytest.raises(PluginError, match=r"nvidia-matrix.*rival-matrix|rival-matrix.*nvidia-matrix"):
        choose_family(session(family_plugin(RivalMatrix)), cuda(90), "matrix")


def test_a_higher_priority_wins_and_unknown_options_are_refused():
    preferred = type("PreferredMatrix", (RivalMatrix,), {"name": "preferred-matrix", "priority": 1})
    family = choose_family(session(family_plugin(preferred)), cuda(90), "matrix")
    assert family.name == "preferred-matrix"
    with pytest.raises(PluginError, match=r"preferred-matrix.*bogus"):
        family_profiles(family, cuda(90))
