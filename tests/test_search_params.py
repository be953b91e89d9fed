"""``triton.autotune(..., hints={"search_params": ...})`` on CPU, with interpreted kernels.

Times come from the ``scripted`` timer plugin (tests/search_doubles.py), so
every pick below is decided by the test, not by the interpreter's speed.
"""

from __future__ import annotations

import importlib
import math
import os
import random
import re
import types
import warnings

import ascend_stand_in
import pytest
import torch
import triton
import triton.language as tl
from kerneltune.core import (
    CandidateFailedWarning,
    NoStoredPickError,
    NoValidConfigError,
    PluginError,
    hookimpl,
)
from kerneltune.core.plugin_system.features import enable_feature
from kerneltune.core.plugin_system.seam import PluginFaultWarning
from kerneltune.plugins.triton import adapter
from kerneltune.plugins.triton.search_params.classify import operator_class, uses_dot
from kerneltune.plugins.triton.search_params.kernel import SearchParamsKernel
from search_doubles import Script, by_block, interpreter_family, timer_plugin, use_session
from tuning_doubles import family_plugin, stored_records

import triton_dist.autotune_hooks

# These tests script the interpreter's compile target and profile family and
# run on CPU tensors; on a CUDA machine (where conftest leaves
# TRITON_INTERPRET unset) tests/test_search_params_gpu.py covers the real path.
pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="interpreter tests; CUDA is covered by test_search_params_gpu.py",
)


def search(**options):
    return {"search_params": options}


def make_double(hints, configs=(), key=("n",), **autotune):
    if key is not None:  # None: left out, as seed 003 allows
        autotune["key"] = list(key)

    @triton.autotune(configs=list(configs), hints=hints, **autotune)
    @triton.jit
    def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)

    return double_kernel


def launch_double(kernel, n=32, **options):
    x = torch.arange(n, dtype=torch.float32)
    y = torch.zeros_like(x)
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, **options)
    assert torch.equal(y, 2 * x)
    return y


def make_add2d(hints, configs=(), **autotune):
    @triton.autotune(configs=list(configs), key=["M", "N"], hints=hints, **autotune)
    @triton.jit
    def add2d_kernel(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        mask = (rows < M) & (cols < N)
        tl.store(y_ptr + rows * N + cols, tl.load(x_ptr + rows * N + cols, mask=mask) + 1, mask=mask)

    return add2d_kernel


def launch_add2d(kernel, size=32, **options):
    x = torch.arange(size * size, dtype=torch.float32).reshape(size, size)
    y = torch.zeros_like(x)
    grid = lambda meta: (triton.cdiv(size, meta["BLOCK_M"]), triton.cdiv(size, meta["BLOCK_N"]))  # noqa: E731
    kernel[grid](x, y, size, size, **options)
    assert torch.equal(y, x + 1)


@triton.jit
def tile_product(a, b):
    return tl.dot(a, b)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, S: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    inner = tl.arange(0, S)
    a = tl.load(a_ptr + rows[:, None] * S + inner[None, :])
    b = tl.load(b_ptr + inner[:, None] * S + cols[None, :])
    tl.store(c_ptr + rows[:, None] * S + cols[None, :], tl.dot(a, b))


@triton.jit
def matmul_via_helper(a_ptr, b_ptr, c_ptr, S: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    inner = tl.arange(0, S)
    a = tl.load(a_ptr + rows[:, None] * S + inner[None, :])
    b = tl.load(b_ptr + inner[:, None] * S + cols[None, :])
    tl.store(c_ptr + rows[:, None] * S + cols[None, :], tile_product(a, b))


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


# -- activation ------------------------------------------------------------------


def test_activation_is_idempotent_and_leaves_plain_kernels_stock():
    wrapper = triton.autotune
    assert triton.runtime.autotune is wrapper
    importlib.reload(triton_dist.autotune_hooks)
    enable_feature("search_params")
    assert triton.autotune is wrapper

    # One config: stock Triton needs a GPU benchmarker to choose between several.
    @triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])
    @triton.jit
    def plain_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)

    assert type(plain_kernel) is triton.runtime.Autotuner
    launch_double(plain_kernel)
    assert plain_kernel.best_config.kwargs == {"BLOCK": 16}


def test_a_kernel_decorated_before_activation_keeps_working():
    original = triton.autotune.__wrapped__
    early = original(configs=[triton.Config({"BLOCK": 32})], key=["n"])(copy_kernel)
    importlib.reload(triton_dist.autotune_hooks)
    x = torch.arange(8.0)
    y = torch.zeros_like(x)
    early[(1,)](x, y, 8)
    assert torch.equal(x, y)


def test_unknown_feature_lists_the_known_ones():
    with pytest.raises(PluginError, match="search_params"):
        enable_feature("no-such-feature")


# -- validation at decoration ----------------------------------------------------


@pytest.mark.parametrize(
    ("hints", "error", "match"),
    [
        (search(params=["BLOCK"], valuez=[16]), ValueError, r"valuez.*valid options: params, values"),
        (
            search(params=["NOT_A_PARAM"]),
            ValueError,
            r"NOT_A_PARAM.*tl.constexpr parameters of the kernel.*BLOCK",
        ),
        (search(params=["n"]), ValueError, r"must be tl.constexpr"),
        (search(params=[]), ValueError, "empty"),
        (search(params="BLOCK"), TypeError, "list of parameter names"),
        (search(values=[16]), ValueError, "needs 'params'"),
        (search(params=["BLOCK"], values=[16, 0]), ValueError, "positive ints"),
        (search(params=["BLOCK"], values=[]), ValueError, "non-empty list"),
        (search(params=["BLOCK"], shape_final_top_k=0), ValueError, "shape_final_top_k"),
        (search(params=["BLOCK"], debug="yes"), TypeError, "debug"),
        (search(params=["BLOCK"], reference_fn=3), TypeError, "reference_fn"),
        (search(params=["BLOCK"], check_outputs="yes"), ValueError, "check_outputs takes True, False"),
        (search(params=["BLOCK"], rtol=-1), ValueError, "search_params: rtol must be a number >= 0"),
        (search(params=["BLOCK"], strategy=""), TypeError, "'strategy' must be a strategy's name"),
        (search(params=["BLOCK"], effort="max"), ValueError, "'effort' must be one of quick, default, full"),
        (search(params=["BLOCK"], budget_s=0), ValueError, "'budget_s' must be a number of seconds > 0"),
        (search(params=["BLOCK"], max_points=0), ValueError, "'max_points' must be an int >= 1"),
        (search(params=["BLOCK", "unit_flag"]), ValueError, "unit_flag is a compile option"),
        ({"search_params": {"params": ["BLOCK"]}, "split_params": {}}, ValueError, "cannot be combined"),
        ({"search_params": ["BLOCK"]}, TypeError, "must be a dict"),
    ],
)
def test_bad_hints_fail_at_decoration(hints, error, match):
    with pytest.raises(error, match=match):
        make_double(hints)


def test_unsupported_autotune_arguments_fail_at_decoration():
    with pytest.raises(ValueError, match=r"do_bench.*cannot be combined with search_params"):
        make_double(search(params=["BLOCK"]), do_bench=lambda fn, quantiles: [1.0])
    with pytest.raises(ValueError, match="perf_model"):
        make_double(search(params=["BLOCK"]), prune_configs_by={"perf_model": lambda **kw: 1.0, "top_k": 1})
    with pytest.raises(ValueError, match="key names size"):
        make_double(search(params=["BLOCK"]), key=["size"])


def test_a_seed_config_may_give_only_search_params():
    with pytest.raises(ValueError, match=r"seed.*GROUP"):
        make_add2d(
            search(params=["BLOCK_M", "BLOCK_N"]), configs=[triton.Config({"BLOCK_M": 16, "GROUP": 8})]
        )


def test_callers_do_not_pass_searched_params(monkeypatch):
    script = Script(lambda meta: 1.0)
    use_session(monkeypatch, timer_plugin(script))
    kernel = make_double(search(params=["BLOCK"], values=[16]))
    x = torch.zeros(4)
    with pytest.raises(ValueError, match="BLOCK are chosen by search_params"):
        kernel[(1,)](x, x, 4, BLOCK=16)
    with pytest.raises(ValueError, match="chosen by search_params"):
        kernel[(1,)](x, x, 4, 16)


# -- generation, seeds, hand-written configs -------------------------------------


def test_generated_candidates_find_the_scripted_fastest_shape(monkeypatch):
    script = Script(
        by_block({(16, 16): 4.0, (16, 32): 3.0, (32, 16): 1.0, (32, 32): 2.0}, "BLOCK_M", "BLOCK_N")
    )
    use_session(monkeypatch, timer_plugin(script))
    kernel = make_add2d(search(params=["BLOCK_M", "BLOCK_N"], values=[16, 32]), pre_hook=script.hook)
    assert isinstance(kernel, SearchParamsKernel)
    launch_add2d(kernel)
    assert kernel.best_config.kwargs == {"BLOCK_M": 32, "BLOCK_N": 16}
    assert kernel.last_search.space == 4
    assert set(script.seen("BLOCK_M", "BLOCK_N")) == {(16, 16), (16, 32), (32, 16), (32, 32)}


def test_the_search_is_staged_not_exhaustive(monkeypatch):
    values = [16, 32, 64, 128, 256, 512]
    warps = {1: 0.3, 2: 0.1, 4: 0.2, 8: 0.4}

    def cost(meta):
        shape = (math.log2(meta["BLOCK_M"]) - 6) ** 2 + (math.log2(meta["BLOCK_N"]) - 5) ** 2
        return 1.0 + shape + warps[meta["num_warps"]]

    script = Script(cost)
    family = interpreter_family("test-vector", "vector", [{"num_warps": w} for w in (4, 1, 2, 8)])
    use_session(monkeypatch, timer_plugin(script), family_plugin(family))
    kernel = make_add2d(search(params=["BLOCK_M", "BLOCK_N"], values=values), pre_hook=script.hook)
    launch_add2d(kernel, size=16)
    summary = kernel.last_search
    assert summary.space == 36 * 4
    assert summary.measured <= summary.space // 4
    assert (kernel.best_config.kwargs, kernel.best_config.num_warps) == ({"BLOCK_M": 64, "BLOCK_N": 32}, 2)


def test_full_hand_written_configs_are_used_as_they_are(monkeypatch, capsys):
    script = Script(by_block({16: 2.0, 64: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    configs = [triton.Config({"BLOCK": 16}, num_warps=2), triton.Config({"BLOCK": 64}, num_warps=2)]
    hints = search(params=["BLOCK"], values=[32], strategy="pattern", max_points=1, debug=True)
    kernel = make_double(hints, configs=configs, pre_hook=script.hook)
    launch_double(kernel)
    assert {block for (block,) in script.seen("BLOCK")} == {16, 64}
    assert set(script.seen("num_warps")) == {(2,)}
    assert kernel.best_config.kwargs == {"BLOCK": 64}
    summary = kernel.last_search
    assert (summary.space, summary.measured, summary.strategy) == (2, 2, "given")
    out = capsys.readouterr().out
    # Measured whole by the exhaustive strategy, whatever strategy and cap the hint names.
    assert "2 hand-written configs give every search param; measuring them as they are" in out
    assert "exhaustive: 2 of 2 measured, 0 without a time" in out
    assert "search strategy pattern" not in out


def test_hand_written_configs_that_all_fail_are_a_clear_error(monkeypatch):
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))

    def hook(named, reset_only=False):
        script.hook(named, reset_only)
        if not reset_only:
            raise ValueError(f"a bug in BLOCK={named['BLOCK']}")

    use_session(monkeypatch, timer_plugin(script))
    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    kernel = make_double(search(params=["BLOCK"]), configs=configs, pre_hook=hook)
    with pytest.warns(CandidateFailedWarning), pytest.raises(NoValidConfigError) as caught:
        launch_double(kernel)
    assert "a bug in BLOCK=16" in str(caught.value) and "a bug in BLOCK=32" in str(caught.value)


def test_partial_configs_seed_the_search(monkeypatch):
    script = Script(lambda meta: 1.0 if meta["BLOCK_M"] == 64 else 5.0)
    use_session(monkeypatch, timer_plugin(script))
    kernel = make_add2d(
        search(params=["BLOCK_M", "BLOCK_N"], values=[16, 32]),
        configs=[triton.Config({"BLOCK_M": 64})],
        pre_hook=script.hook,
    )
    launch_add2d(kernel)
    assert script.seen("BLOCK_M")[0] == (64,)
    assert kernel.best_config.kwargs["BLOCK_M"] == 64
    assert kernel.last_search.space == 3 * 2


def test_a_config_giving_no_searched_param_is_a_base_for_every_candidate(monkeypatch):
    script = Script(lambda meta: 1.0 if meta["BLOCK_M"] == 16 else 2.0)
    use_session(monkeypatch, timer_plugin(script))
    kernel = make_add2d(
        search(params=["BLOCK_M"], values=[16, 32]),
        configs=[triton.Config({"BLOCK_N": 8}), triton.Config({"BLOCK_M": 32})],
        pre_hook=script.hook,
    )
    launch_add2d(kernel)  # no BLOCK_N at launch: the base gives it
    assert set(script.seen("BLOCK_N")) == {(8,)}
    assert script.seen("BLOCK_M")[0] == (32,), "the seed still goes first"
    assert kernel.best_config.kwargs == {"BLOCK_M": 16, "BLOCK_N": 8}


def test_two_base_configs_or_a_seed_with_other_fields_are_clear_errors():
    with pytest.raises(ValueError, match="2 configs give none of the search params; at most one may"):
        make_add2d(
            search(params=["BLOCK_M"], values=[16]),
            configs=[triton.Config({"BLOCK_N": 8}), triton.Config({"BLOCK_N": 16})],
        )
    with pytest.raises(ValueError, match="put those in a config that gives no search param"):
        make_add2d(
            search(params=["BLOCK_M", "BLOCK_N"], values=[16]),
            configs=[triton.Config({"BLOCK_M": 16, "X": 1})],
        )


# -- key -----------------------------------------------------------------------------


def test_same_key_reuses_the_pick_and_a_new_key_tunes_again(monkeypatch):
    script = Script(by_block({16: 1.0, 32: 2.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    kernel = make_double(search(params=["BLOCK"], values=[16, 32]), pre_hook=script.hook)
    launch_double(kernel, n=32)
    tuned = len(script.launches)
    launch_double(kernel, n=32)
    assert len(script.launches) == tuned
    launch_double(kernel, n=24)
    assert len(script.launches) > tuned


@pytest.mark.parametrize("key", [(), None], ids=["empty", "left out"])
def test_without_a_key_one_pick_serves_every_shape(monkeypatch, key):
    script = Script(by_block({16: 1.0, 32: 2.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    kernel = make_double(search(params=["BLOCK"], values=[16, 32]), key=key, pre_hook=script.hook)
    launch_double(kernel, n=32)
    tuned = len(script.launches)
    launch_double(kernel, n=24)
    assert len(script.launches) == tuned


def test_fixed_compile_options_override_the_profile_and_join_the_key(monkeypatch, capsys):
    script = Script(lambda meta: {4: 2.0, 8: 1.0, 2: 3.0}[meta["num_warps"]])
    family = interpreter_family("test-vector", "vector", [{"num_warps": 4}, {"num_warps": 8}])
    use_session(monkeypatch, timer_plugin(script), family_plugin(family), verbose=True)
    kernel = make_double(search(params=["BLOCK"], values=[16, 32]), pre_hook=script.hook)
    launch_double(kernel, num_warps=2)
    assert set(script.seen("num_warps")) == {(2,)}
    assert kernel.best_config.num_warps == 2
    assert "fixed at launch: num_warps=2" in capsys.readouterr().out
    tuned = len(script.launches)
    launch_double(kernel)
    assert {w for (w,) in script.seen("num_warps")[tuned:]} == {4, 8}
    assert kernel.best_config.num_warps == 8


# -- the operator classifier and profile families ---------------------------------


def test_classifier_on_dot_and_non_dot_kernels():
    assert uses_dot(matmul_kernel) is True
    assert uses_dot(matmul_via_helper) is True
    assert uses_dot(copy_kernel) is False
    assert operator_class(matmul_kernel)[0] == "matrix"
    assert operator_class(copy_kernel) == ("vector", "it does not call tl.dot")


def test_the_classifier_chooses_the_family(monkeypatch, capsys):
    script = Script(lambda meta: {4: 2.0, 8: 1.0}.get(meta.get("num_warps"), 3.0))
    matrix = interpreter_family("test-matrix", "matrix", [{"num_warps": 4}, {"num_warps": 8}])
    vector = interpreter_family("test-vector", "vector", [{"num_stages": 1}])
    use_session(monkeypatch, timer_plugin(script), family_plugin(matrix, vector))
    hints = search(params=["BLOCK_M", "BLOCK_N"], values=[16, 32], debug=True)
    kernel = triton.autotune(configs=[], key=[], hints=hints, pre_hook=script.hook)(matmul_kernel)
    a = torch.randn(32, 32)
    b = torch.randn(32, 32)
    c = torch.zeros(32, 32)
    kernel[lambda meta: (triton.cdiv(32, meta["BLOCK_M"]), triton.cdiv(32, meta["BLOCK_N"]))](a, b, c, 32)
    torch.testing.assert_close(c, a @ b)
    out = capsys.readouterr().out
    assert "operator class matrix (it calls tl.dot); profile family test-matrix" in out
    assert {w for (w,) in script.seen("num_warps")} == {4, 8}
    assert kernel.best_config.num_warps == 8


def test_the_familys_probes_time_every_shape_in_stage_1(monkeypatch, capsys):
    # 64x64 tiles are the fastest, but only with 8 warps (with fewer they spill, say).
    def cost(meta):
        if (meta["BLOCK_M"], meta["BLOCK_N"]) == (64, 64):
            return 1.0 if meta["num_warps"] == 8 else 10.0
        return 2.0 + 0.1 * meta["num_warps"] + (64 - meta["BLOCK_M"]) / 64

    script = Script(cost)
    warps = [{"num_warps": w} for w in (4, 1, 2, 8)]
    family = interpreter_family("test-vector", "vector", warps, probes=[{"num_warps": 8}])
    use_session(monkeypatch, timer_plugin(script), family_plugin(family))
    hints = search(params=["BLOCK_M", "BLOCK_N"], values=[16, 32, 64], strategy="staged", debug=True)
    kernel = make_add2d(hints, pre_hook=script.hook)
    launch_add2d(kernel, size=64)
    assert "best of 2 probe profiles" in capsys.readouterr().out
    first_round = script.seen("BLOCK_M", "BLOCK_N", "num_warps")[:8]
    assert sorted(first_round) == sorted((m, n, w) for m in (32, 64) for n in (32, 64) for w in (4, 8))
    assert (kernel.best_config.kwargs, kernel.best_config.num_warps) == ({"BLOCK_M": 64, "BLOCK_N": 64}, 8)
    # Fixing the probed option at launch merges the probes into the base.
    tuned = len(script.launches)
    launch_add2d(kernel, size=64, num_warps=2)
    assert {w for (w,) in script.seen("num_warps")[tuned:]} == {2}


# -- search strategies ----------------------------------------------------------------


def bowl(meta):
    """Fastest at 32x64 with 8 warps; a block size or a warp count away costs more."""
    blocks = (math.log2(meta["BLOCK_M"]) - 5) ** 2 + (math.log2(meta["BLOCK_N"]) - 6) ** 2
    return 1.0 + blocks + 0.1 * abs(math.log2(meta["num_warps"]) - 3)


def bowl_kernel(monkeypatch, *plugins, **hints):
    script = Script(bowl)
    family = interpreter_family("test-warps", "vector", [{"num_warps": w} for w in (4, 1, 2, 8)])
    use_session(monkeypatch, timer_plugin(script), family_plugin(family), *plugins)
    kernel = make_add2d(
        search(params=["BLOCK_M", "BLOCK_N"], values=[16, 32, 64, 128], **hints), pre_hook=script.hook
    )
    return kernel, script


def picked(kernel):
    return (kernel.best_config.kwargs, kernel.best_config.num_warps)


@pytest.mark.parametrize("strategy", ["pattern", "staged", "exhaustive"])
def test_each_strategy_selected_by_hint_searches_and_picks(monkeypatch, strategy):
    kernel, _ = bowl_kernel(monkeypatch, strategy=strategy)
    launch_add2d(kernel, size=16)
    summary = kernel.last_search
    assert summary.strategy == strategy
    assert picked(kernel) == ({"BLOCK_M": 32, "BLOCK_N": 64}, 8)
    assert summary.space == 64
    assert len(summary.times) == summary.measured, "no point of this space fails"
    assert min(summary.times, key=summary.times.__getitem__) == summary.pick
    if strategy == "exhaustive":
        assert summary.measured == 64
    else:
        assert summary.measured < 64


@pytest.mark.parametrize("strategy", ["pattern", "staged", "exhaustive"])
def test_each_strategy_selected_by_the_config_file(monkeypatch, tmp_path, strategy):
    (tmp_path / "kerneltune.toml").write_text(f'search_strategy = "{strategy}"\n')
    kernel, _ = bowl_kernel(monkeypatch)
    launch_add2d(kernel, size=16)
    assert kernel.last_search.strategy == strategy
    assert picked(kernel) == ({"BLOCK_M": 32, "BLOCK_N": 64}, 8)


def test_the_default_strategy_is_pattern_and_a_hint_wins_over_the_config(monkeypatch, tmp_path):
    kernel, _ = bowl_kernel(monkeypatch)
    launch_add2d(kernel, size=16)
    assert kernel.last_search.strategy == "pattern"
    (tmp_path / "kerneltune.toml").write_text('search_strategy = "exhaustive"\n')
    kernel, _ = bowl_kernel(monkeypatch, strategy="staged")
    launch_add2d(kernel, size=16)
    assert kernel.last_search.strategy == "staged"


def test_an_unknown_strategy_fails_the_first_launch_listing_those_there_are(monkeypatch):
    kernel, _ = bowl_kernel(monkeypatch, strategy="annealing")
    with pytest.raises(
        PluginError, match=r"'annealing' is not available \(installed: .*pattern.*staged.*hint of add2d"
    ):
        launch_add2d(kernel, size=16)


def test_max_points_and_effort_reach_the_strategy(monkeypatch, capsys):
    kernel, _ = bowl_kernel(monkeypatch, strategy="exhaustive", max_points=10, effort="quick", debug=True)
    launch_add2d(kernel, size=16)
    assert kernel.last_search.measured == 10
    out = capsys.readouterr().out
    assert "search strategy exhaustive: effort quick, at most 10 points" in out
    assert "stopped: point cap of 10 reached" in out


def test_a_strategy_returning_a_point_outside_the_space_is_a_plugin_error(monkeypatch):
    class Wrong:
        name = "wrong"

        @classmethod
        def is_available(cls):
            return True

        def search(self, geometry, measure, budget, say):
            return [((99, 0), 0)]

    plugin = types.ModuleType("wrong_strategy")
    plugin.kerneltune_register_search_strategies = hookimpl(lambda register: register(Wrong))
    kernel, _ = bowl_kernel(monkeypatch, plugin, strategy="wrong")
    with pytest.raises(PluginError, match=r"'wrong' returned \(\(99, 0\), 0\) as a finalist"):
        launch_add2d(kernel, size=16)


def test_the_example_packages_random_strategy_is_selected_from_the_config_file(monkeypatch, tmp_path, capsys):
    (tmp_path / "kerneltune.toml").write_text('search_strategy = "example-random"\n')
    kernel, _ = bowl_kernel(monkeypatch, debug=True)
    launch_add2d(kernel, size=16)
    assert kernel.last_search.strategy == "example-random"
    # 10% of 64 points, and never fewer than the four profiles; stage 3 re-times its finalists.
    assert kernel.last_search.measured == 7
    assert "example-random: 7 of 64 points measured" in capsys.readouterr().out


# -- stage 3: the correctness gate --------------------------------------------------


def make_row_sum(hints, **autotune):
    @triton.autotune(configs=[], key=["n"], hints=hints, **autotune)
    @triton.jit
    def row_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        # Sums only the first BLOCK values: BLOCK < n is fast and wrong.
        offsets = tl.arange(0, BLOCK)
        tl.store(out_ptr, tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)))

    return row_sum_kernel


def sums_right(x, out, n):
    return bool(torch.isclose(out[0], x.sum()))


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_reference_fn_rejecting_the_fastest_makes_the_next_win(monkeypatch, capsys, unchecked):
    # The reference_fn tests here are of stage 3's gate, which check_outputs = off keeps (row_sum's
    # BLOCK=16 sums half the values); tests/test_search_params_checked.py has them with the check on.
    script = Script(by_block({16: 1.0, 32: 2.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    hints = search(params=["BLOCK"], values=[16, 32], reference_fn=sums_right, debug=True)
    kernel = make_row_sum(hints, pre_hook=script.hook)
    x = torch.arange(32, dtype=torch.float32)
    out = torch.zeros(1)
    kernel[(1,)](x, out, 32)
    assert kernel.best_config.kwargs == {"BLOCK": 32}
    assert out[0] == x.sum()
    assert "BLOCK=16 rejected: RejectedByReference: reference_fn returned False" in capsys.readouterr().out


def test_finalists_are_re_timed_in_interleaved_rounds(monkeypatch, unchecked):
    # row_sum's BLOCK=16 sums half the values: the check would drop it before stage 3.
    script = Script(by_block({16: 1.0, 32: 2.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), repeat=2)
    kernel = make_row_sum(search(params=["BLOCK"], values=[16, 32]), pre_hook=script.hook)
    kernel[(1,)](torch.ones(32), torch.zeros(1), 32)
    assert kernel.best_config.kwargs == {"BLOCK": 16}
    # Stage 1 times each shape twice; stage 3 gives each finalist 4 x 2 runs as
    # four rounds of two runs, each round starting one finalist further on.
    one_way, other_way = [(16,), (16,), (32,), (32,)], [(32,), (32,), (16,), (16,)]
    assert script.seen("BLOCK") == one_way + (one_way + other_way) * 2


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_reference_fn_may_reject_by_raising(monkeypatch, unchecked):
    script = Script(by_block({16: 1.0, 32: 2.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))

    def check(x, out, n):
        torch.testing.assert_close(out[0], x.sum())

    kernel = make_row_sum(search(params=["BLOCK"], values=[16, 32], reference_fn=check), pre_hook=script.hook)
    kernel[(1,)](torch.ones(32), torch.zeros(1), 32)
    assert kernel.best_config.kwargs == {"BLOCK": 32}


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_no_finalist_passing_is_a_clear_error(monkeypatch, unchecked):
    script = Script(by_block({16: 1.0, 32: 2.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    hints = search(params=["BLOCK"], values=[16, 32], reference_fn=lambda *args: False)
    kernel = make_row_sum(hints, pre_hook=script.hook)
    with pytest.raises(NoValidConfigError, match=r"none of the 2 finalists passed reference_fn"):
        kernel[(1,)](torch.ones(32), torch.zeros(1), 32)


# -- drops and output --------------------------------------------------------------


def test_shapes_no_smaller_than_one_out_of_resources_are_dropped_unbuilt(monkeypatch, capsys):
    def cost(meta):
        return 10.0 - math.log2(meta["BLOCK_N"]) + abs(math.log2(meta["BLOCK_M"]) - 5)

    script = Script(cost)

    def hook(named, reset_only=False):
        script.hook(named, reset_only)
        if named["BLOCK_M"] >= 64:
            raise triton.runtime.errors.OutOfResources(named["BLOCK_M"] * 1024, 48 * 1024, "shared memory")

    use_session(monkeypatch, timer_plugin(script))
    hints = search(params=["BLOCK_M", "BLOCK_N"], values=[16, 32, 64, 128], debug=True)
    kernel = make_add2d(hints, pre_hook=hook)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        launch_add2d(kernel)
    assert not [w for w in caught if issubclass(w.category, CandidateFailedWarning)], "drops are no failures"
    assert kernel.best_config.kwargs == {"BLOCK_M": 32, "BLOCK_N": 128}
    assert (64, 128) not in script.seen("BLOCK_M", "BLOCK_N")
    out = capsys.readouterr().out
    assert "dropped BLOCK_M=64, BLOCK_N=128: CandidateDropped: dropped before compiling" in out
    times = kernel.last_search.times
    assert times["BLOCK_M=64, BLOCK_N=128"] == math.inf, "a dropped point's time is infinite"
    assert min(times, key=times.__getitem__) == "BLOCK_M=32, BLOCK_N=128" == kernel.last_search.pick


def test_a_hand_written_config_that_raises_gives_one_warning(monkeypatch):
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))

    def hook(named, reset_only=False):
        script.hook(named, reset_only)
        if named["BLOCK"] == 32 and not reset_only:
            raise ValueError("a bug in this config")

    use_session(monkeypatch, timer_plugin(script))
    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    kernel = make_double(search(params=["BLOCK"]), configs=configs, pre_hook=hook)
    with pytest.warns(CandidateFailedWarning) as caught:
        launch_double(kernel)
    (message,) = [str(w.message) for w in caught]
    assert "double_kernel: candidate [1] BLOCK=32" in message
    assert "ValueError: a bug in this config" in message
    assert kernel.best_config.kwargs == {"BLOCK": 16}


def test_debug_shows_stages_and_what_early_config_prune_dropped(monkeypatch, capsys):
    script = Script(by_block({16: 2.0, 32: 1.0, 64: 3.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))

    def keep_small(configs, named_args, **kwargs):
        return [c for c in configs if c.kwargs["BLOCK"] < 64]

    kernel = make_double(
        search(params=["BLOCK"], values=[16, 32, 64], strategy="staged", debug=True),
        prune_configs_by={"early_config_prune": keep_small},
        pre_hook=script.hook,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        launch_double(kernel)
    assert not [w for w in caught if issubclass(w.category, CandidateFailedWarning)], "pruned is no failure"
    assert 64 not in {block for (block,) in script.seen("BLOCK")}
    out = capsys.readouterr().out
    for line in (
        "stage 1:",
        "stage 2: one profile only",
        "stage 3: re-timing",
        "removed by early_config_prune",
    ):
        assert line in out


def test_the_verbose_setting_turns_on_the_debug_lines(monkeypatch, capsys):
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), verbose=True)
    kernel = make_double(search(params=["BLOCK"], values=[16, 32]), pre_hook=script.hook)
    launch_double(kernel)
    out = capsys.readouterr().out
    assert "[search_params] double_kernel: pattern:" in out, "the strategy's lines"
    assert "[kerneltune] double_kernel: [" in out, "and the engine's lines of each candidate"


def test_tune_never_launches_the_first_candidate_unmeasured_and_fail_raises(monkeypatch):
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), tune="never")
    kernel = make_double(search(params=["BLOCK"], values=[16, 32]), pre_hook=script.hook)
    launch_double(kernel)
    assert script.launches == [], "nothing measured"
    assert kernel.best_config.kwargs == {"BLOCK": 16}, "the first candidate"

    use_session(monkeypatch, timer_plugin(script), tune="fail")
    with pytest.raises(NoStoredPickError, match=r"double_kernel: no stored pick for key \(\(24, "):
        launch_double(kernel, n=24)
    launch_double(kernel)
    assert script.launches == [], "a key with a pick in the kernel is served"


def test_print_autotuning_prints_tritons_message_once_per_tuning(monkeypatch, capsys):
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    kernel = make_double(search(params=["BLOCK"], values=[16, 32]), pre_hook=script.hook)
    launch_double(kernel)
    assert capsys.readouterr().out == ""

    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    launch_double(kernel, n=24)
    out = capsys.readouterr().out
    assert out.count("Triton autotuning") == 1, "its own lines, not the other tuners' as well"
    # The running Triton's own message (3.4 on names the key; triton-ascend 3.2.0 prints one line);
    # how much was measured and the pick's time are verbose lines.
    seconds, best = f"{kernel.last_search.seconds:.2f}", kernel.best_config
    if adapter.release_layout().prints_key:
        assert out == (
            "Triton autotuning for function double_kernel,\n"
            "with key as (24, 'torch.float32', 'torch.float32'),\n"
            f"finished after {seconds}s,\nbest config selected: {best};\n"
        )
    else:
        assert out == (
            f"Triton autotuning for function double_kernel finished after {seconds}s; "
            f"best config selected: {best};\n"
        )
    assert kernel.best_config.kwargs["BLOCK"] == 32

    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING_TIMINGS", "1")
    launch_double(kernel, n=16)
    out = capsys.readouterr().out
    assert "  BLOCK=16: 2.0000 ms" in out
    assert "  BLOCK=32: 1.0000 ms" in out
    launch_double(kernel, n=16)
    assert capsys.readouterr().out == ""


@pytest.mark.skipif(
    not ascend_stand_in.installed(), reason="needs triton-ascend installed (make test-tritons runs it)"
)
def test_ascend_profiles_use_the_npu_backends_own_options(monkeypatch):
    # Outside the interpreter the target is the driver's (the stand-in's Ascend 910B4) and the
    # options are the fields of the real triton-ascend backend's NPUOptions.
    from kerneltune.plugins.profiles.ascend import AscendMixCVProfiles, AscendVectorSafeProfiles
    from kerneltune.plugins.triton import configs

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    target = configs.compile_target()
    assert (target.backend, target.arch, target.warp_size) == ("npu", "Ascend910B4", 0)
    mixcv = AscendMixCVProfiles().profiles(target)
    used = {name for profile in mixcv for name in profile}
    assert used == {
        "set_workspace_multibuffer",
        "tile_mix_vector_loop",
        "tile_mix_cube_loop",
        "multibuffer",
        "limit_auto_multi_buffer_of_local_buffer",
        "limit_auto_multi_buffer_only_for_local_buffer",
    }
    assert used <= target.options and mixcv[0] == {}
    # triton-ascend 3.2.0 has no enable_ubuf_saving: the vector-safe family leaves it out.
    assert "enable_ubuf_saving" not in target.options
    assert AscendVectorSafeProfiles().profiles(target) == [{}, {"multibuffer": False}]
    config = configs.make_config({"BLOCK": 64}, mixcv[-1])
    assert type(config) is triton.Config
    assert {**config.all_kwargs(), **mixcv[-1]} == config.all_kwargs(), "every option reaches the launch"
    # triton-ascend's Config keeps each NPU option as an attribute: the searched value is there.
    assert all(getattr(config, name) == value for name, value in mixcv[-1].items())
    assert config.kwargs == {"BLOCK": 64}


# -- confidence -----------------------------------------------------------------------------------


def test_an_uncertain_search_is_re_checked_head_to_head_by_the_next_kernel_object(monkeypatch, isolated):
    costs = {16: 1.0, 32: 1.05, 64: 1.6}
    noise = random.Random(3)
    busy = Script(lambda meta: costs[meta["BLOCK"]] * noise.choice((1.0, 2.0)))
    settings = {"cache": "json", "cache_dir": isolated, "repeat": 4, "recheck": True}
    use_session(monkeypatch, timer_plugin(busy), **settings)
    hints = search(params=["BLOCK"], values=list(costs))
    launch_double(make_double(hints, pre_hook=busy.hook))
    (record,) = stored_records(isolated, "double_kernel")
    assert record["confidence"] == "uncertain", "doubling at random, 5% apart cannot be told"
    stored_pick = record["best"]["index"]

    quiet = Script(by_block(costs, "BLOCK"))
    use_session(monkeypatch, timer_plugin(quiet), **settings)
    again = make_double(hints, pre_hook=quiet.hook)
    launch_double(again)
    # No search: the stored pick and its rivals, in interleaved rounds, then the pick once more.
    timed = {b for (b,) in quiet.seen("BLOCK")}
    assert len(timed) <= 4
    assert stored_pick in {list(costs).index(b) for b in timed}
    assert again.last_search is None
    (after,) = stored_records(isolated, "double_kernel")
    assert after["confidence"] == "confident" and again.best_config.kwargs["BLOCK"] == 16


# -- strategies that misbehave, and budgets that leave nothing --------------------------------------


def strategy_plugin(search_fn, name="odd"):
    """A plugin module registering the search strategy ``name``, whose search is ``search_fn``."""

    class Odd:
        @classmethod
        def is_available(cls):
            return True

        def search(self, geometry, measure, budget, say):
            return search_fn(geometry, measure, budget)

    Odd.name = name
    module = types.ModuleType(f"tests_{name}_strategy")

    @hookimpl
    def kerneltune_register_search_strategies(register):
        register(Odd)

    module.kerneltune_register_search_strategies = kerneltune_register_search_strategies
    return module


VALUES = [16, 32, 64, 128]
COSTS = {16: 4.0, 32: 3.0, 64: 1.0, 128: 2.0}


def search_with(monkeypatch, search_fn, *, costs=COSTS, **hint):
    script = Script(by_block(costs, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), strategy_plugin(search_fn))
    kernel = make_double(
        search(params=["BLOCK"], values=VALUES, strategy="odd", **hint), pre_hook=script.hook
    )
    launch_double(kernel, n=128)
    return kernel, script


def test_the_point_cap_binds_a_strategy_that_measures_on_its_own(monkeypatch):
    def endless(geometry, measure, budget):
        while True:  # never looks at the budget
            for point in geometry.points():
                measure([point])

    kernel, script = search_with(monkeypatch, endless, max_points=2)
    assert len({b for (b,) in script.seen("BLOCK")}) <= 2 + 1, "two points, then stage 3 of the best"
    assert kernel.best_config.kwargs["BLOCK"] in (16, 32)


def test_the_wall_clock_budget_binds_a_strategy_that_measures_on_its_own(monkeypatch):
    def endless(geometry, measure, budget):
        while True:
            measure(list(geometry.points()))

    kernel, _ = search_with(monkeypatch, endless, budget_s=0.2)
    assert kernel.best_config.kwargs["BLOCK"] == 64


@pytest.mark.parametrize("answer", [[], "budget"], ids=["no finalist", "nothing measured"])
def test_a_search_that_names_no_finalist_falls_back_to_the_spaces_fallback_points(monkeypatch, answer):
    def idle(geometry, measure, budget):
        return []

    if answer == "budget":
        kernel, script = search_with(monkeypatch, lambda g, m, b: [], budget_s=1e-9)
    else:
        kernel, script = search_with(monkeypatch, idle)
    # The middle shape (64), then the smallest (16), at the base profile: the better is the pick.
    assert [b for (b,) in script.seen("BLOCK")][:2] == [64, 16]
    assert kernel.best_config.kwargs["BLOCK"] == 64


@pytest.mark.parametrize(
    ("answer", "wrong"),
    [
        (None, "returned None for double_kernel; a strategy returns a list of points"),
        ([((9,), 0)], "returned ((9,), 0) as a finalist of double_kernel"),
        ([((-1,), 0)], "returned ((-1,), 0) as a finalist"),
    ],
    ids=["none", "outside", "negative"],
)
def test_a_strategy_answering_no_list_of_points_is_a_plugin_error_naming_it(monkeypatch, answer, wrong):
    with pytest.raises(
        PluginError,
        match=re.escape(f"plugin tests_odd_strategy (added in the program): search strategy 'odd' {wrong}"),
    ):
        search_with(monkeypatch, lambda geometry, measure, budget: answer)


@pytest.mark.parametrize("points", [[((-1,), 0)], [((2,), 9)], None, [(True, 0)]])
def test_a_strategy_measuring_no_point_of_the_space_is_a_plugin_error(monkeypatch, points):
    def wrong(geometry, measure, budget):
        measure(points)
        return []

    with pytest.raises(PluginError, match=r"search strategy 'odd' asked double_kernel to measure"):
        search_with(monkeypatch, wrong)


def test_a_strategy_may_say_ahead_what_it_measures_next_and_is_held_to_points_of_its_space(monkeypatch):
    def foreseeing(geometry, measure, budget):
        measure.ahead([((2,), 0), ((3,), 0)])  # in the interpreter nothing compiles: no effect
        measure([((1,), 0), ((2,), 0)])
        return [((2,), 0)]

    kernel, _ = search_with(monkeypatch, foreseeing)
    assert kernel.best_config.kwargs["BLOCK"] == 64

    def wrong(geometry, measure, budget):
        measure.ahead([((9,), 0)])
        return []

    with pytest.raises(PluginError, match=r"search strategy 'odd' asked double_kernel to compile ahead"):
        search_with(monkeypatch, wrong)


def test_a_strategy_that_raises_is_warned_about_and_the_best_measured_wins(monkeypatch):
    def broken(geometry, measure, budget):
        measure([((1,), 0), ((2,), 0)])
        raise ZeroDivisionError("oops")

    with pytest.warns(PluginFaultWarning, match=r"search strategy 'odd' raised ZeroDivisionError: oops"):
        kernel, _ = search_with(monkeypatch, broken)
    assert kernel.best_config.kwargs["BLOCK"] == 64


def test_a_strategy_that_raises_leaves_no_pick_behind_for_a_later_search(monkeypatch):
    def slow_then_broken(geometry, measure, budget):
        measure([((0,), 0)])  # BLOCK=16, the slowest
        raise ZeroDivisionError("oops")

    with pytest.warns(PluginFaultWarning, match=r"raised ZeroDivisionError: oops.*stores no pick"):
        broken, script = search_with(monkeypatch, slow_then_broken)
    assert broken.best_config.kwargs["BLOCK"] == 16, "this launch runs the best point measured"
    broken.last_search = None
    launch_double(broken, n=128)
    assert broken.last_search is not None, "the next launch of the same kernel searches again"

    working = make_double(
        search(params=["BLOCK"], values=VALUES, strategy="exhaustive"), pre_hook=script.hook
    )
    launch_double(working, n=128)
    assert working.last_search is not None, "no stored pick to serve"
    assert working.best_config.kwargs["BLOCK"] == 64


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_finalists_that_all_fail_in_stage_3_fall_back(monkeypatch):
    costs = {**COSTS, 128: math.inf}

    def finalists(geometry, measure, budget):
        return [((3,), 0)]  # 128, which never runs

    kernel, _ = search_with(monkeypatch, finalists, costs=costs)
    assert kernel.best_config.kwargs["BLOCK"] == 64


@pytest.mark.expected_warning(RuntimeWarning, match="differ only in num_warps compile to the same program")
def test_twins_count_against_no_point_cap(monkeypatch):
    """2 block sizes x 4 warp counts, 2 programs under the interpreter: a cap of 2 measures both programs."""
    monkeypatch.setenv("KERNELTUNE_TWINS", "1")
    script = Script(lambda meta: {16: 2.0, 32: 1.0}[meta["BLOCK"]])
    family = interpreter_family("test-vector", "vector", [{"num_warps": w} for w in (4, 1, 2, 8)])
    seen = []

    def one_by_one(geometry, measure, budget):
        for point in [((0,), 0), ((0,), 1), ((0,), 2), ((1,), 0), ((1,), 1)]:
            seen.append(point)
            measure([point])
        return [((1,), 0)]

    use_session(monkeypatch, timer_plugin(script), family_plugin(family), strategy_plugin(one_by_one))
    kernel = make_double(
        search(params=["BLOCK"], values=[16, 32], strategy="odd", max_points=2), pre_hook=script.hook
    )
    launch_double(kernel, n=32)
    assert seen == [((0,), 0), ((0,), 1), ((0,), 2), ((1,), 0), ((1,), 1)], (
        "twins left the cap room for BLOCK=32"
    )
    summary = kernel.last_search
    assert (summary.measured, summary.dropped) == (2, 2), "the fifth point is past the cap"
    assert kernel.best_config.kwargs["BLOCK"] == 32


@pytest.mark.expected_warning(RuntimeWarning, match="differ only in num_warps compile to the same program")
def test_twins_are_measured_once_and_never_finalists_together(monkeypatch):
    """Under the interpreter ``num_warps`` changes nothing: 2 block sizes x 4 warp counts are 2 programs."""
    monkeypatch.setenv("KERNELTUNE_TWINS", "1")  # the suite measures twins each (tests/conftest.py)
    script = Script(lambda meta: {16: 2.0, 32: 1.0}[meta["BLOCK_M"]] + {16: 0.5, 32: 0.0}[meta["BLOCK_N"]])
    family = interpreter_family("test-vector", "vector", [{"num_warps": w} for w in (4, 1, 2, 8)])
    use_session(monkeypatch, timer_plugin(script), family_plugin(family))
    hints = search(params=["BLOCK_M", "BLOCK_N"], values=[16, 32], strategy="exhaustive")
    kernel = make_add2d(hints, pre_hook=script.hook)
    launch_add2d(kernel, size=16)
    summary = kernel.last_search
    assert summary.space == 16
    assert (summary.measured, summary.dropped) == (4, 12)
    assert len(set(script.seen("BLOCK_M", "BLOCK_N", "num_warps"))) == 4, "one warp count per program"
    assert kernel.best_config.kwargs == {"BLOCK_M": 32, "BLOCK_N": 32}
