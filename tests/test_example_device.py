"""examples/kerneltune-example-device: a new accelerator in one plugin module, end to end.

Nothing here is a test double: the example package is installed (``make
install``) and found through its entry point, its timer is selected in a
kerneltune.toml as a user would, and the tuning runs through the engine,
the isolation worker and the JSON cache, with no change to kerneltune.
"""

from __future__ import annotations

import os
from pathlib import Path

import isolation_doubles
import kerneltune_example_device as toy
import pytest
import torch
from kerneltune.core import CandidateFailedWarning
from kerneltune.core.driving import current_session
from tuning_doubles import stored_records

from triton_dist.tune import autotune

BLOCKS = [{"block": 64}, {"block": 128}, {"block": 256}]
HERE = os.getpid()


@pytest.fixture
def on_unit_1(tmp_path):
    """The toy device selected through its timer, isolation on, and this process on toy unit 1."""
    (tmp_path / "kerneltune.toml").write_text(
        'timer = "toy-clock"\nisolate = "subprocess"\nisolate_timeout = 30\nwarmup = 0\nrepeat = 2\n'
    )
    device = toy.ToyDevice()
    device.set_current(1)
    yield
    device.set_current(0)


def runs(log: Path) -> list[tuple[int, int, int]]:
    """Each run as (pid, block, toy unit), in order."""
    return [tuple(int(word) for word in line.split()) for line in log.read_text().splitlines()]


def test_the_session_runs_on_the_device_its_timer_names(on_unit_1):
    session = current_session()
    assert type(session.device) is toy.ToyDevice
    assert type(session.make_timer()) is toy.ToyTimer
    assert session.hardware["device"] == "toy" and session.hardware["count"] == toy.UNITS
    assert session.registries.devices.owners["toy"] == "example-device"


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_tunes_screens_a_crash_and_a_device_fault_and_stores_the_pick(on_unit_1, isolated, tmp_path):
    log = tmp_path / "runs"
    x = torch.arange(4)
    tuned = autotune(config_space=BLOCKS, key_fn=lambda x, *args, **kwargs: tuple(x.shape))(
        isolation_doubles.on_toy
    )

    assert torch.equal(tuned(x, str(log), crash=128, fault=64), x * 256)

    (record,) = stored_records(isolated, "on_toy")
    assert record["hardware"]["device"] == "toy"
    assert record["best"]["index"] == 2
    errors = [candidate["error"] for candidate in record["candidates"]]
    assert errors == [
        "ScreenedOut: crashed the isolation worker (the device stopped working: "
        "RuntimeError: toy unit 1 has faulted)",
        "ScreenedOut: crashed the isolation worker (signal 11)",
        None,
    ]
    here = [(block, unit) for pid, block, unit in runs(log) if pid == HERE]
    assert here == [(256, 1), (256, 1), (256, 1)], "two timed runs, then the pick; on unit 1"
    worker = [(block, unit) for pid, block, unit in runs(log) if pid != HERE]
    assert worker == [(64, 1), (128, 1), (256, 1)], "each candidate once in a worker set to unit 1"
    assert toy.current_unit() == 1 and 1 not in toy._faulted, "the fault stayed in the worker"
