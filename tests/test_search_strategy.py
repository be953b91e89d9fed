"""The staged search's decisions, on synthetic landscapes (no Triton).

tests/test_search_strategies.py covers the strategy contract and every
built-in strategy; this file is about ``staged``'s own stages.
"""

from __future__ import annotations

import itertools
import math

import pytest
from kerneltune.plugins.search import staged as search_module
from kerneltune.plugins.search.moves import (
    axis_neighbours,
    coarse_levels,
    coarse_shapes,
    diagonal_neighbours,
    profile_neighbours,
)
from kerneltune.plugins.search.staged import StagedSearch


class Landscape:
    """A cost per point; records every point measured and every round."""

    def __init__(self, cost):
        self.cost = cost
        self.rounds = []

    def __call__(self, points):
        self.rounds.append(list(points))
        return {p: self.cost(p) for p in points}

    @property
    def measured(self):
        return [p for r in self.rounds for p in r]


def test_coarse_levels_are_inner_slices_of_each_axis():
    assert coarse_levels(1) == [0]
    assert coarse_levels(2) == [0, 1]
    assert coarse_levels(4) == [1, 2]
    assert coarse_levels(8) == [1, 4, 6]
    assert len(coarse_shapes([8, 8, 8])) == 27
    star = coarse_shapes([8, 8, 8, 8])
    assert len(star) == 1 + 2 * 4 and (4, 4, 4, 4) in star


def test_neighbours_stay_inside_the_grid():
    assert sorted(axis_neighbours((0, 2), [3, 3])) == [(0, 1), (1, 2)]
    assert sorted(diagonal_neighbours((0, 0), [3, 3])) == [(1, 1)]


def test_profile_neighbours_change_one_option_to_an_adjacent_value():
    profiles = [
        {"num_warps": 4, "num_stages": 3},
        {"num_warps": 8, "num_stages": 3},
        {"num_warps": 4, "num_stages": 5},
        {"num_warps": 4, "num_stages": 4},
        {"num_warps": 8, "num_stages": 4},
    ]
    neighbours = profile_neighbours(profiles)
    assert sorted(neighbours[0]) == [1, 3]
    assert sorted(neighbours[2]) == [3]
    toggled = profile_neighbours(
        [{}, {"multibuffer": False}, {"workspace": 2}, {"multibuffer": False, "workspace": 2}]
    )
    assert sorted(toggled[0]) == [1, 2]
    assert sorted(toggled[3]) == [1, 2]


def test_finds_the_optimum_of_a_smooth_landscape_measuring_a_small_fraction():
    optimum = ((5, 2, 3), 4)

    def cost(point):
        shape, profile = point
        distance = sum((a - b) ** 2 for a, b in zip(shape, optimum[0], strict=True))
        return 1.0 + distance + 0.1 * abs(profile - optimum[1])

    profiles = [{"num_warps": w, "num_stages": s} for w in (4, 2, 8) for s in (3, 2, 4)]
    landscape = Landscape(cost)
    search = StagedSearch([8, 8, 8], profiles, top_k=3)
    finalists = search.run(landscape)
    assert finalists[0] == optimum
    assert len(set(landscape.measured)) == len(landscape.measured), "a point was measured twice"
    assert len(landscape.measured) <= search.space_size // 10


def test_seeds_are_measured_first_and_each_round_only_new_points():
    landscape = Landscape(lambda point: 1.0 + sum(point[0]))
    StagedSearch([4, 4], [{}], seeds=[(3, 0)], top_k=2).run(landscape)
    assert landscape.rounds[0][0] == ((3, 0), 0)
    assert ((0, 0), 0) in landscape.measured


def test_when_every_start_fails_it_tries_small_shapes_until_one_runs():
    def cost(point):
        return 1.0 if sum(point[0]) <= 1 else math.inf

    landscape = Landscape(cost)
    finalists = StagedSearch([6, 6], [{}], top_k=1).run(landscape)
    assert finalists == [((0, 0), 0)]
    assert all(math.isinf(cost(p)) for p in landscape.rounds[0])


def test_finalists_are_the_best_point_of_each_of_the_best_shapes():
    def cost(point):
        (a,), profile = point
        return 1.0 + abs(a - 2) + 0.5 * profile

    search = StagedSearch([5], [{"x": 0}, {"x": 1}], top_k=2)
    finalists = search.run(Landscape(cost))
    assert finalists == [((2,), 0), ((1,), 0)]
    assert [p[0] for p in finalists] == list(dict.fromkeys(p[0] for p in finalists))


def test_a_large_family_is_searched_along_one_option_at_a_time_not_swept():
    profiles = [{"a": a, "b": b, "c": c} for a, b, c in itertools.product(range(6), repeat=3)]
    target = profiles.index({"a": 1, "b": 4, "c": 2})

    def cost(point):
        chosen = profiles[point[1]]
        return 1.0 + abs(chosen["a"] - 1) + abs(chosen["b"] - 4) + abs(chosen["c"] - 2)

    landscape = Landscape(cost)
    finalists = StagedSearch([2], profiles, top_k=1).run(landscape)
    assert finalists[0][1] == target
    assert len({p[1] for p in landscape.measured}) < len(profiles) // 3


def test_a_profile_walk_moves_only_on_a_gain_above_noise():
    # 36 profiles on one shape: searched one option's line at a time, from the base.
    profiles = [{"a": a, "b": b} for a, b in itertools.product(range(6), repeat=2)]

    def walk(gain):
        # Each step of ``a`` is ``gain`` faster; ``b`` changes nothing.
        landscape = Landscape(lambda point: 1.0 - gain * profiles[point[1]]["a"])
        finalists = StagedSearch([1], profiles, top_k=1).run(landscape)
        return profiles[finalists[0][1]], len(landscape.measured)

    # A real gain: the walk moves to a=5 and searches b's line there as well (1 + 5 + 5 + 5).
    assert walk(3 * search_module.MIN_GAIN) == ({"a": 5, "b": 0}, 16)
    # A gain within noise: both lines from the base are measured, the best of
    # them is still the pick, but the walk does not move on to search from it.
    assert walk(search_module.MIN_GAIN / 10) == ({"a": 5, "b": 0}, 11)


def test_the_shape_walk_stops_when_its_budget_is_spent(monkeypatch):
    monkeypatch.setattr(search_module, "WALK_SHARE", 0.05)
    order = []

    def ever_better(point):
        # Every newly measured point beats all before it, so the walk never settles by itself.
        order.append(point)
        return 1000.0 - len(order)

    landscape = Landscape(ever_better)
    search = StagedSearch([32, 32], [{}], top_k=1)
    search.run(landscape)
    start = len(coarse_shapes([32, 32]))
    budget = start + math.ceil(0.05 * 32 * 32)
    # The round that crosses the budget finishes: at most four neighbours more.
    assert budget <= len(landscape.measured) < budget + 4


# A tiled kernel in miniature: tiles grow with i + j, and from i + j >= 7 a tile's state per
# thread spills below 8 warps (five times slower); smaller tiles lose a little at 8 warps.
# Without the spill the best tile is (4, 5), so at 8 warps it is the optimum.
SPILLING_PROFILES = [{"num_warps": w, "num_stages": s} for w in (4, 2, 8) for s in (3, 2, 4)]
WIDE = SPILLING_PROFILES.index({"num_warps": 8, "num_stages": 3})


def spilling_tiles(point):
    (i, j), profile = point
    warps = SPILLING_PROFILES[profile]["num_warps"]
    tile = 1.0 + 0.1 * ((i - 4) ** 2 + (j - 5) ** 2)
    if i + j >= 7:
        return tile * (5.0 if warps < 8 else 1.0)
    return tile * (1.2 if warps == 8 else 1.0)


def test_probes_keep_tiles_that_spill_at_the_base_profile_in_the_running():
    landscape = Landscape(spilling_tiles)
    search = StagedSearch([6, 6], SPILLING_PROFILES, probes=[0, WIDE], top_k=3)
    finalists = search.run(landscape)
    assert finalists[0] == ((4, 5), WIDE)
    start = coarse_shapes([6, 6])
    assert landscape.rounds[0] == [(s, p) for s in start for p in (0, WIDE)]
    assert all(search.scores[s] == min(spilling_tiles((s, 0)), spilling_tiles((s, WIDE))) for s in start)
    assert len(landscape.measured) <= search.space_size // 4


def test_with_the_base_profile_alone_those_tiles_are_ranked_out():
    # The failure the probes exist for: the walk stops at the largest tiles that don't spill.
    landscape = Landscape(spilling_tiles)
    finalists = StagedSearch([6, 6], SPILLING_PROFILES, top_k=3).run(landscape)
    assert all(sum(shape) < 7 for shape, _ in finalists)
    assert all(p == 0 for _, p in landscape.rounds[0])


def test_probes_must_index_the_profiles():
    with pytest.raises(ValueError, match="must index the 2 profiles"):
        StagedSearch([4], [{}, {"x": 1}], probes=[0, 2])
    with pytest.raises(ValueError, match="must index"):
        StagedSearch([4], [{}], probes=[])
