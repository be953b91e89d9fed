"""Triton's autotune listener (``triton.knobs.autotuning.listener``) sees kerneltune's tunings as stock's.

Stock ``Autotuner.run`` calls the listener when a key first meets its
cache in the process: after benchmarking (``cache_hit=False``, the
tuning's ``duration``) and where the pick came without benchmarking
(``cache_hit=True``, ``duration=None``); a launch whose key the cache
already holds calls nothing. Kernels run in Triton's interpreter on the CPU.
"""

from __future__ import annotations

import math
import os

import kernels
import pytest
import triton
import triton.runtime.autotuner
from kerneltune.core.driving import enable_feature
from search_doubles import Script, by_block, timer_plugin, use_session
from test_ascend_porting import make_scale_kernel, run_scale
from test_search_params import launch_double, make_double, search

from triton_dist.autotuner import contextual_autotune

knobs = pytest.importorskip("triton.knobs")
pytestmark = pytest.mark.skipif(
    not hasattr(knobs.autotuning, "listener"), reason="this Triton has no autotune listener"
)

ARGUMENTS = {"fn", "key", "best_config", "configs_timings", "duration", "cache_hit"}


@pytest.fixture
def heard(monkeypatch):
    """What the listener was called with, one dict per call."""
    calls: list[dict] = []

    def listener(**facts):
        calls.append(facts)

    monkeypatch.setattr(knobs.autotuning, "listener", listener)
    return calls


def blocks(*sizes):
    return [triton.Config({"BLOCK": size}) for size in sizes]


KEY = (64, "torch.float32", "torch.float32")


def test_stock_tuning_calls_the_listener_once_per_new_key(heard, monkeypatch):
    # Stock's benchmarker needs a device; a fake one lets its own run() tune under the interpreter,
    # where what triton.jit makes is an InterpretedFunction: stock's walk to the JITFunction stops there.
    monkeypatch.setattr(triton.runtime.autotuner, "JITFunction", type(kernels.scale_kernel))

    def bench(kernel_call, quantiles):
        kernel_call()
        return [float(len(heard) + 1)] * 3

    kernel = make_scale_kernel(blocks(32, 64), do_bench=bench)
    run_scale(kernel)
    run_scale(kernel)
    (call,) = heard
    assert set(call) == ARGUMENTS
    assert call["fn"] is kernel.fn is kernels.scale_kernel
    assert call["key"] == KEY and call["best_config"] is kernel.best_config
    assert call["configs_timings"] is kernel.configs_timings and call["cache_hit"] is False
    assert call["duration"] == kernel.bench_time


def test_contextual_tuning_calls_the_listener_as_stock_does(heard):
    kernel = make_scale_kernel(blocks(32, 64, 16))

    @contextual_autotune(n_repeat=2, n_warmup=0)
    def tuned():
        run_scale(kernel)

    tuned()
    (call,) = heard
    assert set(call) == ARGUMENTS
    assert call["fn"] is kernel.fn is kernels.scale_kernel, "what stock's walk finds"
    assert call["key"] == KEY and call["best_config"] is kernel.best_config
    assert call["cache_hit"] is False and call["duration"] == kernel.bench_time > 0
    timings = call["configs_timings"]
    assert timings is kernel.configs_timings and list(timings) == kernel.configs
    assert all(len(times) == 3 and math.isfinite(times[0]) for times in timings.values())
    assert min(timings, key=timings.get) is kernel.best_config

    tuned()
    tuned()
    assert len(heard) == 1, "a key the kernel's cache holds calls nothing, as in stock's run()"


def test_a_stored_pick_served_in_a_new_process_reaches_the_listener_as_a_cache_hit(heard, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", "disk")

    def tuned_with(kernel):
        @contextual_autotune(n_repeat=2, n_warmup=0)
        def tuned():
            run_scale(kernel)

        return tuned

    tuned_with(make_scale_kernel(blocks(32, 64)))()
    assert [call["cache_hit"] for call in heard] == [False]
    again = make_scale_kernel(blocks(32, 64))  # a new kernel object: as in a restarted process
    tuned_with(again)()
    hit = heard[1]
    assert set(hit) == ARGUMENTS and hit["cache_hit"] is True and hit["duration"] is None
    assert hit["fn"] is again.fn and hit["key"] == KEY and hit["best_config"] is again.best_config
    assert hit["configs_timings"] == {}, "kerneltune's measurements stay in its record"
    tuned_with(again)()
    assert len(heard) == 2


def test_a_launch_pruned_to_one_config_is_a_cache_hit_as_in_stock(heard):
    pruned = {"early_config_prune": lambda configs, named, **kwargs: configs[1:]}
    kernel = make_scale_kernel(blocks(32, 64), prune_configs_by=pruned)

    @contextual_autotune(n_repeat=2, n_warmup=0)
    def tuned():
        run_scale(kernel)

    tuned()
    (call,) = heard
    assert (call["cache_hit"], call["duration"], call["best_config"]) == (True, None, kernel.configs[1])


def test_no_listener_set_calls_nothing_and_changes_nothing(monkeypatch):
    monkeypatch.setattr(knobs.autotuning, "listener", None)
    kernel = make_scale_kernel(blocks(32, 64))

    @contextual_autotune(n_repeat=2, n_warmup=0)
    def tuned():
        run_scale(kernel)

    tuned()
    assert kernel.best_config in kernel.configs and kernel.bench_time > 0


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="interpreter test")
def test_a_search_params_kernel_calls_the_listener_for_its_search_and_its_stored_pick(heard, monkeypatch):
    script = Script(by_block({16: 2.0, 64: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    enable_feature("search_params")

    hints = search(params=["BLOCK"], values=[32])

    def make():
        return make_double(hints, configs=blocks(16, 64), pre_hook=script.hook)

    kernel = make()
    launch_double(kernel)
    launch_double(kernel)
    (call,) = heard
    assert set(call) == ARGUMENTS and call["fn"] is kernel.fn
    assert call["key"] == (32, "torch.float32", "torch.float32")
    assert call["cache_hit"] is False and call["duration"] > 0
    assert call["best_config"] is kernel.best_config and kernel.best_config.kwargs == {"BLOCK": 64}
    timings = call["configs_timings"]
    assert {config.kwargs["BLOCK"] for config in timings} == {16, 64}
    assert min(timings, key=timings.get) is kernel.best_config

    again = make()  # a new kernel object finds the stored pick, as a restarted process would
    launch_double(again)
    hit = heard[1]
    assert (hit["cache_hit"], hit["duration"], hit["configs_timings"]) == (True, None, {})
    assert hit["best_config"].kwargs == {"BLOCK": 64}
