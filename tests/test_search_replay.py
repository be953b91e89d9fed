"""Search strategies replayed on recorded landscapes: bench/search_params.py's kernels on an H200.

tests/data/h200_matmul_landscape.json holds the time of every candidate of
that space (4096^3 fp16, BLOCK_M x BLOCK_N in 32..256, the nvidia-matrix
family: 192 points; null where the kernel did not build). The pure strategy
runs here with the family's profiles and probes as the kernel derives them
and every point named as the kernel names it, each measurement answered
from the table. Issue 5's targets for ``staged``: at most a quarter of the
space measured, the pick within 2% of the best; ``pattern``, the default
since issue 22, is held to 1% (the tables are noise-free replays, so these
check decisions, not noise).

tests/data/h200_vector_landscapes.json holds the softmax and elementwise
spaces of the same bench (one parameter, the nvidia-vector family: 105
points each). Their landscapes are flat near the top (the three best block
sizes within 2%), which is where a walk that follows noise spends most.

tests/data/h200_search_quality_landscapes.json holds bench/search_quality.py's
oracle tables of 2026-12-01 at `ffcc284` (bf16 matmul 4096^3 with 16-wide tiles, 300
points; fp16 row sum, 120; fp16 online softmax, 105), and
h200_search_quality_landscapes_2026-12-01_0aed052.json the same spaces from
a later run at `0aed052`, the vector kernels' tables the mean of three oracle processes; those
replay through bench/search_replay.py.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
from pathlib import Path

import pytest
from kerneltune.core.search.families import family_probes, family_profiles
from kerneltune.core.values.geometry import SearchBudget, SearchGeometry
from kerneltune.core.values.profiles import CompileTarget
from kerneltune.plugins.profiles.nvidia import NvidiaMatrixProfiles, NvidiaVectorProfiles
from kerneltune.plugins.search import staged as search
from kerneltune.plugins.search.pattern import PatternStrategy
from kerneltune.plugins.search.staged import StagedSearch
from kerneltune.plugins.triton.search_params.space import candidate_label

LANDSCAPE = json.loads((Path(__file__).parent / "data" / "h200_matmul_landscape.json").read_text())
PARAMS = ("BLOCK_M", "BLOCK_N")
#: bench/search_params.py's ``values`` for the matmul.
VALUES = (32, 64, 128, 256)
#: The options triton 3.6 accepts on CUDA that the family may use.
HOPPER = CompileTarget(
    backend="cuda",
    arch=90,
    warp_size=32,
    options=frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"}),
)
FAMILY = NvidiaMatrixProfiles()
PROFILES = family_profiles(FAMILY, HOPPER)
PROBES = tuple(PROFILES.index(p) for p in family_probes(FAMILY, HOPPER, PROFILES))
FRACTION_TARGET = 0.25
RATIO_TARGET = 1.02


def label(point, transposed=False):
    """The table's key for a point; ``transposed`` reads the landscape with BLOCK_M and BLOCK_N swapped."""
    shape, profile = point
    values = [VALUES[i] for i in shape]
    if transposed:
        values.reverse()
    return candidate_label(dict(zip(PARAMS, values, strict=True)), PROFILES[profile])


def table_time(point, transposed=False):
    value = LANDSCAPE["table_ms"][label(point, transposed)]
    return math.inf if value is None else value


def best_time():
    return min(v for v in LANDSCAPE["table_ms"].values() if v is not None)


def replay(probes, transposed=False):
    """Run stages 1 and 2 against the table; the finalists and every point asked for."""
    asked = []

    def measure(points):
        asked.extend(points)
        return {p: table_time(p, transposed) for p in points}

    search = StagedSearch([len(VALUES)] * len(PARAMS), PROFILES, probes=probes, top_k=3)
    finalists = search.run(measure)
    assert len(asked) == len(set(asked)), "a point was measured twice"
    return finalists, asked, search.space_size


def all_points():
    shapes = itertools.product(range(len(VALUES)), repeat=len(PARAMS))
    return [(shape, profile) for shape in shapes for profile in range(len(PROFILES))]


def test_the_table_is_the_space_the_kernel_builds():
    assert {label(point) for point in all_points()} == set(LANDSCAPE["table_ms"])
    # The table's best is also what the interleaved do_bench re-timing found fastest,
    # so the table is a fair judge of the pick.
    fastest = min(LANDSCAPE["do_bench_ms"], key=LANDSCAPE["do_bench_ms"].get)
    assert LANDSCAPE["table_ms"][fastest] == best_time()


@pytest.mark.parametrize("transposed", [False, True], ids=["as-recorded", "transposed"])
def test_the_staged_search_meets_issue_5s_targets_on_the_h200_matmul(transposed):
    finalists, asked, space = replay(PROBES, transposed)
    # Stage 3 re-times the finalists; replayed, their table times decide.
    pick = min(finalists, key=lambda p: table_time(p, transposed))
    assert len(asked) / space <= FRACTION_TARGET
    assert table_time(pick, transposed) / best_time() <= RATIO_TARGET, label(pick, transposed)


def test_timed_at_the_base_profile_alone_the_best_tiles_are_ranked_out():
    """Why the family probes: the same search without them misses the target on this table."""
    finalists, _, _ = replay((0,))
    pick = min(finalists, key=table_time)
    assert table_time(pick) / best_time() > RATIO_TARGET
    best = min(all_points(), key=table_time)
    assert best[0] not in [shape for shape, _ in finalists], "the best tile reached stage 2 after all"


VECTOR = json.loads((Path(__file__).parent / "data" / "h200_vector_landscapes.json").read_text())
VECTOR_PROFILES = family_profiles(NvidiaVectorProfiles(), HOPPER)
VECTOR_PROBES = tuple(
    VECTOR_PROFILES.index(p) for p in family_probes(NvidiaVectorProfiles(), HOPPER, VECTOR_PROFILES)
)


def replay_vector(name):
    """Stages 1 and 2 on a recorded one-parameter space; the finalists, the points asked, the table."""
    case = VECTOR["kernels"][name]
    param, values, table = case["param"], case["values"], case["table_ms"]

    def time_of(point):
        shape, profile = point
        return table[candidate_label({param: values[shape[0]]}, VECTOR_PROFILES[profile])]

    asked = []

    def measure(points):
        asked.extend(points)
        return {p: time_of(p) for p in points}

    strategy = StagedSearch([len(values)], VECTOR_PROFILES, probes=VECTOR_PROBES, top_k=3)
    finalists = strategy.run(measure)
    assert len(asked) == len(set(asked)), "a point was measured twice"
    assert strategy.space_size == len(table)
    return finalists, asked, time_of, min(table.values())


@pytest.mark.parametrize("name", ["softmax", "elementwise"])
def test_the_staged_search_meets_issue_5s_targets_on_the_h200_vector_kernels(name):
    finalists, asked, time_of, best = replay_vector(name)
    pick = min(finalists, key=time_of)
    assert len(asked) / len(VECTOR["kernels"][name]["table_ms"]) <= FRACTION_TARGET, len(asked)
    assert time_of(pick) / best <= RATIO_TARGET


def test_a_profile_walk_that_follows_noise_measures_over_a_quarter_of_the_elementwise_space(monkeypatch):
    """Why ``MIN_GAIN``: moving on every gain, however small, costs the target on this table."""
    monkeypatch.setattr(search, "MIN_GAIN", 0.0)
    _, asked, _, _ = replay_vector("elementwise")
    assert len(asked) / len(VECTOR["kernels"]["elementwise"]["table_ms"]) > FRACTION_TARGET


# -- the default strategy, pattern, on the same tables ------------------------------------------

#: Issue 22's regret target for the default strategy; the shares below are what it measured here.
PATTERN_RATIO = 1.01


def replay_pattern(geometry, time_of):
    """Run the pattern strategy against a table; the best finalist's time and the share measured."""
    asked = []

    def measure(points):
        asked.extend(points)
        return {p: time_of(p) for p in points}

    finalists = PatternStrategy().search(geometry, measure, SearchBudget(), lambda line: None)
    assert len(asked) == len(set(asked)), "a point was measured twice"
    return min(time_of(p) for p in finalists), len(asked) / geometry.space_size


@pytest.mark.parametrize("transposed", [False, True], ids=["as-recorded", "transposed"])
def test_pattern_picks_the_h200_matmuls_best(transposed):
    geometry = SearchGeometry(PARAMS, (VALUES, VALUES), tuple(PROFILES), PROBES)
    picked, share = replay_pattern(geometry, lambda p: table_time(p, transposed))
    assert picked / best_time() <= PATTERN_RATIO
    assert share <= 0.25


@pytest.mark.parametrize("name", ["softmax", "elementwise"])
def test_pattern_picks_within_a_percent_on_the_h200_vector_kernels(name):
    case = VECTOR["kernels"][name]
    param, values, table = case["param"], case["values"], case["table_ms"]
    geometry = SearchGeometry((param,), (tuple(values),), tuple(VECTOR_PROFILES), VECTOR_PROBES)

    def time_of(point):
        return table[geometry.label(point)]

    picked, share = replay_pattern(geometry, time_of)
    assert picked / min(table.values()) <= PATTERN_RATIO
    assert share <= 0.2


QUALITY = json.loads((Path(__file__).parent / "data" / "h200_search_quality_landscapes.json").read_text())
#: What pattern measured of each of bench/search_quality.py's spaces on the H200, as ceilings.
QUALITY_SHARES = {"matmul": 0.10, "reduction": 0.15, "softmax": 0.15}


@pytest.mark.parametrize("name", ["matmul", "reduction", "softmax"])
def test_pattern_finds_the_best_of_bench_search_qualitys_h200_tables(name):
    """Noise-free, the walk reaches each table's best point; on the H200 the misses were noise."""
    case = QUALITY["kernels"][name]
    profiles, probes = (
        (PROFILES, PROBES) if case["family"] == "nvidia-matrix" else (VECTOR_PROFILES, VECTOR_PROBES)
    )
    axes = tuple(tuple(values) for values in case["values"])
    geometry = SearchGeometry(tuple(case["params"]), axes, tuple(profiles), probes)
    table = case["table_ms"]
    assert {geometry.label(point) for point in geometry.points()} == set(table)

    def time_of(point):
        value = table[geometry.label(point)]
        return math.inf if value is None else value

    picked, share = replay_pattern(geometry, time_of)
    assert picked == min(v for v in table.values() if v is not None)
    assert share <= QUALITY_SHARES[name]


def load_search_replay():
    spec = importlib.util.spec_from_file_location("search_replay", ROOT / "bench" / "search_replay.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROOT = Path(__file__).resolve().parent.parent
QUALITY_9 = json.loads(
    (ROOT / "tests" / "data" / "h200_search_quality_landscapes_2026-12-01_0aed052.json").read_text()
)


@pytest.mark.parametrize(("name", "within"), [("matmul", 0.0), ("reduction", 0.01), ("softmax", 0.0)])
def test_pattern_within_its_cap_on_the_0aed052_tables(name, within):
    """The tables recorded at `0aed052` (the vector kernels' the mean of three oracle processes), noise-free.

    At the 15% cap the row sum's walk ends on the 16-warp ridge one stage
    count from its best (0.55%, inside the oracle's 1.6% spread); the
    others reach their best.
    """
    run = load_search_replay().replay(
        QUALITY_9["kernels"][name], "pattern", noise=0.0, final_noise=0.0, seed=0, effort="default"
    )
    assert run["regret"] <= within
    assert run["share"] <= 0.15


QUALITY_10 = json.loads(
    (ROOT / "tests" / "data" / "h200_search_quality_landscapes_2026-12-01_03f108d.json").read_text()
)


@pytest.mark.parametrize("name", ["matmul", "reduction", "softmax"])
def test_pattern_meets_issue_22s_targets_on_the_03f108d_tables_under_noise(name):
    """The tables recorded at `03f108d` (each point timed as its program), at the H200's 0.5% noise, 20 seeds.

    On the H200 the five runs of each kernel lost at most 0.40%; so do
    these replays, within the 15% cap.
    """
    replay = load_search_replay().replay
    runs = [
        replay(
            QUALITY_10["kernels"][name],
            "pattern",
            noise=0.005,
            final_noise=0.005 / 3,
            seed=seed,
            effort="default",
        )
        for seed in range(20)
    ]
    assert max(run["regret"] for run in runs) <= 0.01
    assert max(run["share"] for run in runs) <= 0.15


def test_the_03f108d_tables_give_twins_one_time():
    """Points of one program (the row sum's stage counts) have one time; the matmul's stages do not."""
    for name, kernel in QUALITY_10["kernels"].items():
        times: dict[str, set[float]] = {}
        for label, program in kernel["programs"].items():
            times.setdefault(program, set()).add(kernel["table_ms"][label])
        assert all(len(seen) == 1 for seen in times.values()), name
    assert len(set(QUALITY_10["kernels"]["reduction"]["programs"].values())) == 40
