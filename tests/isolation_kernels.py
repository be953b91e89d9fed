"""Module-level Triton kernels for the isolation tests: the isolation worker imports them by name.

:func:`guarded_double` stores ``2 * x``, except under the block size a launch
names as ``CRASH``, where it stores ``2**40`` elements past the output (a
segfault in Triton's interpreter, an illegal address on a GPU), or as
``HANG``, where it loops for ever. Every launch of a config with the
:func:`note` pre-hook appends ``<pid> <BLOCK> <n>`` to :func:`launches_log`,
so a test can tell which process ran which config.

Each tuned kernel object lives under a module-level name of its own, as a
user's would; the tests tune each with keys (``n``) of their own, so no
test sees another's picks. The search_params kernels are in
tests/isolation_search.py.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
from kerneltune.core import add_plugin, hookimpl, remove_plugin

BLOCKS = (16, 32, 64)
#: How far past the output the crashing block stores, in elements (and how long the hanging one loops).
FAR = tl.constexpr(1 << 40)


def launches_log() -> Path:
    """The file the launches of this test process and of its isolation worker are noted in."""
    owner = os.getpid() if multiprocessing.parent_process() is None else os.getppid()
    return Path(tempfile.gettempdir()) / f"kerneltune-isolation-launches-{owner}.log"


def note(nargs: dict[str, Any], reset_only: bool = False) -> None:
    """A pre-hook (of a config or a kernel): note this process and the launch's block size."""
    if not reset_only:
        with launches_log().open("a") as handle:
            handle.write(f"{os.getpid()} {nargs['BLOCK']} {nargs['n']}\n")


def launches(n: int | None = None) -> list[tuple[int, int]]:
    """Every launch noted so far (of ``n`` elements, when given), as ``(pid, block)``, in order."""
    path = launches_log()
    lines = [line.split() for line in path.read_text().splitlines()] if path.exists() else []
    return [(int(pid), int(block)) for pid, block, size in lines if n is None or int(size) == n]


def forget_launches() -> None:
    launches_log().unlink(missing_ok=True)


class Outcomes:
    """An observer plugin: each candidate's error (``None``: measured) by kernel, ``n`` and block size.

    ``n`` is the first item of the tuning key: a contextual key's, or a
    search_params key's Triton part's.
    """

    def __init__(self) -> None:
        self.errors: dict[tuple[str, object, int], str | None] = {}

    @hookimpl
    def kerneltune_candidate_measured(self, event):
        block = event.candidate.config.kwargs["BLOCK"]
        n = event.key[0][0] if isinstance(event.key[0], tuple) else event.key[0]
        self.errors[(event.function, n, block)] = event.measurement.error

    def of(self, kernel: str, n: int) -> dict[int, str | None]:
        return {
            block: error for (name, key, block), error in self.errors.items() if (name, key) == (kernel, n)
        }


@contextlib.contextmanager
def observed() -> Iterator[Outcomes]:
    """Launches noted afresh (forgotten after), and each candidate's outcome in every session meanwhile."""
    forget_launches()
    outcomes = Outcomes()
    add_plugin(outcomes)
    try:
        yield outcomes
    finally:
        remove_plugin(outcomes)
        forget_launches()


@triton.jit
def guarded_double(x_ptr, y_ptr, n, BLOCK: tl.constexpr, CRASH: tl.constexpr = 0, HANG: tl.constexpr = 0):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    out = y_ptr + offsets
    if BLOCK == CRASH:
        out += FAR
    if BLOCK == HANG:
        for _ in range(FAR):
            x = x + 0.0
    tl.store(out, 2 * x, mask=mask)


def noted_configs() -> list[Any]:
    return [triton.Config({"BLOCK": block}, pre_hook=note) for block in BLOCKS]


#: Tuned by contextual_autotune; ``note`` runs before each launch.
doubled = triton.autotune(configs=noted_configs(), key=["n"])(guarded_double)


@triton.autotune(configs=noted_configs(), key=["n"])
@triton.heuristics({"PROGRAMS": lambda args: triton.cdiv(args["n"], args["BLOCK"])})
@triton.heuristics({"CRASH": lambda args: 32 if args["n"] == 96 else 0})
@triton.jit
def heuristic_double(x_ptr, y_ptr, n, BLOCK: tl.constexpr, CRASH: tl.constexpr, PROGRAMS: tl.constexpr):
    """``guarded_double`` under two heuristics: the grid's size, and the crashing block (32 at n = 96)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    out = y_ptr + offsets
    if BLOCK == CRASH:
        out += FAR
    tl.store(out, 2 * tl.load(x_ptr + offsets, mask=mask), mask=mask)


def launch(kernel: Any, x: torch.Tensor, **options: Any) -> torch.Tensor:
    """``2 * x`` through ``kernel``, with a grid function of the block size."""
    y = torch.zeros_like(x)
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, **options)
    return y


def double_on_host(x: torch.Tensor, *, block: int, crash: bool) -> torch.Tensor:
    """A host function for the function-level tuner that launches ``guarded_double`` itself."""
    y = torch.zeros_like(x)
    n = x.numel()
    guarded_double[(triton.cdiv(n, block),)](x, y, n, BLOCK=block, CRASH=block if crash else 0)
    return y
