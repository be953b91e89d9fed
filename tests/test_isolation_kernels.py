"""ISOLATE for Triton kernels: contextual_autotune and search_params screen their candidates.

The kernels (tests/isolation_kernels.py, tests/isolation_search.py) run in
Triton's interpreter on CPU tensors; the config that stores ``2**40``
elements away really segfaults the interpreter, so it must be screened out
in the isolation worker: run in this process it would end the test run. Each
config notes the process it runs in, so the tests also check that it never
did. The worker is the one CPU worker of the test process, shared with
tests/test_isolation.py; a crash replaces it at the next screening, so the
crashing config comes last where a test allows.
"""

from __future__ import annotations

import os
import threading

import ascend_stand_in
import isolation_kernels as kernels
import pytest
import rank_doubles
import torch
import triton
import triton.language as tl
from kerneltune.core import CandidateFailedWarning, IsolationError, add_plugin, remove_plugin
from kerneltune.plugins.triton.isolated import KernelIsolation, fresh_descriptors
from rank_doubles import ThreadGroup, act_as, run_ranks
from tuning_doubles import stored_records

import triton_dist.autotune_hooks  # noqa: F401  (before isolation_search decorates its kernels)
from triton_dist.autotuner import contextual_autotune

import isolation_search as searches  # isort: skip

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="interpreter tests; CUDA is covered by test_isolation_gpu.py",
)

HERE = os.getpid()
CRASHED = "ScreenedOut: crashed the isolation worker (signal 11)"


@pytest.fixture
def isolate(monkeypatch, quick):
    """Isolation on (2 s per candidate: an interpreted launch takes 0.1 s at most), and each outcome."""
    monkeypatch.setenv("KERNELTUNE_ISOLATE", "subprocess")
    monkeypatch.setenv("KERNELTUNE_ISOLATE_TIMEOUT", "2")
    with kernels.observed() as outcomes:
        yield outcomes


def ran_here() -> set[int]:
    return {block for pid, block in kernels.launches() if pid == HERE}


def ran_in_the_worker() -> list[int]:
    return [block for pid, block in kernels.launches() if pid != HERE]


def doubled_by(kernel, n: int, **options) -> torch.Tensor:
    x = torch.arange(n, dtype=torch.float32)

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def outer():
        return kernels.launch(kernel, x, **options)

    y = outer()
    assert torch.equal(y, 2 * x)
    return y


# -- contextual_autotune -------------------------------------------------------------------------------


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_contextual_a_config_that_segfaults_is_screened_out_and_never_runs_here(isolate):
    doubled_by(kernels.doubled, 64, CRASH=64)
    assert isolate.of("guarded_double", 64) == {16: None, 32: None, 64: CRASHED}
    assert kernels.doubled.best_config.kwargs["BLOCK"] in (16, 32)
    assert ran_here() == {16, 32}, "measured, then the pick; never the crashing config"
    assert ran_in_the_worker() == [16, 32, 64]


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_contextual_a_kernel_waiting_for_its_turn_never_stands_in_with_a_crashing_config(isolate):
    x, w = torch.arange(40.0), torch.arange(24.0)

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def outer():
        # The second launch waits while the first is measured; its stand-in would try block 16 first.
        return kernels.launch(kernels.doubled, x), kernels.launch(kernels.doubled, w, CRASH=16)

    y, v = outer()
    assert torch.equal(y, 2 * x) and torch.equal(v, 2 * w)
    assert isolate.of("guarded_double", 24) == {16: CRASHED, 32: None, 64: None}
    here = [block for pid, block in kernels.launches(24) if pid == HERE]
    assert 16 not in here, "never as a stand-in, which takes the first kept config that is not known bad"
    assert len(here) > 3, "stand-ins while the other key was measured, then the two measured and the pick"
    assert [block for pid, block in kernels.launches(24) if pid != HERE] == [16, 32, 64]


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_contextual_heuristics_and_the_grid_are_evaluated_here_and_launched_there(isolate):
    # At n = 96 a heuristic makes block 32 crash; the grid reads another heuristic's value.
    x = torch.arange(96.0)

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def outer():
        y = torch.zeros_like(x)
        kernels.heuristic_double[lambda meta: (meta["PROGRAMS"],)](x, y, 96)
        return y

    assert torch.equal(outer(), 2 * x)
    assert isolate.of("heuristic_double", 96) == {16: None, 32: CRASHED, 64: None}
    assert ran_here() == {16, 64}


def test_what_the_worker_is_sent_for_a_launch_under_heuristics():
    x = torch.arange(96.0)
    grid = lambda meta: (meta["PROGRAMS"], meta["n"] // 32)  # noqa: E731
    isolation = KernelIsolation(kernels.heuristic_double, (x, x, 96), {"grid": grid, "warmup": False})
    target = isolation.target
    assert (target.module, target.qualname, target.unwrap) == ("isolation_kernels", "heuristic_double", 0)
    assert target.kwargs == {} and target.runner == "kerneltune.plugins.triton.isolated:kernel_runner"
    config = kernels.heuristic_double.configs[1]
    assert isolation.payload(config) == {
        "options": config.all_kwargs(),
        "derived": {"PROGRAMS": 3, "CRASH": 32},
        "grid": (3, 3),
        "pre_hook": 0,  # the first config's: every config has the one pre-hook
    }
    clashing = KernelIsolation(kernels.doubled, (x, x, 96), {"grid": (1,), "BLOCK": 16})
    assert clashing.payload(kernels.doubled.configs[0]) is None, "it raises here before launching"


def installed_triton() -> str:
    """The installed Triton as a reason names it: ``triton 3.3.1``, ``triton-ascend 3.2.0rc4``."""
    ascend = ascend_stand_in.release()
    return f"triton-ascend {ascend}" if ascend is not None else f"triton {triton.__version__}"


def test_the_worker_copies_the_tensor_under_a_host_side_descriptor():
    TensorDescriptor = pytest.importorskip(
        "triton.tools.tensor_descriptor",
        reason=f"host-side tensor descriptors came with Triton 3.4; {installed_triton()} has none",
    ).TensorDescriptor

    buffer = torch.arange(64.0).reshape(8, 8)
    descriptor = TensorDescriptor.from_tensor(buffer[:, 4:], [2, 4])
    copied, number = fresh_descriptors([descriptor, 3])
    assert number == 3 and copied.base.data_ptr() != descriptor.base.data_ptr()
    assert (copied.base.stride(), copied.base.storage_offset()) == ((8, 1), 4)
    assert torch.equal(copied.base, buffer[:, 4:]) and copied.block_shape == [2, 4]


def test_contextual_a_kernel_decorated_in_a_function_is_a_clear_error(isolate):
    @triton.autotune(configs=kernels.noted_configs(), key=["n"])
    @triton.jit
    def local_double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)

    with pytest.raises(
        IsolationError,
        match=r"imports the tuned kernel by name, but test_isolation_kernels\..*<locals>\.local_double is "
        r"defined inside another function; define it at module level, or turn isolation off",
    ):
        doubled_by(local_double, 32)
    assert kernels.launches() == []


def test_contextual_a_tuner_made_at_run_time_is_a_clear_error(isolate):
    made_now = triton.autotune(configs=kernels.noted_configs(), key=["n"])(kernels.guarded_double)
    with pytest.raises(IsolationError, match=r"but no module-level name holds it \(isolation_kernels\."):
        doubled_by(made_now, 32)


def test_contextual_an_argument_that_cannot_be_pickled_is_a_clear_error(isolate):
    with pytest.raises(IsolationError, match=r"keyword argument 'HANG' \(lock\) can be neither shared"):
        doubled_by(kernels.doubled, 32, HANG=threading.Lock())
    assert kernels.launches() == []


# -- search_params -------------------------------------------------------------------------------------


def errors_in_record(cache, n: int) -> dict[int, str | None]:
    (record,) = [r for r in stored_records(cache, "guarded_double") if r["key"][0][0] == n]
    return {int(c["label"].split(",")[0].split("=")[1]): c["error"] for c in record["candidates"]}


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_search_params_a_config_that_segfaults_is_screened_out_and_never_runs_here(isolate, isolated):
    kernels.launch(searches.searched, torch.arange(48.0), CRASH=64)
    assert errors_in_record(isolated, 48) == {16: None, 32: None, 64: CRASHED}
    assert searches.searched.best_config.kwargs["BLOCK"] in (16, 32)
    assert ran_here() == {16, 32}
    assert ran_in_the_worker() == [16, 32, 64]


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_search_params_a_generated_candidate_that_hangs_is_failed_as_hung(isolate, isolated):
    kernels.launch(searches.generated, torch.arange(40.0), HANG=32)
    assert errors_in_record(isolated, 40)[32] == "ScreenedOut: hung for more than 2 s in the isolation worker"
    assert searches.generated.best_config.kwargs["BLOCK"] == 16
    assert ran_here() == {16}
    assert ran_in_the_worker() == [16, 32]


def test_search_params_a_kernel_decorated_in_a_function_is_a_clear_error(isolate):
    @triton.autotune(configs=[], key=["n"], hints={"search_params": {"params": ["BLOCK"], "values": [16]}})
    @triton.jit
    def local_search(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)

    with pytest.raises(IsolationError, match=r"<locals>\.local_search is defined inside another function"):
        kernels.launch(local_search, torch.arange(16.0))


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_search_params_a_crash_on_one_rank_fails_the_config_on_every_rank(isolate, isolated, monkeypatch):
    # Both thread-ranks screen through the one CPU worker, one after the other: more than the default wait.
    monkeypatch.setattr(rank_doubles, "HANG_SECONDS", 30.0)
    monkeypatch.setenv("KERNELTUNE_REDUCER", "threads")
    # Triton's interpreter patches triton.language while a kernel runs: one kernel at a time in this process.
    interpret, one_at_a_time = kernels.guarded_double.run, threading.Lock()

    def run(*args, **kwargs):
        with one_at_a_time:
            return interpret(*args, **kwargs)

    monkeypatch.setattr(kernels.guarded_double, "run", run)
    add_plugin(rank_doubles.plugin)
    group = ThreadGroup(2)
    kernel_of = (searches.searched_rank0, searches.searched_rank1)

    def rank(r: int) -> int:
        act_as(group.member(r))
        kernels.launch(kernel_of[r], torch.arange(56.0), CRASH=64 if r == 1 else 0)
        return kernel_of[r].best_config.kwargs["BLOCK"]

    try:
        picks = run_ranks(2, rank)
    finally:
        remove_plugin(rank_doubles.plugin)
    assert picks[0] == picks[1] in (16, 32), picks
    assert errors_in_record(isolated, 56)[64] == f"{CRASHED} on rank 1"
    assert ran_here() == {16, 32}
    assert sorted(ran_in_the_worker()) == [16, 16, 32, 32, 64, 64]
    for counts in group.counts:
        assert counts["gather"] == 2, "the agreement and one screening"
