"""A kernel launch's tensor arguments, by name: copied, put back, held to copies bit for bit, poisoned.

What :mod:`~kerneltune.core.drivers.checked_launches` does with the
arguments around a candidate's checked run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kerneltune.core.machine import outputs, passes


def copies(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A :func:`~kerneltune.core.machine.outputs.snapshot` of each argument, by name."""
    return {name: outputs.snapshot(value) for name, value in arguments.items()}


def put_back(
    arguments: Mapping[str, Any], saved: Mapping[str, Any], only: frozenset[str] | None = None
) -> None:
    """Copy ``saved`` back into the arguments (``only`` those named, where given)."""
    for name, value in arguments.items():
        if only is None or name in only:
            outputs.put_back(value, saved[name])


def holding(arguments: Mapping[str, Any], saved: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` hold exactly the ``saved`` copies: the same names, shapes, dtypes and bits."""
    return arguments.keys() == saved.keys() and passes.settled(
        [passes.untouched(value, saved[name]) for name, value in arguments.items()]
    )


#: Each element size's integer dtype, by name, to flip a floating-point tensor's bits through.
_BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def poisonable(value: Any) -> bool:
    """Whether ``value`` can be filled with a :func:`complement`: a floating-point tensor.

    An integer argument may hold indices, which poisoned would send loads astray.
    """
    return hasattr(value, "is_floating_point") and value.is_floating_point() and value.element_size() in _BITS


def complement(expected: Any) -> Any:
    """A tensor holding the bitwise complement of ``expected``'s: no element equals it."""
    import torch

    poisoned = expected.clone()
    poisoned.view(getattr(torch, _BITS[poisoned.element_size()])).bitwise_not_()
    return poisoned
