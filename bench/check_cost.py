"""The output check's host time per candidate, apart from the work it checks.

From the repository root, on a CUDA GPU or the CPU::

    python3 bench/check_cost.py [--device cuda] [--size 4096] [--candidates 16] [--reps 20]
        [--warm 0.3] [--json FILE]

Two checks, each over ``--candidates`` candidates that all compute the same
``--size``-square matrix product (bfloat16 on a GPU, float32 on the CPU),
``--reps`` times afresh:

* ``launch``: the contextual tuner's check of a kernel launch's writes
  (:class:`~kerneltune.core.drivers.checked_launches.LaunchCheck`), the
  launch a ``torch.mm`` into an output argument;
* ``function``: the function-level tuner's check of a return value
  (:class:`~kerneltune.core.drivers.checked_outputs.OutputCheck`), the
  function returning a new product.

Printed for each: the reference's first run (the first candidate: its
copies, and for launches the probe of what it writes whole) and the median
later candidate's (for launches, its run and ``LaunchCheck.settle``: from
the third candidate on, its comparison and verdict, which a tuning reads
with the candidate's samples), in microseconds of host time with the work's own launch
time taken out (the device synchronised after each run, so that a figure
holds what the check waits for as well), over the tunings after the first;
and apart, the process's first tuning (what a check's first use costs
once, its torch kernels loaded on a GPU); with ``--warm SECONDS`` the
launch check's warm-up (``LaunchCheck.warm``) starts before that first
tuning, which waits that long first, as the contextual tuner waits for its
candidates to compile (the function-level check has no warm-up). The tuners run each candidate's
first run through its check once per tuning; every other run costs nothing
more.

Then what the check adds to a whole contextual tuning, which is more than
its parts above (its Python around them, the reference's probes):
``bench/regret.py``'s matmul kernel over its 16 configs, ``--size`` cubed in
bfloat16, tuned afresh ``--reps`` times with ``check_outputs`` on and off in
turn, after one of each unmeasured; the output buffer is kept from one
tuning to the next, as ``bench/regret.py`` keeps it. On a GPU the kernel runs (every
config compiled first); on the CPU its programs, under the interpreter, are
replaced by ``torch.mm`` (so every config agrees bit for bit).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any


class _Launch:
    """A kernel launch as the contextual tuner hands it over: ``out = a @ b``, the same for every config."""

    key = ("bench",)
    name = "mm"
    source = ""

    def __init__(self, a: Any, b: Any, out: Any) -> None:
        import torch

        self.kernel = torch.mm
        self._arguments = {"a": a, "b": b, "out": out}

    def arguments(self) -> dict[str, Any]:
        return dict(self._arguments)

    def scratch(self) -> tuple[str, ...]:
        return ()

    def configs(self) -> list[Any]:
        return []

    def candidates(self) -> list[Any]:
        return []

    def unsupported(self) -> str | None:
        return None

    def cached(self) -> Any:
        return None

    def label(self, config: Any) -> str:
        return str(config)

    def commit(self, config: Any) -> None:
        pass

    def run(self, config: Any, around: Any = None) -> None:
        import torch

        arguments = self._arguments

        def work() -> None:
            torch.mm(arguments["a"], arguments["b"], out=arguments["out"])

        work() if around is None else around(work)


class _Tuning:
    """What a check asks of its tuning: nothing queued, failures ignored (every candidate is right)."""

    def queued(self) -> list[Any]:
        return []

    def fail(self, *_: Any) -> None:
        pass


def _run(thunk: Any) -> None:
    thunk()


def measure(device: str, size: int, candidates: int, reps: int, warm: float | None = None) -> dict[str, Any]:
    """Each check's host time for the reference and a later candidate, the work's own time taken out."""
    import torch
    from kerneltune.core.drivers.checked_launches import LaunchCheck
    from kerneltune.core.drivers.checked_outputs import OutputCheck
    from kerneltune.core.machine.outputs import Tolerance
    from kerneltune.core.values.records import Candidate

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    out = torch.empty(size, size, device=device, dtype=dtype)
    launch = _Launch(a, b, out)
    chosen = [Candidate(index=i, config=i, label=str(i), fingerprint=str(i)) for i in range(candidates)]

    def timed(call: Any) -> float:
        sync()
        start = time.perf_counter()
        call()
        sync()
        return (time.perf_counter() - start) * 1e6

    alone = statistics.median(timed(lambda: launch.run(None)) for _ in range(50))
    product = statistics.median(timed(lambda: torch.mm(a, b)) for _ in range(50))
    rows: dict[str, dict[str, list[float]]] = {
        "launch": {"reference": [], "later": []},
        "function": {"reference": [], "later": []},
    }
    once: dict[str, dict[str, float]] = {}
    for rep in range(reps + 1):
        if rep == 1:  # the first tuning apart: what the checks' first use costs
            once = {
                name: {"reference": parts["reference"][0], "later": statistics.median(parts["later"])}
                for name, parts in rows.items()
            }
            for parts in rows.values():
                parts["reference"].clear()
                parts["later"].clear()
        check = LaunchCheck("mm", ("bench",), _Tuning(), Tolerance(), strict=False, budget=0, rerun=False)
        if rep == 0 and warm is not None:
            check.warm(launch)
            time.sleep(warm)
        for candidate in chosen:
            # A later candidate's verdict, where it waits for the samples, is read in settle.
            spent = timed(lambda c=candidate, k=check: (k.run(launch, c, _run), k.settle(launch, c)))
            # The reference's probe runs the work once more; a later candidate's run, once.
            runs = 2 if candidate.index == 0 else 1
            rows["launch"]["reference" if candidate.index == 0 else "later"].append(spent - runs * alone)
        function = OutputCheck("mm", {"a": a, "b": b}, (), Tolerance())
        for candidate in chosen:
            first = function.around(candidate, None)
            assert first is not None
            spent = timed(lambda f=first: f(_run, lambda: torch.mm(a, b)))
            rows["function"]["reference" if candidate.index == 0 else "later"].append(spent - product)
    return {
        "device": device,
        "size": size,
        "candidates": candidates,
        "reps": reps,
        "warm_s": warm,
        "work_us": {"launch": alone, "function": product},
        "first_tuning": once,
        "checks": {
            name: {part: statistics.median(values) for part, values in parts.items()}
            for name, parts in rows.items()
        },
    }


def tunings(device: str, size: int, reps: int) -> dict[str, Any]:
    """Whole contextual tunings with the check on and off in turn (module docstring), in milliseconds."""
    import torch
    import triton
    from regret import MATMUL_CONFIGS, matmul_kernel

    from triton_dist.autotuner import contextual_autotune

    a, b = (torch.randn(size, size, device=device, dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty_like(a)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def grid(meta: dict[str, Any]) -> tuple[int, ...]:
        return (triton.cdiv(size, meta["BLOCK_M"]) * triton.cdiv(size, meta["BLOCK_N"]),)

    if device == "cpu":
        from triton.runtime.interpreter import InterpretedFunction

        InterpretedFunction.run = lambda self, a, b, c, *_, **__: torch.mm(a, b, out=c)  # type: ignore[method-assign]
    else:
        for config in MATMUL_CONFIGS:
            matmul_kernel[grid](a, b, c, size, size, size, **config.all_kwargs())

    def tuning(check: bool) -> float:
        kernel = triton.autotune(configs=MATMUL_CONFIGS, key=["M", "N", "K"])(matmul_kernel)

        @contextual_autotune(n_repeat=5, check_outputs=check)
        def outer() -> None:
            kernel[grid](a, b, c, size, size, size)

        sync()
        start = time.perf_counter()
        with warnings.catch_warnings():  # picks among configs alike (on the CPU) are uncertain
            warnings.simplefilter("ignore")
            outer()
        sync()
        return (time.perf_counter() - start) * 1e3

    first = tuning(True)
    tuning(False)
    walls: dict[bool, list[float]] = {True: [], False: []}
    for rep in range(reps):
        for check in (True, False) if rep % 2 else (False, True):
            walls[check].append(tuning(check))
    on, off = statistics.median(walls[True]), statistics.median(walls[False])
    return {
        "configs": len(MATMUL_CONFIGS),
        "on_ms": on,
        "off_ms": off,
        "added_ms": on - off,
        "first_ms": first,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda where there is one")
    parser.add_argument(
        "--size", type=int, help="the square matrices' side (default: 4096 on cuda, 64 on cpu)"
    )
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument(
        "--warm",
        type=float,
        help="start the launch check's warm-up, then wait this long, before the first tuning",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    options = parser.parse_args(argv)
    import torch

    device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        # regret.py's kernel is made at its import: under the interpreter, whose programs are stubbed.
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "TRITON_INTERPRET": "1"})
    size = options.size or (4096 if device == "cuda" else 64)
    result = measure(device, size, options.candidates, options.reps, options.warm)
    warmed = "" if options.warm is None else f", warmed for {options.warm} s first"
    print(f"{device}, {size}x{size}, {options.candidates} candidates, {options.reps} tunings{warmed}")
    for name, parts in result["checks"].items():
        once = result["first_tuning"][name]
        print(
            f"{name:9} reference {parts['reference']:9.1f} us, a later candidate {parts['later']:8.1f} us "
            f"(the work alone {result['work_us'][name]:.1f} us); the process's first tuning: "
            f"{once['reference']:.1f} and {once['later']:.1f} us"
        )
    whole = result["tunings"] = tunings(device, size, options.reps)
    print(
        f"a contextual tuning of {whole['configs']} matmul configs ({size}^3 bfloat16): check on "
        f"{whole['on_ms']:.2f} ms, off {whole['off_ms']:.2f} ms, +{whole['added_ms']:.2f} ms "
        f"({whole['on_ms'] / whole['off_ms']:.2f}x); the process's first, checked: {whole['first_ms']:.1f} ms"
    )
    if options.json is not None:
        options.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
