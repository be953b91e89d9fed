"""A stand-in for triton-ascend's NPU driver, so its real Python layer runs on a host without an NPU.

triton-ascend installs on any x86-64 Linux host, and its autotuner,
``triton.autotune``, ``triton.jit`` and interpreter are plain Python. What
needs an NPU is the driver: ``triton.runtime.driver.active`` resolves, on
first use, to the one backend driver whose ``is_active()`` holds, and
triton-ascend's ``NPUDriver`` is active only where CANN's compiler
(``ccec``, found through ``bishengir``) runs. Without it the first use raises
``RuntimeError: 0 active drivers ([]). There should only be one.``, and the
first use is ``Autotuner.__init__`` asking for a benchmarker, so no
autotuned kernel can even be declared.

:func:`install` makes :class:`StandInNpuDriver` the active driver through
``triton.runtime.driver.set_active`` (Triton's own switch; ``reset_active``
undoes it). It replaces nothing else: the autotuner classes, the decorator,
``Config``, the JIT, the interpreter and the NPU backend's option
dataclass are the installed package's. The stand-in answers exactly:

* ``get_benchmarker()``: a benchmarker that raises :class:`StandInDriverError`.
  ``Autotuner.__init__`` stores it without calling it; only the stock
  autotuner's own benchmarking (a launch kerneltune does not tune) would
  call it, and nothing here can time an NPU.
* ``get_current_target()``: ``GPUTarget("npu", ARCH, 0)``, as ``NPUDriver``
  reports an Ascend 910B4 (``backend "npu"``, ``warp_size`` 0), so that
  ``triton.compiler.make_backend`` gives the real ``AscendBackend`` and its
  ``NPUOptions``.
* ``get_current_device()`` 0; ``set_current_device(0)`` accepts unit 0 only;
  ``get_current_stream()`` 0.
* ``utils.get_device_properties(0)``: ``{"max_shared_mem": 1, "num_aicore":
  20, "num_vectorcore": 40}``, the keys ``NPUUtils`` returns, with an
  Ascend 910B4's core counts. ``triton.runtime.utils`` reads them when it is
  imported, which importing the ``AutoTilingTuner`` does (its tile
  generator sizes tiles by the core counts).

Everything else, such as compiling or launching on the NPU, is absent and
raises ``AttributeError``. Kernels run in Triton's interpreter
(``TRITON_INTERPRET=1``, which the tests set on hosts without CUDA), which
:func:`widen_interpreter` teaches the names of the NPU's compile options,
as the NPU JIT takes them.

tests/conftest.py calls :func:`install` when triton-ascend is the installed
Triton and torch_npu is not importable (on an Ascend host the real driver
stays), and :func:`reach_spawned_processes`, so that the ranks and
isolation workers the tests start install it too.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The architecture the stand-in reports: an Ascend 910B4...
ARCH = "Ascend910B4"
#: ...and its AI cores (cube cores; two vector cores each).
AI_CORES = 20


class StandInDriverError(RuntimeError):
    """What the stand-in raises for work that needs an NPU."""


class StandInNpuUtils:
    """The part of triton-ascend's ``NPUUtils`` read without an NPU: the device's properties."""

    def get_device_properties(self, device: int) -> dict[str, int]:
        return {"max_shared_mem": 1, "num_aicore": AI_CORES, "num_vectorcore": 2 * AI_CORES}


class StandInNpuDriver:
    """The part of triton-ascend's ``NPUDriver`` that code running without an NPU reaches."""

    def __init__(self) -> None:
        self.utils = StandInNpuUtils()

    def get_benchmarker(self) -> Callable[..., Any]:
        def benchmark(*args: Any, **kwargs: Any) -> Any:
            raise StandInDriverError(
                "the stand-in NPU driver cannot benchmark: triton-ascend's own autotuning needs an NPU"
            )

        return benchmark

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("npu", ARCH, 0)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        if device != 0:
            raise StandInDriverError(f"the stand-in NPU driver has unit 0 only, not {device}")

    def get_current_stream(self, device: int | None = None) -> int:
        return 0


def release() -> str | None:
    """The installed triton-ascend's version (``3.2.0``, ``3.2.0rc4``), or ``None`` where there is none.

    Its ``triton.__version__`` cannot tell: 3.2.0rc4's reads ``3.2.0`` too.
    """
    try:
        return importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        return None


def installed() -> bool:
    """Whether the installed Triton is triton-ascend."""
    return release() is not None


#: Where each triton-ascend release's ``triton.autotune`` takes ``hints``: 3.2.0 third, 3.2.0rc4 not at
#: all (its ``AutoTilingTuner`` comes from ``split_params`` and ``tiling_params``, with a dict key).
HINTS_BY_RELEASE = {"3.2.0": "positional", "3.2.0rc4": None}


def auto_tiling_by_hints_missing() -> str | None:
    """Why ``hints={"enable_ascend_autotune": True}`` makes no ``AutoTilingTuner`` here, or ``None``.

    For a test's skip reason: no triton-ascend, or a release whose ``triton.autotune`` takes no hints.
    """
    version = release()
    if version is None:
        return "needs triton-ascend installed (make test-tritons runs it)"
    if HINTS_BY_RELEASE.get(version) is None:
        return (
            f"triton-ascend {version}'s triton.autotune takes no hints: it makes its AutoTilingTuner from "
            "split_params and tiling_params (the tests of auto_tiling_by_params_missing())"
        )
    return None


def auto_tiling_by_params_missing() -> str | None:
    """Why ``triton.autotune(..., split_params=..., tiling_params=...)`` makes no ``AutoTilingTuner`` here.

    ``None`` where it makes one (3.2.0rc4); for a test's skip reason otherwise. Asked of the release's
    own decorator, under any replacement the search_params hooks made.
    """
    version = release()
    if version is None:
        return "needs triton-ascend installed (make test-tritons runs it)"
    import inspect

    import triton

    if "split_params" not in inspect.signature(inspect.unwrap(triton.autotune)).parameters:
        return (
            f"triton-ascend {version}'s triton.autotune takes no split_params: it makes its AutoTilingTuner "
            "from hints (the tests of auto_tiling_by_hints_missing())"
        )
    return None


def wanted() -> bool:
    """Whether triton-ascend is installed and torch_npu (hence an NPU stack) is not."""
    return installed() and importlib.util.find_spec("torch_npu") is None


def widen_interpreter() -> tuple[str, ...]:
    """Let Triton's interpreter drop the compile options the NPU JIT takes, as it drops its own.

    triton-ascend 3.2.0's ``Config.all_kwargs()`` always passes the NPU's
    options (``num_buffers_warp_spec``, ``multibuffer``, ...), which its JIT
    takes as ``NPUOptions`` fields; its interpreter knows only upstream's
    six reserved names and hands the rest to the kernel's Python function,
    so every launch with a Config would fail. The interpreter reads
    ``RESERVED_KWS`` on every launch, so adding the names is enough.

    :returns: the names added.
    """
    import dataclasses

    from triton.backends.ascend.compiler import NPUOptions
    from triton.runtime import interpreter

    added = tuple(f.name for f in dataclasses.fields(NPUOptions) if f.name not in interpreter.RESERVED_KWS)
    interpreter.RESERVED_KWS.extend(added)
    return added


def parse_interpreted_source() -> None:
    """Give the interpreter's kernels the ``parse()`` the NPU JIT's have.

    triton-ascend's auto-tiling tuner (``hints={"enable_ascend_autotune":
    True}``) reads the kernel's syntax tree (``self.fn.parse()``, a
    ``JITFunction`` method: the source from ``def`` on) to find its split and
    tiling parameters; the interpreter's ``InterpretedFunction`` has no such
    method. This adds the same one, over the same source.
    """
    import ast
    import inspect
    import re
    import textwrap

    from triton.runtime.interpreter import InterpretedFunction

    def parse(self: Any) -> ast.Module:
        source = textwrap.dedent(inspect.getsource(self.fn))
        start = re.search(r"^def\s+\w+\s*\(", source, re.MULTILINE)
        return ast.parse(source[start.start() if start else 0 :])

    if not hasattr(InterpretedFunction, "parse"):
        InterpretedFunction.parse = parse


def install() -> StandInNpuDriver:
    """Make the stand-in the active Triton driver for the rest of the process, its interpreter widened."""
    from triton.runtime import driver

    stand_in = StandInNpuDriver()
    driver.set_active(stand_in)
    widen_interpreter()
    parse_interpreted_source()
    return stand_in


#: A folder whose ``sitecustomize.py`` installs the stand-in in a process started with it on ``PYTHONPATH``.
SITE = Path(__file__).resolve().parent / "ascend_site"


def reach_spawned_processes() -> None:
    """Put :data:`SITE` ahead on ``PYTHONPATH``, so that processes this one starts install the stand-in.

    The entries already there are made absolute: ``make test-tritons`` puts a later triton-ascend
    release (``build/triton-ascends/<release>``) there as a relative path, which a rank or worker
    started in a test's own directory would not find, importing the venv's release instead.
    """
    given = filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))
    paths = [str(SITE), *(os.path.abspath(path) for path in given)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
