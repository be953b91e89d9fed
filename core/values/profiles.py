"""Compile-option profile families: what a staged search tries after the block shape.

A *profile* is a dict of compile options a Triton backend accepts at launch
(``{"num_warps": 8, "num_stages": 3}`` on NVIDIA, ``{"multibuffer": False}``
on Ascend); a *family* (a plugin's
:class:`~kerneltune.core.plugin_system.contracts.ProfileFamily`) an ordered
list of them for one backend and operator class, the base first. This
module holds what a family is written with;
:mod:`kerneltune.core.search.families` chooses one and checks what it offers.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

OPERATORS = ("matrix", "vector")


class _Unset:
    """The type of :data:`UNSET`."""

    def __repr__(self) -> str:
        return "UNSET"


#: A choice meaning "leave this option out of the profile" (the compiler's default).
UNSET: Any = _Unset()


@attrs.frozen
class CompileTarget:
    """The device a kernel compiles for, as profile families see it.

    :ivar backend: Triton's backend name: ``"cuda"``, ``"hip"``, ``"npu"``
        (triton-ascend), or ``"interpreter"`` under ``TRITON_INTERPRET=1``.
    :ivar arch: the backend's architecture: the compute capability as an int
        on CUDA (``90`` for Hopper), the arch string elsewhere.
    :ivar warp_size: threads per warp (``0`` where the backend has none).
    :ivar options: names of the compile options the installed Triton accepts
        at launch for this backend; a profile may use only these.
    """

    backend: str
    arch: Any
    warp_size: int
    options: frozenset[str]


def option_grid(choices: Mapping[str, Sequence[Any]], accepted: Collection[str]) -> list[dict[str, Any]]:
    """Every combination of ``choices``, for families that are products of options.

    The first value of each option comes first, so the first profile is the
    combination of first values. Options not in ``accepted`` (the target's
    :attr:`CompileTarget.options`) are dropped, so a family asks for an
    option only where the installed Triton knows it; a value of
    :data:`UNSET` leaves the option out of that profile.
    """
    names = [name for name in choices if name in accepted]
    profiles = []
    for values in itertools.product(*(choices[name] for name in names)):
        profiles.append({n: v for n, v in zip(names, values, strict=True) if v is not UNSET})
    return profiles


def unique_profiles(profiles: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``profiles`` without repeats, first occurrence kept."""
    seen: set[tuple[tuple[str, Any], ...]] = set()
    kept = []
    for profile in profiles:
        marker = tuple(sorted((k, repr(v)) for k, v in profile.items()))
        if marker not in seen:
            seen.add(marker)
            kept.append(dict(profile))
    return kept
