"""The compile-profile family for a kernel, and its profiles and probes checked against the contract.

What a profile and a family are: :mod:`kerneltune.core.values.profiles`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kerneltune.core.errors import PluginError
from kerneltune.core.plugin_system.contracts import ProbingProfileFamily, ProfileFamily, provides
from kerneltune.core.plugin_system.registry import DEFAULT_PRIORITY
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.profiles import OPERATORS, CompileTarget, unique_profiles


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
    registry = session.registries.profile_families
    fitting = registry.ranked(
        lambda cls: cls.operator == operator and target.backend in cls.backends and registry.available(cls),
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
    probes = family.probe_profiles(target) if provides(family, ProbingProfileFamily) else []
    for probe in probes:
        if probe not in profiles:
            raise PluginError(
                f"profile family {family.name!r} probes with {probe!r}, which is not one of its profiles"
            )
    return unique_profiles([profiles[0], *probes])
