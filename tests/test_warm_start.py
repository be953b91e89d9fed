"""Warm start: a new key measures the configs that won for the stored keys nearest to it (opt-in).

The tuned function's configs are ``n`` in 1..8 and a key ``m`` is fastest
with ``n = log2(m) - 3`` (64 with 3, 128 with 4, ...), each step away
costing one more millisecond on a fake clock: the landscape drifts with the
key, as a matmul's does with M.
"""

from __future__ import annotations

import collections
import functools
import json
import math
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kernels
import pytest
import torch
import triton
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import Session, Settings, add_plugin, hookimpl, remove_plugin
from kerneltune.core.driving import Space, Tuner, encode_key
from kerneltune.core.machine import timing, warm_start
from kerneltune.core.machine import tuner as tuner_module
from kerneltune.core.machine.schedule import Schedule
from kerneltune.core.machine.warm_start import (
    config_distance,
    default_distance,
    growth,
    nearest,
    warm_candidates,
)
from kerneltune.core.plugin_system.seam import PluginFaultWarning
from kerneltune.core.values.keys import describe
from kerneltune.core.values.records import TuningRecord
from rank_doubles import ThreadGroup, plugin, run_ranks
from tuning_doubles import FakeClock, clock_plugin, install_session, stored_records

from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

NS = list(range(1, 9))
#: a warm start's screen: untimed and timed runs of each kept config.
SCREEN_WARMUP, SCREEN_REPEAT = Schedule(0, 1).screen_warmup, Schedule(0, 1).screen_repeat


def cost(m: int, n: int) -> float:
    return 1.0 + abs(math.log2(m) - 3 - n)


class Landscape:
    """The tuned function over ``NS``, and the configs it ran per call of a test."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[int] = []

    def tuner(self, **options: Any) -> Callable[..., int]:
        def swept(m: int, n: int) -> int:
            self.calls.append(n)
            self.clock.advance(cost(m, n))
            return n

        return autotune(config_space=[{"n": n} for n in NS], key_fn=lambda m: m, **options)(swept)

    def measured(self) -> set[int]:
        """The configs run since the last call, the final run with the pick included."""
        seen, self.calls = set(self.calls), []
        return seen


def landscape(monkeypatch, extra: tuple[object, ...] = (), **settings: Any) -> Landscape:
    clock = FakeClock()
    install_session(
        monkeypatch, extra=(clock_plugin(clock), *extra), timer="scripted", warmup=0, repeat=1, **settings
    )
    return Landscape(clock)


@pytest.fixture
def swept(monkeypatch):
    return landscape(monkeypatch)


def warm_record(cache: Path, m: int) -> dict[str, Any]:
    (record,) = [r for r in stored_records(cache, "swept") if r["key"] == m]
    return record


# -- the default distance and config closeness -------------------------------------------


def test_numeric_key_parts_count_on_a_log_scale_and_the_rest_must_match():
    def between(a: Any, b: Any) -> float:
        return default_distance(encode_key(a), encode_key(b))

    assert between(1024, 2048) == pytest.approx(between(8, 16), abs=0.2)
    assert between(1024, 2048) < between(1024, 4096)
    assert between((512, 4096, "bf16"), (1024, 4096, "bf16")) == pytest.approx(math.log2(1025 / 513))
    assert between((512, 1.5), (512, 3.0)) == pytest.approx(math.log2(4 / 2.5))
    assert between((512, "bf16"), (512, "fp16")) == math.inf
    assert between((512, True), (512, False)) == math.inf
    assert between((512, 4096), (512, 4096, 1)) == math.inf
    assert between(5, "5") == math.inf
    assert between((0, -4), (0, -4)) == 0.0


def test_sizes_and_dtypes_in_keys():
    near = default_distance(
        encode_key((torch.Size([64, 32]), torch.float16)), encode_key((torch.Size([128, 32]), torch.float16))
    )
    assert near == pytest.approx(math.log2(129 / 65))
    other = default_distance(
        encode_key((torch.Size([64]), torch.float16)), encode_key((torch.Size([64]), torch.bfloat16))
    )
    assert other == math.inf


def test_configs_closest_in_value_are_one_step_apart():
    base = {"BLOCK_M": 64, "BLOCK_N": 64, "layout": "row"}
    assert config_distance(base, {**base, "BLOCK_M": 128}) == pytest.approx(math.log2(129 / 65))
    assert config_distance(base, {**base, "layout": "col"}) == 1.0
    assert config_distance(base, {**base, "BLOCK_M": 128, "BLOCK_N": 128}) > config_distance(
        base, {**base, "BLOCK_M": 128}
    )


# -- off by default, three ways on --------------------------------------------------------


def test_warm_start_is_off_by_default(swept, isolated):
    swept.tuner()(64)
    swept.measured()
    swept.tuner()(128)
    assert swept.measured() == set(NS)
    assert warm_record(isolated, 128)["warm_start"] is None


def test_a_new_key_measures_the_nearest_keys_picks_and_neighbours_within_the_budget(swept, isolated):
    swept.tuner()(64)
    swept.measured()

    assert swept.tuner(warm_start="nearest", warm_start_budget=3)(128) == 4
    # 64's pick (3), then the best of its other times: 2 and 4 tie, both are taken.
    assert swept.measured() == {2, 3, 4}
    record = warm_record(isolated, 128)
    assert record["warm_start"] == {"from": 64, "distance": pytest.approx(math.log2(129 / 65))}
    assert [c["error"] for c in record["candidates"]].count("not measured") == len(NS) - 3
    assert record["finalists"] == [1, 2, 3]

    assert swept.tuner(warm_start="nearest")(128) == 4
    assert swept.measured() == {4}, "a warm-started key is a stored key like any other"


def test_keys_tuned_in_order_follow_the_drift_measuring_the_budget_each(swept, isolated):
    swept.tuner()(16)
    swept.measured()
    tuned = swept.tuner(warm_start="nearest")
    for m in (32, 64, 128, 256, 512, 1024):
        assert tuned(m) == math.log2(m) - 3
        assert len(swept.measured()) <= 5
    assert warm_record(isolated, 1024)["warm_start"]["from"] == 512


def test_a_sweep_parses_each_stored_record_once(swept, isolated, monkeypatch):
    parsed = []
    parse = warm_start._parse
    monkeypatch.setattr(warm_start, "_parse", lambda data: parsed.append(data) or parse(data))
    tuned = swept.tuner(warm_start="nearest")
    for m in (16, 32, 64, 128, 256, 512, 1024):
        tuned(m)
    # Each key's record is parsed by the next key's warm start, and read from memory by the later ones.
    assert sorted(data["key"] for data in parsed) == [16, 32, 64, 128, 256, 512]
    assert warm_record(isolated, 1024)["warm_start"]["from"] == 512


def test_a_warm_start_reads_the_candidates_of_the_nearest_keys_only(swept, isolated, monkeypatch):
    tuned = swept.tuner(warm_start="nearest")
    for m in (16, 32, 64, 128, 256, 512):
        tuned(m)
    read = []
    ranked = warm_start.ranked

    def reading(record, *rest):
        read.append(record.key)
        return ranked(record, *rest)

    monkeypatch.setattr(warm_start, "ranked", reading)
    tuned(1024)
    # Six keys stored; the nearest two give their evidence, and only theirs is read to find them.
    assert read[: warm_start.NEAREST_KEYS] == [512, 256]
    assert warm_record(isolated, 1024)["warm_start"]["from"] == 512
    assert 16 not in read and 32 not in read


def test_the_picks_of_both_nearest_keys_come_first(swept, isolated):
    tuned = swept.tuner()
    tuned(64)
    tuned(256)
    swept.measured()
    assert swept.tuner(warm_start="nearest", warm_start_budget=2)(128) == 3, "3 and 5 tie: the lower index"
    assert swept.measured() == {3, 5}, "64's pick and 256's pick: n=4, closer to either, waits its turn"


def test_the_environment_and_a_config_file_switch_it_on(monkeypatch, tmp_path, isolated):
    monkeypatch.setenv("KERNELTUNE_WARM_START", "nearest")
    monkeypatch.setenv("KERNELTUNE_WARM_START_BUDGET", "2")
    swept = landscape(monkeypatch)
    swept.tuner()(64)
    swept.measured()
    swept.tuner()(128)
    assert len(swept.measured()) == 2

    monkeypatch.delenv("KERNELTUNE_WARM_START")
    monkeypatch.delenv("KERNELTUNE_WARM_START_BUDGET")
    (tmp_path / "kerneltune.toml").write_text('warm_start = "nearest"\nwarm_start_budget = 4\n')
    swept = landscape(monkeypatch)
    swept.tuner()(256)
    assert len(swept.measured()) == 4
    swept.tuner(warm_start="off")(512)
    assert swept.measured() == set(NS), "the decorator's option wins over the settings"


def test_nothing_stored_nearby_is_a_full_tuning(swept, isolated):
    swept.tuner(warm_start="nearest")(64)
    assert swept.measured() == set(NS)

    @autotune(config_space=[{"n": n} for n in NS], key_fn=lambda m, dtype: (m, dtype), warm_start="nearest")
    def typed(m: int, dtype: str, n: int) -> int:
        swept.calls.append(n)
        swept.clock.advance(cost(m, n))
        return n

    typed(64, "bf16")
    swept.measured()
    typed(128, "fp16")
    assert swept.measured() == set(NS), "another dtype is no neighbour"

    swept.tuner(warm_start="nearest")(512)
    assert swept.measured() == set(NS), "64 is more than MAX_DISTANCE from 512: about 8x"
    swept.tuner(warm_start="nearest")(1024)
    assert len(swept.measured()) == 5, "512 is one step from 1024"


def test_a_budget_as_large_as_the_list_tunes_in_full(swept, isolated):
    swept.tuner()(64)
    swept.measured()
    swept.tuner(warm_start="nearest", warm_start_budget=len(NS))(128)
    assert swept.measured() == set(NS)
    assert warm_record(isolated, 128)["warm_start"] is None


def test_a_bad_option_is_refused_at_decoration():
    with pytest.raises(ValueError, match="warm_start must be one of off, nearest"):
        autotune(config_space=[{"n": 1}], key_fn=lambda m: m, warm_start="near")(lambda m, n: n)
    with pytest.raises(ValueError, match="warm_start_budget must be an integer >= 1"):
        autotune(config_space=[{"n": 1}], key_fn=lambda m: m, warm_start_budget=0)(lambda m, n: n)


# -- the distance hook ------------------------------------------------------------------------


def distance_plugin(answer: Callable[[Any, Any], float | None]) -> types.ModuleType:
    module = types.ModuleType("tests_key_distance")

    @hookimpl
    def kerneltune_key_distance(function, key, other):
        return answer(key, other)

    module.kerneltune_key_distance = kerneltune_key_distance
    return module


def test_a_plugin_replaces_the_distance(monkeypatch, isolated):
    # M below 100 and above it never share picks here; inside each side, the default decides.
    def split(key: Any, other: Any) -> float | None:
        return math.inf if (key < 100) != (other < 100) else None

    swept = landscape(monkeypatch, extra=(distance_plugin(split),))
    swept.tuner()(64)
    swept.measured()
    swept.tuner(warm_start="nearest")(128)
    assert swept.measured() == set(NS)
    swept.tuner(warm_start="nearest")(256)
    assert len(swept.measured()) == 5
    assert warm_record(isolated, 256)["warm_start"]["from"] == 128


def test_a_distance_that_is_not_one_is_warned_about_once_and_the_default_used(monkeypatch, isolated):
    swept = landscape(monkeypatch, extra=(distance_plugin(lambda key, other: -1.0),))
    swept.tuner()(64)
    with pytest.warns(PluginFaultWarning, match=r"kerneltune_key_distance returned -1\.0, not a number >= 0"):
        swept.tuner(warm_start="nearest")(128)
    assert warm_record(isolated, 128)["warm_start"]["from"] == 64


# -- choosing, in the engine's terms ----------------------------------------------------------


def tuned_records(tmp_path: Path, spaces: dict[int, list[int]]) -> tuple[Session, Space, list[TuningRecord]]:
    """Tune each key over its own list of ``n`` (one code: rows match by config), fully measured."""
    session = Session.create(Settings(reducer="local", cache="json", timer="wallclock", cache_dir=tmp_path))
    records = []
    for m, ns in spaces.items():
        tuner = Tuner(Space.build("work", [{"n": n} for n in ns], source="def work(m, n): ..."))
        with tuner.begin(session, m) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                tuning.record(candidate, [cost(m, candidate.config["n"])])
            tuning.finish()
        records += [TuningRecord.from_data(data) for data in tuner.records.values()]
    return session, Space.build("work", [{"n": n} for n in NS], source="def work(m, n): ..."), records


def test_choose_takes_the_nearest_pick_then_the_best_evidence(tmp_path):
    session, space, records = tuned_records(tmp_path, {64: NS, 512: NS})
    found = nearest(session, space, encode_key(128), records, "device")
    assert [n.record.key for n in found] == [64, 512]
    kept = tuple(range(len(NS)))
    # 64's pick n=3 first. Then by evidence, a stored time over its key's fastest, 10% worse per
    # step of distance (64 is 0.99 steps from 128, 512 1.99): 512's pick n=6 (1.2), n=2 and n=4
    # (2 at 64: 2.2), n=5 and n=7 (2 at 512: 2.4, the lower index first), n=1 (3.3), n=8 (3.6).
    # Both keys timed every config: nothing is left to explore.
    assert warm_candidates(space, kept, found, 6) == (2, 5, 1, 3, 4, 6)


def test_choose_explores_configs_the_nearest_key_never_timed(tmp_path):
    session, space, records = tuned_records(tmp_path, {64: [2, 3, 4]})
    found = nearest(session, space, encode_key(128), records, "device")
    # 64's pick n=3, its runner-up n=2 (tied with n=4: the lower index), then the two configs
    # 64 never timed closest in value to n=3: n=5, then n=6.
    assert warm_candidates(space, tuple(range(len(NS))), found, 4) == (2, 1, 4, 5)


def test_explored_configs_lie_the_way_the_key_moved(tmp_path):
    session, space, records = tuned_records(tmp_path, {64: [2, 3, 4]})
    kept = tuple(range(len(NS)))
    # 64 picked n=3 and timed n=2 and n=4 (tied: the lower index first). Of the configs it never
    # timed, a larger key explores the larger ones first (n=5, then n=6); a smaller key the smaller
    # ones (n=1, the only one), then the closest of the rest (n=5).
    larger, smaller = encode_key(128), encode_key(16)
    assert warm_candidates(space, kept, nearest(session, space, larger, records, "device"), 4, larger) == (
        2,
        1,
        4,
        5,
    )
    below = nearest(session, space, smaller, records, "device")
    assert warm_candidates(space, kept, below, 4, smaller) == (2, 1, 0, 4)
    assert warm_candidates(space, kept, below, 4) == (2, 1, 4, 5), "without the key: closeness alone"


def test_growth_sums_the_numbers_both_hold_on_a_log_scale():
    assert growth(encode_key((64, 4096)), encode_key((128, 4096))) == pytest.approx(math.log2(129 / 65))
    assert growth(encode_key((64, 2.0)), encode_key((32, 4.0))) == pytest.approx(
        math.log2(33 / 65) + math.log2(5 / 3)
    )
    assert growth(describe({"n": 4, "mode": "a"}), describe({"n": 2, "mode": "b"})) < 0
    assert growth(encode_key(("a",)), encode_key(("b",))) == 0.0
    assert growth(encode_key((True,)), encode_key((False,))) == 0.0, "flags are not sizes"


# -- ranks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [2, 3])
def test_ranks_with_different_caches_warm_start_alike_in_one_gather(tmp_path, size):
    # Rank 0 holds key 64 (pick n=3), the last rank key 512 (pick n=6), the others nothing.
    seeded = {0: 64, size - 1: 512}
    for rank, m in seeded.items():
        session = Session.create(
            Settings(reducer="local", cache="json", timer="wallclock", cache_dir=tmp_path / f"cache{rank}")
        )
        with Tuner(Space.build("work", [{"n": n} for n in NS], source="def work(m, n): ...")).begin(
            session, m
        ) as t:
            while (candidate := t.next_candidate()) is not None:
                t.record(candidate, [cost(m, candidate.config["n"])])
            t.finish()
    group = ThreadGroup(size)
    measured: dict[int, list[int]] = collections.defaultdict(list)

    def rank(r: int) -> tuple[int, Any]:
        session = Session.create(
            Settings(
                reducer="threads",
                cache="json",
                timer="wallclock",
                cache_dir=tmp_path / f"cache{r}",
                tie_rounds=0,
                warm_start="nearest",
                warm_start_budget=3,
            ),
            extra=(plugin,),
        )
        space = Space.build("work", [{"n": n} for n in NS], source="def work(m, n): ...")
        with Tuner(space).begin(session, 128, group=group.member(r)) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                measured[r].append(candidate.config["n"])
                tuning.record(candidate, [cost(128, candidate.config["n"])])
            best = tuning.finish()
        (record,) = [
            json.loads(p.read_text())
            for p in (tmp_path / f"cache{r}" / "work").glob("*.json")
            if json.loads(p.read_text()).get("key") == 128
        ]
        return best.config["n"], record["warm_start"]["from"]

    assert run_ranks(size, rank) == [(4, 64)] * size, "rank 0's start is everyone's"
    assert all(measured[r] == measured[0] for r in range(size))
    assert sorted(set(measured[0])) == [2, 3, 4]
    for counts in group.counts:
        # The votes; one max over the plan's first pass (had every config it measured failed,
        # all ranks would measure the rest of the list alike); REDUCE.
        assert counts == {"gather": 1, "max": 2, "barrier": len(measured[0])}


# -- the command ------------------------------------------------------------------------------


def test_report_and_show_say_where_a_warm_start_began(swept, isolated):
    swept.tuner()(64)
    swept.tuner(warm_start="nearest", warm_start_budget=3)(128)
    reported = CliRunner().invoke(cli.main, ["report", "swept"], catch_exceptions=False)
    assert reported.exit_code == 0
    block = next(
        b for b in reported.stdout.split("\n\n") if b.startswith("swept (128,)") or b.startswith("swept 128")
    )
    assert "warm-started from key 64 (distance 0.989): 3 of 8 measured" in block
    assert block.count("not measured") == 5
    listed = json.loads(CliRunner().invoke(cli.main, ["cache", "list", "--json"]).stdout)
    assert sorted(str(row["warm_start"]) for row in listed) == sorted(
        ["None", str({"from": 64, "distance": warm_record(isolated, 128)["warm_start"]["distance"]})]
    )


# -- the contextual tuner ---------------------------------------------------------------------


class Launches:
    """Observer: the candidates a contextual tuner launched while measuring, per key."""

    def __init__(self) -> None:
        self.labels: dict[Any, set[str]] = collections.defaultdict(set)

    @hookimpl
    def kerneltune_launch_measured(self, event: Any) -> None:
        self.labels[event.key].add(event.candidate.label)


def test_a_contextual_kernel_warm_starts_from_the_keys_it_tuned_in_this_process(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_WARM_START", "nearest")
    monkeypatch.setenv("KERNELTUNE_WARM_START_BUDGET", "3")
    launches = Launches()
    add_plugin(launches)
    try:
        configs = [
            triton.Config({"BLOCK": 64}, num_warps=w, num_stages=s) for w in (1, 2, 4, 8) for s in (1, 2)
        ]
        kernel = triton.autotune(configs=configs, key=["n"])(kernels.scale_kernel)

        @contextual_autotune(n_repeat=1, n_warmup=0)
        def run(x):
            y = torch.empty_like(x)
            kernel[(triton.cdiv(x.numel(), 64),)](x, y, 2.0, x.numel())
            return y

        for n in (64, 128):
            x = torch.randn(n, device=kernels.DEVICE)
            torch.testing.assert_close(run(x), 2.0 * x)
        first, second = ((n, "torch.float32", "torch.float32") for n in (64, 128))
        assert len(launches.labels[first]) == len(configs)
        assert len(launches.labels[second]) == 3
    finally:
        remove_plugin(launches)


def test_a_nearer_key_that_timed_none_of_the_candidates_gives_way(tmp_path):
    session = Session.create(
        Settings(reducer="local", cache="json", timer="wallclock", cache_dir=tmp_path, tie_rounds=0)
    )

    def tune(ns: list[int], m: int, **options: Any) -> list[int]:
        space = Space.build("work", [{"n": n} for n in ns], source="def work(m, n): ...")
        measured = []
        with Tuner(space).begin(session, m, **options) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                measured.append(candidate.config["n"])
                tuning.record(candidate, [cost(m, candidate.config["n"] % 100)])
            tuning.finish()
        return measured

    tune([101, 102, 103], 64)  # the same code, configs since replaced
    tune(NS, 512)
    measured = tune(NS, 128, warm_start="nearest", warm_start_budget=2)
    assert sorted(set(measured)) == [5, 6], "512's pick (6) and its runner-up; key 64 had none of these"
    records = [json.loads(path.read_text()) for path in (tmp_path / "work").glob("*.json")]
    (record,) = [r for r in records if r.get("key") == 128]  # beside them, the key index
    assert record["warm_start"]["from"] == 512


# -- keys and plans that used to break a warm start ---------------------------------------------


def test_a_key_number_no_float_holds_is_no_neighbour_and_breaks_nothing(swept, isolated):
    huge = 10**400
    assert default_distance(encode_key(huge), encode_key(64)) == math.inf
    assert default_distance(encode_key(huge), encode_key(huge)) == 0.0
    assert default_distance({"float": "0x1p+2000"}, encode_key(1.0)) == math.inf
    assert growth(encode_key((huge, 2)), encode_key((64, 4))) == pytest.approx(math.log2(5 / 3))
    tuned = swept.tuner(warm_start="nearest")
    assert tuned(huge) in NS  # stored with a key no float holds...
    tuned = swept.tuner(warm_start="nearest")
    assert tuned(64) == 3  # ...which a later warm start of another key passes over
    assert swept.tuner(warm_start="nearest")(huge) in NS


def test_a_distance_hook_that_raises_or_answers_past_a_float_is_skipped_with_a_warning(monkeypatch, isolated):
    class Distances:
        @hookimpl
        def kerneltune_key_distance(self, function, key, other):
            if key == 128:
                raise RuntimeError("no distance for you")
            return 10**400

    swept = landscape(monkeypatch, extra=(Distances(),))
    swept.tuner()(64)
    swept.tuner(warm_start="nearest")(96)  # 10**400 away: no neighbour, so a full tuning
    assert swept.measured() == set(NS)
    with pytest.warns(
        PluginFaultWarning, match=r"plugin .*Distances.* kerneltune_key_distance raised RuntimeError"
    ):
        assert swept.tuner(warm_start="nearest")(128) == 4
    record = warm_record(isolated, 128)
    assert record["warm_start"] is not None and record["warm_start"]["from"] == 96, "the default distance"


def test_a_warm_start_whose_configs_all_fail_measures_the_rest_of_the_list(monkeypatch, isolated, caplog):
    clock = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted", warmup=0, repeat=1)
    broken: set[int] = set()

    def swept(m: int, n: int) -> int:
        if n in broken:
            raise RuntimeError(f"n={n} runs out of memory")
        clock.advance(cost(m, n))
        return n

    def tuner():
        return autotune(config_space=[{"n": n} for n in NS], key_fn=lambda m: m, warm_start="nearest")(swept)

    assert tuner()(64) == 3
    broken.update(range(1, 8))  # all but n=8, which no warm start from 64 tries for 128
    with caplog.at_level("INFO", logger="kerneltune"), pytest.warns(Warning):
        assert tuner()(128) == 8
    assert "every candidate the plan measured failed" in caplog.text
    assert warm_record(isolated, 128)["best"]["index"] == 7


# -- a screened warm start ---------------------------------------------------------------------


def test_a_screen_times_every_config_briefly_and_finds_a_best_the_neighbours_never_picked(
    swept, isolated, caplog
):
    swept.tuner()(64)
    swept.measured()
    with caplog.at_level("INFO", logger="kerneltune"):
        assert swept.tuner(warm_start="screen", warm_start_budget=3)(256) == 5
    assert swept.measured() == set(NS), "the screen timed every config"
    record = warm_record(isolated, 256)
    where = record["warm_start"]
    assert (where["from"], where["screen"], where["lead"]) == (64, True, 2), "64's pick: n = 3, index 2"
    assert 4 in where["finalists"] and 2 in where["finalists"] and len(where["finalists"]) <= 3
    assert record["finalists"] == sorted(where["finalists"])
    samples = [len(row["samples_ms"]) for row in record["candidates"]]
    screened_only = set(range(len(NS))) - set(where["finalists"])
    assert all(samples[i] == SCREEN_REPEAT for i in screened_only), f"the screen's timed runs: {samples}"
    assert "screening all 8 kept candidates, then re-timing the fastest with its pick [2]" in caplog.text


class NotingTimer:
    """A timer on ``clock`` that can flush and hold, noting in ``steps`` which instance did what."""

    name = "noting"
    auto_priority = -100
    clock: FakeClock
    steps: list[tuple[str, int]]

    @classmethod
    def is_available(cls) -> bool:
        return True

    def __init__(self) -> None:
        self._samples: list[float] = []

    def flush(self) -> None:
        self.steps.append(("flush", id(self)))

    def hold(self, microseconds: float) -> bool:
        self.steps.append(("hold", id(self)))
        return True

    def sample(self, fn: Callable[[], object], *, before: Callable[[], object] | None = None) -> None:
        if before is not None:
            before()
        start = self.clock.now
        fn()
        self._samples.append(self.clock.now - start)

    def collect(self) -> list[float]:
        self.steps.append(("collect", id(self)))
        samples, self._samples = self._samples, []
        return samples


def test_a_screen_launches_every_config_before_it_waits_for_the_device_once(monkeypatch, isolated):
    clock, steps = FakeClock(), []
    noting = type("Noting", (NotingTimer,), {"clock": clock, "steps": steps})
    timers = types.SimpleNamespace(kerneltune_register_timers=hookimpl(lambda register: register(noting)))
    install_session(monkeypatch, extra=(timers,), timer="noting", warmup=0, repeat=1)

    def swept(m: int, n: int) -> int:
        steps.append(("run", n))
        clock.advance(cost(m, n))
        return n

    def tuner():
        return autotune(config_space=[{"n": n} for n in NS], key_fn=lambda m: m, warm_start="screen")(swept)

    assert tuner()(64) == 3
    steps.clear()
    assert tuner()(256) == 5
    first_wait = steps.index(next(step for step in steps if step[0] == "collect"))
    screened = [n for what, n in steps[:first_wait] if what == "run"]
    runs = SCREEN_WARMUP + SCREEN_REPEAT
    assert sorted(set(screened)) == NS and len(screened) == len(NS) * runs, "each config's runs, unwaited"
    devices = {who for what, who in steps[:first_wait] if what in ("flush", "hold")}
    assert len(devices) == 1, "one timer flushes and holds for the whole screen: one flush buffer"
    assert [what for what, _ in steps[:first_wait]].count("hold") == len(NS) * SCREEN_REPEAT, "all held"
    record = warm_record(isolated, 256)
    samples = [row["samples_ms"] for row in record["candidates"]]
    assert all(set(samples[n - 1]) == {cost(256, n)} for n in NS), f"each config its own samples: {samples}"


def noting_session(
    monkeypatch, timer: type[NotingTimer], repeat: int = 1
) -> Callable[[], Callable[..., int]]:
    """A session timed by ``timer``; returns a maker of screened warm-start tuners of ``swept``."""
    timers = types.SimpleNamespace(kerneltune_register_timers=hookimpl(lambda register: register(timer)))
    install_session(monkeypatch, extra=(timers,), timer="noting", warmup=0, repeat=repeat)

    def swept(m: int, n: int) -> int:
        timer.steps.append(("run", n))
        timer.clock.advance(cost(m, n))
        return n

    return lambda: autotune(config_space=[{"n": n} for n in NS], key_fn=lambda m: m, warm_start="screen")(
        swept
    )


def test_the_finalists_are_launched_as_one_batch_after_the_screen(monkeypatch, isolated):
    steps: list[tuple[str, int]] = []
    noting = type("Noting", (NotingTimer,), {"clock": FakeClock(), "steps": steps})
    tuner = noting_session(monkeypatch, noting)
    assert tuner()(64) == 3
    steps.clear()
    assert tuner()(256) == 5
    finalists = warm_record(isolated, 256)["warm_start"]["finalists"]
    assert len(finalists) >= 2
    phases = [what == "collect" for what, _ in steps]
    blocks = [waits for i, waits in enumerate(phases) if i == 0 or waits != phases[i - 1]]
    assert blocks == [False, True, False, True, False], (
        "the screen's runs, one wait, the finalists' runs, one wait, then the pick's own call"
    )
    second = phases.index(True) + phases[phases.index(True) :].index(False)
    retimed = [n for what, n in steps[second:] if what == "run"][:-1]
    assert sorted(set(retimed)) == [i + 1 for i in sorted(finalists)]
    assert len(retimed) == 2 * 2 * len(finalists), "two rounds of a warm-up and a timed run each"


@pytest.mark.parametrize(("repeat", "most"), [(4, 3), (10, 3), (10, None), (7, None)])
def test_a_finalist_takes_half_of_repeat_timed_runs_a_round_or_at_most_finalist_repeat(
    monkeypatch, isolated, repeat, most
):
    monkeypatch.setattr(tuner_module, "Schedule", functools.partial(Schedule, finalist_repeat=most))
    steps: list[tuple[str, int]] = []
    noting = type("Noting", (NotingTimer,), {"clock": FakeClock(), "steps": steps})
    tuner = noting_session(monkeypatch, noting, repeat=repeat)
    tuner()(64)
    steps.clear()
    assert tuner()(256) == 5
    finalists = warm_record(isolated, 256)["warm_start"]["finalists"]
    phases = [what == "collect" for what, _ in steps]
    second = phases.index(True) + phases[phases.index(True) :].index(False)
    retimed = collections.Counter(n for what, n in steps[second:] if what == "run")
    retimed[5] -= 1  # the pick's own call
    per_round = {(4, 3): 2, (10, 3): 3, (10, None): 5, (7, None): 4}[repeat, most]
    assert dict(retimed) == {i + 1: 2 * (1 + per_round) for i in finalists}, (
        "two rounds of a warm-up and those"
    )


class FlushTimedTimer(NotingTimer):
    """A :class:`NotingTimer` that knows its flush takes 60 us, and notes how long each hold is."""

    def hold(self, microseconds: float) -> bool:
        self.steps.append(("hold", round(microseconds)))
        return True

    def flush_microseconds(self) -> float | None:
        return 60.0


def test_in_a_batch_the_flush_counts_toward_the_hold(monkeypatch, isolated):
    steps: list[tuple[str, int]] = []
    timed_flush = type("FlushTimed", (FlushTimedTimer,), {"clock": FakeClock(), "steps": steps})
    tuner = noting_session(monkeypatch, timed_flush)
    monkeypatch.setattr(timing, "hold_microseconds", lambda host_us: 100.0)
    assert tuner()(64) == 3
    holds = [us for what, us in steps if what == "hold"]
    assert len(holds) >= len(NS) and set(holds) == {100}, "a full tuning holds every timed run in full"
    steps.clear()
    assert tuner()(256) == 5
    finalists = warm_record(isolated, 256)["warm_start"]["finalists"]
    holds = [us for what, us in steps if what == "hold"]
    assert len(holds) == len(NS) * SCREEN_REPEAT + 2 * len(finalists), "screen and finalists"
    assert set(holds) == {100 - 60}, "less the flush that follows it"
    steps.clear()
    monkeypatch.setattr(timing, "hold_microseconds", lambda host_us: 50.0)
    assert tuner()(1024) == 7
    asked = [what for what, _ in steps]
    assert "hold" not in asked and asked.count("flush") >= len(NS) * SCREEN_REPEAT, "the flush outlasts it"


def test_a_config_that_raises_in_the_screen_fails_alone(monkeypatch, isolated):
    swept = landscape(monkeypatch)
    assert swept.tuner()(64) == 3
    real = swept.clock.advance

    def advance(ms: float) -> None:
        if swept.calls and swept.calls[-1] == 4:
            raise RuntimeError("n=4 runs out of memory at m=256")
        real(ms)

    monkeypatch.setattr(swept.clock, "advance", advance)
    with pytest.warns(Warning, match="runs out of memory"):
        assert swept.tuner(warm_start="screen")(256) == 5
    rows = warm_record(isolated, 256)["candidates"]
    assert [len(row["samples_ms"]) > 0 for row in rows] == [n != 4 for n in NS]


def test_a_screen_with_nothing_stored_nearby_is_a_full_tuning(swept, isolated):
    swept.tuner()(16)
    swept.measured()
    assert swept.tuner(warm_start="screen")(4096) == 9 - 1
    assert warm_record(isolated, 4096)["warm_start"] is None


def test_screen_finalists_take_the_fastest_the_noise_cannot_part_and_the_lead():
    from kerneltune.core.machine.ties import Finalists
    from kerneltune.core.machine.warm_start import screen_finalists

    times = (5.0, 1.0, 1.01, 3.0, math.inf, 2.0)
    chosen = screen_finalists(Finalists((1, 2), (), 0.01, times), lead=3, budget=5)
    assert chosen.indices == (1, 2, 3)
    assert screen_finalists(Finalists((), (), 0.0, times), lead=None, budget=5).indices == (1, 2)
    # A budget too small for all: the lead keeps its place at the end.
    assert screen_finalists(Finalists((1, 2, 5), (), 0.0, times), lead=0, budget=2).indices == (1, 0)
    assert screen_finalists(Finalists((), (), 0.0, times), lead=4, budget=5).indices == (1, 2), "lead failed"
