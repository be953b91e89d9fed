"""The progress bar: what it draws on a terminal, and when it stays silent."""

from __future__ import annotations

import functools
import io
import os
import re
import subprocess
import sys
import threading
import time

import pytest
from kerneltune.core import CandidateFailedWarning, Settings, TuningStarted
from kerneltune.core.driving import Candidate
from kerneltune.plugins.observers import progress
from tuning_doubles import FakeClock, clock_plugin, install_session

from triton_dist.tune import autotune


class Terminal(io.StringIO):
    """stderr as a terminal would be: it says it is one, and keeps what is drawn."""

    def isatty(self) -> bool:
        return True


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def _draw_every_update(monkeypatch) -> None:
    """Bars drawn at every update, not once per tenth of a second."""
    quiet = progress._quiet_tqdm()
    monkeypatch.setattr(progress, "_quiet_tqdm", lambda: functools.partial(quiet, mininterval=0))


def _tune(monkeypatch, stderr: io.StringIO) -> None:
    """One tuning of four candidates taking 3, 1, 2 ms and failing, on a scripted clock."""
    clock = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted", warmup=0, repeat=2)
    monkeypatch.setattr(sys, "stderr", stderr)

    @autotune(config_space=[{"ms": 3.0}, {"ms": 1.0}, {"ms": 2.0}, {"ms": -1.0}], key_fn=lambda size: (size,))
    def gemm(size, ms):
        if ms < 0:
            raise RuntimeError("out of resources")
        clock.advance(ms)
        return size

    gemm(256)


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_long_tuning_draws_count_time_and_best_so_far(monkeypatch):
    # Every tuning here lasts past the threshold (a real one would have to sleep a second),
    # and every update is drawn, not only one per tenth of a second.
    monkeypatch.setattr(progress, "DRAW_AFTER_S", 0.0)
    _draw_every_update(monkeypatch)
    terminal = Terminal()
    _tune(monkeypatch, terminal)
    frames = [frame for frame in re.split(r"[\r\n]", terminal.getvalue()) if frame]
    assert frames, "nothing was drawn"
    final = frames[-1]
    assert final.startswith("gemm: 4/4 candidates |")
    assert re.search(r"\[\d\d:\d\d<\d\d:\d\d, best ms=<1\.0>: 1\.0000 ms\]$", final), final
    # The best so far moved as better candidates came in.
    assert any("best ms=<3.0>: 3.0000 ms" in frame for frame in frames)
    assert any(frame.startswith("gemm: 1/4 candidates") for frame in frames)
    assert terminal.getvalue().endswith("\n")
    assert progress._bars == {}


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_short_tuning_draws_nothing(monkeypatch):
    terminal = Terminal()
    _tune(monkeypatch, terminal)
    assert terminal.getvalue() == ""


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_nothing_is_drawn_into_a_pipe(monkeypatch):
    monkeypatch.setattr(progress, "DRAW_AFTER_S", 0.0)
    pipe = Pipe()
    _tune(monkeypatch, pipe)
    assert pipe.getvalue() == ""


@pytest.mark.parametrize("how", ["variable", "file"])
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_progress_false_turns_it_off(monkeypatch, tmp_path, how):
    monkeypatch.setattr(progress, "DRAW_AFTER_S", 0.0)
    if how == "variable":
        monkeypatch.setenv("KERNELTUNE_PROGRESS", "0")
    else:
        (tmp_path / "kerneltune.toml").write_text("progress = false\n")
    terminal = Terminal()
    _tune(monkeypatch, terminal)
    assert terminal.getvalue() == ""


def test_only_rank_zero_draws(monkeypatch):
    monkeypatch.setattr(progress, "DRAW_AFTER_S", 0.0)
    monkeypatch.setattr(sys, "stderr", Terminal())
    candidates = (Candidate(index=0, config={}, fingerprint="f", label="a"),)
    for rank in (1, 0):
        progress.kerneltune_tuning_started(
            TuningStarted("gemm", (rank,), candidates, rank=rank, world_size=2, verbose=False, log_dir=None),
            Settings(),
        )
    assert list(progress._bars) == [("gemm", "(0,)")]
    progress._bars.pop(("gemm", "(0,)")).close()


def test_compiling_shows_until_every_candidate_is_compiled(monkeypatch):
    from kerneltune.core.driving import Space, Tuner

    monkeypatch.setattr(progress, "DRAW_AFTER_S", 0.0)
    _draw_every_update(monkeypatch)
    terminal = Terminal()
    clock = FakeClock()
    session = install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted", warmup=0, repeat=1)
    monkeypatch.setattr(sys, "stderr", terminal)
    tuner = Tuner(Space.build("gemm", [{"ms": 1.0}, {"ms": 2.0}, {"ms": 3.0}], "def gemm(ms): ..."))
    with tuner.begin(session, "key") as tuning:
        tuning.compile(lambda candidate: None)
        while (candidate := tuning.next_candidate()) is not None:
            tuning.measure(candidate, functools.partial(clock.advance, candidate.config["ms"]))
        tuning.finish()
    frames = [frame for frame in re.split(r"[\r\n]", terminal.getvalue()) if frame]
    assert any(re.search(r"compiling [12]/3", frame) for frame in frames), frames
    assert "compiling" not in frames[-1] and "best {'ms': 1.0}: 1.0000 ms" in frames[-1]


def test_a_process_that_draws_no_bar_never_imports_tqdm(tmp_path):
    tuning = (
        "import sys\n"
        "from triton_dist.tune import autotune\n"
        "work = autotune(config_space=[{'n': 1}, {'n': 2}], key_fn=lambda x: x)(lambda x, n: x)\n"
        "assert work(3) == 3\n"
        "print('tqdm' in sys.modules)\n"
    )
    environment = os.environ | {"TRITON_DIST_AUTOTUNE_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # tuning into a pipe, then the pick stored
        done = subprocess.run(
            [sys.executable, "-c", tuning], env=environment, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0 and done.stdout.split() == ["False"], done.stderr


def test_the_bar_starts_no_thread():
    # tqdm's monitor thread would wake beside the measurements.
    before = set(threading.enumerate())
    bar = progress._quiet_tqdm()(total=2, file=io.StringIO())
    try:
        assert set(threading.enumerate()) == before
    finally:
        bar.close()


@pytest.mark.parametrize("draw_after", [0.05, 60.0])
def test_a_bar_ends_on_its_final_count_and_a_new_line_or_is_never_drawn(monkeypatch, draw_after):
    # Compile events used to draw the bar before its delay, and a tuning that ended before
    # it was left frozen mid-line ("0/3 candidates ... compiling 1/1") under the next output.
    from kerneltune.core.driving import Space, Tuner

    monkeypatch.setattr(progress, "DRAW_AFTER_S", draw_after)
    terminal = Terminal()
    clock = FakeClock()
    session = install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted", warmup=0, repeat=1)
    monkeypatch.setattr(sys, "stderr", terminal)
    tuner = Tuner(Space.build("gemm", [{"ms": 1.0}, {"ms": 2.0}, {"ms": 3.0}], "def gemm(ms): ..."))
    with tuner.begin(session, "key") as tuning:
        tuning.compile(lambda candidate: time.sleep(0.1), [tuning.queued()[0]])
        while (candidate := tuning.next_candidate()) is not None:
            tuning.measure(candidate, functools.partial(clock.advance, candidate.config["ms"]))
        tuning.finish()
    drawn = terminal.getvalue()
    if draw_after > 1:
        assert drawn == "", "a tuning shorter than the delay draws nothing"
        return
    assert drawn.endswith("\n"), repr(drawn[-120:])
    final = [frame for frame in re.split(r"[\r\n]", drawn) if frame][-1]
    assert final.startswith("gemm: 3/3 candidates") and "compiling" not in final, final
