"""contextual_cache = "disk": contextual picks kept in the cache, so that a restart tunes nothing.

A fresh ``triton.autotune`` object over the same jit function stands for the
kernel of a new process (kerneltune keeps its in-process state per kernel
object); one test runs two real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import kernels
import pytest
import torch
import triton
from kerneltune.core import hookimpl
from kerneltune.core.plugin_system.settings import load_settings

from triton_dist.autotuner import contextual_autotune

BLOCK = 64
CONFIGS = [triton.Config({"BLOCK": BLOCK}, num_warps=w) for w in (1, 2, 4)]


def fresh_kernel():
    """The scale kernel under a new Autotuner: what a new process's kernel is to kerneltune."""
    return triton.autotune(configs=CONFIGS, key=["n"])(kernels.scale_kernel)


def launch(kernel, x):
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, 2.0, x.numel())
    return y


class Seen:
    """Counts what the contextual tuner measured and what it loaded."""

    def __init__(self):
        self.measured = 0
        self.loaded: list[str] = []

    @hookimpl
    def kerneltune_launch_measured(self, event):
        self.measured += 1

    @hookimpl
    def kerneltune_pick_loaded(self, event):
        self.loaded.append(event.function)


@pytest.fixture
def seen(monkeypatch):
    from kerneltune.core import add_plugin, remove_plugin

    observer = Seen()
    add_plugin(observer)
    yield observer
    remove_plugin(observer)


def tuned_outer(kernel):
    @contextual_autotune(n_repeat=2, n_warmup=1)
    def outer(x):
        return launch(kernel, x)

    return outer


def test_the_default_keeps_contextual_picks_in_the_process_only(tmp_path, seen):
    assert load_settings().get("contextual_cache") == "process"
    x = torch.randn(100, device=kernels.DEVICE)
    torch.testing.assert_close(tuned_outer(fresh_kernel())(x), 2.0 * x)
    assert seen.measured > 0
    assert not list((tmp_path / "cache").rglob("*.json"))
    measured = seen.measured
    tuned_outer(fresh_kernel())(x)
    assert seen.measured > measured, "a new kernel object tunes again"


def test_disk_serves_the_next_processes_kernel_without_measuring(tmp_path, seen, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", "disk")
    x = torch.randn(100, device=kernels.DEVICE)
    first = fresh_kernel()
    torch.testing.assert_close(tuned_outer(first)(x), 2.0 * x)
    (stored,) = (tmp_path / "cache" / "scale_kernel").glob("[0-9a-f]*.json")
    assert json.loads(stored.read_text())["function"] == "scale_kernel"
    measured = seen.measured
    assert measured > 0 and seen.loaded == []

    again = fresh_kernel()
    torch.testing.assert_close(tuned_outer(again)(x), 2.0 * x)
    assert seen.measured == measured, "the stored pick is served, nothing is measured"
    assert seen.loaded == ["scale_kernel"]
    assert again.best_config.all_kwargs() == first.best_config.all_kwargs()


def test_disk_picks_are_keyed_by_the_outer_functions_source(tmp_path, seen, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", "disk")
    x = torch.randn(100, device=kernels.DEVICE)
    tuned_outer(fresh_kernel())(x)
    measured = seen.measured
    kernel = fresh_kernel()

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def other_outer(x):
        x = x + 0  # other work around the kernel: its best config may differ
        return launch(kernel, x)

    torch.testing.assert_close(other_outer(x), 2.0 * x)
    assert seen.measured > measured and seen.loaded == []
    assert len(list((tmp_path / "cache" / "scale_kernel").glob("[0-9a-f]*.json"))) == 2


def test_a_restarted_process_serves_the_pick_from_disk(tmp_path):
    script = tmp_path / "restart.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            import kernels, torch, triton
            from kerneltune.core import add_plugin, hookimpl
            from triton_dist.autotuner import contextual_autotune

            class Count:
                measured = 0

                @hookimpl
                def kerneltune_launch_measured(self, event):
                    Count.measured += 1

            add_plugin(Count())
            kernel = triton.autotune(
                configs=[triton.Config({{"BLOCK": 64}}, num_warps=w) for w in (1, 2, 4)], key=["n"]
            )(kernels.scale_kernel)

            @contextual_autotune(n_repeat=2, n_warmup=1)
            def outer(x):
                y = torch.empty_like(x)
                kernel[(triton.cdiv(x.numel(), 64),)](x, y, 2.0, x.numel())
                return y

            x = torch.randn(100, device=kernels.DEVICE)
            torch.testing.assert_close(outer(x), 2.0 * x)
            print(Count.measured, kernel.best_config.all_kwargs()["num_warps"])
            """
        )
    )
    env = {**os.environ, "KERNELTUNE_CONTEXTUAL_CACHE": "disk"}
    runs = [
        subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    (first_measured, first_pick), (second_measured, second_pick) = (r.stdout.split() for r in runs)
    assert int(first_measured) > 0
    assert int(second_measured) == 0
    assert second_pick == first_pick


def _stored_ms(tmp_path) -> list[float]:
    """The stored record's time of each of CONFIGS, in order."""
    (stored,) = (tmp_path / "cache" / "scale_kernel").glob("[0-9a-f]*.json")
    return [row["time_ms"] for row in json.loads(stored.read_text())["candidates"]]


def _kernel_of(configs, prune=None):
    prune_by = None if prune is None else {"early_config_prune": prune}
    return triton.autotune(configs=configs, key=["n"], prune_configs_by=prune_by)(kernels.scale_kernel)


def _tuned_then_served(tmp_path, seen, kernel_of):
    """Tune the three CONFIGS, then launch ``kernel_of(picked num_warps)``; its served num_warps.

    :returns: what the new kernel served, the stored times of CONFIGS, the first pick, and how many
        launches the second tuning measured.
    """
    x = torch.randn(100, device=kernels.DEVICE)
    first = fresh_kernel()
    tuned_outer(first)(x)
    picked = first.best_config.num_warps
    measured = seen.measured
    kernel = kernel_of(picked)
    torch.testing.assert_close(tuned_outer(kernel)(x), 2.0 * x)
    assert seen.loaded == ["scale_kernel"]
    return kernel.best_config.num_warps, _stored_ms(tmp_path), picked, seen.measured - measured


def test_a_list_without_the_stored_pick_serves_the_best_stored_time_left_measuring_nothing(
    tmp_path, seen, monkeypatch
):
    # docs/contextual.md ("Keeping contextual picks across processes"): nothing tunes again.
    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", "disk")
    served, times, picked, measured = _tuned_then_served(
        tmp_path, seen, lambda picked: _kernel_of([c for c in CONFIGS if c.num_warps != picked])
    )
    left = [i for i, c in enumerate(CONFIGS) if c.num_warps != picked]
    assert measured == 0
    assert served == CONFIGS[min(left, key=lambda i: (times[i], i))].num_warps, (times, picked)


def test_a_stored_pick_of_an_unchanged_list_is_served_without_pruning_again(tmp_path, seen, monkeypatch):
    # As Triton serves a hit of its own cache: pruning runs where a tuning decides what to measure.
    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", "disk")

    def dropping(picked):
        return _kernel_of(
            CONFIGS, prune=lambda configs, named, **kw: [c for c in configs if c.num_warps != picked]
        )

    served, _, picked, measured = _tuned_then_served(tmp_path, seen, dropping)
    assert (served, measured) == (picked, 0)


def test_a_changed_list_is_pruned_and_serves_the_best_stored_time_its_pruning_keeps(
    tmp_path, seen, monkeypatch
):
    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", "disk")

    def reordered_and_dropping(picked):
        return _kernel_of(
            CONFIGS[::-1], prune=lambda configs, named, **kw: [c for c in configs if c.num_warps != picked]
        )

    served, times, picked, measured = _tuned_then_served(tmp_path, seen, reordered_and_dropping)
    warps = [c.num_warps for c in CONFIGS]
    assert measured == 0
    assert served != picked
    assert times[warps.index(served)] == min(t for w, t in zip(warps, times, strict=True) if w != picked)


def test_an_added_config_is_measured_against_the_stored_pick_alone(tmp_path, seen, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", "disk")
    x = torch.randn(100, device=kernels.DEVICE)
    first = fresh_kernel()
    tuned_outer(first)(x)
    picked = first.best_config.num_warps
    launched: list[int] = []

    class Launches:
        @hookimpl
        def kerneltune_launch_measured(self, event):
            launched.append(event.candidate.config.num_warps)

    from kerneltune.core import add_plugin, remove_plugin

    observer = Launches()
    add_plugin(observer)
    try:
        added = triton.Config({"BLOCK": BLOCK}, num_warps=8)
        torch.testing.assert_close(tuned_outer(_kernel_of([*CONFIGS, added]))(x), 2.0 * x)
    finally:
        remove_plugin(observer)

    assert set(launched) == {picked, 8}, "only the new config and the stored pick are measured"
