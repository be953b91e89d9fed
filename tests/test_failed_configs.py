"""Configs that fail for every key are remembered across keys: compiled or launched once per function."""

from __future__ import annotations

import contextlib
import json
import logging
import warnings

import attrs
import kernels
import pytest
import torch
import triton
from click.testing import CliRunner
from kerneltune.cli import main
from kerneltune.core import CandidateFailedWarning
from kerneltune.core.compiling.forks import CompileDeadline, CompileTimeout
from kerneltune.core.drivers import function_tuner
from kerneltune.core.machine.failed_configs import DEADLINE, failure_kind
from kerneltune.core.plugin_system.layered_cache import LayeredCache
from kerneltune.core.values.failed import FailedConfig, FailedConfigs
from kerneltune.plugins.caches.files import JsonCache, MsgpackCache
from kerneltune.plugins.caches.memory import MemoryCache
from search_doubles import Script, by_block, timer_plugin, use_session
from tuning_doubles import FakeClock, clock_plugin, install_session, load_file, record_files

from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune

# The tuned functions return which config ran: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

KEYS = (1, 2, 3, 4)


def out_of_resources():
    return triton.runtime.errors.OutOfResources(300000, 232448, "shared memory")


def sweep(clock, calls, fails=out_of_resources, *, name="sweep"):
    """A tuned ``work(x, n)`` over n in (1, 2, 3), whose n = 3 raises ``fails()``; ``calls`` counts each n."""

    def work(x, n):
        calls[n] = calls.get(n, 0) + 1
        if n == 3:
            raise fails()
        clock.advance({1: 2.0, 2: 1.0}[n])
        return n

    work.__name__ = work.__qualname__ = name
    return autotune(config_space=[{"n": n} for n in (1, 2, 3)], key_fn=lambda x: int(x.shape[0]))(work)


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(fake),), timer="scripted", warmup=1, repeat=2)
    return fake


@contextlib.contextmanager
def quiet_drops():
    """Out of resources is an expected drop: a CandidateFailedWarning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", CandidateFailedWarning)
        yield


def failed_files(cache, function):
    return [p for p in record_files(cache, function) if load_file(p).get("kind") == "failed configs"]


def test_a_config_out_of_resources_runs_once_over_a_sweep_of_keys(clock, isolated, caplog):
    calls: dict[int, int] = {}
    work = sweep(clock, calls)
    with caplog.at_level(logging.INFO, logger="kerneltune"):
        for size in KEYS:
            assert work(torch.ones(size), autotune_verbose=True) == 2
    assert calls[3] == 1, "the failing config ran for the first key only"
    assert calls[1] == len(KEYS) * 3, "every other config is measured (1 warm-up, 2 timed)"
    lines = [r.getMessage() for r in caplog.records if "[2] n=<3>" in r.getMessage()]
    said = "RememberedFailure: failed for an earlier key (out of resources), not run again"
    remembered = [line for line in lines if said in line]
    assert len(remembered) == len(KEYS) - 1, lines
    (memory,) = [load_file(p) for p in failed_files(isolated, "sweep")]
    (failure,) = memory["failed"]
    assert failure["label"] == "n=<3>" and failure["kind"] == "out of resources"
    assert failure["dtypes"] == ["torch.float32"]
    # Another process (a fresh tuner) reads the memory from the cache: the config never runs.
    again: dict[int, int] = {}
    assert sweep(clock, again)(torch.ones(9)) == 2
    assert 3 not in again


def test_other_dtypes_are_tried_afresh(clock):
    calls: dict[int, int] = {}
    work = sweep(clock, calls)
    with quiet_drops():
        work(torch.ones(1))
        work(torch.ones(2, dtype=torch.float16))
    assert calls[3] == 2, "the memory is kept per argument dtypes"


def test_a_failure_of_the_users_code_is_not_remembered(clock, isolated):
    calls: dict[int, int] = {}
    work = sweep(clock, calls, lambda: ValueError("no good for this size"))
    with pytest.warns(CandidateFailedWarning):
        for size in KEYS:
            work(torch.ones(size))
    assert calls[3] == len(KEYS), "a key-dependent failure is tried again for each key"
    assert not failed_files(isolated, "sweep")


def test_a_new_triton_forgets_the_memory(monkeypatch, isolated):
    clock = FakeClock()
    calls: dict[int, int] = {}
    session = install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted", warmup=1, repeat=2)
    sweep(clock, calls)(torch.ones(1))
    newer = attrs.evolve(session, versions={**session.versions, "triton": "99.0"})
    monkeypatch.setattr(function_tuner, "current_session", lambda: newer)
    sweep(clock, calls)(torch.ones(2))
    assert calls[3] == 2, "another Triton version compiles and launches it again"
    (memory,) = [load_file(p) for p in failed_files(isolated, "sweep")]
    assert memory["versions"]["triton"] == "99.0", "the memory now holds what the new version found"


def test_a_damaged_memory_is_a_logged_miss(clock, isolated, caplog):
    calls: dict[int, int] = {}
    sweep(clock, calls)(torch.ones(1))
    (path,) = failed_files(isolated, "sweep")
    data = load_file(path)
    data["failed"][0]["dtypes"] = "float32"
    path.write_text(json.dumps(data))
    with caplog.at_level(logging.INFO, logger="kerneltune"):
        assert sweep(clock, calls)(torch.ones(2)) == 2
    assert calls[3] == 2, "nothing trusted from a damaged memory"
    logged = [r.getMessage() for r in caplog.records]
    assert any("stored failed configs" in line and "damaged" in line for line in logged), logged


def test_cache_show_lists_and_cache_clear_clears_the_memory(clock, isolated):
    sweep(clock, {})(torch.ones(1))
    runner = CliRunner()
    shown = runner.invoke(main, ["cache", "show", "sweep"])
    assert shown.exit_code == 0, shown.output
    assert "remembered failures of sweep" in shown.output
    assert "n=<3> [torch.float32]: out of resources: OutOfResources" in shown.output
    listed = runner.invoke(main, ["cache", "list"])
    assert listed.exit_code == 0 and "skipping" not in listed.output, listed.output
    cleared = runner.invoke(main, ["cache", "clear", "sweep", "--yes"])
    assert cleared.exit_code == 0, cleared.output
    assert "damaged" not in cleared.output
    assert not record_files(isolated, "sweep")


def test_what_counts_as_failing_every_key(clock):
    session = function_tuner.current_session()  # the clock fixture's
    assert failure_kind(session, out_of_resources()) == "out of resources"
    assert failure_kind(session, triton.compiler.errors.CompilationError("def f(): ...", None, "bad")) == (
        "compile error"
    )
    wrapped = RuntimeError("launch failed")
    wrapped.__cause__ = out_of_resources()
    assert failure_kind(session, wrapped) == "out of resources", "found through raise ... from"
    assert failure_kind(session, CompileDeadline("past the deadline")) == DEADLINE
    assert failure_kind(session, CompileTimeout("past compile_timeout")) is None, "a loaded host passes it"
    assert failure_kind(session, ValueError("the user's own")) is None


# -- contextual_autotune -------------------------------------------------------------------------


def scaling(kernel):
    """``2 * x`` through ``kernel``, one program of 64 elements per block."""

    def scale(x):
        out = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 64),)](x, out, 2.0, x.numel())
        return out

    return scale


@pytest.mark.parametrize("contextual_cache", ["process", "disk"])
def test_a_contextual_kernels_config_out_of_resources_runs_once_over_keys(monkeypatch, contextual_cache):
    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", contextual_cache)
    launched: list[int] = []

    def refuse(named):
        launched.append(named["n"])
        raise out_of_resources()

    configs = [
        triton.Config({"BLOCK": 64}, num_warps=4),
        triton.Config({"BLOCK": 64}, num_warps=8, pre_hook=refuse),
    ]
    scale = scaling(triton.autotune(configs=configs, key=["n"])(kernels.scale_kernel))
    run = contextual_autotune(n_repeat=1, n_warmup=0)(scale)
    with quiet_drops():
        for size in (16, 32, 48):
            x = torch.randn(size, device=kernels.DEVICE)
            torch.testing.assert_close(run(x), 2.0 * x)
    assert launched == [16], "the failing config launched for the first key only"


# -- search_params -------------------------------------------------------------------------------


def test_search_params_fails_a_remembered_config_unrun(monkeypatch):
    import triton_dist.autotune_hooks  # noqa: F401  (search_params hints take effect)

    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    refused: list[int] = []

    def hook(named, reset_only=False):
        script.hook(named, reset_only)
        if named["BLOCK"] == 32 and not reset_only:
            refused.append(named["n"])
            raise out_of_resources()

    use_session(monkeypatch, timer_plugin(script))
    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    hints = {"search_params": {"params": ["BLOCK"]}}
    kernel = triton.autotune(configs=configs, key=["n"], hints=hints, pre_hook=hook)(kernels.scale_kernel)
    for n in (16, 32, 48):
        x = torch.ones(n)
        y = torch.empty_like(x)
        kernel[lambda meta, n=n: (triton.cdiv(n, meta["BLOCK"]),)](x, y, 2.0, n)
        assert torch.equal(y, 2 * x)
        assert kernel.best_config.kwargs == {"BLOCK": 16}
    assert refused == [16], "the config out of resources launched for the first key only"


# -- the caches carry the memory -----------------------------------------------------------------


class DictStore:
    """A remote store in a dict, as the redis cache's client reads and writes."""

    name = "dict-store"
    location = "memory://"
    ttl = None

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    def get(self, key):
        return self.values.get(key)

    def put(self, key, value, ttl):
        self.values[key] = value


def a_memory():
    failed = FailedConfig(
        "f" * 16, "BLOCK=128", ("torch.float16",), "out of resources", "OutOfResources: smem"
    )
    return FailedConfigs("work", "def work(): ...", {"triton": "3.9.0"}, {"device": "cpu"}, (failed,), 1.0e9)


@pytest.mark.parametrize("suffix", ["json", "msgpack"])
def test_the_file_caches_and_a_remote_store_carry_the_memory(tmp_path, suffix):
    data = a_memory().to_data()
    file_cache = {"json": JsonCache, "msgpack": MsgpackCache}[suffix](tmp_path / suffix)
    store = DictStore()
    LayeredCache(file_cache, store, "tests").store("work", "entry", data)
    assert FailedConfigs.from_data(file_cache.load("work", "entry")) == a_memory()
    elsewhere = LayeredCache(MemoryCache(tmp_path), store, "tests")  # another node: the store's copy
    assert FailedConfigs.from_data(elsewhere.load("work", "entry")) == a_memory()
