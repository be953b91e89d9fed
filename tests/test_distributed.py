"""Multi-rank tuning over real torch.distributed: 2 and 4 ranks, one process each.

The ranks run tests/multirank_worker.py, every scenario in one start per world
size (starting processes is the slow part); each test below checks one
scenario's outcomes on every rank. Collectives give up after the worker's
group timeout and the processes are killed after :data:`JOIN_TIMEOUT_S`, so a
hang fails the tests instead of blocking the run.

gloo on CPU by default. On a machine with GPUs, the same suite runs over NCCL,
one process per GPU (the 4-rank tests need 4 GPUs and are skipped with fewer)::

    KERNELTUNE_TEST_BACKEND=nccl python -m pytest -m dist tests/test_distributed.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

pytestmark = pytest.mark.dist

BACKEND = os.environ.get("KERNELTUNE_TEST_BACKEND", "gloo")
WORKER = Path(__file__).with_name("multirank_worker.py")
JOIN_TIMEOUT_S = 60
# Well under the worker's 30 s group timeout: an agreement error must come at once.
PROMPT_S = 10
SLOW_MS = 40.0  # as in the worker
FAST_MS = 5.0

SCENARIOS = [
    "slowest_rank_decides",
    "sharded",
    "verbose_under_max",
    "counts_per_tuning",
    "disk_hit_on_one_rank",
    "tune_switches",
    "prune_differs",
    "key_fails_on_one_rank",
    "key_unusable_on_one_rank",
    "candidate_fails_on_one_rank",
    "wrong_on_one_rank",
    "host_function_with_all_reduce",
    "wrong_group",
]
SCENARIOS_OF_4 = [*SCENARIOS, "subgroups_tune_apart"]


def _unavailable(world: int) -> str | None:
    if not dist.is_available():
        return "torch.distributed is not available"
    if BACKEND == "gloo" and not dist.is_gloo_available():
        return "gloo is not available"
    if BACKEND == "nccl" and torch.cuda.device_count() < world:
        return f"NCCL needs {world} GPUs, found {torch.cuda.device_count()}"
    return None


def spawn(world: int, scenarios: list[str], run_dir: Path, worker: Path = WORKER) -> list[dict[str, Any]]:
    """Run ``scenarios`` of ``worker`` on ``world`` fresh processes; each rank's outcomes by scenario."""
    config = run_dir / "kerneltune.toml"
    # Host-side sleeps are what the scenarios time, on GPUs too; a few runs suffice.
    # The scenarios count collectives and calls, so near ties are not re-timed and host
    # functions are not run once more for COMPILE (which they would be on a GPU machine).
    # The scenarios' functions return which config ran, on purpose: outputs are checked
    # only where a scenario turns the check on.
    config.write_text(
        'timer = "wallclock"\nwarmup = 1\nrepeat = 3\ntie_rounds = 0\nprecompile = false\nrecheck = false\n'
        "check_outputs = false\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELTUNE_", "TRITON_DIST_AUTOTUNE_"))}
    env |= {
        "KERNELTUNE_CONFIG": str(config),
        "KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD": "1",
        "TRITON_DIST_AUTOTUNE_CACHE_DIR": str(run_dir / "cache"),
        "OMP_NUM_THREADS": "1",
    }
    if BACKEND == "gloo":
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if BACKEND == "nccl":
        # One host: bootstrap over loopback. Nothing here needs NVLink multicast, and on
        # shared GPU hosts it must stay off.
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        env.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    names = ",".join(scenarios)
    procs: list[subprocess.Popen[bytes]] = []
    merged = subprocess.STDOUT
    hung = False
    try:
        for rank in range(world):
            home = run_dir / f"rank{rank}"
            home.mkdir()
            command = [sys.executable, str(worker), str(rank), str(world), str(run_dir), BACKEND, names]
            with (run_dir / f"rank{rank}.out").open("wb") as out:
                procs.append(subprocess.Popen(command, cwd=home, env=env, stdout=out, stderr=merged))
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for proc in procs:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        hung = True
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    codes = [proc.returncode for proc in procs]
    if hung or any(codes):
        tails = "\n".join(
            f"--- rank {rank} (exit {code}):\n"
            + (run_dir / f"rank{rank}.out").read_text(errors="replace")[-3000:]
            for rank, code in enumerate(codes)
        )
        state = f"killed after {JOIN_TIMEOUT_S} s" if hung else "failed"
        raise AssertionError(f"{world} ranks over {BACKEND} {state}:\n{tails}")
    return [json.loads((run_dir / f"rank{rank}.json").read_text()) for rank in range(world)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``runs(world)``: every rank's outcomes, from one start of ``world`` processes."""
    done: dict[int, Any] = {}

    def get(world: int) -> list[dict[str, Any]]:
        reason = _unavailable(world)
        if reason:
            pytest.skip(reason)
        if world not in done:
            scenarios = SCENARIOS_OF_4 if world == 4 else SCENARIOS
            try:
                done[world] = spawn(world, scenarios, tmp_path_factory.mktemp(f"{BACKEND}-{world}-ranks"))
            except AssertionError as exc:
                done[world] = exc
        if isinstance(done[world], AssertionError):
            raise done[world]
        return done[world]

    return get


def values(outcomes: list[dict[str, Any]], scenario: str) -> list[Any]:
    """Each rank's result of ``scenario``; a rank that raised fails the test with its error."""
    errors = {r: o[scenario] for r, o in enumerate(outcomes) if "error" in o[scenario]}
    assert not errors, f"{scenario} raised: {errors}"
    return [o[scenario]["value"] for o in outcomes]


def errors(outcomes: list[dict[str, Any]], scenario: str) -> list[dict[str, Any]]:
    """Each rank's raised error of ``scenario``; a rank that did not raise fails the test."""
    missing = {r: o[scenario] for r, o in enumerate(outcomes) if "error" not in o[scenario]}
    assert not missing, f"{scenario} did not raise on some ranks: {missing}"
    return [o[scenario] for o in outcomes]


def assert_prompt_error(raised: dict[str, Any], kind: str, *fragments: str) -> None:
    assert raised["error"] == kind, raised
    for fragment in fragments:
        assert fragment in raised["message"], raised
    assert raised["seconds"] < PROMPT_S, raised


WORLDS = pytest.mark.parametrize("world", [2, 4])


@WORLDS
def test_the_slowest_rank_decides_for_all(runs, world):
    results = values(runs(world), "slowest_rank_decides")
    for rank, result in enumerate(results):
        # Alone, each rank would pick the config fast on it; together they pick the
        # config whose slowest rank is fastest, having measured every config.
        assert result["own_argmin"] == rank
        assert result["pick"] == world
        assert result["measured"] == list(range(world + 1))
        assert result["collectives"] == {
            "counts": {"all_gather_object": 1, "all_gather": 1, "barrier": world + 1},
            "groups": ['"world"'],
        }
        # One writer for the shared cache directory; every rank keeps its own log file.
        assert result["stores"] == (1 if rank == 0 else 0)
        assert result["logs"] == [f"tune-rank{r}.log" for r in range(world)]
    # The stored times are the maxima: no rank's fast run survives the reduction.
    assert all(t >= SLOW_MS for t in results[0]["times"][:world])
    # Each rank's own time of each candidate is kept too, from the same one collective:
    # config c was fast on rank c alone, and each stored time is its slowest rank's.
    rank_times = results[0]["rank_times"]
    for c in range(world):
        assert len(rank_times[c]) == world
        assert FAST_MS <= rank_times[c][c] < SLOW_MS
        assert all(t >= SLOW_MS for r, t in enumerate(rank_times[c]) if r != c)
    assert all(t == max(row) for t, row in zip(results[0]["times"], rank_times, strict=True))


@WORLDS
def test_verbose_lines_give_each_candidates_time_on_its_slowest_rank(runs, world):
    results = values(runs(world), "verbose_under_max")
    times, rank_times = results[0]["times"], results[0]["rank_times"]
    for result in results:
        shown = result["verbose"]
        assert result["pick"] == world
        # Each rank's own lines say what it measured; then, from REDUCE, the time SELECT
        # compares for each candidate: its slowest rank's, with every rank's beside it.
        for c, agreed in enumerate(times):
            slowest = max(range(world), key=lambda r: (rank_times[c][r], -r))
            each = ", ".join(f"rank {r} {t:.4f}" for r, t in enumerate(rank_times[c]))
            line = (
                f"sleepy: [{c}] cfg=<{c}> (slowest of {world} ranks: rank {slowest}): "
                f"trimmed mean {agreed:.4f} ms; each rank (ms): {each}"
            )
            assert line in shown, shown
        slowest = max(range(world), key=lambda r: (rank_times[world][r], -r))
        picked = (
            f"picked [{world}] cfg=<{world}> at {times[world]:.4f} ms on its slowest rank, "
            f"rank {slowest} of {world} (tuned in "
        )
        assert any(picked in line for line in shown), shown


@WORLDS
def test_a_sharded_record_keeps_what_every_rank_measured_and_serves_the_next_tuning(runs, world):
    results = values(runs(world), "sharded")
    configs = 2 * world + 1
    owner = 3 % world
    for rank, result in enumerate(results):
        # Rank 0 wrote the record, though another rank measured its pick: it still loads.
        assert result["again"] == [3], "the stored pick is served without measuring"
        assert [row["measured_on"] for row in result["rows"]] == [c % world for c in range(configs)]
        assert all(row["error"] is None and row["samples"] == 3 for row in result["rows"])
        # Each rank shows the times of the candidates the others measured, and where the pick was.
        for c in range(configs):
            if c % world != rank:
                line = f"sleepy: [{c}] cfg=<{c}> (measured on rank {c % world}): trimmed mean "
                assert any(shown.startswith(line) for shown in result["verbose"]), result["verbose"]
        where = f"measured on rank {owner} of {world}"
        assert any("picked [3] cfg=<3> at " in line and where in line for line in result["verbose"])
    report = results[0]["report"]
    assert "not measured" not in report, report
    assert f"pick [3] measured on rank {owner} of {world}: " in report, report
    assert "(sharded: each candidate was timed on one rank only)" in report, report
    for c in range(configs):
        row = rf"^\s+\*?\[{c}\]\s+cfg=<{c}>\s+\d+\.\d{{4}} ms\s+{c % world}\s"
        assert re.search(row, report, re.M), report


@WORLDS
def test_sharded_ranks_measure_a_share_each_and_agree_on_the_pick(runs, world):
    results = values(runs(world), "sharded")
    configs = 2 * world + 1
    for rank, result in enumerate(results):
        assert result["pick"] == 3
        # Its share, measured (warm-up and timed runs), then the pick once more.
        assert sorted(set(result["calls"][:-1])) == list(range(rank, configs, world))
        assert result["calls"][-1] == 3
        # One barrier before measuring: no rank measures while another on its host compiles.
        assert result["collectives"]["counts"] == {"all_gather_object": 2, "barrier": 1}
        assert result["shards"] == world
        assert result["finite"] == configs, "every rank's record has every rank's times"


@WORLDS
def test_a_tuning_uses_two_collectives_besides_its_barriers(runs, world):
    for counts in values(runs(world), "counts_per_tuning"):
        for n in (1, 3, 6):
            assert counts[f"tune {n}"]["counts"] == {"all_gather_object": 1, "all_gather": 1, "barrier": n}
            assert counts[f"hit {n}"]["counts"] == {}
            assert counts[f"disk {n}"]["counts"] == {"all_gather_object": 1}
        # verify_pick, asked for on rank 0 only: one more gather, on every rank.
        assert counts["verify 4"]["counts"] == {"all_gather_object": 2, "all_gather": 1, "barrier": 4}


@WORLDS
def test_a_disk_hit_on_one_rank_is_shared_without_a_hang(runs, world):
    results = values(runs(world), "disk_hit_on_one_rank")
    assert results[0]["seeded"] == 1
    for result in results:
        # Measuring would pick config 0: every rank took rank 0's record, ran only the
        # pick, and agreed in one gather; each rank's own cache now holds the pick.
        assert result["pick"] == 1
        assert result["calls"] == [1]
        assert result["collectives"]["counts"] == {"all_gather_object": 1}
        assert result["stored"] == [1]
        assert result["next_run"]["pick"] == 1
        assert result["next_run"]["calls"] == [1]


@WORLDS
def test_tune_fail_raises_on_every_rank_and_never_and_fail_serve_a_pick_one_rank_holds(runs, world):
    outcomes = values(runs(world), "tune_switches")
    for outcome in outcomes:
        assert_prompt_error(outcome["failing"], "NoStoredPickError", "light: no stored pick for key 7")
    assert [(o["served"], o["calls"]) for o in outcomes] == [(1, [1])] * world, "rank 0's pick, unmeasured"
    assert [(o["never"], o["never_calls"]) for o in outcomes] == [(0, [0])] * world
    assert all(o["never_collectives"]["counts"] == {"all_gather_object": 1} for o in outcomes)


@WORLDS
def test_prune_fn_keeping_different_candidates_stops_every_rank_at_once(runs, world):
    for raised in errors(runs(world), "prune_differs"):
        keeps = [f"rank {r} keeps {[c for c in range(world + 1) if c != r]}" for r in range(world)]
        assert_prompt_error(raised, "RankMismatchError", "prune_fn", *keeps)


@WORLDS
def test_key_fn_raising_on_one_rank_stops_every_rank_at_once(runs, world):
    bad = world - 1
    results = values(runs(world), "key_fails_on_one_rank")
    for result in results:
        assert "value" in result["first"], result
        assert_prompt_error(
            result["failing"],
            "RankMismatchError",
            f"rank {bad} failed while computing the key: ValueError: key_fn cannot read x on rank {bad}",
        )
        assert "value" in result["after"], result
    assert len({r["after"]["value"] for r in results}) == 1


@WORLDS
@pytest.mark.parametrize("kind", ["unhashable", "unencodable"])
def test_a_key_one_rank_cannot_use_stops_every_rank_at_once(runs, world, kind):
    for result in values(runs(world), "key_unusable_on_one_rank"):
        assert_prompt_error(
            result[kind],
            "RankMismatchError",
            f"rank {world - 1} failed while computing the key: TypeError",
            "cannot be part of a tuning key",
        )


@WORLDS
def test_a_candidate_failing_on_one_rank_is_infinite_for_all(runs, world):
    bad = world - 1
    results = values(runs(world), "candidate_fails_on_one_rank")
    for rank, result in enumerate(results):
        assert result["pick"] == 1
        # Every rank still measured the other configs (the bad rank tried 0 once).
        assert set(result["calls"]) == {0, 1, 2}
        if rank == bad:
            assert result["calls"].count(0) == 1
    zero = results[0]["candidates"][0]
    assert zero["time_ms"] is None
    # Rank 0 wrote the record: its own runs of config 0 succeeded.
    assert zero["error"] is None and len(zero["samples_ms"]) == 3
    assert all(c["time_ms"] is not None for c in results[0]["candidates"][1:])


@WORLDS
def test_a_candidate_wrong_on_one_rank_alone_is_picked_by_none(runs, world):
    bad = world - 1
    results = values(runs(world), "wrong_on_one_rank")
    for rank, result in enumerate(results):
        assert result["result"] == 28.0
        assert len(result["warnings"]) == (1 if rank == bad else 0), result["warnings"]
    assert "[1] cfg=<1>: result: 1 of 1 values off, largest absolute error 7," in results[bad]["warnings"][0]
    assert [result["pick"] for result in results] == [2] * world
    # Rank 0 wrote the record: config 1 ran right there, and is infinite all the same (the MAX).
    assert results[0]["times"][1] is None and None not in (results[0]["times"][0], results[0]["times"][2])


@WORLDS
def test_a_host_function_with_its_own_all_reduce_tunes_on_every_rank(runs, world):
    expected = [float(sum(range(1, world + 1)))] * 8
    for result in values(runs(world), "host_function_with_all_reduce"):
        assert result == {"first": expected, "second": expected}


@WORLDS
def test_a_reducer_over_other_ranks_than_those_tuning_is_a_clear_error(runs, world):
    raised = errors(runs(world), "wrong_group")
    local = f"reducer 'local' cannot combine timings of the {world} ranks"
    assert_prompt_error(raised[0], "PluginError", local)
    for outsider in raised[1:]:
        assert_prompt_error(outsider, "PluginError", "not one of the ranks of autotune_pg")


def test_a_subgroup_of_two_ranks_tunes_without_the_others(runs):
    results = values(runs(4), "subgroups_tune_apart")
    for rank, result in enumerate(results):
        members = "[0, 1]" if rank < 2 else "[2, 3]"
        assert result["role"] == ("A" if rank < 2 else "B")
        # Each group picks by its own slowest rank; every collective ran on its own group.
        assert result["pick"] == (0 if rank < 2 else 1)
        assert result["collectives"] == {
            "counts": {"all_gather_object": 1, "all_gather": 1, "barrier": 3},
            "groups": [members],
        }
        assert result["stores"] == (1 if rank in (0, 2) else 0)
        # Log files are named by the rank in the job, so the groups' files don't collide.
        assert result["logs"] == ["tune-rank0.log", "tune-rank1.log", "tune-rank2.log", "tune-rank3.log"]
