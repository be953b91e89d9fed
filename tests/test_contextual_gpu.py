"""contextual_autotune on a CUDA device: a matmul whose candidates really differ.

The pick is checked against a separate, careful measurement: each config
alone under ``triton.testing.do_bench`` (50 ms warm-up, 300 ms of runs, L2
flushed before each, median). The table of both measurements is printed and,
where ``KERNELTUNE_RECORD_DIR`` is set, written there as
``contextual_matmul_pick.json``.

Skipped without CUDA; tests/test_contextual.py runs its whole suite on CUDA
too when a device is present.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch
from contextual_matmul import SIX_CONFIGS, launch_matmul, make_matmul, median_ms
from kerneltune.core.driving import current_session

from triton_dist.autotuner import contextual_autotune

pytestmark = pytest.mark.gpu

SIZE = 2048
# do_bench and the tuner each see noise; configs closer than this are a tie.
TIE = 1.10


def mean_times_from_log(tmp_path: Path) -> dict[int, float]:
    means = {}
    for line in (tmp_path / ".autotune_logs" / "rank-0.log").read_text().splitlines():
        if ": config " in line and " mean " in line:
            index = int(line.split(": config ")[1].split()[0])
            value = line.split(" mean ")[1].split()[0]
            means[index] = float(value) if value != "invalid" else math.inf
    return means


def test_uses_the_cuda_event_timer():
    assert current_session().make_timer().name == "cuda-event"


def test_matmul_pick_matches_a_separate_do_bench_measurement(tmp_path):
    torch.manual_seed(0)
    a = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
    b = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
    kernel = make_matmul(SIX_CONFIGS)

    @contextual_autotune(n_repeat=20, n_warmup=5)
    def product(a, b):
        return launch_matmul(kernel, a, b)

    c = product(a, b)
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), atol=0.5, rtol=0.02)
    pick = SIX_CONFIGS.index(kernel.best_config)

    medians = [median_ms(kernel, cfg, a, b) for cfg in SIX_CONFIGS]
    tuned = mean_times_from_log(tmp_path)
    table = [
        {"config": str(cfg), "do_bench_median_ms": medians[i], "contextual_mean_ms": tuned.get(i)}
        for i, cfg in enumerate(SIX_CONFIGS)
    ]
    record = {"device": torch.cuda.get_device_name(0), "size": SIZE, "pick": pick, "configs": table}
    print(json.dumps(record, indent=2))
    folder = os.environ.get("KERNELTUNE_RECORD_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "contextual_matmul_pick.json").write_text(json.dumps(record, indent=2))

    fastest = min(range(len(medians)), key=medians.__getitem__)
    # The candidates really differ: the slowest is several times the fastest.
    assert max(medians) > 3 * medians[fastest]
    # The pick is do_bench's fastest, or within noise of it.
    assert pick == fastest or medians[pick] <= TIE * medians[fastest], record
