"""The cuda-graph timer on a CUDA device: each sample replays the captured runs (a short run back to
back several times, a long one alone), and work that cannot be captured is timed with events, said once.

The timings themselves are not asserted (bench/regret.py compares picks); what is: the work ran as
many times as the samples' replays hold, through the graph where it could be captured,
and a tuning under ``timer = "cuda-graph"`` records its picks with that timer.
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
from kerneltune.plugins.timers.events import GRAPH_FILL_US, CudaGraphTimer

from triton_dist.tune import autotune

pytestmark = pytest.mark.gpu


@triton.jit
def bump(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


def launch(x: torch.Tensor, block: int = 1024) -> None:
    bump[(triton.cdiv(x.numel(), block),)](x, x.numel(), BLOCK=block)


def test_a_short_run_is_replayed_back_to_back_and_each_sample_is_one_runs_time():
    x = torch.zeros(4096, device="cuda")
    launch(x)  # compiled and loaded before the capture
    timer = CudaGraphTimer(CudaDevice())
    timer.expect(0.004)  # the first pass's fastest: 4 us
    for _ in range(5):
        timer.sample(lambda: launch(x), before=timer.flush)
    samples = timer.collect()
    assert isinstance(timer._graph, torch.cuda.CUDAGraph), "captured, not run as it is"
    assert timer.runs == int(GRAPH_FILL_US // 4)
    assert len(samples) == 5 and all(0 < s < 0.05 for s in samples), "per run, not per replay"
    assert torch.equal(x, torch.full_like(x, float(1 + 5 * timer.runs))), "one eager launch, five replays"


def test_a_long_run_stays_alone_in_its_graph():
    torch.cuda._sleep(1000)  # loaded before the capture
    for expected in (0.5, None):  # half a millisecond; nothing told
        timer = CudaGraphTimer(CudaDevice())
        if expected is not None:
            timer.expect(expected)
        for _ in range(3):
            timer.sample(lambda: torch.cuda._sleep(1_000_000), before=timer.flush)  # about half a millisecond
        samples = timer.collect()
        assert isinstance(timer._graph, torch.cuda.CUDAGraph) and timer.runs == 1
        assert len(samples) == 3 and all(s > 0.1 for s in samples)


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
