"""Twins: configs that launch the same program are measured once (docs/compiling.md, "Twins").

On CPU the kernels run in Triton's interpreter, which ignores ``num_warps``
and ``num_stages``: 8 configs over 4 block sizes are 4 programs. The
observer counts what was measured; the record keeps why the twins were not.
"""

from __future__ import annotations

import kernels
import pytest
import torch
import triton
from kerneltune.core import add_plugin, hookimpl, remove_plugin
from kerneltune.core.machine.twins import TwinDropped, Twins
from kerneltune.core.values.records import Candidate

from triton_dist.autotuner import contextual_autotune


@pytest.fixture(autouse=True)
def twins_on(monkeypatch):
    """The suite measures twins each (tests/conftest.py); these tests are about the default."""
    monkeypatch.setenv("KERNELTUNE_TWINS", "1")


BLOCKS = (32, 64, 128, 256)
#: 8 configs, 4 programs under the interpreter: each block size at two warp counts.
EIGHT = [triton.Config({"BLOCK": b}, num_warps=w, num_stages=s) for b in BLOCKS for w, s in ((4, 2), (8, 3))]


class Measured:
    """Observer: the indices of the candidates measured (and dropped) per tuning."""

    def __init__(self) -> None:
        self.measured: list[int] = []
        self.errors: dict[int, str] = {}

    @hookimpl
    def kerneltune_candidate_measured(self, event):
        if event.measurement.error is None:
            self.measured.append(event.candidate.index)
        else:
            self.errors[event.candidate.index] = event.measurement.error


@pytest.fixture
def measured():
    observer = Measured()
    add_plugin(observer)
    yield observer
    remove_plugin(observer)


def launch_scale(kernel, n=256):
    x = torch.randn(n, device=kernels.DEVICE)
    y = torch.empty_like(x)
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, 2.0, n)
    return x, y


@pytest.mark.expected_warning(
    RuntimeWarning, match="differ only in num_stages, num_warps compile to the same"
)
def test_eight_configs_that_are_four_programs_measure_four(quick, measured, isolated):
    kernel = triton.autotune(configs=list(EIGHT), key=["n"])(kernels.scale_kernel)

    @contextual_autotune()
    def outer():
        return launch_scale(kernel)

    x, y = outer()
    torch.testing.assert_close(y, 2.0 * x)
    assert sorted(measured.measured) == [0, 2, 4, 6]
    assert {i: why for i, why in measured.errors.items()} == {
        i: f"TwinDropped: the same program as [{i - 1}] (differs only in num_stages, num_warps)"
        for i in (1, 3, 5, 7)
    }
    assert kernel.best_config in EIGHT[::2]


def test_twins_false_measures_every_config(quick, measured, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_TWINS", "0")
    kernel = triton.autotune(configs=list(EIGHT), key=["n"])(kernels.scale_kernel)

    @contextual_autotune()
    def outer():
        return launch_scale(kernel)

    outer()
    assert sorted(measured.measured) == list(range(8))
    assert measured.errors == {}


def test_distinct_programs_are_all_measured(quick, measured):
    configs = [triton.Config({"BLOCK": b}, num_warps=4) for b in BLOCKS]
    kernel = triton.autotune(configs=configs, key=["n"])(kernels.scale_kernel)

    @contextual_autotune()
    def outer():
        return launch_scale(kernel)

    outer()
    assert sorted(measured.measured) == [0, 1, 2, 3]


def candidates(n):
    return [Candidate(i, f"c{i}", f"c{i}", f"c{i}") for i in range(n)]


@pytest.mark.expected_warning(RuntimeWarning, match="differ only in w compile to the same program")
def test_the_first_candidate_of_a_program_stands_for_it_in_any_round():
    programs = {0: "a", 1: "b", 2: "a", 3: None, 4: "b"}
    twins = Twins("work", lambda c: programs[c.index], lambda c: {"w": c.index})
    c = candidates(5)
    assert twins.twin_of(c[0]) is None
    assert twins.twin_of(c[1]) is None
    dropped = twins.twin_of(c[2])
    assert isinstance(dropped, TwinDropped) and dropped.twin == 0
    assert twins.twin_of(c[3]) is None  # the backend cannot tell: measured
    assert twins.twin_of(c[4]).twin == 1
    assert twins.twin_of(c[0]) is None  # a later round of the first keeps it
    assert twins.dropped == {2: 0, 4: 1}


def test_a_backend_that_raises_tells_nothing():
    def broken(candidate):
        raise RuntimeError("no binary")

    twins = Twins("work", broken)
    assert all(twins.twin_of(c) is None for c in candidates(3))


@pytest.mark.gpu
@pytest.mark.expected_warning(RuntimeWarning, match="differ only in num_stages compile to the same program")
def test_stage_counts_of_a_loop_free_kernel_are_one_binary_on_a_gpu(measured):
    """Compiled, twins are told by the binary: a kernel without a loop has nothing to pipeline."""
    configs = [triton.Config({"BLOCK": b}, num_warps=4, num_stages=s) for b in (128, 256) for s in (1, 2, 3)]
    kernel = triton.autotune(configs=configs, key=["n"])(kernels.scale_kernel)

    @contextual_autotune()
    def outer():
        return launch_scale(kernel, n=1 << 16)

    x, y = outer()
    torch.testing.assert_close(y, 2.0 * x)
    assert sorted(measured.measured) == [0, 3]
    assert sorted(measured.errors) == [1, 2, 4, 5]
