"""The GPU benchmarks' CPU smoke modes still run, so a bench that rots fails here, not on a lease.

Each runs under ``TRITON_INTERPRET=1`` in a fresh process, with its
``--out`` JSON checked for the figures BENCHMARKS.md quotes.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_script(script: str, *arguments: str, tmp_path: Path, interpret: bool = True) -> str:
    """Run bench/``script`` with ``arguments`` in ``tmp_path`` (under the interpreter unless not
    ``interpret``); its output.

    Whatever the bench made in the temporary folder (fresh caches, its children's results) is gone
    when it returns.
    """
    temporary = tmp_path / "temporary"
    temporary.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(temporary)}
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *arguments],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    left = sorted(p.name for p in temporary.iterdir() if not p.name.startswith("torchinductor_"))
    assert not left, f"{script} left {left} (torch's own cache aside)"
    return done.stdout


def run_bench(script: str, *arguments: str, tmp_path: Path) -> dict:
    out = tmp_path / "out.json"
    run_script(script, "--smoke", f"--out={out}", *arguments, tmp_path=tmp_path)
    return json.loads(out.read_text())


def records_in(folder: Path) -> list[dict]:
    """The records in a function's cache folder (hex names: not its key index)."""
    return [json.loads(path.read_text()) for path in folder.glob("[0-9a-f]*.json")]


def test_warm_start_smoke_refines_every_pick_it_judges(tmp_path):
    result = run_bench("warm_start.py", tmp_path=tmp_path)
    assert result["refine"]["top"] == 4
    for row in result["rows"]:
        refined = {int(i) for i in row["refined_ms"]}
        assert {row["full"]["pick"], row["warm"]["pick"]} <= refined
        assert row["best"] in refined
    assert result["summary"]["warm_max_measured_after_first"] <= result["budget"]
    for row in result["rows"]:
        refined = {int(i): ms for i, ms in row["refined_ms"].items()}
        assert row["warm"]["against_full"] == pytest.approx(
            refined[row["warm"]["pick"]] / refined[row["full"]["pick"]] - 1
        )
        ratios = [ms / row["oracle_ms"][i] for i, ms in refined.items()]
        assert row["oracle_disagreement"] == pytest.approx(max(ratios) / min(ratios) - 1)
    summary = result["summary"]
    assert summary["warm_vs_full_within_5pct"] >= summary["warm_vs_full_within_2pct"]
    for row in result["rows"]:
        assert abs(row["full"]["turn"] - row["warm"]["turn"]) == 1, "each M's two tunings side by side"
    later = result["rows"][1:]
    for kind in ("full", "warm"):
        spent = sum(row[kind]["seconds"] for row in later)
        counted = sum(row[kind]["measurements"] for row in later)
        assert counted >= sum(row[kind]["measured"] for row in later) > 0
        assert summary[f"{kind}_ms_per_measurement"] == pytest.approx(1e3 * spent / counted)
    for m in summary["undecided_m"]:
        row = next(row for row in result["rows"] if row["m"] == m)
        assert 0.02 < max(row["warm"]["regret"], row["full"]["regret"]) <= row["oracle_disagreement"]


def test_portfolio_smoke_serves_the_held_out_half_from_the_stored_half(tmp_path):
    result = run_bench("portfolio.py", tmp_path=tmp_path)
    chosen = [c["index"] for c in result["portfolio"]["configs"]]
    assert 1 <= len(chosen) <= 2 and result["portfolio"]["stored"].endswith("portfolio.json")
    assert result["held_out_m"] == [2, 8, 32] and result["stored_m"] == [1, 4, 16]
    for row in result["rows"]:
        refined = {int(i): ms for i, ms in row["refined_ms"].items()}
        assert set(chosen) | {row["served"]["pick"], row["full"]["pick"]} <= set(refined)
        assert row["served"]["pick"] in chosen and row["served"]["measured"] <= len(chosen)
        assert row["full"]["measured"] == len(result["configs"])
        best = min(refined.values())
        assert row["portfolio_loss"] == pytest.approx(min(refined[i] for i in chosen) / best - 1)
        assert row["served"]["regret"] == pytest.approx(refined[row["served"]["pick"]] / best - 1)
    summary = result["summary"]
    losses = [row["portfolio_loss"] for row in result["rows"]]
    assert summary["portfolio_within_3pct"] == pytest.approx(sum(v <= 0.03 for v in losses) / len(losses))
    assert summary["command_worst_pct"] == result["portfolio"]["worst"]


def test_warm_start_smoke_screens_with_the_run_counts_asked_for(tmp_path):
    root = tmp_path / "caches"
    arguments = (
        "--mode=screen",
        "--screen-warmup=0",
        "--screen-repeat=2",
        "--finalist-repeat=1",
        "--beside-finalist-repeat=3",
        "--beside-screen-warmup=1",
        f"--cache-root={root}",
    )
    result = run_bench("warm_start.py", *arguments, tmp_path=tmp_path)
    assert result["screen_runs"] == {"warmup": 0, "repeat": 2, "finalist": 1}
    orders = [entry["order"] for entry in result["summary"]["orders"]]
    assert orders == ["increasing", "increasing-f3", "increasing-w1"], "and two beside it"
    beside = records_in(root / "warm-f3" / "matmul_launch")
    assert any(record.get("warm_start") for record in beside)
    records = records_in(root / "warm" / "matmul_launch")
    screened = [record for record in records if record.get("warm_start")]
    assert screened and all(record["warm_start"]["screen"] for record in screened)
    for record in screened:
        finalists = set(record["warm_start"]["finalists"])
        counts = {len(row["samples_ms"]) for i, row in enumerate(record["candidates"]) if i not in finalists}
        assert counts <= {0, 2}, f"two timed runs per screened config: {counts}"
        retimed = {len(record["candidates"][i]["samples_ms"]) for i in finalists}
        assert retimed == {2}, f"two rounds of one timed run per finalist: {retimed}"
    # Beside it, the same sweep with one untimed screen run per config, in a cache of its own.
    beside = records_in(root / "warm-w1" / "matmul_launch")
    assert any(record.get("warm_start") for record in beside)


#: A kernel looping over a runtime int argument, as the smoke's row sum does.
LOOP_PROBE = """
import torch, triton, triton.language as tl

@triton.jit
def total(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        acc += tl.load(x_ptr + start + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.sum(acc, 0))

x, out = torch.ones(8), torch.empty(1)
total[(1,)](x, out, 8, BLOCK=4)
assert out.item() == 8.0
"""


def interpreter_loops_over_runtime_ints() -> bool:
    """Whether this Triton's interpreter runs a ``range`` over a runtime int argument.

    Triton 3.4-3.6's interpreter hands the kernel such an argument as a
    one-element NumPy array, which NumPy 2 refuses to turn into an index
    (``only 0-dimensional arrays can be converted to Python scalars``);
    3.9's runs it. Compiled for a GPU, the same kernel runs on all of them.
    """
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", LOOP_PROBE], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    return done.returncode == 0


def test_search_quality_smoke_judges_each_run_against_its_oracle(tmp_path):
    if not interpreter_loops_over_runtime_ints():
        pytest.skip("this Triton's interpreter cannot loop over a runtime int (Triton 3.4-3.6 with NumPy 2)")
    result = run_bench(
        "search_quality.py",
        "--kernels=reduction",
        "--strategies",
        "pattern",
        "--runs=2",
        "--cold-runs=1",
        "--oracle-processes=2",
        tmp_path=tmp_path,
    )
    oracle = result["kernels"]["reduction"]["oracle"]
    first, second = (process["table_ms"] for process in oracle["processes"])
    label = next(label for label, time in first.items() if time is not None and second[label] is not None)
    assert oracle["table_ms"][label] == pytest.approx((first[label] + second[label]) / 2)
    assert oracle["spread"] >= 0
    # The table and the space it records replay through every strategy on the CPU (bench/search_replay.py).
    replay = load_bench("search_replay").replay
    kernel = result["kernels"]["reduction"]
    for strategy in ("pattern", "staged", "exhaustive"):
        run = replay(kernel, strategy, noise=0.0, final_noise=0.0, seed=0, effort="default")
        assert 0 < run["share"] <= 1 and run["regret"] >= 0
    exhaustive = replay(kernel, "exhaustive", noise=0.0, final_noise=0.0, seed=0, effort="default")
    assert exhaustive == {"share": 1.0, "regret": 0.0}
    runs = result["kernels"]["reduction"]["runs"]["pattern"]
    assert [run["cold"] for run in runs] == [True, False]
    assert all(oracle["table_ms"][run["pick"]] is not None for run in runs)
    assert all(run["times_ms"][run["pick"]] is not None for run in runs)
    (row,) = result["rows"]
    assert row["strategy"] == "pattern" and row["space"] == oracle["space"]


def load_bench(name: str):
    """A bench script as a module (bench/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_search_quality_oracle_is_the_mean_over_processes_and_its_spread_how_far_they_disagree():
    bench = load_bench("search_quality")

    def oracle(table, noise):
        return {"table_ms": table, "oracle_s": 1.0, "refined": list(table), "noise": noise, "search": {}}

    first = oracle({"a": 1.00, "b": 1.02, "c": None}, 0.01)
    second = oracle({"a": 1.03, "b": 1.00, "c": 2.0}, 0.02)
    combined = bench.combine_oracles([first, second])
    assert combined["table_ms"] == {"a": pytest.approx(1.015), "b": pytest.approx(1.01), "c": 2.0}
    # the first process's best (a) is 3% behind as the second timed it; b is 2% behind in the first
    assert combined["spread"] == pytest.approx(0.03)
    assert combined["noise"] == 0.02 and combined["oracle_s"] == 2.0
    assert bench.combine_oracles([first])["spread"] == 0.0
    # A point one process failed is left out of the spread, not an infinite disagreement.
    failed = oracle({"a": None, "b": 1.05, "c": 1.00}, 0.01)
    fastest = oracle({"a": 0.50, "b": 1.00, "c": 1.02}, 0.01)
    assert bench.combine_oracles([failed, fastest])["spread"] == pytest.approx(0.05)


PROGRAMS = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, sys.argv[1])
import search_quality

row_sum = search_quality.build("reduction", smoke=True)[0].fn  # compiled, not interpreted, here


def program(block, warps, stages):
    signature = {"x_ptr": "*fp16", "out_ptr": "*fp16", "n_cols": "i32", "BLOCK_N": "constexpr"}
    source = ASTSource(row_sum, signature=signature, constexprs={"BLOCK_N": block})
    options = {"num_warps": warps, "num_stages": stages}
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    return search_quality.program_of(compiled, {"BLOCK_N": block}, f"{block}/{warps}/{stages}")


points = [(1024, 8, 1), (1024, 8, 3), (1024, 16, 1), (2048, 8, 1)]
print(json.dumps({f"{b}/{w}/{s}": program(b, w, s) for b, w, s in points}))
"""


def test_search_quality_oracle_times_points_that_launch_one_program_as_one(tmp_path):
    """The row sum compiled for an H200, on the CPU (ptxas ships with triton): its stages are one program."""
    pytest.importorskip("triton")
    script = tmp_path / "programs.py"
    script.write_text(PROGRAMS)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, str(script), str(ROOT / "bench")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    programs = json.loads(done.stdout.splitlines()[-1])
    assert programs["1024/8/1"] == programs["1024/8/3"]
    assert programs["1024/8/1"] != programs["1024/16/1"]
    assert programs["1024/8/1"] != programs["2048/8/1"]
    # Nothing compiled (the interpreter): every point is its own program.
    bench = load_bench("search_quality")
    assert bench.program_of(None, {"BLOCK_N": 64}, "a") != bench.program_of(None, {"BLOCK_N": 64}, "b")


def test_noisy_smoke_judges_every_stored_pick_and_re_checks_the_uncertain_ones(tmp_path):
    result = run_bench("noisy.py", tmp_path=tmp_path)
    summary = result["summary"]
    assert len(result["busy"]) == len(result["quiet"]) == summary["processes"] == 2
    for outcome in result["busy"] + result["quiet"] + result["rechecked"]:
        assert outcome["confidence"] in ("confident", "uncertain")
        times = result["oracle_ms"]
        assert outcome["right"] == (times[outcome["pick"]] / min(times) - 1 <= 0.02)
    uncertain = [o for o in result["busy"] if o["confidence"] == "uncertain"]
    assert summary["rechecked"] == len(uncertain)
    assert all(o["rechecks"] == 0 or o["confidence"] == "uncertain" for o in result["rechecked"])


def test_restart_fetches_only_the_peer_autotuner_and_loads_it_under_its_own_name(tmp_path):
    """bench/restart.py's --fetch-peer on a stand-in wheel: one file out, its own name, never edited."""
    bench = load_bench("restart")
    wheel = tmp_path / "triton_dist-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("triton/__init__.py", "raise ImportError('the wheel must never be imported')\n")
        archive.writestr("triton_dist/__init__.py", "")
        archive.writestr(
            bench.PEER_MEMBER, "import typing\n\ndef contextual_autotune():\n    return 'peer'\n"
        )
    peer_dir = tmp_path / ".peer"
    bench.fetch_peer(wheel, peer_dir)
    assert sorted(p.name for p in peer_dir.iterdir()) == ["SOURCE.json", f"{bench.PEER_MODULE}.py"]
    try:
        module = bench.load_peer(peer_dir)
        assert module.__name__ == "peer_triton_dist_autotuner" and module.contextual_autotune() == "peer"
        assert sys.modules.get("triton_dist") is not module
    finally:
        sys.modules.pop(bench.PEER_MODULE, None)
    (peer_dir / f"{bench.PEER_MODULE}.py").write_text("def contextual_autotune():\n    return 'edited'\n")
    with pytest.raises(SystemExit, match="differs"):
        bench.load_peer(peer_dir)
    # An autotuner that needs its package's other modules cannot be loaded alone: refused, named.
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(bench.PEER_MEMBER, "from triton_dist.utils import x\nfrom . import y\n")
    with pytest.raises(SystemExit, match=r"imports \., triton_dist\.utils"):
        bench.fetch_peer(wheel, tmp_path / "refused")


def test_restart_reports_the_disk_sides_first_rep_apart_from_its_restarts():
    bench = load_bench("restart")

    def runs(*seconds, pick=0):
        return [{"seconds": s, "pick": pick} for s in seconds]

    oracle_ms = [0.25, 0.2]
    results = {
        "kerneltune-disk": runs(1.0, 0.2, 0.3, pick=1),
        "triton-dist": runs(0.7, 0.8, 0.6),
        "stock": runs(2.0, 2.0, 2.0, pick=1),
    }
    rows = {row["side"]: row for row in bench.summarise(results, oracle_ms)}
    assert rows["kerneltune-disk, rep 1 (tunes, stores)"]["seconds"] == [1.0]
    restart = rows["kerneltune-disk"]
    assert restart["median_s"] == pytest.approx(0.25)
    assert restart["over_triton-dist"] == pytest.approx(0.25 / 0.7)
    assert restart["over_stock"] == pytest.approx(0.125)
    assert rows["triton-dist"]["regrets"] == [pytest.approx(0.25)] * 3
    assert restart["regrets"] == [0.0, 0.0]


def test_the_overhead_bench_measures_every_workload(tmp_path):
    out = tmp_path / "out.json"
    printed = run_script("overhead.py", "--keys", "3", "--reps", "1", "--json", str(out), tmp_path=tmp_path)
    result = json.loads(out.read_text())
    assert set(result) == {"function after", "screen after", "contextual after"}
    for row in result.values():
        # A process's first tuning pays imports and is left out; every later one costs something.
        assert len(row["overhead_s"]) == len(row["per_run_s"]) == 2
        assert all(0 < seconds < 5 for seconds in row["overhead_s"])
    assert [line.split()[0] for line in printed.splitlines()[1:]] == ["function", "screen", "contextual"]


def test_the_hotpath_bench_times_each_side_beside_its_baseline_in_one_process(tmp_path):
    out = tmp_path / "out.json"
    printed = run_script("hotpath.py", "--smoke", "--json", str(out), tmp_path=tmp_path)
    rows = json.loads(out.read_text())["rows"]
    assert [(r["workload"], r["side"]) for r in rows] == [
        (workload, side) for workload in ("scale", "matmul") for side in ("contextual", "function")
    ]
    for row in rows:
        baseline = "launcher" if row["side"] == "function" else "plain"
        assert len(row[f"over_{baseline}_us_each"]) == 1
        assert len(row["first_s"]) == len(row["first_s_baseline"]) == 1
    assert "contextual" in printed and f"{'over baselines (paired, us)':36}" in printed


def test_the_hotpath_bench_times_a_contextual_hits_parts(tmp_path):
    out = tmp_path / "parts.json"
    printed = run_script("hotpath.py", "--parts", "--json", str(out), tmp_path=tmp_path)
    parts = json.loads(out.read_text())
    assert list(parts) == [
        "plain",
        "contextual",
        "wrapper alone",
        "launch in call",
        "kernel's run",
        "Triton's key",
        "direct key",
        "function",
        "launcher",
    ]
    assert all(0 < micros < math.inf for micros in parts.values()), "timed, not how fast: no order asserted"
    assert "contextual over plain: " in printed and "function over launcher: " in printed


@pytest.mark.gpu
def test_the_hotpath_bench_times_a_contextual_hits_parts_with_real_launches(tmp_path):
    out = tmp_path / "parts.json"
    run_script(
        "hotpath.py", "--parts", "--device", "cuda", "--json", str(out), tmp_path=tmp_path, interpret=False
    )
    parts = json.loads(out.read_text())
    # What it times, not how fast (an order of two figures once failed on a busy H100 host).
    assert {"plain", "contextual", "launch in call", "kernel's run", "function", "launcher"} <= parts.keys()
    assert all(0 < micros < math.inf for micros in parts.values()), parts


def test_the_key_profile_runs_every_tuning_under_the_profiler(tmp_path):
    out = run_script("key_profile.py", "--smoke", tmp_path=tmp_path)
    for label in ("full tuning, M=8", "full tuning, M=32", "screened warm start, M=12"):
        assert f"== {label}, profiled: wall " in out, out[-2000:]
    assert "Self CPU time total" in out


def test_the_cold_bench_widens_the_matmul_to_48_configs_and_the_searches_take_a_deadline(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    cold = load_bench("cold")
    base = cold.matmul_configs(16)
    wider = cold.matmul_configs(48)

    def shape(config):
        return tuple(sorted(config.kwargs.items())), config.num_warps, config.num_stages

    assert len(base) == 16 and [shape(c) for c in wider[::3]] == [shape(c) for c in base], "the 16 first"
    assert len({shape(c) for c in wider}) == 48, "48 distinct configs"
    assert [(c.num_warps, c.num_stages) for c in wider[:3]] == [(2, 2), (4, 2), (2, 3)]
    with pytest.raises(SystemExit, match="16 or 48"):
        cold.matmul_configs(20)
    quality = load_bench("search_quality")
    assert quality.search_deadline(quality.parse([])) == {}
    deadline = quality.search_deadline(quality.parse(["--search-deadline", "3,2"]))
    assert deadline == {"KERNELTUNE_COMPILE_DEADLINE": "3", "BENCH_DEADLINE_MIN_S": "2"}


def test_the_cold_bench_judges_picks_by_a_refined_oracle_of_its_fastest_configs_and_every_pick():
    cold = load_bench("cold")
    coarse = [float(10 + i) for i in range(20)]
    coarse[15] = 1.0  # the fastest of the first rounds
    contenders = cold.contenders_of(coarse, picks=[19, 3, 99])
    assert contenders == [0, 1, 2, 3, 4, 5, 6, 15, 19], "the eight fastest and every pick (99 is none)"
    times = cold.judged({"oracle_ms": coarse, "refined_ms": {"15": 2.0, "19": 12.5}})
    assert times[15] == 2.0 and times[19] == 12.5 and times[0] == 10.0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the bench forks")
def test_the_fork_tree_bench_times_both_ways_of_forking(tmp_path):
    out = run_script("fork_tree.py", "--n", "3,5", "--reps", "1", tmp_path=tmp_path)
    rows = [line.split() for line in out.splitlines() if line.split() and line.split()[0] in ("3", "5")]
    assert [row[0] for row in rows] == ["3", "5"]
    for _, serial, tree, ratio in rows:
        assert float(serial) > 0 and float(tree) > 0
        assert float(ratio) == pytest.approx(float(tree) / float(serial), rel=0.05, abs=0.01)


def test_the_serving_bench_times_a_nearest_key_beside_a_hit(tmp_path):
    out = tmp_path / "serving.json"
    printed = run_script(
        "serving.py", "--keys", "30", "--procs", "1", "--new", "3", "--json", str(out), tmp_path=tmp_path
    )
    figures = json.loads(out.read_text())
    result = figures["median"]
    assert set(result) == {
        "hit",
        "stored key as first call, over hit",
        "first new key, a stored key's call 50 ms before, over hit",
        "first new key, a stored key's call right before, over hit",
        "first new key as first call, over hit",
        "new keys 10 ms apart, over hit",
        "new keys back to back, over hit",
        "first process's first new key over hit",
    }
    assert 0 < result["hit"] < 1000 and result["first new key as first call, over hit"] > 0
    assert [len(runs) for runs in figures["runs"].values()] == [1, 1, 1]
    assert figures["fill_s"] > 0
    assert "30 keys tuned" in printed


def test_check_cost_times_both_checks_reference_and_later_apart(tmp_path):
    out = tmp_path / "cost.json"
    printed = run_script(
        "check_cost.py",
        "--device=cpu",
        "--size=16",
        "--candidates=3",
        "--reps=2",
        f"--json={out}",
        tmp_path=tmp_path,
    )
    result = json.loads(out.read_text())
    assert set(result["checks"]) == {"launch", "function"}
    for figures in (result["checks"], result["first_tuning"]):
        assert set(figures) == {"launch", "function"}
        for parts in figures.values():
            # Each figure is the check's own time: a first run's copies and comparisons cost something.
            assert parts["reference"] > 0 and parts["later"] > 0
    assert "a later candidate" in printed and "the process's first tuning" in printed
    whole = result["tunings"]  # whole contextual tunings, checked and not, in turn
    assert whole["configs"] == 16 and min(whole["on_ms"], whole["off_ms"], whole["first_ms"]) > 0
    assert whole["added_ms"] == whole["on_ms"] - whole["off_ms"]
    assert "a contextual tuning of 16 matmul configs (16^3 bfloat16): check on" in printed
