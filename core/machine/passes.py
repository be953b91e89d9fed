"""The usual verdict, a pass, read from the device once for all of a candidate's outputs.

A check asks each output for a flag (:func:`verdicts`: within the
reference's ``atol * scale``; :func:`untouched`: bit for bit as before),
computed on the device without waiting, and reads them all in one
:func:`settled`; only where one fails does :func:`first_mismatch` ask
:func:`~.outputs.compare` where and by how much. A flag never passes what
the full verdict fails: an infinity, a NaN, or an error that the bound
passes only through ``rtol * |r|`` fails it and is left to the verdict.
:func:`exact`'s flag, a kernel or two dearer, is the verdict itself where the
reference is finite: a check that reads it later need not keep the outputs.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kerneltune.core.machine.outputs import Mismatch, Tolerance, bounded, compare, is_tensor, reference_side

#: An output compared: its path for a message, its value now and the reference's (or what it held).
Compared = tuple[str, Any, Any]


def first_mismatch(
    written: Sequence[Compared], left_alone: Sequence[Compared], tolerance: Tolerance
) -> Mismatch | None:
    """Where a run first differs: each of ``written`` held to its reference's snapshot within
    ``tolerance``, each of ``left_alone`` to what it held, bit for bit ("changed, which the
    reference leaves alone"); the device waited on once where none does."""
    if settled(agreeing(written, left_alone, tolerance)):
        return None
    for path, value, reference in written:
        if (found := compare(value, reference, tolerance, path)) is not None:
            return found
    for path, value, before in left_alone:
        if not unchanged(value, before):
            return Mismatch(path, "changed, which the reference leaves alone")
    return None


def agreeing(written: Sequence[Compared], left_alone: Sequence[Compared], tolerance: Tolerance) -> list[Any]:
    """:func:`first_mismatch`'s flags, not yet read: all true (:func:`settled`) where the run agrees.

    A flag may fail where the full verdict passes (an infinity or NaN in ``written``), never the
    other way round.
    """
    flags: list[Any] = []
    for _, value, reference in written:
        verdicts(value, reference, tolerance, flags)
    return flags + [untouched(value, before) for _, value, before in left_alone]


def unchanged(value: Any, before: Any) -> bool:
    """Whether a tensor or array holds what its :func:`~.outputs.snapshot` ``before`` held: a tensor
    bit for bit (a NaN is the same NaN; ``-0.0`` is not ``0.0``: whatever a kernel writes
    differently, it wrote), an array value for value (NaN as NaN)."""
    return settled([untouched(value, before)])


def untouched(value: Any, before: Any) -> Any:
    """:func:`unchanged` as a flag for :func:`settled`: on a tensor, a 0-dim tensor on its device."""
    if is_tensor(value):
        import torch

        if tuple(value.shape) != tuple(before.shape) or value.dtype != before.dtype:
            return False
        if value.is_complex():
            value, before = torch.view_as_real(value), torch.view_as_real(before)
        if value.is_floating_point():  # compared as bits: one comparison, not four kernels
            bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[value.element_size()]
            value, before = value.view(bits), before.view(bits)
        return (value == before.to(value.device)).all()
    import numpy

    return bool(numpy.array_equal(value, before, equal_nan=value.dtype.kind in "fc"))


def verdicts(value: Any, reference: Any, tolerance: Tolerance, into: list[Any]) -> None:
    """Put into ``into`` a flag for each part of ``value`` that :func:`~.outputs.compare` holds to
    ``reference``, for :func:`settled`: true where it passes.

    A real tensor of the reference's shape, dtype and device gives a 0-dim
    tensor on its device, computed without waiting for it; anything else,
    :func:`~.outputs.compare`'s verdict as a bool.
    """
    if is_tensor(reference) and is_tensor(value):
        alike = (tuple(value.shape), value.dtype, value.device) == (
            tuple(reference.shape),
            reference.dtype,
            reference.device,
        )
        if alike and not reference.is_complex():
            limits = tolerance.of(str(reference.dtype))
            into.append(_same_bits(value, reference) if limits is None else _near(value, reference, limits))
            return
    elif isinstance(reference, tuple | list) and isinstance(value, tuple | list):
        if len(value) != len(reference):
            into.append(False)
            return
        for v, r in zip(value, reference, strict=True):
            verdicts(v, r, tolerance, into)
        return
    elif isinstance(reference, Mapping) and isinstance(value, Mapping) and set(value) == set(reference):
        for k, r in reference.items():
            verdicts(value[k], r, tolerance, into)
        return
    into.append(compare(value, reference, tolerance) is None)


def exact(value: Any, reference: Any, tolerance: Tolerance) -> Any:
    """:func:`~.outputs.compare`'s verdict on a real tensor of ``reference``'s shape, dtype and device
    whose every value is finite, as a flag for :func:`settled`: unlike :func:`verdicts`'s,
    it fails only where the verdict does, so that what failed need not be kept to be judged."""
    limits = tolerance.of(str(reference.dtype))
    return _same_bits(value, reference) if limits is None else bounded(value, reference, limits)


def settled(flags: list[Any]) -> bool:
    """Whether every flag of :func:`verdicts` and :func:`untouched` is true: the device waited on once."""
    return not any(flag is False for flag in flags) and all(read(flags))


def read(flags: list[Any]) -> list[bool]:
    """Each flag of :func:`verdicts` and :func:`untouched` as a bool, the device waited on once."""
    tensors = [flag for flag in flags if not isinstance(flag, bool)]
    if len(tensors) > 1:
        import torch

        device = tensors[0].device
        values = iter(torch.stack([flag.to(device) for flag in tensors]).tolist())
    else:
        values = iter(bool(flag) for flag in tensors)
    return [flag if isinstance(flag, bool) else bool(next(values)) for flag in flags]


def _same_bits(value: Any, reference: Any) -> Any:
    import torch

    if value.element_size() == 1 and value.is_floating_point():  # fp8: compared as its bits
        value, reference = value.view(torch.uint8), reference.view(torch.uint8)
    return (value.detach() == reference).all()


def _near(value: Any, reference: Any, limits: tuple[float, float]) -> Any:
    """Whether every ``|c - r|`` of a real tensor is within ``atol * scale``, which passes the bound
    wherever ``r`` is finite, as a 0-dim tensor: three kernels, the difference in the tensors' own
    dtype. Its failure (a larger error, or an infinity or NaN anywhere) leaves the verdict to
    :func:`~.outputs.compare`."""
    import torch

    if not value.numel():
        return True
    kept = reference_side(reference, limits)
    difference = torch.sub(value.detach(), reference.detach())
    return torch.linalg.vector_norm(difference, ord=math.inf) <= kept.within


#: The (device, dtype) pairs whose kernels :func:`warm` loaded or is loading.
_WARMED: set[tuple[Any, Any]] = set()


def warm(values: Iterable[Any], *more: Callable[[Any], object]) -> Callable[[], None]:
    """Start loading, on a thread of its own, the device kernels that this module's flags (and
    ``more``, each called with a tensor) use for the CUDA tensors among ``values``; what it returns
    waits for it.

    A GPU loads each kernel at its first launch in a process (CUDA's lazy
    loading), 5-30 ms for each of the dozen or so a check launches: the
    thread runs them on two-element tensors of each device and dtype, on a
    stream of its own, while the caller waits for something else (the
    candidates compiling). Each pair is warmed once per process.
    """
    pairs = {
        (value.device, value.dtype)
        for value in values
        if is_tensor(value) and value.device.type == "cuda" and value.dtype.is_floating_point
    } - _WARMED
    if not pairs:
        return _waited
    _WARMED.update(pairs)
    thread = threading.Thread(target=_warm, args=(pairs, more), name="kerneltune-check-warm-up", daemon=True)
    thread.start()
    return thread.join


def _warm(pairs: set[tuple[Any, Any]], more: Sequence[Callable[[Any], object]]) -> None:
    import torch

    for device, dtype in pairs:
        try:
            stream = torch.cuda.Stream(device)
            with torch.cuda.stream(stream):
                value = torch.ones(2, device=device, dtype=dtype)
                flags: list[Any] = []
                verdicts(value, value.clone(), Tolerance(), flags)
                read([*flags, untouched(value, value.clone()), exact(value, value.clone(), Tolerance())])
                for use in more:
                    use(value)
            stream.synchronize()
        except Exception:  # a warm-up only: the check itself meets and reports whatever failed here
            pass


def _waited() -> None:
    pass
