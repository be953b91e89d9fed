"""COMPILE in forked processes on a CUDA device: this process only loads what they compiled.

Each tuning starts from an empty Triton cache. Triton's compilation listener
sees every compile made in this process, with whether it was a load from the
on-disk cache: with ``compile_pool = "processes"`` every one must be, since
the forked processes did the compiling; with ``"threads"`` they are real
compiles here, which shows the listener can tell the two apart.
"""

from __future__ import annotations

import pytest
import torch
from contextual_matmul import SIX_CONFIGS, launch_config, launch_matmul, make_matmul
from kerneltune.core import add_plugin, hookimpl, remove_plugin

from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune

pytestmark = pytest.mark.gpu

SIZE = 1024


@pytest.fixture
def compiles_here(tmp_path, monkeypatch):
    """Whether each compile in this process was a cache load, in order; with an empty Triton cache."""
    from triton import knobs

    if not hasattr(knobs.compilation, "listener"):
        pytest.skip("this Triton has no compilation listener")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setenv("KERNELTUNE_CACHE", "memory")
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_ALWAYS_TUNE", "1")
    loads: list[bool] = []

    def listener(**event):
        if getattr(event.get("src"), "name", None) != "_empty_kernel":  # the compiler's warm-up
            loads.append(bool(event.get("cache_hit")))

    monkeypatch.setattr(knobs.compilation, "listener", listener)
    return loads


def operands():
    torch.manual_seed(0)
    a = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
    b = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
    return a, b, (a.float() @ b.float()).half()


def tune_contextually():
    a, b, expected = operands()
    kernel = make_matmul(SIX_CONFIGS)

    @contextual_autotune(n_repeat=5, n_warmup=2)
    def product(a, b):
        return launch_matmul(kernel, a, b)

    torch.testing.assert_close(product(a, b), expected, atol=0.5, rtol=0.02)


@pytest.mark.parametrize("pool", ["processes", "threads"])
def test_contextual_compiles_in_forked_processes_and_loads_here(compiles_here, monkeypatch, pool):
    monkeypatch.setenv("KERNELTUNE_COMPILE_POOL", pool)
    tune_contextually()
    assert len(compiles_here) >= len(SIX_CONFIGS)
    if pool == "processes":
        assert all(compiles_here), f"compiled here, not loaded: {compiles_here}"
    else:
        assert compiles_here.count(False) == len(SIX_CONFIGS), compiles_here


def test_function_level_precompiles_in_forked_processes(compiles_here, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_PRECOMPILE", "1")
    monkeypatch.setenv("KERNELTUNE_COMPILE_POOL", "processes")
    a, b, expected = operands()
    kernel = make_matmul(SIX_CONFIGS)

    @autotune(config_space=[{"cfg": cfg} for cfg in SIX_CONFIGS], key_fn=lambda a, b: a.shape)
    def product(a, b, cfg):
        out = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=torch.float16)
        launch_config(kernel, cfg, a, b, out)
        return out

    torch.testing.assert_close(product(a, b), expected, atol=0.5, rtol=0.02)
    assert len(compiles_here) >= len(SIX_CONFIGS)
    assert all(compiles_here), f"compiled here, not loaded: {compiles_here}"


@pytest.fixture
def compiles_started():
    """The candidate index of every compile the tuning machine starts, in order."""
    started: list[int] = []

    class Compiles:
        @hookimpl
        def kerneltune_compile_started(self, event):
            started.append(event.candidate.index)

    watch = Compiles()
    add_plugin(watch)
    yield started
    remove_plugin(watch)


def keys_of_loaded_programs(product, a, b, expected, started):
    """Tune ``product`` for a key, another M of its specialisation, then an M Triton specialises apart."""
    torch.testing.assert_close(product(a, b), expected, atol=0.5, rtol=0.02)
    assert sorted(started) == list(range(len(SIX_CONFIGS))), "the first key compiles every config"
    started.clear()
    half = a[: SIZE // 2]  # another M, the same specialisation (a multiple of 16)
    torch.testing.assert_close(product(half, b), expected[: SIZE // 2], atol=0.5, rtol=0.02)
    assert started == [], "every program of the second key was loaded here already"
    odd = a[: SIZE // 2 + 1]  # an M Triton specialises apart: new programs to compile
    torch.testing.assert_close(product(odd, b), expected[: SIZE // 2 + 1], atol=0.5, rtol=0.02)
    assert sorted(started) == list(range(len(SIX_CONFIGS)))


def test_a_new_key_whose_programs_this_process_has_loaded_starts_no_compile(
    compiles_here, compiles_started, monkeypatch
):
    monkeypatch.setenv("KERNELTUNE_PRECOMPILE", "1")
    a, b, expected = operands()
    kernel = make_matmul(SIX_CONFIGS)

    @autotune(config_space=[{"cfg": cfg} for cfg in SIX_CONFIGS], key_fn=lambda a, b: a.shape)
    def product(a, b, cfg):
        out = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=torch.float16)
        launch_config(kernel, cfg, a, b, out)
        return out

    keys_of_loaded_programs(product, a, b, expected, compiles_started)


def test_a_contextual_key_whose_programs_this_process_has_loaded_starts_no_compile(
    compiles_here, compiles_started
):
    a, b, expected = operands()
    kernel = make_matmul(SIX_CONFIGS)

    @contextual_autotune(n_repeat=5, n_warmup=2)
    def product(a, b):
        return launch_matmul(kernel, a, b)

    keys_of_loaded_programs(product, a, b, expected, compiles_started)
    assert len(kernel.cache) == 3, "each of the three keys was tuned"
