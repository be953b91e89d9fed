"""The docs' ``scale`` example on a real CUDA device, timed by the cuda-event timer.

Skipped without CUDA (see conftest.py); run on the GPU machine with
``python3 -m pytest -m gpu``.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import triton
from kernels import scale_kernel
from kerneltune.core.driving import current_session

from triton_dist.tune import autotune

pytestmark = pytest.mark.gpu


SPACE = [
    {"cfg": triton.Config({"BLOCK": block}, num_warps=warps)}
    for block in (256, 512, 1024, 2048, 8192)
    for warps in (4, 8)
]

# Every config each launch used, in order: how the test tells measuring from a hit.
launched: list[triton.Config] = []


def key_fn(x, alpha, *args, **kwargs):
    return (tuple(x.shape), str(x.dtype))


def prune_fn(entry, x, alpha, *args, **kwargs):
    # The usage guide's rule: one block of the input stays under 32 KiB.
    return entry["cfg"].all_kwargs()["BLOCK"] * x.element_size() < 32 * 1024


def scale(x, alpha, cfg):
    launched.append(cfg)
    y = torch.empty_like(x)
    meta = cfg.all_kwargs()
    grid = (triton.cdiv(x.numel(), meta["BLOCK"]),)
    scale_kernel[grid](x, y, alpha, x.numel(), **meta)
    return y


def test_scale_tunes_with_cuda_events_and_persists_its_pick(isolated, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_PRECOMPILE", "1")  # the suite's default is off; users get it
    session = current_session()
    assert session.make_timer().name == "cuda-event"

    launched.clear()
    tuned = autotune(config_space=SPACE, key_fn=key_fn, prune_fn=prune_fn)(scale)
    x = torch.randn(1 << 18, device="cuda", dtype=torch.float32)
    y = tuned(x, 2.5, autotune=True, autotune_verbose=True)
    torch.testing.assert_close(y, 2.5 * x, atol=1e-5, rtol=1e-4)

    kept = [i for i, entry in enumerate(SPACE) if prune_fn(entry, x, 2.5)]
    assert 0 < len(kept) < len(SPACE)  # the rule above really prunes something
    settings = session.settings
    # Each kept candidate runs once with its launches recorded for COMPILE, then its
    # warm-up and timed runs; then the pick runs once more.
    assert len(launched) == len(kept) * (1 + settings.get("warmup") + settings.get("repeat")) + 1

    files = list((isolated / "scale").glob("[0-9a-f]*.json"))
    assert len(files) == 1
    record = json.loads(files[0].read_text())
    assert record["hardware"]["device"] == "cuda"
    assert record["hardware"]["name"] == torch.cuda.get_device_name(0)
    times = {row["index"]: row["time_ms"] for row in record["candidates"]}
    best = record["best"]["index"]
    assert best in kept
    assert all(times[i] is not None and math.isfinite(times[i]) and times[i] > 0 for i in kept)
    assert all(times[i] is None for i in set(times) - set(kept))
    assert times[best] == min(times[i] for i in kept)
    # The call after tuning ran the pick, and so does the next one, without measuring.
    assert launched[-1] is SPACE[best]["cfg"]
    launched.clear()
    torch.testing.assert_close(tuned(x, 2.5), 2.5 * x, atol=1e-5, rtol=1e-4)
    assert launched == [SPACE[best]["cfg"]]

    # A second tuner of the same function and space finds the pick on disk.
    launched.clear()
    again = autotune(config_space=SPACE, key_fn=key_fn, prune_fn=prune_fn)(scale)
    torch.testing.assert_close(again(x, 2.5), 2.5 * x, atol=1e-5, rtol=1e-4)
    assert launched == [SPACE[best]["cfg"]]
    assert list((isolated / "scale").glob("[0-9a-f]*.json")) == files
