"""The search-strategy contract, its registry, and every built-in strategy on synthetic landscapes.

No Triton: strategies are pure decisions over the times they are handed.
"""

from __future__ import annotations

import itertools
import math
import types

import attrs
import pytest
from kerneltune.core import ConfigError, PluginError, Session, hookimpl, load_settings
from kerneltune.core.search.ledger import TIMED_ROUND, SearchLedger
from kerneltune.core.search.strategies import choose_strategy
from kerneltune.core.values.geometry import SearchBudget, SearchGeometry
from kerneltune.plugins.search import pattern
from kerneltune.plugins.search.exhaustive import ExhaustiveStrategy
from kerneltune.plugins.search.pattern import PatternStrategy
from kerneltune.plugins.search.staged import StagedStrategy
from test_search_strategy import Landscape

BUILT_IN = (PatternStrategy, StagedStrategy, ExhaustiveStrategy)
MATRIX = tuple({"num_warps": w, "num_stages": s} for w in (4, 2, 8) for s in (3, 2, 4, 5))
VECTOR = tuple({"num_warps": w, "num_stages": s} for w in (4, 1, 2, 8, 16) for s in (3, 1, 2))


def run(strategy, geometry, cost, **budget):
    landscape = Landscape(cost)
    lines = []
    finalists = strategy().search(geometry, landscape, SearchBudget(**budget), lines.append)
    assert len(set(landscape.measured)) == len(landscape.measured), "a point was measured twice"
    return finalists, landscape, lines


def best_point(geometry, cost):
    return min(geometry.points(), key=lambda p: (cost(p), p))


def session(*plugins, **settings):
    return Session.create(attrs.evolve(load_settings(), cache="memory", **settings), extra=plugins)


# -- the contract and its registry ---------------------------------------------------


def test_every_built_in_is_registered_and_auto_takes_pattern():
    registry = session().registries.search_strategies
    assert {"pattern", "staged", "exhaustive"} <= set(registry.names())
    assert registry.select("auto") is PatternStrategy
    assert registry.owners["pattern"] == "kerneltune.plugins.search.pattern"
    for cls in BUILT_IN:
        assert cls.is_available() and callable(cls().search)


def test_an_unknown_name_lists_the_strategies_there_are():
    with pytest.raises(
        PluginError, match=r"search strategy 'annealing' is not available \(installed: .*pattern"
    ):
        choose_strategy(session(), "annealing", "the search_params hint of k")
    with pytest.raises(PluginError, match="set by environment variable KERNELTUNE_SEARCH_STRATEGY"):
        chosen = attrs.evolve(
            load_settings(),
            search_strategy="annealing",
            sources=(("search_strategy", "environment variable KERNELTUNE_SEARCH_STRATEGY"),),
        )
        choose_strategy(Session.create(chosen))


def test_two_plugins_registering_one_name_is_an_error_naming_both():
    class Impostor:
        name = "pattern"

        @classmethod
        def is_available(cls):
            return True

    plugin = types.ModuleType("impostor_plugin")
    plugin.kerneltune_register_search_strategies = hookimpl(lambda register: register(Impostor))
    with pytest.raises(PluginError, match=r"registered by two plugins: .*pattern and impostor_plugin"):
        session(plugin)


def test_the_hint_wins_over_the_setting():
    chosen = session(search_strategy="exhaustive")
    assert type(choose_strategy(chosen)) is ExhaustiveStrategy
    assert type(choose_strategy(chosen, "staged")) is StagedStrategy


def test_settings_read_strategy_effort_and_budget(tmp_path):
    (tmp_path / "kerneltune.toml").write_text('search_strategy = "staged"\nsearch_effort = "quick"\n')
    settings = load_settings(
        tmp_path, {"KERNELTUNE_SEARCH_BUDGET_S": "2.5", "KERNELTUNE_SEARCH_MAX_POINTS": "30"}
    )
    assert (settings.get("search_strategy"), settings.get("search_effort")) == ("staged", "quick")
    assert (settings.get("search_budget_s"), settings.get("search_max_points")) == (2.5, 30)
    with pytest.raises(ConfigError, match=r"KERNELTUNE_SEARCH_EFFORT.*'quick', 'default' or 'full'"):
        load_settings(tmp_path, {"KERNELTUNE_SEARCH_EFFORT": "thorough"})
    with pytest.raises(ConfigError, match="seconds >= 0"):
        load_settings(tmp_path, {"KERNELTUNE_SEARCH_BUDGET_S": "soon"})


def test_a_budget_takes_the_hint_first_and_the_settings_for_the_rest():
    settings = attrs.evolve(load_settings(), search_effort="full", search_budget_s=9.0, search_max_points=0)
    budget = SearchBudget.resolve(settings, effort="quick", finalists=2)
    assert (budget.effort, budget.seconds, budget.max_points, budget.finalists) == ("quick", 9.0, None, 2)
    assert SearchBudget.resolve(settings, seconds=1.0, max_points=5).describe() == (
        "effort full, at most 5 points, 1 s"
    )
    with pytest.raises(ValueError, match="effort must be one of"):
        SearchBudget(effort="thorough")


def test_a_geometry_checks_itself_and_names_points_as_candidates_are_named():
    geometry = SearchGeometry(("BLOCK_M", "BLOCK_N"), ((16, 32), (64, 128, 256)), MATRIX, (0, 8))
    assert (geometry.sizes, geometry.shape_count, geometry.space_size) == ((2, 3), 6, 72)
    assert geometry.label(((1, 2), 8)) == "BLOCK_M=32, BLOCK_N=256, num_warps=8, num_stages=3"
    assert geometry.holds(((1, 2), 11)) and not geometry.holds(((2, 0), 0))
    with pytest.raises(ValueError, match="ascending"):
        SearchGeometry(("B",), ((32, 16),))
    with pytest.raises(ValueError, match="must index"):
        SearchGeometry(("B",), ((16,),), ({},), (1,))
    with pytest.raises(ValueError, match="seed"):
        SearchGeometry(("B",), ((16, 32),), seeds=((2,),))


# -- the ledger: what every built-in measures through ---------------------------------


def test_the_ledger_measures_each_point_once_and_stops_at_the_cap():
    landscape = Landscape(lambda p: float(p[0][0]))
    ledger = SearchLedger(landscape, SearchBudget(max_points=5), cap=4)
    points = [((i,), 0) for i in range(6)]
    assert ledger.measure(points[:2] + points[:2]) == points[:2]
    assert ledger.measure(points) == points[2:4]
    assert ledger.spent and ledger.measure(points) == [] and ledger.why_spent() == "point cap of 4 reached"
    assert landscape.rounds == [points[:2], points[2:4]]
    assert ledger.best() == points[0] and ledger.ranked(points[1:3]) == points[1:3]


class Foreseen(Landscape):
    """A landscape whose measure function also takes the points the strategy expects next (``ahead``)."""

    def __init__(self, cost):
        super().__init__(cost)
        self.expected = []

    def ahead(self, points):
        self.expected.append((len(self.rounds), list(points)))


def test_the_ledger_passes_on_what_is_expected_next_less_the_measured_and_past_the_cap():
    landscape = Foreseen(lambda p: float(p[0][0]))
    ledger = SearchLedger(landscape, SearchBudget(), cap=4)
    points = [((i,), 0) for i in range(6)]
    ledger.measure(points[:2])
    ledger.ahead(points[1:] + points[1:])
    ledger.ahead(points[:2])  # all measured: nothing to say
    assert landscape.expected == [(1, points[2:4])], "two points are left under the cap"
    ledger.measure(points[2:4])
    ledger.ahead(points[4:])
    assert len(landscape.expected) == 1, "the cap is reached: nothing more will be measured"
    SearchLedger(Landscape(lambda p: 1.0), SearchBudget()).ahead(points)  # a plain function ignores it


class WithTwins(Landscape):
    """A landscape where odd profiles launch the program of the profile below: twins, as a run names them."""

    def __init__(self, cost):
        super().__init__(cost)
        self.twins = set()

    def __call__(self, points):
        self.twins.update(p for p in points if p[1] % 2)
        return super().__call__(points)


def test_twins_count_against_no_cap_and_leave_room_for_more_points():
    landscape = WithTwins(lambda p: float(p[0][0]))
    ledger = SearchLedger(landscape, SearchBudget(), cap=3)
    points = [((i,), profile) for i in range(4) for profile in (0, 1)]
    assert ledger.measure(points) == points[:5], "three programs, and the twins met on the way"
    assert ledger.counted == 3 and ledger.spent
    assert landscape.rounds == [points[:3], points[3:4], points[4:5]]


def test_pattern_says_ahead_what_its_walk_polls_next():
    geometry = SearchGeometry(("A", "B", "C"), ((1, 2, 3, 4, 5, 6, 7, 8),) * 3, MATRIX[:9])
    landscape = Foreseen(smooth(((5, 2, 3), 4)))
    finalists = PatternStrategy().search(geometry, landscape, SearchBudget(), lambda line: None)
    assert finalists[0] == ((5, 2, 3), 4), "the walk is unchanged"
    assert landscape.expected, "the walk said what it would poll next"
    rounds = [set(r) for r in landscape.rounds]
    for at, expected in landscape.expected:
        assert not set(expected) & set().union(*rounds[:at]), "nothing measured already"
    # Where the poll before gained nothing, the next round is the points expected.
    foreseen = [
        at for at, expected in landscape.expected if at + 1 < len(rounds) and set(expected) == rounds[at + 1]
    ]
    assert foreseen, landscape.expected


def test_with_a_time_budget_the_ledger_measures_in_rounds_and_starts_none_late():
    now = [0.0]
    landscape = Landscape(lambda p: 1.0)

    def measure(points):
        now[0] += 1.0
        return landscape(points)

    ledger = SearchLedger(measure, SearchBudget(seconds=1.5, clock=lambda: now[0]))
    points = [((i,), 0) for i in range(3 * TIMED_ROUND)]
    assert len(ledger.measure(points)) == 2 * TIMED_ROUND
    assert [len(r) for r in landscape.rounds] == [TIMED_ROUND, TIMED_ROUND]
    assert ledger.why_spent() == "wall-clock budget of 1.5 s spent"


# -- every built-in on synthetic landscapes -------------------------------------------


def smooth(optimum):
    def cost(point):
        shape, profile = point
        return (
            1.0
            + sum((a - b) ** 2 for a, b in zip(shape, optimum[0], strict=True))
            + 0.1 * abs(profile - optimum[1])
        )

    return cost


@pytest.mark.parametrize("strategy", BUILT_IN, ids=lambda cls: cls.name)
def test_every_built_in_finds_the_optimum_of_a_smooth_landscape(strategy):
    geometry = SearchGeometry(("A", "B", "C"), ((1, 2, 3, 4, 5, 6, 7, 8),) * 3, MATRIX[:9])
    cost = smooth(((5, 2, 3), 4))
    finalists, landscape, _ = run(strategy, geometry, cost)
    assert finalists[0] == ((5, 2, 3), 4)
    assert [cost(p) for p in finalists] == sorted(cost(p) for p in finalists)
    share = len(landscape.measured) / geometry.space_size
    assert share == 1.0 if strategy is ExhaustiveStrategy else share <= 0.1


def ridge(point, geometry=None):
    """A row reduction in miniature: a block x warps interaction.

    Each block of BLOCK_N values is split over 32 x num_warps threads; a
    thread is best at 8 values, so the fast points lie on a ridge where
    BLOCK_N and the warps grow together, and along it more warps win. At the
    default 4 warps 1024 is the best block; the best point, 4096 at 16 warps,
    is two steps of both away, and a block move alone is slower.
    """
    (block,), profile = point
    warps, stages = VECTOR[profile]["num_warps"], VECTOR[profile]["num_stages"]
    per_thread = 64 * 2**block / (32 * warps)
    return 1.0 + 0.05 * (math.log2(per_thread) - 3) ** 2 + 0.02 * (4 - math.log2(warps)) + 0.001 * stages


RIDGE = SearchGeometry(("BLOCK_N",), (tuple(64 * 2**i for i in range(8)),), VECTOR)


def test_on_a_block_by_warps_interaction_staged_misses_the_best_and_pattern_finds_it():
    best = best_point(RIDGE, ridge)
    assert RIDGE.label(best) == "BLOCK_N=4096, num_warps=16, num_stages=1"
    # Staged ranks the blocks at 4 warps, sweeps the warps of the best three, and stops short.
    staged, _, _ = run(StagedStrategy, RIDGE, ridge)
    assert best[0] not in {shape for shape, _ in staged}
    assert min(ridge(p) for p in staged) / ridge(best) > 1.015
    found, landscape, lines = run(PatternStrategy, RIDGE, ridge)
    # The ridge's best block and warps; the stage term (0.1% a stage) lies below the walk's
    # resolution (MIN_GAIN), and the 15% cap ends the final pass before it reaches stage 1.
    (block,), profile = found[0]
    assert (block, VECTOR[profile]["num_warps"]) == (best[0][0], 16)
    assert ridge(found[0]) / ridge(best) < 1 + pattern.MIN_GAIN
    assert len(landscape.measured) <= 0.15 * RIDGE.space_size
    assert any("pairs of moves" in line for line in lines)


def two_options(point):
    """A best point two options away: more warps with fewer stages wins.

    Either option alone loses, and so does either with a block move.
    """
    (block,), profile = point
    options = (VECTOR[profile]["num_warps"], VECTOR[profile]["num_stages"])
    return (1.0 + 0.1 * abs(block - 4)) * {(4, 3): 1.0, (8, 2): 0.95}.get(options, 1.05)


def test_the_final_pass_finds_what_two_options_together_gain():
    """The walk polls single moves and block-with-option pairs; the final pass alone tries two options."""
    found, landscape, lines = run(PatternStrategy, RIDGE, two_options)
    assert found[0] == best_point(RIDGE, two_options)
    finals = [i for i, line in enumerate(lines) if line.startswith("pattern: final pass around BLOCK_N=1024")]
    assert finals and any("walking from BLOCK_N=1024, num_warps=8" in line for line in lines[finals[0] :])
    assert len(landscape.measured) <= 0.15 * RIDGE.space_size


# A tiled kernel in miniature: tiles grow with i + j; from i + j >= 6 a tile spills below 8 warps (five
# times slower) and from i + j >= 7 it runs out of shared memory above 3 stages (inf, as a failed point).
# The best tile, (3, 4) at 8 warps and 3 stages, sits against both walls.
def walled_tiles(point):
    (i, j), profile = point
    warps, stages = MATRIX[profile]["num_warps"], MATRIX[profile]["num_stages"]
    if i + j >= 7 and stages > 3:
        return math.inf
    tile = 1.0 + 0.1 * ((i - 3) ** 2 + (j - 4) ** 2) + 0.01 * abs(stages - 3)
    if i + j >= 6:
        return tile * (5.0 if warps < 8 else 1.0)
    return tile * (1.15 if warps == 8 else 1.0)


WALLED = SearchGeometry(("BLOCK_M", "BLOCK_N"), ((16, 32, 64, 128, 256),) * 2, MATRIX, (0, 8))


@pytest.mark.parametrize("strategy", [PatternStrategy, ExhaustiveStrategy], ids=lambda cls: cls.name)
def test_failed_points_are_data_the_walk_steps_around(strategy):
    finalists, landscape, _ = run(strategy, WALLED, walled_tiles)
    assert finalists[0] == best_point(WALLED, walled_tiles)
    assert all(math.isfinite(walled_tiles(p)) for p in finalists)
    assert any(math.isinf(walled_tiles(p)) for p in landscape.measured), "the walk never met the wall"


@pytest.mark.parametrize("strategy", [PatternStrategy, StagedStrategy], ids=lambda cls: cls.name)
def test_when_nothing_at_the_start_runs_smaller_shapes_are_tried(strategy):
    def cost(point):
        return 1.0 + point[1] if sum(point[0]) <= 1 else math.inf

    geometry = SearchGeometry(("A", "B"), ((1, 2, 3, 4, 5, 6),) * 2, ({}, {"x": 1}))
    finalists, landscape, _ = run(strategy, geometry, cost)
    assert finalists[0] == ((0, 0), 0)
    assert all(math.isinf(cost(p)) for p in landscape.rounds[0])


def test_nothing_running_anywhere_leaves_no_finalist():
    geometry = SearchGeometry(("A",), ((1, 2, 3),), ({}, {"x": 1}))
    for strategy in BUILT_IN:
        assert run(strategy, geometry, lambda p: math.inf)[0] == []


@pytest.mark.parametrize("strategy", BUILT_IN, ids=lambda cls: cls.name)
def test_every_built_in_honours_the_point_cap_and_the_finalist_count(strategy):
    finalists, landscape, lines = run(strategy, WALLED, walled_tiles, max_points=12, finalists=2)
    assert len(landscape.measured) <= 12
    assert 1 <= len(finalists) <= 2
    assert any("point cap of 12 reached" in line for line in lines)


@pytest.mark.parametrize("strategy", BUILT_IN, ids=lambda cls: cls.name)
def test_every_built_in_honours_the_wall_clock_budget(strategy):
    now = [0.0]
    landscape = Landscape(walled_tiles)

    def measure(points):
        now[0] += 1.0  # every round takes a second
        return landscape(points)

    budget = SearchBudget(seconds=2.5, clock=lambda: now[0])
    finalists = strategy().search(WALLED, measure, budget, lambda line: None)
    assert len(landscape.rounds) == 3
    assert finalists


def test_pattern_effort_buys_more_measurements_and_never_worse_picks():
    measured, found = {}, {}
    for effort in ("quick", "default", "full"):
        finalists, landscape, _ = run(PatternStrategy, WALLED, walled_tiles, effort=effort)
        measured[effort] = len(landscape.measured)
        found[effort] = walled_tiles(finalists[0])
        # The cap never goes below the start (8 points) and one full neighbourhood (32).
        cap = pattern.EFFORTS[effort].share * WALLED.space_size
        assert measured[effort] <= max(math.ceil(cap), 8 + 32)
    assert measured["quick"] < measured["default"] < measured["full"]
    assert (
        found["quick"] >= found["default"] >= found["full"] == walled_tiles(best_point(WALLED, walled_tiles))
    )


def test_pattern_starts_from_the_seeds_and_the_spread_at_every_probe():
    seeded = attrs.evolve(WALLED, seeds=((4, 0),))
    _, landscape, _ = run(PatternStrategy, seeded, walled_tiles)
    first = landscape.rounds[0]
    assert first[:2] == [((4, 0), 0), ((4, 0), 8)]
    assert {p for _, p in first} == {0, 8}


def test_pattern_moves_change_a_block_size_and_an_option_together():
    moves = pattern.Neighbourhood(WALLED)
    here = ((2, 2), 0)  # 64x64 at 4 warps, 3 stages
    singles, pairs, options = moves.singles(here), moves.pairs(here), moves.option_pairs(here)
    labels = {WALLED.label(p) for p in pairs}
    assert "BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3" in labels
    assert "BLOCK_M=128, BLOCK_N=128, num_warps=4, num_stages=3" in labels
    assert len(singles) == 4 + 4 and len(pairs) == 4 * 4 + 4 and len(options) == 4
    assert {WALLED.label(p) for p in options} >= {"BLOCK_M=64, BLOCK_N=64, num_warps=8, num_stages=4"}
    assert here not in {*singles, *pairs, *options}
    assert len(set(moves.full(here))) == len(moves.full(here))


def test_pattern_repeats_a_move_along_its_direction():
    moves = pattern.Neighbourhood(RIDGE)
    four = {p: i for i, p in enumerate(map(lambda q: tuple(q.values()), VECTOR))}
    at = lambda block, warps: ((block,), four[(warps, 3)])  # noqa: E731
    assert moves.repeat(at(4, 4), at(5, 8)) == at(6, 16)
    assert moves.repeat(at(5, 8), at(6, 16)) == at(7, 16)
    assert moves.repeat(at(6, 8), at(7, 8)) is None


def test_exhaustive_measures_the_probes_first_and_stops_where_the_budget_does():
    _, landscape, _ = run(ExhaustiveStrategy, WALLED, walled_tiles, max_points=50)
    assert {p for _, p in landscape.measured} == {0, 8}
    _, everything, _ = run(ExhaustiveStrategy, WALLED, walled_tiles)
    assert sorted(everything.measured) == sorted(WALLED.points())
    assert len(everything.rounds) == 1


def test_staged_effort_scales_its_shape_walk():
    geometry = SearchGeometry(("A", "B"), (tuple(range(16)),) * 2, ({},))
    counts = {}
    for effort in ("quick", "default", "full"):
        # Every newly measured point beats all before it, so only the budget stops the walk.
        order = itertools.count()
        _, landscape, _ = run(
            StagedStrategy, geometry, lambda p, order=order: 1000.0 - next(order), effort=effort
        )
        counts[effort] = len(landscape.measured)
    assert counts["quick"] < counts["default"] < counts["full"]
