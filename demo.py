"""kerneltune demo: tune real work on the device present, then reuse the pick.

    python3 demo.py                 # CUDA GPU if there is one, else CPU
    python3 demo.py --device cpu    # the CPU workload even on a GPU machine

On a CUDA GPU it tunes the ``scale`` Triton kernel of the Triton-distributed
docs through ``triton_dist.tune.autotune``, over BLOCK x num_warps, on a
16M-element tensor. On a CPU it tunes a panel matmul: ``a @ b`` computed a
panel of ``rows`` rows at a time, where small panels pay per-call overhead and
big ones keep the BLAS kernel busy, so the candidates differ for real.

The first run measures every candidate, prints the times and the pick, checks
the result against a reference and writes the pick to the disk cache. A second
run finds the pick there and measures nothing. The cache lives in
``~/.triton_dist/autotune/`` unless ``TRITON_DIST_AUTOTUNE_CACHE_DIR`` or a
config file says otherwise; ``TRITON_DIST_AUTOTUNE_ALWAYS_TUNE=1`` forces a
new tuning.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import torch
from kerneltune.core import CandidateMeasured, TuningFinished, TuningStarted, add_plugin, hookimpl
from kerneltune.core.driving import current_session, encode_key

from triton_dist.tune import autotune

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU demo needs no Triton
    triton = None

# -- the CPU workload: a matmul in row panels ---------------------------------


def panel_configs() -> list[dict[str, Any]]:
    """Panel heights to try; 2048 is pruned for the 1024-row input below."""
    return [{"rows": rows} for rows in (8, 32, 128, 512, 2048)]


def panel_key(a: torch.Tensor, b: torch.Tensor) -> Hashable:
    """Shapes and dtype decide the best panel height; the values don't."""
    return (tuple(a.shape), tuple(b.shape), a.dtype)


def panel_prune(config: dict[str, Any], a: torch.Tensor, b: torch.Tensor) -> bool:
    """A panel taller than ``a`` would run the same as the whole matrix: skip it."""
    return config["rows"] <= a.shape[0]


@autotune(config_space=panel_configs(), key_fn=panel_key, prune_fn=panel_prune)
def panel_matmul(a: torch.Tensor, b: torch.Tensor, rows: int) -> torch.Tensor:
    """``a @ b``, computed ``rows`` rows of ``a`` at a time."""
    out = a.new_empty(a.shape[0], b.shape[1])
    for start in range(0, a.shape[0], rows):
        torch.matmul(a[start : start + rows], b, out=out[start : start + rows])
    return out


# -- the GPU workload: the docs' scale kernel ---------------------------------

if triton is not None:

    @triton.jit
    def scale_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offsets = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        tl.store(y_ptr + offsets, alpha * x, mask=mask)

    def scale_configs() -> list[dict[str, Any]]:
        """BLOCK x num_warps: how much each program does and how many warps do it."""
        return [
            {"cfg": triton.Config({"BLOCK": block}, num_warps=warps)}
            for block in (256, 512, 1024, 2048, 4096)
            for warps in (4, 8)
        ]

    def scale_key(x: torch.Tensor, alpha: float, *args: Any, **kwargs: Any) -> Hashable:
        """The layout decides the best config; ``alpha`` does not."""
        return (tuple(x.shape), str(x.dtype))

    def scale_prune(entry: dict[str, Any], x: torch.Tensor, alpha: float, *args: Any, **kwargs: Any) -> bool:
        """A block larger than the whole tensor only wastes lanes."""
        return entry["cfg"].all_kwargs()["BLOCK"] <= x.numel()

    @autotune(config_space=scale_configs(), key_fn=scale_key, prune_fn=scale_prune)
    def scale(x: torch.Tensor, alpha: float, cfg: Any) -> torch.Tensor:
        """``alpha * x`` by the Triton kernel, launched with ``cfg``."""
        y = torch.empty_like(x)
        meta = cfg.all_kwargs()
        grid = (triton.cdiv(x.numel(), meta["BLOCK"]),)
        scale_kernel[grid](x, y, alpha, x.numel(), **meta)
        return y


# -- watching the engine --------------------------------------------------------


class TuningWatcher:
    """An observer plugin: keeps what the engine reports while it tunes.

    If ``started`` stays empty through a call, no candidate was measured: the
    pick came from a cache.
    """

    def __init__(self) -> None:
        self.started: list[TuningStarted] = []
        self.measured: list[CandidateMeasured] = []
        self.finished: list[TuningFinished] = []

    @hookimpl
    def kerneltune_tuning_started(self, event: TuningStarted) -> None:
        self.started.append(event)

    @hookimpl
    def kerneltune_candidate_measured(self, event: CandidateMeasured) -> None:
        self.measured.append(event)

    @hookimpl
    def kerneltune_tuning_finished(self, event: TuningFinished) -> None:
        self.finished.append(event)


def find_record(function: str, key: Hashable) -> tuple[Path, dict[str, Any]] | None:
    """The newest stored record for ``function`` and ``key`` on this hardware, and its file.

    ``None`` when the configured cache keeps no files (``memory``) or holds
    no such record.
    """
    session = current_session()
    directory = session.cache.directory(function)
    if directory is None or not directory.is_dir():
        return None
    wanted = encode_key(key)
    found: list[tuple[float, Path, dict[str, Any]]] = []
    for path in directory.iterdir():
        if path.suffix in (".lock", ".log", ".tmp") or not path.is_file():
            continue
        data = session.cache.load(function, path.stem)
        if isinstance(data, dict) and data.get("key") == wanted and data.get("hardware") == session.hardware:
            found.append((float(data.get("created", 0.0)), path, data))
    if not found:
        return None
    _, path, data = max(found, key=lambda item: item[0])
    return path, data


def print_table(rows: list[tuple[str, float | None, str | None]], best: int) -> None:
    """One line per candidate: its mean time or why it has none; the pick marked."""
    width = max(len(label) for label, _, _ in rows)
    for index, (label, time_ms, error) in enumerate(rows):
        outcome = f"{time_ms:10.4f} ms" if time_ms is not None else f"{'-':>10}    ({error})"
        mark = "  <- pick" if index == best else ""
        print(f"    [{index}] {label:<{width}}  {outcome}{mark}")


def rows_from_event(event: TuningFinished, measured: list[CandidateMeasured]) -> list[tuple[Any, ...]]:
    """Table rows from what the observer saw during this run's tuning."""
    errors = {m.candidate.index: m.measurement.error for m in measured if m.function == event.function}
    return [
        (c.label, t if math.isfinite(t) else None, errors.get(c.index) or "pruned")
        for c, t in zip(event.candidates, event.times, strict=True)
    ]


def rows_from_record(data: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Table rows from a stored record: what the earlier tuning measured."""
    return [(row["label"], row["time_ms"], row["error"]) for row in data["candidates"]]


# -- the run -------------------------------------------------------------------


def workload(device: str) -> tuple[Any, tuple[Any, ...], Callable[[Any], None], str]:
    """The tuned function, its arguments, a check of its result, and a description."""
    torch.manual_seed(0)
    if device == "cuda":
        x = torch.randn(1 << 24, device="cuda", dtype=torch.float32)

        def check(y: torch.Tensor) -> None:
            torch.testing.assert_close(y, 2.5 * x, atol=1e-5, rtol=1e-4)

        gpu = torch.cuda.get_device_name(0)
        about = f"Triton kernel 'scale' on {gpu}: y = 2.5 * x, x of {x.numel()} float32"
        return scale, (x, 2.5), check, about
    a = torch.randn(1024, 1024)
    b = torch.randn(1024, 1024)

    def check(out: torch.Tensor) -> None:
        torch.testing.assert_close(out, a @ b, atol=1e-3, rtol=1e-4)

    threads = torch.get_num_threads()
    about = f"CPU panel matmul 'panel_matmul': 1024x1024 @ 1024x1024 float32, {threads} torch threads"
    return panel_matmul, (a, b), check, about


def main(argv: list[str] | None = None) -> int:
    """Tune (or load) once, verify, and say which of the two happened."""
    parser = argparse.ArgumentParser(description="kerneltune demo: tune, verify, cache.")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    options = parser.parse_args(argv)
    device = options.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() and triton is not None else "cpu"
    if device == "cuda" and (triton is None or not torch.cuda.is_available()):
        print("demo: --device cuda needs a CUDA device and Triton", file=sys.stderr)
        return 2
    if device == "cpu":
        # The panel matmul runs on the host: on a GPU machine the default objective would time it
        # by the GPU's events, which see nothing of it (docs/measuring.md, "The objective").
        os.environ.setdefault("KERNELTUNE_OBJECTIVE", "wall")

    # An observer plugin living in this script: it sees whether this run tunes.
    watcher = TuningWatcher()
    add_plugin(watcher)
    session = current_session()

    tuned, args, check, about = workload(device)
    key = tuned.key_fn(*args)
    print(f"kerneltune demo: {about}")
    print(f"cache directory: {session.settings.cache_root}  (cache plugin: {session.cache.name})")
    print()

    start = time.perf_counter()
    # Verbose: a real tuning prints its INFO lines (start, each candidate, the pick).
    result = tuned(*args, autotune_verbose=True)
    seconds = time.perf_counter() - start
    check(result)
    print("result matches the reference (torch.testing.assert_close)")

    stored = find_record(tuned.__name__, key)
    if watcher.started:
        finished = watcher.finished[-1]
        assert finished.best is not None
        # A near tie is re-timed in rounds, each one more event: count the candidates.
        measured = {m.candidate.index for m in watcher.measured}
        what = "RE-CHECKED the stored pick head to head" if finished.recheck else "TUNED"
        print(
            f"{what}: measured {len(measured)} candidates for key {key!r} "
            f"in {finished.seconds:.2f} s (first call {seconds:.2f} s):"
        )
        print_table(rows_from_event(finished, watcher.measured), finished.best.index)
        print(f"pick: [{finished.best.index}] {finished.best.label} ({finished.confidence})")
        if stored is not None:
            print(f"cache file: {stored[0]}")
            if finished.confidence == "uncertain":
                print(
                    "the pick is uncertain (README, 'Uncertain picks'): the next run re-checks it head "
                    "to head, then loads it"
                )
            else:
                print("run the demo again: the pick will be loaded from the disk cache, with no measuring")
        else:
            print("the selected cache keeps nothing on disk, so a second run will tune again")
    elif stored is not None:
        path, data = stored
        print(f"LOADED from disk cache {path}: no measuring (first call {seconds * 1e3:.1f} ms)")
        tuned_at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data["created"]))
        print(f"times stored by the tuning of {tuned_at}:")
        print_table(rows_from_record(data), data["best"]["index"])
        print(f"pick: [{data['best']['index']}] {data['best']['label']} ({data.get('confidence')})")
    else:
        # A cache plugin that keeps no files where this demo can read them.
        name = session.cache.name
        print(f"LOADED from the {name!r} cache: no measuring (first call {seconds * 1e3:.1f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
