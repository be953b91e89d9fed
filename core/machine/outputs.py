"""Outputs compared: a snapshot of what a run returned or changed, and a candidate's checked against it.

A candidate that skips work (drops the remainder of a tile, needs zeroing
nobody declared) is often the fastest, and wrong. Every tuner can keep
the reference's outputs with :func:`snapshot` and hold each candidate's to
them with :func:`compare`, on the device: nothing but the few numbers of a
mismatch comes back to the host. A check of several outputs reads its
usual verdict, a pass, in one wait (:mod:`~kerneltune.core.machine.passes`)
and asks :func:`compare` only where that fails.

What is compared: torch tensors (detached and cloned), NumPy arrays
(copied), numbers and ``None``, and tuples, lists and dicts of them;
anything else is skipped, and its path listed so that the caller can say
so once. A snapshot taken with a ``step`` keeps of each tensor and array
only a :class:`Sampled` subset, every ``step``-th value ending with the
last, and a later value's same subset is compared with it. Floating-point
values pass within :class:`Tolerance`, whose defaults by dtype let configs
that only add in another order pass and catch one that drops a remainder;
integers, booleans and fp8 must match bit for bit. torch and NumPy are
imported only when a value of theirs is met.
"""

from __future__ import annotations

import math
import numbers
import sys
import weakref
from collections.abc import Mapping
from typing import Any

import attrs

#: Default ``(rtol, atol)`` by dtype family: a candidate's value ``c`` passes beside the reference's
#: ``r`` when ``|c - r| <= atol * scale + rtol * |r|``, ``scale`` the largest finite ``|r|`` of that
#: output (1 where it is all zero), so that ``atol`` is relative to the output's magnitude. fp32
#: sums of a few thousand terms added in another order differ by about 1e-6 of the largest;
#: a dropped remainder, by far more.
WIDE_FLOAT = (1e-5, 1e-4)
#: float16 and bfloat16 round each stored value to 3 or 2 significant digits (Helion checks 1e-2).
HALF_FLOAT = (1e-2, 1e-2)
_HALF = ("float16", "bfloat16", "half")


@attrs.frozen
class Tolerance:
    """How far a candidate's floating-point outputs may be from the reference's.

    ``None`` takes the default of each output's dtype (:data:`WIDE_FLOAT`,
    :data:`HALF_FLOAT`); a number given applies to every floating dtype.
    Integers, booleans and fp8 are always compared bit for bit.
    """

    rtol: float | None = None
    atol: float | None = None

    def of(self, dtype: str) -> tuple[float, float] | None:
        """``(rtol, atol)`` for a dtype named as torch or NumPy name it; ``None``: bit for bit."""
        name = dtype.rpartition(".")[2]
        if "float8" in name or not ("float" in name or "complex" in name or name == "half"):
            return None
        rtol, atol = HALF_FLOAT if name in _HALF else WIDE_FLOAT
        return (rtol if self.rtol is None else self.rtol, atol if self.atol is None else self.atol)


@attrs.frozen
class Mismatch:
    """Where a candidate's outputs differ from the reference's, for a record's error text."""

    #: the output's path in what was compared: ``result[0]['y']``, ``argument out``.
    path: str
    #: what differs, where no errors can be given: ``shape (4,), the reference's (3,)``.
    what: str = ""
    max_abs: float = math.nan
    max_rel: float = math.nan
    #: how many elements are off, of how many.
    off: int = 0
    total: int = 0

    def __str__(self) -> str:
        if self.what:
            return f"{self.path}: {self.what}"
        return (
            f"{self.path}: {self.off} of {self.total} values off, largest absolute error "
            f"{self.max_abs:.3g}, largest relative error {self.max_rel:.3g}"
        )


@attrs.frozen
class Skipped:
    """A value of a kind that is not compared, kept as its type's name."""

    kind: str


@attrs.frozen
class Sampled:
    """Every ``step``-th value of a tensor or array (:func:`sample`), and the whole's shape and dtype."""

    values: Any
    step: int
    shape: tuple[int, ...]
    dtype: str


def sample(value: Any, step: int) -> Any:
    """Every ``step``-th value of a contiguous tensor or array, flattened, ending with its last: a view."""
    flat = value.reshape(-1)
    return flat[(flat.shape[0] - 1) % step :: step]


def _contiguous(value: Any) -> bool:
    return bool(value.is_contiguous()) if is_tensor(value) else bool(value.flags.c_contiguous)


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (torch is not imported to ask)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _is_array(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray | numpy.generic)


def comparable(value: Any) -> bool:
    """Whether ``value`` is a tensor or an array, whose changes in place can be seen."""
    return is_tensor(value) or _is_array(value)


def nbytes(value: Any) -> int:
    """How many bytes :func:`snapshot` would copy of ``value``'s tensors and arrays."""
    if is_tensor(value):
        return int(value.numel() * value.element_size())
    if _is_array(value):
        return int(value.nbytes)
    if isinstance(value, tuple | list):
        return sum(nbytes(v) for v in value)
    if isinstance(value, Mapping):
        return sum(nbytes(v) for v in value.values())
    return 0


def snapshot(value: Any, path: str = "result", skipped: list[str] | None = None, step: int = 1) -> Any:
    """A copy of ``value`` that later runs cannot change; ``skipped`` gets the paths left out.

    :param step: above 1, keep every ``step``-th value of each tensor and array (:class:`Sampled`);
        one that is not contiguous, which only a full copy could sample, is skipped.
    """
    if value is None or (isinstance(value, bool | numbers.Number) and not _is_array(value)):
        return value
    if (is_tensor(value) or _is_array(value)) and value.ndim and step > 1:
        if _contiguous(value):
            return Sampled(snapshot(sample(value, step)), step, tuple(value.shape), str(value.dtype))
        if skipped is not None:
            skipped.append(f"{path} (not contiguous, so not sampled)")
        return Skipped("not contiguous")
    if is_tensor(value):
        return value.detach().clone()
    if _is_array(value):
        return value.copy()
    if isinstance(value, tuple | list):
        return type(value)(snapshot(v, f"{path}[{i}]", skipped, step) for i, v in enumerate(value))
    if isinstance(value, Mapping):
        return {k: snapshot(v, f"{path}[{k!r}]", skipped, step) for k, v in value.items()}
    if skipped is not None:
        skipped.append(f"{path} ({type(value).__name__})")
    return Skipped(type(value).__name__)


def compare(value: Any, reference: Any, tolerance: Tolerance, path: str = "result") -> Mismatch | None:
    """Where ``value`` first differs from the ``reference`` :func:`snapshot`; ``None`` if nowhere."""
    if isinstance(reference, Skipped):
        return None
    if isinstance(reference, Sampled):
        whole = (tuple(value.shape), str(value.dtype)) if comparable(value) else None
        if whole != (reference.shape, reference.dtype):
            return Mismatch(path, f"{_kind(value)}, the reference's {reference.shape} {reference.dtype}")
        return compare(sample(value, reference.step), reference.values, tolerance, f"{path} (sampled)")
    if reference is None or value is None:
        return (
            None
            if value is reference
            else Mismatch(path, f"{_kind(value)}, the reference's {_kind(reference)}")
        )
    if is_tensor(reference) or _is_array(reference):
        if type(value) is not type(reference) and not (_is_array(value) and _is_array(reference)):
            return Mismatch(path, f"{_kind(value)}, the reference's {_kind(reference)}")
        if tuple(value.shape) != tuple(reference.shape) or str(value.dtype) != str(reference.dtype):
            return Mismatch(path, f"{_kind(value)}, the reference's {_kind(reference)}")
        return (_tensors if is_tensor(reference) else _arrays)(value, reference, tolerance, path)
    if isinstance(reference, tuple | list):
        if not isinstance(value, tuple | list) or len(value) != len(reference):
            return Mismatch(path, f"{_kind(value)}, the reference's {_kind(reference)}")
        for i, (v, r) in enumerate(zip(value, reference, strict=True)):
            if (found := compare(v, r, tolerance, f"{path}[{i}]")) is not None:
                return found
        return None
    if isinstance(reference, Mapping):
        if not isinstance(value, Mapping) or set(value) != set(reference):
            return Mismatch(path, f"{_kind(value)}, the reference's {_kind(reference)}")
        for k, r in reference.items():
            if (found := compare(value[k], r, tolerance, f"{path}[{k!r}]")) is not None:
                return found
        return None
    return _numbers(value, reference, tolerance, path)


def _kind(value: Any) -> str:
    if is_tensor(value) or _is_array(value):
        return f"{type(value).__name__} {tuple(value.shape)} {value.dtype}"
    if isinstance(value, tuple | list | Mapping):
        return f"{type(value).__name__} of {len(value)}"
    return "None" if value is None else type(value).__name__


def _numbers(value: Any, reference: Any, tolerance: Tolerance, path: str) -> Mismatch | None:
    if not isinstance(value, numbers.Number) or isinstance(value, bool) != isinstance(reference, bool):
        return Mismatch(path, f"{value!r}, the reference's {reference!r}")
    exact = isinstance(reference, numbers.Integral) and isinstance(value, numbers.Integral)
    kind = "int64" if exact else "complex128" if isinstance(reference, complex) else "float64"
    limits = tolerance.of(kind)
    c, r = complex(value), complex(reference)  # type: ignore[call-overload]
    if c == r or (math.isnan(abs(c)) and math.isnan(abs(r))):
        return None
    error = abs(c - r)
    if limits is not None and math.isfinite(abs(r)):
        rtol, atol = limits
        if error <= atol * (abs(r) if math.isfinite(abs(r)) and r else 1.0) + rtol * abs(r):
            return None
    rel = error / abs(r) if r else math.inf
    return Mismatch(path, f"{value!r}, the reference's {reference!r}", error, rel, 1, 1)


def _tensors(value: Any, reference: Any, tolerance: Tolerance, path: str) -> Mismatch | None:
    import torch

    limits = tolerance.of(str(reference.dtype))
    kept = reference  # a snapshot, whose bound is kept by its own id (detach() makes a new tensor)
    value, reference = value.detach(), reference.detach()
    if value.device != reference.device:
        value = value.to(reference.device)
    if limits is None:
        if value.element_size() == 1 and value.is_floating_point():  # fp8: compared as its bits
            value, reference = value.view(torch.uint8), reference.view(torch.uint8)
        if bool((value == reference).all()):
            return None
        off = value != reference
        work = value.double() - reference.double()
        errors = work.abs()
        return Mismatch(
            path,
            max_abs=float(errors.max()),
            max_rel=float((errors / reference.double().abs())[off].max()),
            off=int(off.sum()),
            total=value.numel(),
        )
    wide = _wide(reference)
    if not reference.is_complex():
        if bool(bounded(value, kept, limits)):
            return None
    else:
        value, reference = torch.view_as_real(value), torch.view_as_real(reference)
    c, r = value.to(wide), reference.to(wide)
    rtol, atol = limits
    magnitude = r.abs()
    finite = torch.isfinite(r)
    scale = (
        torch.where(finite, magnitude, torch.zeros_like(magnitude)).amax() if r.numel() else magnitude.sum()
    )
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    errors = (c - r).abs()
    ok = (finite & (errors <= atol * scale + rtol * magnitude)) | (c == r) | (torch.isnan(c) & torch.isnan(r))
    if bool(ok.all()):
        return None
    bad = ~ok
    # A NaN error (a NaN the reference lacks) counts as the largest; the values that pass count as no
    # error, a zero beside the reference's zero too.
    shown = torch.where(bad, errors, torch.zeros_like(errors)).nan_to_num(nan=math.inf, posinf=math.inf)
    relative = torch.where(bad, shown / magnitude, torch.zeros_like(shown))
    return Mismatch(
        path,
        max_abs=float(shown.max()),
        max_rel=float(relative.nan_to_num(nan=math.inf, posinf=math.inf).max()),
        off=int(bad.sum()),
        total=r.numel(),
    )


def _arrays(value: Any, reference: Any, tolerance: Tolerance, path: str) -> Mismatch | None:
    import numpy

    limits = tolerance.of(str(reference.dtype))
    value, reference = numpy.asarray(value), numpy.asarray(reference)
    with numpy.errstate(all="ignore"):
        if limits is None:
            if numpy.array_equal(value, reference):
                return None
            errors = numpy.abs(value.astype(numpy.float64) - reference.astype(numpy.float64))
            off = value != reference
            return Mismatch(
                path,
                max_abs=float(errors.max()),
                max_rel=float((errors / numpy.abs(reference.astype(numpy.float64)))[off].max()),
                off=int(off.sum()),
                total=int(value.size),
            )
        rtol, atol = limits
        c, r = value, reference
        magnitude = numpy.abs(r)
        finite = numpy.isfinite(r)
        scale = float(numpy.where(finite, magnitude, 0).max()) if r.size else 0.0
        scale = scale or 1.0
        errors = numpy.abs(c - r)
        ok = (
            (finite & (errors <= atol * scale + rtol * magnitude))
            | (c == r)
            | (numpy.isnan(c) & numpy.isnan(r))
        )
        if ok.all():
            return None
        shown = numpy.nan_to_num(numpy.where(ok, 0.0, errors), nan=math.inf, posinf=math.inf)
        relative = numpy.where(ok, 0.0, shown / magnitude)
        return Mismatch(
            path,
            max_abs=float(shown.max()),
            max_rel=float(numpy.nan_to_num(relative, nan=math.inf, posinf=math.inf).max()),
            off=int((~ok).sum()),
            total=int(r.size),
        )


#: By reference tensor (its id, while it lives): what its comparisons need (:func:`reference_side`).
_KEPT: dict[int, ReferenceSide] = {}

#: A quick pass (:mod:`~kerneltune.core.machine.passes`) asks ``|c - r|``, as the candidate's dtype
#: rounds it, to stay this far inside ``atol * scale``: bfloat16 rounds a difference by at most 2**-8.
_ROUNDING = 0.99


@attrs.define
class ReferenceSide:
    """A reference's side of the comparisons, for the limits and the version it was made for."""

    limits: tuple[float, float]
    version: int
    #: ``atol * scale`` (less the rounding margin), a 0-dim tensor on the reference's device.
    within: Any
    #: ``scale`` itself, a 0-dim tensor.
    scale: Any
    #: ``atol * scale + rtol * |r|`` for each value, ``-1`` where it is not finite (made when asked).
    bound: Any = None


def reference_side(reference: Any, limits: tuple[float, float]) -> ReferenceSide:
    """The real ``reference``'s scale and thresholds under ``limits``, made at its first comparison
    (for :mod:`~kerneltune.core.machine.passes` as for :func:`compare`).

    Kept while it lives (a snapshot is compared with every candidate of a
    tuning), until the tensor is written (its version counter moves) or
    other limits are asked.
    """
    import torch

    kept = _KEPT.get(id(reference))
    if kept is not None and (kept.limits, kept.version) == (limits, reference._version):
        return kept
    magnitude = reference.detach().abs()
    if magnitude.numel():
        scale = magnitude.where(torch.isfinite(magnitude), 0).amax().to(_wide(reference))
    else:
        scale = magnitude.to(_wide(reference)).sum()
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    if kept is None:
        weakref.finalize(reference, _KEPT.pop, id(reference), None)
    within = scale * (limits[1] * _ROUNDING)
    kept = _KEPT[id(reference)] = ReferenceSide(limits, reference._version, within, scale)
    return kept


def bounded(value: Any, reference: Any, limits: tuple[float, float]) -> Any:
    """Whether each value of a real tensor is within the bound of ``reference``'s (a snapshot, or a
    tensor nothing writes while it is compared), as a 0-dim tensor, in four kernels (five where the
    difference is taken in a wider dtype); the bound is made at the first such comparison and kept
    (:func:`reference_side`). A value the bound cannot pass (beside an infinite or NaN one) needs
    the full verdict."""
    import torch

    kept = reference_side(reference, limits)
    wide = _wide(reference)
    if kept.bound is None:
        rtol, atol = limits
        magnitude = reference.detach().to(wide).abs()
        finite = torch.isfinite(magnitude)
        kept.bound = magnitude.mul_(rtol).add_(kept.scale * atol).where(finite, -1.0)
    value, reference = value.detach(), reference.detach()
    differences = torch.sub(value, reference) if value.dtype == wide else value.to(wide).sub_(reference)
    return differences.abs_().le_(kept.bound).all()


def _wide(reference: Any) -> Any:
    import torch

    return torch.float64 if reference.dtype in (torch.float64, torch.complex128) else torch.float32


def put_back(value: Any, saved: Any) -> None:
    """Copy ``saved`` (a :func:`snapshot`, or a clone) back into the tensor or array ``value``."""
    if hasattr(value, "copy_"):
        value.copy_(saved)
    else:
        value[...] = saved
