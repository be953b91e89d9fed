"""``kerneltune portfolio``: a few configs for every stored key, with the loss they cost, stated two ways.

The tuned function runs on a fake clock, so each (key, config) takes exactly
the time :data:`FACTORS` gives it: the records are written by real tunings.
Over keys 1..7 and configs 0..5, with ``F`` a key's best:

    key   c0     c1    c2    c3    c4    c5
    1-3   1.2F   F     2F    1.3F  3F    2.5F
    4-6   1.15F  2F    F     1.3F  3F    2.5F
    7     1.1F   1.5F  1.4F  F     3F    fails

so with no tolerance the best single config is c0 (worst loss 20 %), the
best two {c0, c1} (15 %), the best three {c1, c2, c3} (0 %), where adding
configs greedily would keep c0 and stop at 10 %.
"""

from __future__ import annotations

import collections
import json
import math
import random
from typing import Any

import pytest
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import CandidateFailedWarning
from kerneltune.core.driving import TimeTable, choose_portfolio, leave_one_out
from kerneltune.core.values.records import NOT_MEASURED
from tuning_doubles import FakeClock, clock_plugin, install_session, record_files, stored_records

from triton_dist.tune import autotune

# The tuned function returns which config ran: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

FACTORS = {
    **{m: (1.2, 1.0, 2.0, 1.3, 3.0, 2.5) for m in (1, 2, 3)},
    **{m: (1.15, 2.0, 1.0, 1.3, 3.0, 2.5) for m in (4, 5, 6)},
    7: (1.1, 1.5, 1.4, 1.0, 3.0, math.inf),
}
CONFIGS = range(6)


def best_of(m: int) -> float:
    """Key ``m``'s best time in ms: keys differ, so losses are relative to each key's own best."""
    return 1.0 + m / 4


class Swept:
    """The tuned function ``swept`` on a fake clock, and the configs each call ran."""

    def __init__(self, monkeypatch) -> None:
        self.clock = FakeClock()
        install_session(monkeypatch, extra=(clock_plugin(self.clock),), timer="scripted", warmup=0, repeat=1)
        self.runs: collections.Counter[int] = collections.Counter()
        self.factors = dict(FACTORS)

        def swept(m: int, n: int) -> int:
            self.runs[n] += 1
            factor = self.factors[m][n]
            if math.isinf(factor):
                raise RuntimeError("out of shared memory")
            self.clock.advance(best_of(m) * factor)
            return n

        self.tuned = autotune(config_space=[{"n": n} for n in CONFIGS], key_fn=lambda m: m)(swept)

    def tune(self, *keys: int) -> None:
        for m in keys:
            if any(math.isinf(f) for f in self.factors[m]):
                with pytest.warns(CandidateFailedWarning, match="out of shared memory"):
                    self.tuned(m)
            else:
                self.tuned(m)

    def measured(self) -> set[int]:
        """The configs run since the last call (the final run with the pick included)."""
        seen = set(self.runs)
        self.runs.clear()
        return seen


@pytest.fixture
def swept(monkeypatch) -> Swept:
    tuned = Swept(monkeypatch)
    tuned.tune(*FACTORS)
    tuned.measured()
    return tuned


def factors_table() -> TimeTable:
    """:data:`FACTORS` as the table the command builds from the records, for the choice alone."""
    return TimeTable(
        keys=tuple(FACTORS), times=tuple(tuple(best_of(m) * f for f in FACTORS[m]) for m in FACTORS)
    )


def run(*arguments: str):
    return CliRunner().invoke(cli.main, ["portfolio", *arguments], catch_exceptions=False)


def chosen(*arguments: str) -> dict[str, Any]:
    result = run("swept", "--json", *arguments)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# -- the choice --------------------------------------------------------------------------------


def test_the_exact_optimum_for_one_two_and_three_configs(swept):
    one, two, three = (chosen("--configs", str(k), "--tolerance", "0") for k in (1, 2, 3))
    assert [c["index"] for c in one["configs"]] == [0]
    assert one["worst"] == pytest.approx(20.0)
    assert [c["index"] for c in two["configs"]] == [0, 1]  # c0 serves four keys, c1 the other three
    assert two["worst"] == pytest.approx(15.0)
    assert [c["index"] for c in three["configs"]] == [1, 2, 3]
    assert three["worst"] == pytest.approx(0.0)
    assert three["within_tolerance"] and not two["within_tolerance"]
    assert three["method"].startswith(
        "exact: every set of at most 3 of the 4 configs"
    )  # c3 beats c4 and c5 on every key
    by_key = {row["key"]: row for row in three["keys"]}
    assert [by_key[m]["served_by"] for m in FACTORS] == [1, 1, 1, 2, 2, 2, 3]
    assert by_key[5]["best_ms"] == pytest.approx(best_of(5))


def test_configs_beyond_the_tolerance_are_added_while_they_lower_the_loss():
    # Within 20 % one config does, within 15 % two; allowed three, it takes the three that serve
    # every key exactly, and says how many the tolerance needed.
    table = factors_table()
    for tolerance, needed in ((0.20, 1), (0.15, 2), (0.0, 3), (-1.0, None)):
        choice = choose_portfolio(table, 3, tolerance)
        assert (sorted(choice.configs), choice.needed, choice.worst) == ([1, 2, 3], needed, 0.0)
    # Two keys a single config serves exactly: a second config lowers nothing and is not added.
    table = TimeTable(keys=(1, 2), times=((1.0, 2.0, 1.5), (2.0, 4.0, 3.0)))
    for exact in (True, False):
        assert choose_portfolio(table, 3, 0.0, exact=exact).configs == (0,)
    # Each key's best config is the best of no other key: K = 2 comes to 10 %, K = 3 serves all.
    table = TimeTable(
        keys=(1, 2, 3), times=((2.0, 2.0, 2.0, 1.0), (1.0, 1.1, 1.2, 9.0), (1.2, 1.0, 1.2, 9.0))
    )
    for exact in (True, False):
        two, three = (choose_portfolio(table, k, 0.05, exact=exact) for k in (2, 3))
        assert (sorted(two.configs), two.worst, two.needed) == ([1, 3], pytest.approx(0.1), None)
        assert (sorted(three.configs), three.worst, three.needed) == ([0, 1, 3], 0.0, 3)


def test_greedy_is_stated_and_can_miss_what_exact_finds():
    table = factors_table()
    greedy = choose_portfolio(table, 3, 0.0, exact=False)
    assert sorted(greedy.configs) == [0, 1, 2] and greedy.worst == pytest.approx(0.10)
    assert greedy.method.startswith("greedy: configs added one at a time")
    assert choose_portfolio(table, 3, 0.0).worst == pytest.approx(0.0)


def test_leave_one_out_is_the_loss_of_each_key_under_the_choice_made_without_it(swept):
    # By hand, two configs, no tolerance. Without key 7 the rest are served exactly by {c1, c2},
    # under which key 7 takes 1.4F: 40 %. Without one of keys 1-3 the choice stays {c0, c1}, which
    # serves the key left out by c1 exactly: 0 %. Without one of keys 4-6, it stays {c0, c1} too,
    # and c0 serves that key at 1.15F: 15 %.
    by_hand = {1: 0.0, 2: 0.0, 3: 0.0, 4: 15.0, 5: 15.0, 6: 15.0, 7: 40.0}
    report = chosen("--configs", "2", "--tolerance", "0")
    assert {row["key"]: row["left_out_loss"] for row in report["keys"]} == pytest.approx(by_hand)
    assert report["leave_one_out"] == {"worst": pytest.approx(40.0), "within_tolerance": 3, "keys": 7}
    assert report["worst"] == pytest.approx(
        15.0
    )  # the stored keys alone look better than an unseen key fares

    table = TimeTable(keys=(1, 2), times=((1.0, 2.0), (3.0, 1.0)))
    # Without key 1, c1 serves key 2 exactly and key 1 at 2.0 / 1.0: 100 %; without key 2, c0 serves
    # key 2 at 3.0 / 1.0: 200 %.
    assert leave_one_out(table, choose_portfolio(table, 1, 0.0), 1, 0.0) == (1.0, 2.0)
    assert (
        leave_one_out(TimeTable(keys=(1,), times=((1.0, 2.0),)), choose_portfolio(table, 1, 0.0), 1, 0.0)
        is None
    )


@pytest.mark.parametrize("exact", [True, False])
def test_leave_one_out_is_the_choice_made_on_the_table_without_the_key(exact):
    # Tables full of ties and failures, where which configs are beaten everywhere depends on the keys.
    rng = random.Random(2)
    for _ in range(150):
        configs, keys = rng.randint(2, 8), rng.randint(2, 6)
        values = [rng.uniform(1, 2) for _ in range(3)]
        times = [[rng.choice([math.inf, *values]) for _ in range(configs)] for _ in range(keys)]
        times = [row if any(map(math.isfinite, row)) else [1.0, *row[1:]] for row in times]
        table = TimeTable(keys=tuple(range(keys)), times=tuple(map(tuple, times)))
        most, tolerance = rng.randint(1, 4), rng.choice([0.0, 0.05, 0.2])
        estimates = leave_one_out(
            table, choose_portfolio(table, most, tolerance, exact=exact), most, tolerance
        )
        by_hand = []
        for out, row in enumerate(times):
            rest = [r for k, r in enumerate(times) if k != out]
            without = TimeTable(keys=tuple(range(keys - 1)), times=tuple(map(tuple, rest)))
            chosen = choose_portfolio(without, most, tolerance, exact=exact).configs
            by_hand.append(min(row[c] for c in chosen) / min(row) - 1)
        assert list(estimates or ()) == by_hand


def test_json_shape(swept):
    report = chosen("--configs", "3")
    assert {"configs", "worst", "leave_one_out", "method", "keys", "tolerance", "within_tolerance"} <= set(
        report
    )
    assert report["tolerance"] == 3.0 and report["most"] == 3 and report["candidates"] == 6
    for config in report["configs"]:
        assert set(config) == {"index", "fingerprint", "label", "values", "serves"}
        assert config["values"] == {"n": config["index"]}  # each is some key's pick
    assert set(report["keys"][0]) == {"key", "key_text", "best_ms", "loss", "served_by", "left_out_loss"}
    assert report["stored"] is None and report["left_out"] == []


def test_the_report_states_both_losses_and_how_close_k_configs_get(swept):
    result = run("swept", "--configs", "2", "--tolerance", "5")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "portfolio of swept: 2 of 6 configs, from 7 stored key(s) tuned in full" in text
    assert "worst loss over the stored keys: 15.00 % (key 4), no 2 configs keep every key within 5 %" in text
    assert "worst loss with each key left out of the choice: 40.00 %; 3 of 7 key(s) within 5 %" in text


# -- storing, and a new key measuring only the portfolio ------------------------------------------


def test_a_stored_portfolio_is_all_a_new_key_measures(swept, isolated):
    result = run("swept", "--configs", "3", "--tolerance", "0", "--store")
    assert result.exit_code == 0, result.output
    stored = isolated / "swept" / "portfolio.json"
    assert f"stored as the portfolio of swept in {stored}" in result.stdout
    swept.factors[8] = (1.2, 1.1, 1.0, 1.3, 0.5, 2.5)  # c4 would win, but is not in the portfolio
    swept.tune(8)
    assert swept.measured() == {1, 2, 3}
    (record,) = [r for r in stored_records(isolated, "swept") if r.get("key") == 8]
    assert record["best"]["index"] == 2
    assert [row["error"] for row in record["candidates"] if row["index"] not in (1, 2, 3)] == [
        NOT_MEASURED
    ] * 3
    assert record["warm_start"] == {"portfolio": 3}
    listed = json.loads(CliRunner().invoke(cli.main, ["cache", "list", "--json"]).stdout)
    (digest,) = [row["digest"] for row in listed if row["key"] == 8]
    shown = CliRunner().invoke(cli.main, ["cache", "show", digest])
    assert "from the stored portfolio's 3 config(s): 3 of 6 measured" in shown.stdout, shown.output

    # The portfolio is no record: the listing holds eight, and names no damaged file.
    listed = CliRunner().invoke(cli.main, ["cache", "list", "--json"])
    assert listed.exit_code == 0 and listed.stderr == ""
    assert sorted(row["key"] for row in json.loads(listed.stdout)) == list(range(1, 9))
    # Key 8 was measured in part, so a new choice leaves it out, and says so.
    assert "1 key(s) not tuned in full" in chosen()["left_out"][0]


def test_a_new_key_whose_portfolio_configs_all_fail_measures_the_rest(swept):
    assert run("swept", "--configs", "1", "--tolerance", "50", "--store").exit_code == 0
    swept.factors[9] = (math.inf, 1.0, 1.2, 1.3, 3.0, 2.5)
    swept.tune(9)
    assert swept.measured() == set(CONFIGS)


def test_a_damaged_stored_portfolio_is_warned_about_and_tuned_without(swept, isolated):
    (isolated / "swept" / "portfolio.json").write_text('{"kind": "kerneltune portfolio", "schema": 1}')
    swept.factors[8] = FACTORS[1]
    with pytest.warns(RuntimeWarning, match="the stored portfolio is damaged"):
        swept.tune(8)
    assert swept.measured() == set(CONFIGS)


def test_cache_clear_removes_the_portfolio_with_the_records(swept, isolated):
    assert run("swept", "--store").exit_code == 0
    cleared = CliRunner().invoke(cli.main, ["cache", "clear", "swept", "--yes"])
    assert cleared.exit_code == 0, cleared.output
    assert not (isolated / "swept" / "portfolio.json").exists()
    assert [p.name for p in (isolated / "swept").iterdir()] == ["tune-rank0.log"]  # the tuning log stays


def test_the_snippet_lists_the_configs_and_names_one_without_values(swept):
    three = run("swept", "--configs", "3", "--tolerance", "0", "--snippet")
    assert three.exit_code == 0, three.output
    assert three.stdout.splitlines()[1:] == [
        "config_space=[",
        "    {'n': 1},",
        "    {'n': 2},",
        "    {'n': 3},",
        "]",
    ]
    assert "@autotune(config_space=[...], ...)" in three.stdout.splitlines()[0]
    two = run("swept", "--configs", "2", "--tolerance", "0", "--snippet")
    assert "# n=<0>: no stored key picked it, so no record kept its values: add it by hand" in two.stdout
    assert two.stdout.splitlines()[-3:] == ["config_space=[", "    {'n': 1},", "]"]


# -- hostile inputs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--configs", "0"), "0 is not a number of configs; give 1 or more"),
        (("--configs", "-2"), "-2 is not a number of configs; give 1 or more"),
        (("--tolerance", "-1"), "-1.0 is not a tolerance; give a percentage >= 0"),
        (("--tolerance", "nan"), "nan is not a tolerance; give a percentage >= 0"),
        (("--json", "--snippet"), "give one of them"),
    ],
)
def test_bad_options_are_usage_errors(swept, arguments, message):
    result = CliRunner().invoke(cli.main, ["portfolio", "swept", *arguments])
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_function_never_tuned(swept, isolated):
    result = CliRunner().invoke(cli.main, ["portfolio", "nothing"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: no readable records of nothing in {isolated}: tune it first, or see `kerneltune cache "
        "list` for the functions stored there"
    )


def test_no_stored_times_when_no_key_was_tuned_in_full(monkeypatch, isolated):
    tuned = Swept(monkeypatch)
    tuned.tune(1)
    assert run("swept", "--configs", "1", "--store").exit_code == 0
    tuned.tune(2, 3)  # each measures the portfolio's one config
    (full,) = [p for p in record_files(isolated, "swept") if json.loads(p.read_text()).get("key") == 1]
    full.unlink()
    result = CliRunner().invoke(cli.main, ["portfolio", "swept"])
    assert result.exit_code == 1
    assert "no stored key has a time or a failure for every one of its 6 configs" in result.stderr
    assert "2 key(s) not tuned in full" in result.stderr


def test_a_corrupt_record_is_skipped_with_a_note(swept, isolated):
    (damaged,) = [p for p in record_files(isolated, "swept") if json.loads(p.read_text()).get("key") == 7]
    damaged.write_text("{not json")
    result = CliRunner().invoke(
        cli.main, ["portfolio", "swept", "--json", "--configs", "3", "--tolerance", "0"]
    )
    assert result.exit_code == 0
    assert f"kerneltune: skipping {damaged}: " in result.stderr
    report = json.loads(result.stdout)
    assert len(report["keys"]) == 6
    assert [c["index"] for c in report["configs"]] == [1, 2]  # without key 7, two configs serve exactly


def test_a_store_into_a_cache_without_files_is_refused(swept, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CACHE", "memory")
    result = CliRunner().invoke(cli.main, ["portfolio", "swept", "--store"])
    assert result.exit_code == 1
    assert "cache 'memory' keeps no files" in result.stderr
