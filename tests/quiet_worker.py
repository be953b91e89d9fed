"""A fresh process tuning NumPy work with the defaults (precompile on, no Triton imported).

Prints one JSON line: the pick, the threads other than the main one that
were alive during any candidate's run, whether Triton got imported, and
each candidate's stored time. With ``--import-torch`` it imports torch
first, as a program that also does torch work would: ``auto`` then asks the
torch timers too. Run by tests/test_quiet_measure.py.
"""

from __future__ import annotations

import json
import sys
import threading

import numpy as np

if "--import-torch" in sys.argv:
    import torch  # noqa: F401

from triton_dist.tune import autotune

WORK = (1, 8, 16, 32)
data = np.random.default_rng(0).random(100_000)
beside: set[str] = set()


@autotune(config_space=[{"work": work} for work in WORK], key_fn=lambda x: x.shape[0])
def summed(x: np.ndarray, work: int) -> float:
    beside.update(t.name for t in threading.enumerate() if t is not threading.main_thread())
    return float(sum(np.sum(x) for _ in range(work)) / work)  # more work, the same result


summed(data)
pick = summed._picks[data.shape[0]]
print(json.dumps({"pick": pick.index, "beside": sorted(beside), "triton": "triton" in sys.modules}))
