"""The cuda-graph timer on a CUDA device: each sample replays the captured run once, and work that
cannot be captured is timed with events, said once.

The timings themselves are not asserted (bench/regret.py compares picks); what is: the work ran as
many times as samples were taken, through the graph where it could be captured, and a tuning under
``timer = "cuda-graph"`` records its picks with that timer.
"""

from __future__ import annotations

import warnings

import attrs
import pytest
import torch
import triton
import triton.language as tl
from kerneltune.core import Session, load_settings
from kerneltune.core.drivers import function_tuner
from kerneltune.plugins.devices.accelerators import CudaDevice
from kerneltune.plugins.timers.events import CudaGraphTimer

from triton_dist.tune import autotune

pytestmark = pytest.mark.gpu


@triton.jit
def bump(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


def launch(x: torch.Tensor, block: int = 1024) -> None:
    bump[(triton.cdiv(x.numel(), block),)](x, x.numel(), BLOCK=block)


def test_each_sample_replays_the_captured_launch_once():
    x = torch.zeros(4096, device="cuda")
    launch(x)  # compiled and loaded before the capture
    timer = CudaGraphTimer(CudaDevice())
    for _ in range(5):
        timer.sample(lambda: launch(x), before=timer.flush)
    samples = timer.collect()
    assert len(samples) == 5 and all(0 < s < 10 for s in samples)
    assert isinstance(timer._graph, torch.cuda.CUDAGraph), "captured, not run as it is"
    assert torch.equal(x, torch.full_like(x, 6.0)), "one eager launch and five replays"


def test_work_that_cannot_be_captured_is_timed_with_events_and_said_once():
    x = torch.zeros(4096, device="cuda")
    launch(x)

    def synchronising() -> None:
        launch(x)
        torch.cuda.synchronize()  # not allowed while a stream is captured

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            timer = CudaGraphTimer(CudaDevice())
            for _ in range(3):
                timer.sample(synchronising)
            assert len(timer.collect()) == 3 and timer._graph is False
    said = [str(w.message) for w in caught if "cuda-graph timer cannot capture" in str(w.message)]
    assert len(said) == 1, said
    assert torch.equal(x, torch.full_like(x, 7.0)), "one eager launch and six samples, each run as it is"


def test_a_tuning_under_the_cuda_graph_timer_times_its_near_ties_with_it(monkeypatch):
    session = Session.create(attrs.evolve(load_settings(), timer="cuda-graph", cache="memory", tie_rounds=3))
    monkeypatch.setattr(function_tuner, "current_session", lambda: session)
    made: list[CudaGraphTimer] = []
    real_init = CudaGraphTimer.__init__

    def counting(self, device):
        made.append(self)
        real_init(self, device)

    monkeypatch.setattr(CudaGraphTimer, "__init__", counting)
    x = torch.zeros(4096, device="cuda")

    # Three copies of one config: the first pass (cuda-event) cannot tell them apart.
    @autotune(config_space=[{"tag": t} for t in range(3)], key_fn=lambda x, tag=None: x.numel())
    def bumped(x, tag):
        launch(x)

    bumped(x)
    assert made, "the near-tie rounds were timed by cuda-graph timers"
    assert all(isinstance(t._graph, torch.cuda.CUDAGraph) for t in made), "a plain launch captures"
