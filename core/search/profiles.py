"""Compile-option profile families: what a staged search tries after the block shape.

A *profile* is a dict of compile options a Triton backend accepts at launch
(``{"num_warps": 8, "num_stages": 3}`` on NVIDIA, ``{"multibuffer": False}``
on Ascend). A *family* is an ordered list of profiles for one backend and one
operator class (``matrix``: kernels that call ``tl.dot``; ``vector``: the
rest); its first profile is the base. The shape search times every shape
with the family's *probe* profiles (the base alone unless the family names
more) and scores it by the best of them. Families come from plugins through
``kerneltune_register_profile_families``, so a new backend brings its own
without touching the engine.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs
from kerneltune.core.errors import PluginError
from kerneltune.core.plugin_system.contracts import ProfileFamily
from kerneltune.core.plugin_system.registry import DEFAULT_PRIORITY, Registry, collect_registry
from kerneltune.core.plugin_system.session import Session

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


def profile_families(session: Session) -> Registry[ProfileFamily]:
    """Every family the session's plugins register, by name.

    :raises PluginError: when two plugins register one name.
    """
    return collect_registry(session.manager, "profile family", "kerneltune_register_profile_families")


def choose_family(session: Session, target: CompileTarget, operator: str) -> ProfileFamily | None:
    """An instance of the family serving ``target.backend`` for ``operator``, or ``None``.

    Among several available families for the same backend and operator the
    first by the registry's rule (:meth:`Registry.ranked`, ranking by
    ``priority``) wins, except that a tie for first place is an error: two
    plugins claiming one backend equally would otherwise be settled by the
    order they happen to load in.

    :raises ValueError: for an operator class other than ``matrix``/``vector``.
    :raises PluginError: when two families tie for first place (naming both).
    """
    if operator not in OPERATORS:
        raise ValueError(f"operator class {operator!r} is not one of {', '.join(OPERATORS)}")
    registry = profile_families(session)
    fitting = registry.ranked(
        lambda cls: cls.operator == operator and target.backend in cls.backends and cls.is_available(),
        priority="priority",
    )
    if not fitting:
        return None
    if len(fitting) > 1 and _priority(fitting[0]) == _priority(fitting[1]):
        first, second = fitting[0].name, fitting[1].name
        raise PluginError(
            f"profile families {first!r} (from plugin {registry.owners[first]}) and {second!r} "
            f"(from plugin {registry.owners[second]}) both serve {operator} kernels on "
            f"{target.backend}; give one a higher priority or block a plugin"
        )
    return fitting[0]()


def _priority(family: type[ProfileFamily]) -> int:
    return getattr(family, "priority", DEFAULT_PRIORITY)


def family_profiles(family: ProfileFamily, target: CompileTarget) -> list[dict[str, Any]]:
    """The family's profiles for ``target``, checked against the plugin contract.

    :raises PluginError: naming the family, when it returns no profile, a
        profile that is not a dict of option names, or an option the target
        does not accept.
    """
    profiles = family.profiles(target)
    if not isinstance(profiles, Sequence) or isinstance(profiles, str | bytes) or not profiles:
        raise PluginError(f"profile family {family.name!r} returned no profiles for {target.backend}")
    for profile in profiles:
        if not isinstance(profile, Mapping) or not all(isinstance(k, str) for k in profile):
            raise PluginError(f"profile family {family.name!r} returned {profile!r}, not a dict of options")
        unknown = sorted(set(profile) - target.options)
        if unknown:
            raise PluginError(
                f"profile family {family.name!r} sets {', '.join(unknown)}, which the installed Triton "
                f"does not accept for {target.backend} (it accepts: {', '.join(sorted(target.options))})"
            )
    return unique_profiles(profiles)


def family_probes(
    family: ProfileFamily, target: CompileTarget, profiles: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The profiles the shape search times every shape with: the base first, then the family's probes.

    ``profiles`` is what :func:`family_profiles` returned for ``target``. A
    family without ``probe_profiles`` probes with the base alone.

    :raises PluginError: naming the family, when a probe is not one of its profiles.
    """
    named = getattr(family, "probe_profiles", None)
    probes = [] if named is None else named(target)
    for probe in probes:
        if probe not in profiles:
            raise PluginError(
                f"profile family {family.name!r} probes with {probe!r}, which is not one of its profiles"
            )
    return unique_profiles([profiles[0], *probes])
