"""The calls after tuning: a cache hit of any tuner looks nothing up, and the contextual one skips its route.

The counts come from bench/hotpath.py's :class:`Lookups` (a profile hook),
the same counter its ``--count`` mode prints.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import kernels
import numpy as np
import pytest
import torch
import triton
from kerneltune.core import NoStoredPickError
from kerneltune.core.drivers.contextual_call import ContextualCall
from kerneltune.core.driving import current_session
from kerneltune.core.plugin_system.manager import BUILTIN_PLUGINS, DEFERRED_PLUGINS
from kerneltune.plugins.triton import adapter

from triton_dist.autotuner import contextual_autotune

BENCH = Path(__file__).resolve().parent.parent / "bench" / "hotpath.py"
FIRST_HIT = BENCH.with_name("first_hit.py")


@pytest.fixture(scope="module")
def hotpath():
    spec = importlib.util.spec_from_file_location("bench_hotpath", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_hotpath"] = module
    spec.loader.exec_module(module)
    return module


def make_scale_kernel(**options):
    configs = [triton.Config({"BLOCK": 64}, num_warps=w) for w in (4, 8)]
    return triton.autotune(configs=configs, key=["n"], **options)(kernels.scale_kernel)


def launch_scale(kernel, x, alpha=2.0):
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 64),)](x, y, alpha, x.numel())
    return y


def contextual_scale(**options):
    """A fresh autotuned scale kernel, and an outer function under contextual_autotune launching it."""
    kernel = make_scale_kernel(**options)

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def scale(x):
        return launch_scale(kernel, x)

    return kernel, scale


@pytest.fixture
def routed(monkeypatch):
    """The launches that reached the contextual tuner's route."""
    seen = []
    route = ContextualCall.route

    def counting(self, launch):
        seen.append(launch.key)
        return route(self, launch)

    monkeypatch.setattr(ContextualCall, "route", counting)
    return seen


def test_the_counter_sees_environment_reads_files_and_sessions(hotpath, tmp_path):
    with hotpath.Lookups() as lookups:
        os.environ.get("HOME")
        (tmp_path / "missing").exists()
        current_session()
    assert lookups.counts["environment"] >= 1
    assert lookups.counts["files"] >= 1
    assert lookups.counts["sessions"] >= 1


@pytest.mark.parametrize("side", ["contextual", "function", "search-params"])
def test_a_cache_hit_reads_and_looks_up_nothing(hotpath, side):
    assert hotpath.count(side, hits=5) == {"environment": 0, "files": 0, "sessions": 0, "imports": 0}


def test_the_first_call_that_finds_its_pick_on_disk_imports_only_the_plugins_a_hit_needs(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_first_hit", FIRST_HIT)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert not bench.first_hit(tmp_path)["hit"]
    hit = bench.first_hit(tmp_path)
    assert hit["hit"]
    imported = set(hit["plugins"])
    # Every built-in but the deferred ones (search strategies, profiles, Triton's interceptor and
    # feature), their packages, and the Triton config helpers the labels plugin imports: 31 modules.
    assert imported & set(BUILTIN_PLUGINS) == set(BUILTIN_PLUGINS) - set(DEFERRED_PLUGINS)
    assert not {
        m for m in imported if m.startswith(("kerneltune.plugins.search", "kerneltune.plugins.profiles"))
    }
    assert not imported & {"kerneltune.plugins.triton.compiler", "kerneltune.plugins.triton.isolated"}
    assert len(imported) <= 31


def test_tuned_launches_are_made_without_the_route(routed):
    kernel, scale = contextual_scale()

    x = torch.randn(64, device=kernels.DEVICE)
    torch.testing.assert_close(scale(x), 2.0 * x)
    tuning = len(routed)
    torch.testing.assert_close(scale(x), 2.0 * x)  # served by the route once: filed for the interceptor
    assert len(routed) == tuning + 1
    for _ in range(3):
        x = torch.randn(64, device=kernels.DEVICE)
        torch.testing.assert_close(scale(x), 2.0 * x)
    assert len(routed) == tuning + 1
    assert kernel.best_config is kernel.cache[(64, "torch.float32", "torch.float32")]


def test_a_key_without_a_pick_met_after_direct_launches_is_tuned(routed):
    kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def scale_both(x, y):
        return launch_scale(kernel, x), launch_scale(kernel, y, 3.0)

    x, y = torch.randn(64, device=kernels.DEVICE), torch.randn(64, device=kernels.DEVICE)
    scale_both(x, y)
    scale_both(x, y)
    before = len(routed)
    longer = torch.randn(128, device=kernels.DEVICE)
    out_x, out_y = scale_both(x, longer)
    torch.testing.assert_close(out_x, 2.0 * x)
    torch.testing.assert_close(out_y, 3.0 * longer)
    assert (128, "torch.float32", "torch.float32") in kernel.cache
    assert len(routed) > before


def test_clearing_the_kernels_cache_tunes_again(routed):
    kernel, scale = contextual_scale()

    x = torch.randn(64, device=kernels.DEVICE)
    for _ in range(3):
        scale(x)
    kernel.cache.clear()
    before = len(routed)
    torch.testing.assert_close(scale(x), 2.0 * x)
    assert len(routed) > before, "a pick the kernel no longer holds is not served"
    assert kernel.cache


def test_kernels_that_change_arguments_in_place_keep_the_route(routed):
    _, scale = contextual_scale(restore_value=["y_ptr"])

    x = torch.randn(64, device=kernels.DEVICE)
    for _ in range(3):
        torch.testing.assert_close(scale(x), 2.0 * x)
    before = len(routed)
    scale(x)
    assert len(routed) == before + 1


def test_a_setting_changed_mid_process_takes_effect_at_the_next_call_that_tunes(monkeypatch, hotpath):
    _, scale = contextual_scale()

    x = torch.randn(64, device=kernels.DEVICE)
    scale(x)
    scale(x)
    monkeypatch.setenv("KERNELTUNE_TUNE", "fail")
    with hotpath.Lookups() as lookups:
        torch.testing.assert_close(scale(x), 2.0 * x)
    assert lookups.counts["environment"] == 0, "a call of tuned launches reads nothing"
    with pytest.raises(NoStoredPickError, match="no stored pick for key \\(128,"):
        scale(torch.randn(128, device=kernels.DEVICE))
    monkeypatch.delenv("KERNELTUNE_TUNE")
    longer = torch.randn(128, device=kernels.DEVICE)
    torch.testing.assert_close(scale(longer), 2.0 * longer)


class Shaped:
    """An argument with a dtype that is no tensor."""

    dtype = "shaped"


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("x", "y", 2.0, 64), {"grid": (1,), "warmup": False}),
        (("x", "y", 2.0), {"n": 64, "grid": (1,)}),
        (("x", "y"), {"alpha": 2.0, "n": 64}),
        ((np.zeros(3, dtype=np.int8), Shaped(), None, 7), {}),
        ((torch.zeros(2, dtype=torch.bfloat16), 1, True, 9), {"num_warps": 4}),
    ],
)
def test_the_short_key_is_tritons_key(args, kwargs):
    kernel = make_scale_kernel()
    values = {"x": torch.zeros(2), "y": torch.zeros(2, dtype=torch.float16)}
    args = tuple(values.get(a, a) if isinstance(a, str) else a for a in args)
    named = {**dict(zip(kernel.arg_names, args, strict=False)), **kwargs}
    expected = [named[k] for k in kernel.keys if k in named]
    expected += [str(v.dtype) for k, v in named.items() if k in kernel.arg_names and hasattr(v, "dtype")]
    assert adapter.tuning_key(kernel, args, kwargs) == tuple(expected)


def test_an_autotuner_class_defined_between_two_calls_is_intercepted_in_the_second():
    from triton.runtime.autotuner import Autotuner

    kernel = make_scale_kernel()
    later = []

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def outer(x):
        return [launch_scale(k, x) for k in (kernel, *later)]

    x = torch.randn(64, device=kernels.DEVICE)
    outer(x)
    outer(x)

    class OwnRunTuner(Autotuner):
        def run(self, *args, **kwargs):
            return self.fn.run(*args, **kwargs, **self.configs[0].all_kwargs())

    configs = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]
    jit = kernels.scale_kernel
    later.append(OwnRunTuner(jit, jit.arg_names, configs, ["n"], None, None))
    with pytest.warns(RuntimeWarning, match="OwnRunTuner has a run\\(\\) of its own"):
        outputs = outer(x)
    for out in outputs:
        torch.testing.assert_close(out, 2.0 * x)


def test_direct_launches_find_the_pick_triton_would_by_a_cheaper_key(monkeypatch):
    from kerneltune.plugins.triton.adapter import direct

    kernel = make_scale_kernel()
    made = []
    monkeypatch.setattr(kernel.fn, "run", lambda *args, **kwargs: made.append(kwargs["num_warps"]))
    x32, y32 = torch.zeros(4), torch.zeros(4)
    x16, y16 = torch.zeros(4, dtype=torch.float16), torch.zeros(4, dtype=torch.float16)
    launches = {  # args, kwargs -> the pick's num_warps
        ((x32, y32, 2.0, 64), ("grid", "warmup")): 4,
        ((x16, y16, 2.0, 64), ("grid", "warmup")): 8,
        ((x32, y32, 2.0, 128), ("grid", "warmup")): 8,
        ((x32, y32, 3, 64), ("grid", "warmup")): 4,  # an int alpha, another shape: Triton's key
        ((x32, y32, 2.0), ("n", "grid")): 8,  # n by name (32): Triton's key
    }
    picks = {}
    for (args, names), warps in launches.items():
        kwargs = {name: 32 if name == "n" else None for name in names}
        key = adapter.tuning_key(kernel, args, kwargs)
        kernel.cache[key] = next(c for c in kernel.configs if c.num_warps == warps)
        picks[key] = adapter.direct_entry(kernel, key)
    del picks[adapter.tuning_key(kernel, (x32, y32, 2.0, 128), {})]
    keys = []
    monkeypatch.setattr(direct, "tuning_key", lambda *a: keys.append(1) or adapter.tuning_key(*a))
    served = direct.DirectKernel(picks)
    for _ in range(3):
        for (args, names), warps in launches.items():
            kwargs = {name: 32 if name == "n" else None for name in names}
            made.clear()
            result = served.launch(kernel, args, kwargs)
            if args[3:] == (128,):
                assert result is direct.NOT_DIRECT, "a key without a pick goes to the route"
            else:
                assert made == [warps] and kernel.best_config.num_warps == warps
    # Triton's key once for each of the two launches of the planned shape, then the cheap key;
    # every time for the 128 one (no pick), the int alpha (another shape) and the by-name n.
    assert len(keys) == 2 + 3 * 3
    kernel.cache[adapter.tuning_key(kernel, (x32, y32, 2.0, 64), {})] = kernel.configs[1]
    assert served.launch(kernel, (x32, y32, 2.0, 64), {"grid": None, "warmup": None}) is direct.NOT_DIRECT
