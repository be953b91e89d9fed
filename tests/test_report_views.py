"""`kerneltune report`: pruned candidates are shown as pruned, spreads as min/median/max."""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import CandidateFailedWarning
from tuning_doubles import make_record

from triton_dist.tune import autotune


@pytest.fixture
def tuned(isolated, tmp_path):
    """One record: [0] fast, [1] pruned, [2] raised, [3] slow with one sample far above its others."""
    (tmp_path / "kerneltune.toml").write_text("warmup = 0\nrepeat = 5\n")
    runs = {3: 0}

    @autotune(
        config_space=[{"c": 0}, {"c": 1}, {"c": 2}, {"c": 3}],
        key_fn=lambda: "k",
        prune_fn=lambda config: config["c"] != 1,
    )
    def work(c):
        if c == 2:
            raise RuntimeError("out of resources")
        if c == 3:
            runs[3] += 1
            sum(range(200_000 if runs[3] == 1 else 20_000))  # one slow sample skews the spread

    with pytest.warns(CandidateFailedWarning, match=r"candidate \[2\] c=<2> failed"):
        work()
    return isolated


def test_report_names_pruned_candidates_and_gives_the_range_of_the_samples(tuned):
    shown = CliRunner().invoke(cli.main, ["report", "work"], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\s+\*?\s*\[(\d)\].*$", shown.stdout, re.M)}
    assert re.search(r"c=<1>\s+pruned\s*$", rows["1"]), rows["1"]
    assert "failed" in rows["2"] and "out of resources" in rows["2"]
    assert re.search(r"min [\d.]+, median [\d.]+, max [\d.]+ \(5 samples\)", rows["3"]), rows["3"]
    assert "±" not in shown.stdout


def test_report_plot_whiskers_run_from_the_fastest_to_the_slowest_sample(tuned, tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    drawn = []
    original = Axes.barh

    def barh(self, labels, widths, *args, xerr=None, **kwargs):
        drawn.append((list(labels), list(widths), xerr))
        return original(self, labels, widths, *args, xerr=xerr, **kwargs)

    monkeypatch.setattr(Axes, "barh", barh)
    texts = []
    monkeypatch.setattr(Axes, "text", lambda self, x, y, s, **kw: texts.append(s.strip()))
    shown = CliRunner().invoke(cli.main, ["report", "work", "--plot", str(tmp_path / "r.png")])
    assert shown.exit_code == 0, shown.output
    ((_, widths, (below, above)),) = drawn
    assert all(b >= 0 for b in below) and all(a >= 0 for a in above)
    assert all(w - b >= 0 for w, b in zip(widths, below, strict=True)), "a whisker below 0 ms"
    assert sorted(texts) == ["failed", "pruned"]


@pytest.mark.parametrize(
    ("objective", "timed"),
    [("device", "host time (by the host's clock)"), ("wall", "wall time (host-inclusive, per call)")],
)
def test_host_timed_work_is_not_called_device_time(monkeypatch, cpu_host, isolated, objective, timed):
    monkeypatch.setenv("KERNELTUNE_OBJECTIVE", objective)

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda: "k")
    def on_host(n):
        sum(range(1_000 * n))

    on_host()
    for command in (["report", "on_host"], ["cache", "show", "on_host"]):
        shown = CliRunner().invoke(cli.main, command, catch_exceptions=False)
        assert shown.exit_code == 0, shown.output
        assert f"measured with: {timed}, 20% trimmed mean of 10 runs" in shown.stdout, shown.stdout
        assert "device time" not in shown.stdout


def test_a_record_from_before_it_said_what_was_timed_names_its_objective():
    from kerneltune.cli.views import timed_text
    from kerneltune.core.driving import TuningRecord

    data = make_record().to_data()
    del data["measured_with"]["timed"]
    assert timed_text(TuningRecord.from_data(data)) == "device objective"


def test_report_and_cache_show_give_each_ranks_time_of_the_pick_and_its_slowest_rank(tmp_path):
    from kerneltune.core import Session, Settings
    from kerneltune.core.driving import Space, Tuner
    from rank_doubles import ThreadGroup, plugin, run_ranks

    cache_dir = tmp_path / "cache"
    group = ThreadGroup(2)
    rank_ms = [[1.0, 4.0, 3.0], [2.5, 1.0, 3.5]]  # [0] is the fastest on its slowest rank

    def rank(r: int) -> int:
        settings = Settings(
            reducer="gathering-threads", cache="json", timer="wallclock", cache_dir=cache_dir, tie_rounds=0
        )
        session = Session.create(settings, extra=(plugin,))
        space = Space.build("spread", [{"c": 0}, {"c": 1}, {"c": 2}], source="def spread(c): ...")
        with Tuner(space).begin(session, "k", group=group.member(r)) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                tuning.record(candidate, [rank_ms[r][candidate.index]])
            return tuning.finish().index

    assert run_ranks(2, rank) == [0, 0]
    for command in (["report", "spread"], ["cache", "show", "spread"]):
        shown = CliRunner().invoke(cli.main, [*command, "--dir", str(cache_dir)], catch_exceptions=False)
        assert shown.exit_code == 0, shown.output
        pick = "pick [0] on its slowest rank: 2.5000 ms (rank 1 of 2); per rank (ms): "
        assert pick + "rank 0 1.0000, rank 1 2.5000" in shown.stdout, shown.stdout
        rows = {m.group(1): m.group(0) for m in re.finditer(r"^\s+\*?\s*\[(\d)\].*$", shown.stdout, re.M)}
        assert re.search(r"4\.0000 ms\s+0\s+4\.0000 1\.0000", rows["1"]), rows["1"]
        assert re.search(r"3\.5000 ms\s+1\s+3\.0000 3\.5000", rows["2"]), rows["2"]


def test_cache_show_prints_python_that_hard_codes_the_pick(isolated):
    import triton

    @autotune(
        config_space=[
            {"block": 64, "cfg": triton.Config({"BLOCK": 64}, num_warps=4), "mode": "fast"},
            {"block": 128, "cfg": triton.Config({"BLOCK": 128}, num_warps=8, num_stages=2), "mode": "slow"},
        ],
        key_fn=lambda: "k",
    )
    def hard(block, cfg, mode):
        sum(range(200_000 if block == 64 else 1_000))

    hard()
    shown = CliRunner().invoke(cli.main, ["cache", "show", "hard"], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    line = (
        "config_space=[{'block': 128, 'cfg': triton.Config({'BLOCK': 128}, num_warps=8, num_stages=2), "
        "'mode': 'slow'}]"
    )
    assert "to hard-code the pick:\n  # hard: one candidate left" in shown.stdout, shown.stdout
    assert f"  {line}\n" in shown.stdout, shown.stdout
    (path,) = (isolated / "hard").glob("[0-9a-f]*.json")
    record = json.loads(path.read_text())
    assert record["best"]["values"]["cfg"] == {
        "triton.Config": {"kwargs": {"BLOCK": 128}, "num_warps": 8, "num_stages": 2}
    }
    # The line is Python that makes the same config again.
    made = eval(line.removeprefix("config_space="), {"triton": triton})[0]
    assert made["cfg"].all_kwargs() == triton.Config({"BLOCK": 128}, num_warps=8, num_stages=2).all_kwargs()
    # A record from before the values were kept still shows, and says why there is no line.
    del record["best"]["values"]
    path.write_text(json.dumps(record))
    shown = CliRunner().invoke(cli.main, ["cache", "show", "hard"], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert "# this record keeps no plain values of its pick" in shown.stdout, shown.stdout


def test_a_triton_configs_snippet_is_a_triton_config_line():
    import attrs
    import triton
    from kerneltune.cli import views
    from tuning_doubles import make_record

    values = {"triton.Config": {"kwargs": {"BLOCK_M": 64, "BLOCK_N": 32}, "num_warps": 8}}
    record = attrs.evolve(make_record(), pick_values=values)
    lines = views.snippet_lines(record)
    assert lines[-1] == "configs=[triton.Config({'BLOCK_M': 64, 'BLOCK_N': 32}, num_warps=8)]"
    made = eval(lines[-1].removeprefix("configs="), {"triton": triton})[0]
    assert made.kwargs == {"BLOCK_M": 64, "BLOCK_N": 32} and made.num_warps == 8


def _snippet(function: str) -> str:
    """The last line ``kerneltune cache show FUNCTION`` prints: the Python that hard-codes the pick."""
    shown = CliRunner().invoke(cli.main, ["cache", "show", function], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert "to hard-code the pick:" in shown.stdout, shown.stdout
    return shown.stdout.rstrip("\n").splitlines()[-1].strip()


def test_a_contextual_kernels_snippet_is_a_triton_config_naming_its_compile_options(monkeypatch):
    import kernels
    import torch
    import triton

    from triton_dist.autotuner import contextual_autotune

    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", "disk")
    # Default compile options: a snippet must still name them, as releases' defaults differ.
    kernel = triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (32, 64)], key=["n"])(
        kernels.scale_kernel
    )

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def outer(x):
        y = torch.empty_like(x)
        kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, 2.0, x.numel())
        return y

    outer(torch.randn(100, device=kernels.DEVICE))
    line = _snippet("scale_kernel")
    assert line.startswith("configs=[triton.Config({'BLOCK': "), line
    assert "num_warps=" in line and "num_stages=" in line, line
    (made,) = eval(line.removeprefix("configs="), {"triton": triton})
    assert made.all_kwargs() == kernel.best_config.all_kwargs()


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="scripted interpreter search")
def test_a_search_params_kernels_snippet_is_the_searched_pick_as_a_triton_config(monkeypatch):
    import torch
    import triton
    import triton.language as tl
    from search_doubles import Script, by_block, timer_plugin, use_session

    import triton_dist.autotune_hooks  # noqa: F401

    script = Script(by_block({16: 3.0, 32: 1.0, 64: 2.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script), cache="json")
    hints = {"search_params": {"params": ["BLOCK"], "values": [16, 32, 64]}}

    @triton.autotune(configs=[], key=["n"], hints=hints, pre_hook=script.hook)
    @triton.jit
    def doubled(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)

    x = torch.arange(64, dtype=torch.float32)
    doubled[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, torch.empty_like(x), 64)
    line = _snippet("doubled")
    assert line.startswith("configs=[triton.Config({'BLOCK': 32}"), line
    assert "num_warps=" in line and "num_stages=" in line, line
    (made,) = eval(line.removeprefix("configs="), {"triton": triton})
    assert made.all_kwargs() == doubled.best_config.all_kwargs()


def test_a_config_with_a_pre_hook_has_no_snippet_rather_than_one_without_it(isolated):
    import triton

    def zero_out(named):
        pass

    @autotune(
        config_space=[{"cfg": triton.Config({"BLOCK": b}, pre_hook=zero_out)} for b in (16, 32)],
        key_fn=lambda: "k",
    )
    def hooked(cfg):
        pass

    hooked()
    (record,) = (json.loads(p.read_text()) for p in (isolated / "hooked").glob("[0-9a-f]*.json"))
    assert "values" not in record["best"]
    line = _snippet("hooked")
    assert line.startswith("# this record keeps no plain values of its pick"), line
