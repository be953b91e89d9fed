"""The candidates of a search_params kernel: every block shape of the searched params
times every compile-option profile of the family the operator classifier chooses.

:func:`build_space` makes the engine's :class:`~kerneltune.core.driving.Space` for one
set of compile options fixed at launch, with the geometry a search strategy
walks. Hand-written configs that give every searched param make a space of
their own: one axis, their indices.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from kerneltune.core import Point, SearchGeometry, Shape, unique_profiles
from kerneltune.core.driving import Candidate, Space, Tuner, choose_family, family_probes, family_profiles
from kerneltune.plugins.triton import configs as triton_configs


@attrs.frozen
class SearchSpace:
    """Everything one kernel searches for one set of fixed compile options."""

    tuner: Tuner
    #: the searched params' names (for hand-written configs, :data:`GIVEN_AXIS`).
    params: tuple[str, ...]
    #: the values of each searched param, ascending (for hand-written configs, their indices).
    axes: tuple[tuple[int, ...], ...]
    #: compile-option profiles, fixed options applied; index 0 is the base.
    profiles: tuple[dict[str, Any], ...]
    #: indices of the profiles stage 1 times every shape with (the base first).
    probes: tuple[int, ...]
    seeds: tuple[Shape, ...]
    family: str | None
    #: the space is the hand-written configs, measured as they are (their sizes are no shapes).
    given: bool

    def index(self, point: Point) -> int:
        """The candidate index of a point."""
        shape, profile = point
        flat = 0
        for axis, position in enumerate(shape):
            flat = flat * len(self.axes[axis]) + position
        return flat * len(self.profiles) + profile

    def point(self, index: int) -> Point:
        """The point of a candidate index (:meth:`index` undone)."""
        flat, profile = divmod(index, len(self.profiles))
        positions = []
        for axis in reversed(self.axes):
            flat, position = divmod(flat, len(axis))
            positions.append(position)
        return tuple(reversed(positions)), profile

    def candidate(self, point: Point) -> Candidate:
        """The engine's candidate for a point."""
        return self.tuner.space.candidates[self.index(point)]

    @property
    def geometry(self) -> SearchGeometry:
        """What a search strategy sees of the space."""
        return SearchGeometry(self.params, self.axes, self.profiles, self.probes, self.seeds, self.family)


#: The one axis of a space of hand-written configs: each config's index.
GIVEN_AXIS = "config"


def candidate_label(shape: Mapping[str, int], profile: Mapping[str, Any]) -> str:
    """How a generated candidate is named: what was chosen, not every default its Config carries.

    ``"BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=3"``: the searched
    params in their order, then the profile's options in theirs.
    """
    return ", ".join(f"{name}={value}" for name, value in {**shape, **profile}.items())


def _full_label(config: Any) -> str:
    return ", ".join(f"{name}={value}" for name, value in config.all_kwargs().items())


def build_space(
    *,
    name: str,
    source: str,
    params: Sequence[str],
    values: Sequence[int],
    given: Sequence[Any] | None,
    seeds: Sequence[Mapping[str, int]],
    base: Mapping[str, Any],
    operator: str,
    session: Any,
    fixed: Mapping[str, Any],
) -> SearchSpace:
    """The space searched for launches that fix the compile options ``fixed``.

    :param given: hand-written configs giving every searched param: the
        space is just them, with ``fixed`` laid over each, along one axis.
    :param seeds: partial shapes (some searched params) measured first.
    :param base: meta-parameters every generated candidate takes.
    :param operator: ``"matrix"`` or ``"vector"``, for the profile family.
    """
    if given is not None:
        configs = [triton_configs.config_with_options(c, fixed) for c in given]
        tuner = Tuner(Space.build(name, configs, source, label=_full_label))
        return SearchSpace(tuner, (GIVEN_AXIS,), (tuple(range(len(configs))),), ({},), (0,), (), None, True)
    target = triton_configs.compile_target()
    family = choose_family(session, target, operator)
    offered = family_profiles(family, target) if family is not None else [{}]
    probed = family_probes(family, target, offered) if family is not None else offered
    profiles = unique_profiles([{**p, **fixed} for p in offered])
    # Fixed options may merge probes (all of them into the base, when they fix the probed option).
    probes = tuple(dict.fromkeys(profiles.index({**p, **fixed}) for p in probed))
    axes = tuple(tuple(sorted({*values, *(s[p] for s in seeds if p in s)})) for p in params)
    # A param a seed leaves out takes the middle of its values (the upper one of an even count).
    starts = tuple(
        tuple(axes[i].index(seed[p]) if p in seed else len(axes[i]) // 2 for i, p in enumerate(params))
        for seed in seeds
    )
    configs = []
    labels: dict[int, str] = {}
    for chosen in itertools.product(*axes):
        shape = dict(zip(params, chosen, strict=True))
        for profile in profiles:
            config = triton_configs.make_config({**base, **shape}, profile)
            configs.append(config)
            labels[id(config)] = candidate_label(shape, profile)
    tuner = Tuner(Space.build(name, configs, source, label=lambda config: labels[id(config)]))
    return SearchSpace(
        tuner,
        tuple(params),
        axes,
        tuple(profiles),
        probes,
        starts,
        None if family is None else family.name,
        False,
    )
