"""COMPILE: candidates compiled on a pool ahead of MEASURE, never beside a timed run, for every tuner."""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import errno
import functools
import os
import re
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import triton
from kerneltune.core import CandidateFailedWarning, CompileMiss, hookimpl, load_settings
from kerneltune.core.compiling import forks, processes, siblings
from kerneltune.core.compiling import stage as compile_stage
from kerneltune.core.compiling.forks import ForkSupervisor
from kerneltune.core.compiling.gate import LoadGate
from kerneltune.core.compiling.stage import CompileStage
from kerneltune.core.driving import Space, Tuner
from kerneltune.core.errors import ConfigError
from kerneltune.plugins.triton import compile_device, compiler, warming
from rank_doubles import ThreadGroup, run_ranks
from test_multirank import make_session, space
from tuning_doubles import FakeClock, clock_plugin, install_session, stored_records

from triton_dist.tune import autotune

NAMES = ["a", "b", "c", "d"]
COSTS = {"a": 3.0, "b": 1.0, "c": 2.0, "d": 4.0}


class Watch:
    """Observer of the compile events."""

    def __init__(self) -> None:
        self.started: list[tuple[int, str]] = []
        self.finished: list[tuple[int, str | None, int, int]] = []
        self.lock = threading.Lock()

    @hookimpl
    def kerneltune_compile_started(self, event):
        with self.lock:
            self.started.append((event.candidate.index, threading.current_thread().name))

    @hookimpl
    def kerneltune_compile_finished(self, event):
        with self.lock:
            self.finished.append((event.candidate.index, event.error, event.done, event.total))


def engine_session(monkeypatch, clock, watch, **settings):
    settings = {"timer": "scripted", "warmup": 1, "repeat": 2} | settings
    return install_session(monkeypatch, extra=(clock_plugin(clock), watch), **settings)


def drive(session, clock, compile_one, measured: list[str], on_run=lambda name: None, child=None):
    tuner = Tuner(Space.build("work", [{"name": n} for n in NAMES], "def work(name): ..."))
    with tuner.begin(session, "key") as tuning:
        tuning.compile(compile_one, child=child)
        while (candidate := tuning.next_candidate()) is not None:
            name = candidate.config["name"]

            def run(name=name):
                measured.append(name)
                on_run(name)
                clock.advance(COSTS[name])

            tuning.measure(candidate, run)
        return tuning.finish()


def test_no_candidate_is_measured_while_a_compile_runs(monkeypatch, isolated):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=2)
    running: set[str] = set()
    beside: list[tuple[str, set[str], list[str]]] = []
    measured: list[str] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def compile_one(candidate):
        name = candidate.config["name"]
        threads.add(threading.current_thread().name)
        with lock:
            running.add(name)
        time.sleep(0.3 if name == "d" else 0.01)  # the last candidate compiles longest
        with lock:
            running.discard(name)

    def on_run(name):
        pool = [t.name for t in threading.enumerate() if t.name.startswith("kerneltune")]
        with lock:
            beside.append((name, set(running), pool))

    best = drive(session, clock, compile_one, measured, on_run=on_run)
    assert best.config["name"] == "b"
    assert set(measured) == set(NAMES)
    assert all(name.startswith("kerneltune-compile") for name in threads)
    assert all(not compiling and not pool for _, compiling, pool in beside), beside
    assert sorted(i for i, _ in watch.started) == [0, 1, 2, 3]
    assert sorted(f[2] for f in watch.finished) == [1, 2, 3, 4] and {f[3] for f in watch.finished} == {4}
    assert all(error is None for _, error, _, _ in watch.finished)


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_candidate_whose_compile_fails_fails_alone(monkeypatch, isolated):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch)
    measured: list[str] = []

    def compile_one(candidate):
        if candidate.config["name"] == "b":
            raise RuntimeError("out of resources: shared memory, Required: 300000, Hardware limit: 232448")

    best = drive(session, clock, compile_one, measured)
    assert best.config["name"] == "c"
    assert "b" not in measured, "a candidate that did not compile is never run"
    (record,) = stored_records(isolated, "work")
    assert record["candidates"][1]["error"].startswith("RuntimeError: out of resources: shared memory")
    assert (1, "RuntimeError: out of resources: shared memory, Required: 300000, Hardware limit: 232448") in [
        f[:2] for f in watch.finished
    ]


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_compile_that_outlasts_the_timeout_fails_that_candidate_only(monkeypatch, isolated):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_timeout=1)
    release = threading.Event()
    measured: list[str] = []

    def compile_one(candidate):
        if candidate.config["name"] == "b":
            release.wait(timeout=30)

    started = time.monotonic()
    try:
        best = drive(session, clock, compile_one, measured)
    finally:
        release.set()
    assert time.monotonic() - started < 5
    assert best.config["name"] == "c" and "b" not in measured
    (record,) = stored_records(isolated, "work")
    assert record["candidates"][1]["error"] == (
        "CompileTimeout: compiling took longer than compile_timeout = 1 s"
    )


def test_one_worker_compiles_everything_on_one_thread(monkeypatch, isolated):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=1)
    drive(session, clock, lambda candidate: None, [])
    assert len({thread for _, thread in watch.started}) == 1
    assert [i for i, _ in watch.started] == [0, 1, 2, 3], "in the order they will be measured"


@pytest.mark.parametrize("size", [2, 3])
def test_ranks_on_one_host_split_the_compiling(tmp_path, size):
    group = ThreadGroup(size)
    configs = [{"block": 2**i} for i in range(7)]
    compiled: dict[int, list[int]] = {}

    def rank(r: int) -> int:
        session, tuner = make_session(tmp_path / "cache"), Tuner(space(configs))
        mine = compiled.setdefault(r, [])
        with tuner.begin(session, 7, group=group.member(r)) as tuning:
            tuning.compile(lambda candidate: mine.append(candidate.index))
            while (candidate := tuning.next_candidate()) is not None:
                tuning.record(candidate, [float(candidate.index + 1)])
            return tuning.finish().index

    assert run_ranks(size, rank) == [0] * size
    # The threads share a host name: each compiles every size-th candidate.
    assert {r: sorted(c) for r, c in compiled.items()} == {r: list(range(r, 7, size)) for r in range(size)}
    for counts in group.counts:
        assert counts == {"gather": 1, "max": 1, "barrier": 7}


def test_sharded_ranks_measure_only_once_every_rank_on_the_host_has_compiled(tmp_path):
    group = ThreadGroup(2)
    compiling, measured_beside = threading.Event(), []

    def compile_one(candidate):
        compiling.set()
        time.sleep(0.3)
        compiling.clear()

    def rank(r: int) -> int:
        session = make_session(tmp_path / "cache", shard=True)
        with Tuner(space()).begin(session, 7, group=group.member(r)) as tuning:
            if r == 1:
                tuning.compile(compile_one)  # only rank 1 has anything to compile
            while (candidate := tuning.next_candidate()) is not None:
                time.sleep(0.1)  # a run long enough to meet the other rank's compile, if it ran now
                measured_beside.append(compiling.is_set())
                tuning.record(candidate, [float(candidate.index + 1)])
            return tuning.finish().index

    assert run_ranks(2, rank) == [0, 0]
    assert measured_beside and not any(measured_beside), "a rank measured while another compiled"


# -- compile processes: each compile forked first, then loaded here ------------------------------------


class ForkedCompiles:
    """A backend whose compiles can run in forked processes: each compile appends ``pid name`` to a log."""

    def __init__(self, log: Path, behave=None) -> None:
        self.log, self.behave = log, behave or {}
        self.readied = 0

    def ready(self) -> None:
        self.readied += 1

    def prepare(self) -> None:
        pass

    def compile_one(self, candidate) -> None:
        name = candidate.config["name"]
        with self.log.open("a") as out:
            out.write(f"{os.getpid()} {name}\n")
        self.behave.get(name, lambda: None)()

    def compiled(self) -> list[tuple[str, str]]:
        """(where, name) for each compile: ``child`` or ``here``."""
        lines = [line.split() for line in self.log.read_text().splitlines()]
        return sorted(("here" if int(pid) == os.getpid() else "child", name) for pid, name in lines)


def segfault() -> None:
    ctypes.string_at(0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_each_compile_runs_in_a_forked_process_then_loads_here(monkeypatch, isolated, tmp_path):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=2)
    backend = ForkedCompiles(tmp_path / "compiled.log")
    measured: list[str] = []
    best = drive(session, clock, backend.compile_one, measured, child=backend)
    assert best.config["name"] == "b" and set(measured) == set(NAMES)
    assert backend.compiled() == sorted([("child", n) for n in NAMES] + [("here", n) for n in NAMES])
    assert backend.readied == len(NAMES), "each fork waited for the compiler's set-up"
    assert all(error is None for _, error, _, _ in watch.finished)


class ProbedCompiles(ForkedCompiles):
    """A backend that can probe: under ``probing()`` a compile of a name not in ``cached`` is a miss."""

    def __init__(self, log: Path, cached: set[str]) -> None:
        super().__init__(log)
        self.cached = cached
        self.local = threading.local()

    @contextlib.contextmanager
    def probing(self):
        self.local.probing = True
        try:
            yield
        finally:
            self.local.probing = False

    def compile_one(self, candidate) -> None:
        if getattr(self.local, "probing", False) and candidate.config["name"] not in self.cached:
            raise CompileMiss(f"{candidate.config['name']} is not cached")
        super().compile_one(candidate)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_a_program_the_cache_holds_is_loaded_here_until_a_probe_misses(monkeypatch, isolated, tmp_path):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=1)
    backend = ProbedCompiles(tmp_path / "compiled.log", cached={"a", "c"})
    measured: list[str] = []
    best = drive(session, clock, backend.compile_one, measured, child=backend)
    assert best.config["name"] == "b" and set(measured) == set(NAMES)
    # a loads under its probe, no process forked; b misses, so the cache is taken for cold: c and d
    # go to compile processes unprobed (c, cached after all, is only loaded there), then load here.
    assert backend.compiled() == sorted([*(("here", n) for n in NAMES), *(("child", n) for n in "bcd")])
    assert backend.readied == 3, "only a fork waits for the compiler's set-up; a probe does not ask for it"
    assert all(error is None for _, error, _, _ in watch.finished)


class SlowMiss(ProbedCompiles):
    """Nothing cached, and the first probe takes 0.3 s to miss: by then every pool thread has begun."""

    def compile_one(self, candidate) -> None:
        if getattr(self.local, "probing", False) and not getattr(self, "missed", False):
            self.missed = True
            time.sleep(0.3)
        super().compile_one(candidate)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_without_descriptors_for_a_fork_tree_each_compile_is_forked_alone(monkeypatch, isolated, tmp_path):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=len(NAMES))
    # The first miss queues every compile begun, and one thread forks them together: a tree is tried.
    backend = SlowMiss(tmp_path / "compiled.log", cached=set())
    trees: list[int] = []

    def no_descriptors(size, compile_one):
        trees.append(size)
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(forks.fork_tree, "fork", no_descriptors)
    best = drive(session, clock, backend.compile_one, [], child=backend)
    assert best.config["name"] == "b"
    assert backend.compiled() == sorted([("child", n) for n in NAMES] + [("here", n) for n in NAMES])
    assert all(error is None for _, error, _, _ in watch.finished)
    assert trees == [len(NAMES)], "a tree of every compile was tried first"


def test_a_program_loaded_just_before_the_first_miss_is_not_forked_again(monkeypatch, isolated, tmp_path):
    # a's probe loads it; before its compile has ended here, b's probe misses and queues every compile
    # begun for a process: a, loaded already, must not be among them.
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=len(NAMES))
    backend = ProbedCompiles(tmp_path / "compiled.log", cached={"a"})
    done, slowed = LoadGate.done, []

    def slow_first_done(self, index: int) -> None:
        if not slowed:
            slowed.append(index)
            time.sleep(0.3)
        done(self, index)

    monkeypatch.setattr(LoadGate, "done", slow_first_done)
    best = drive(session, clock, backend.compile_one, [], child=backend)
    assert best.config["name"] == "b"
    forked = [(where, name) for name in "bcd" for where in ("child", "here")]
    assert backend.compiled() == sorted([("here", "a"), *forked])


def watch_timing(monkeypatch) -> tuple[threading.Event, list[bool]]:
    """An event set from a candidate's first timed run until they are all launched, and a list for
    the loads to note whether it was set (a load beside a timed run)."""
    timing = threading.Event()
    begin, end = CompileStage.timing_begins, CompileStage.timing_ends
    monkeypatch.setattr(CompileStage, "timing_begins", lambda stage: (begin(stage), timing.set()))
    monkeypatch.setattr(CompileStage, "timing_ends", lambda stage: (timing.clear(), end(stage)))
    return timing, []


def held_session(monkeypatch, clock, watch, **settings):
    """A session whose timer holds the device, as the cuda-event timer does."""
    settings = {"timer": "held", "warmup": 1, "repeat": 2} | settings
    return install_session(monkeypatch, extra=(clock_plugin(clock, "held", holds=True), watch), **settings)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_where_the_timer_holds_the_device_the_cached_programs_load_beside_the_measuring(
    monkeypatch, isolated, tmp_path
):
    clock, watch = FakeClock(), Watch()
    # One worker loads a, b, c, d in turn: with two, d could take the fork lock ahead of a.
    session = held_session(monkeypatch, clock, watch, compile_workers=1)
    backend = ProbedCompiles(tmp_path / "compiled.log", cached=set(NAMES))
    measuring, d_loaded = threading.Event(), threading.Event()

    def load_d_once_a_is_measured() -> None:
        measuring.wait(10)
        d_loaded.set()

    # A load may go on beside a candidate's warm-up runs, never beside its timed runs.
    timing, loaded_while_timed = watch_timing(monkeypatch)

    def load(seconds: float) -> Callable[[], None]:
        def loading() -> None:
            loaded_while_timed.append(timing.is_set())
            time.sleep(seconds)
            loaded_while_timed.append(timing.is_set())

        return loading

    backend.behave = {"b": load(0.05), "c": load(0.05), "d": load_d_once_a_is_measured}
    measured: list[str] = []
    beside: list[str] = []

    def on_run(name):
        measuring.set()
        if not d_loaded.is_set():
            beside.append(name)
        time.sleep(0.02)  # runs that take time, so that a load beside them would overlap a timed one

    best = drive(session, clock, backend.compile_one, measured, on_run=on_run, child=backend)
    assert best.config["name"] == "b" and set(measured) == set(NAMES)
    assert "a" in beside and "d" not in beside, "a was measured while d loaded; d once it had"
    assert loaded_while_timed and not any(loaded_while_timed), "no load beside a timed run"
    assert backend.compiled() == sorted(("here", name) for name in NAMES), "every program loaded, none forked"
    assert all(error is None for _, error, _, _ in watch.finished)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_cached_programs_load_in_turn_and_the_measuring_thread_goes_before_the_loads_waiting(
    monkeypatch, isolated, tmp_path
):
    # Four threads start their loads at once. Each load holds the fork lock, which the measuring
    # thread needs too: queued behind every load, it measured nothing until all had loaded (an
    # H200's restart: sixteen loads, then the first measurement).
    clock, watch = FakeClock(), Watch()
    session = held_session(monkeypatch, clock, watch, compile_workers=4)
    backend = ProbedCompiles(tmp_path / "compiled.log", cached=set(NAMES))
    timing, loaded_while_timed = watch_timing(monkeypatch)
    events: list[tuple[str, str]] = []

    def load(name: str) -> Callable[[], None]:
        def loading() -> None:
            loaded_while_timed.append(timing.is_set())
            time.sleep(0.08)
            loaded_while_timed.append(timing.is_set())
            events.append(("loaded", name))

        return loading

    backend.behave = {name: load(name) for name in NAMES}
    measured: list[str] = []
    on_run = lambda name: events.append(("run", name))  # noqa: E731
    best = drive(session, clock, backend.compile_one, measured, on_run=on_run, child=backend)
    assert best.config["name"] == "b" and set(measured) == set(NAMES)
    assert [name for kind, name in events if kind == "loaded"] == NAMES, "loaded in the order handed over"
    assert events.index(("run", "a")) < events.index(("loaded", "d")), "a was measured before d loaded"
    assert loaded_while_timed and not any(loaded_while_timed), "no load beside a timed run"
    assert backend.compiled() == sorted(("here", name) for name in NAMES), "every program loaded, none forked"


def test_load_turns_go_by_ticket_and_wait_while_the_measuring_thread_wants_the_lock():
    gate = LoadGate(beside=True)
    indexes = [7, 2, 5, 0]  # handed over in this order
    for index in indexes:
        gate.enter(index)
    order: list[int] = []
    gate.measuring()
    gate.timing_begins()

    def load(index: int) -> None:
        with gate.turn(index):
            order.append(index)

    threads = [threading.Thread(target=load, args=(i,)) for i in reversed(indexes[1:])]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    assert order == [], "no load begins while the measuring thread wants the fork lock"
    gate.timing_ends()
    time.sleep(0.1)
    assert order == [], "every load waits for the first ticket, which has not ended"
    gate.done(indexes[0])  # ended without a turn (a compile on a thread, say)
    for thread in threads:
        thread.join(5)
    assert order == indexes[1:], "the earliest handed over loads first"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_once_a_program_must_be_compiled_in_a_process_nothing_compiles_beside_the_measuring(
    monkeypatch, isolated, tmp_path
):
    clock, watch = FakeClock(), Watch()
    session = held_session(monkeypatch, clock, watch, compile_workers=2)
    # a, the first measured, goes to a compile process: before it is measured the stage settles.
    backend = ProbedCompiles(tmp_path / "compiled.log", cached={"c", "d"})
    running: set[str] = set()
    beside: list[set[str]] = []
    lock = threading.Lock()

    def slow(name: str) -> Callable[[], None]:
        def compiling() -> None:
            with lock:
                running.add(name)
            time.sleep(0.2)
            with lock:
                running.discard(name)

        return compiling

    backend.behave = {name: slow(name) for name in NAMES}
    measured: list[str] = []

    def on_run(name):
        with lock:
            beside.append(set(running))

    best = drive(session, clock, backend.compile_one, measured, on_run=on_run, child=backend)
    assert best.config["name"] == "b" and set(measured) == set(NAMES)
    assert beside and not any(beside), "a and b go to compile processes: the stage settles as before"
    assert ("child", "a") in backend.compiled() and ("child", "b") in backend.compiled()


class CompilesNoted(ProbedCompiles):
    """A cache that holds nothing. Each compile process notes when its compile began and ended; the
    first candidate's probe misses only after a pause, by which the measuring thread waits for it."""

    def __init__(self, log: Path, times: Path) -> None:
        super().__init__(log, cached=set())
        self.times, self.parent = times, os.getpid()

    def compile_one(self, candidate) -> None:
        name = candidate.config["name"]
        if getattr(self.local, "probing", False) and name == NAMES[0]:
            time.sleep(0.1)
        super().compile_one(candidate)
        if os.getpid() != self.parent:
            began = time.monotonic()
            time.sleep(0.3)
            with self.times.open("a") as out:
                out.write(f"{name} {began} {time.monotonic()}\n")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_compiles_that_miss_the_cache_go_to_their_processes_together(monkeypatch, isolated, tmp_path):
    # The measuring thread waits for the first candidate's load, and other loads wait behind it; once
    # that load missed, they waited for its whole compile, and the next compiles began only then (an
    # H200's search: one compile, then seven).
    clock, watch = FakeClock(), Watch()
    session = held_session(monkeypatch, clock, watch, compile_workers=len(NAMES))
    backend = CompilesNoted(tmp_path / "compiled.log", tmp_path / "times.log")
    measured: list[str] = []
    best = drive(session, clock, backend.compile_one, measured, child=backend)
    assert best.config["name"] == "b" and set(measured) == set(NAMES)
    spans = {
        name: (float(began), float(ended))
        for name, began, ended in (line.split() for line in (tmp_path / "times.log").read_text().splitlines())
    }
    assert sorted(spans) == sorted(NAMES), "every candidate compiled in a process"
    assert max(b for b, _ in spans.values()) < min(e for _, e in spans.values()), (
        f"one after another: {spans}"
    )


class WeighedCompiles(ProbedCompiles):
    """A cache that holds nothing and a guess at each compile's length; each probe is noted, in order."""

    def __init__(self, log: Path) -> None:
        super().__init__(log, cached=set())
        self.probed: list[str] = []
        self.efforts = {"a": 1.0, "b": 4.0, "c": 9.0, "d": 0.0}

    def effort(self, config) -> float:
        return self.efforts[config["name"]]

    def compile_one(self, candidate) -> None:
        name = candidate.config["name"]
        if getattr(self.local, "probing", False):
            self.probed.append(name)
            if name == NAMES[0]:
                time.sleep(0.1)  # every other probe waits for its turn by now
        super().compile_one(candidate)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_after_a_miss_every_compile_begun_is_forked_at_once_unprobed_the_longest_first(
    monkeypatch, isolated, tmp_path
):
    clock, watch = FakeClock(), Watch()
    session = held_session(monkeypatch, clock, watch, compile_workers=len(NAMES))
    backend = WeighedCompiles(tmp_path / "compiled.log")
    batches: list[list[str]] = []
    fork_queued = ForkSupervisor._fork_queued

    def noted(supervisor) -> None:
        batches.append([candidate.config["name"] for candidate, _ in supervisor._unforked])
        fork_queued(supervisor)

    monkeypatch.setattr(ForkSupervisor, "_fork_queued", noted)
    measured: list[str] = []
    best = drive(session, clock, backend.compile_one, measured, child=backend)
    assert best.config["name"] == "b" and set(measured) == set(NAMES)
    # a's probe, the first handed over, finds the cache cold: no other is probed, and every compile
    # the pool has begun goes to one tree of compile processes, the longest first.
    assert backend.probed == ["a"]
    assert batches == [["c", "b", "a", "d"]]
    assert sorted(n for where, n in backend.compiled() if where == "child") == sorted(NAMES)


def test_a_guess_that_raises_or_is_not_a_number_counts_as_none():
    class Guessing(ForkedCompiles):
        def __init__(self, answer) -> None:
            super().__init__(Path("unused"))
            self.answer = answer

        def effort(self, config):
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    assert processes.effort(Guessing(3), {}) == 3.0
    assert processes.effort(Guessing(RuntimeError("no guess")), {}) == 0.0
    assert processes.effort(Guessing(float("nan")), {}) == 0.0
    assert processes.effort(Guessing("many"), {}) == 0.0
    assert processes.effort(ForkedCompiles(Path("unused")), {}) == 0.0, "no effort(): no guess"
    both = processes.CompileProcesses((Guessing(2.0), ForkedCompiles(Path("unused")), Guessing(5)))
    assert processes.effort(both, {}) == 7.0


class LateMiss(ProbedCompiles):
    """A probe of a program not cached that finds out only once ``found`` is set."""

    def __init__(self, log: Path, cached: set[str], found: threading.Event) -> None:
        super().__init__(log, cached)
        self.found = found

    def compile_one(self, candidate) -> None:
        if getattr(self.local, "probing", False) and candidate.config["name"] not in self.cached:
            self.found.wait(10)
        super().compile_one(candidate)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_no_compile_process_is_forked_while_a_candidate_is_measured(monkeypatch, isolated, tmp_path):
    clock, watch = FakeClock(), Watch()
    session = held_session(monkeypatch, clock, watch, compile_workers=1)  # a's load, then b's probe
    measuring = threading.Event()
    backend = LateMiss(tmp_path / "compiled.log", cached={"a", "c", "d"}, found=measuring)
    forked_while_measuring: list[str] = []

    def on_run(name):
        if name == "a" and not measuring.is_set():
            measuring.set()  # b's probe misses now, and wants a compile process
            time.sleep(0.3)
            forked_while_measuring.extend(n for where, n in backend.compiled() if where == "child")

    measured: list[str] = []
    best = drive(session, clock, backend.compile_one, measured, on_run=on_run, child=backend)
    assert best.config["name"] == "b" and set(measured) == set(NAMES)
    assert forked_while_measuring == [], "b's compile process waited until a was measured"
    assert ("child", "b") in backend.compiled()


PROBE_CHECK = """
import sys
from pathlib import Path

import pytest
import triton
from kerneltune.core import CompileMiss
from kerneltune.plugins.triton import compiler
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

sys.path.insert(0, sys.argv[1])
import kernels

cache = Path(sys.argv[2])
# Under the interpreter @triton.jit gives an InterpretedFunction: compile the function itself.
kernel = kernels.scale_kernel
jitted = kernel if isinstance(kernel, JITFunction) else JITFunction(kernel.fn)
source = ASTSource(
    jitted,
    signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "alpha": "fp32", "n": "i32", "BLOCK": "constexpr"},
    constexprs={"BLOCK": 64},
)
target = GPUTarget("cuda", 90, 32)  # compiling for a GPU needs none: only launching does
process = compiler.TritonCompileProcess(driver=None, device=0, target=target)
with pytest.raises(CompileMiss, match="not in Triton's cache"), process.probing():
    triton.compile(source, target=target)
assert not list(cache.rglob("*.cubin")), "a miss compiles nothing"
compiled = triton.compile(source, target=target)  # what a compile process leaves in the cache
with process.probing():
    loaded = triton.compile(source, target=target)
assert loaded.hash == compiled.hash
assert triton.compile(source, target=target).hash == compiled.hash, "outside a probe nothing changed"
"""


def test_the_triton_probe_misses_before_compiling_and_loads_what_the_cache_holds(tmp_path):
    # In a process of its own: Triton's interpreter patches triton.language for a device function
    # called from an interpreted kernel (tl.sum, say) and never puts it back, and a real compile
    # after that in the same process fails ('value' object has no attribute 'dtype').
    cache = tmp_path / "triton"
    done = subprocess.run(
        [sys.executable, "-c", PROBE_CHECK, str(Path(__file__).parent), str(cache)],
        env={**os.environ, "TRITON_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


TREE_CHECK = """
import os
import sys
from pathlib import Path

import triton
from kerneltune.core.compiling.stage import CompileStage
from kerneltune.core.values.events import Header
from kerneltune.core.values.records import Candidate
from kerneltune.plugins.triton import compiler
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

sys.path.insert(0, sys.argv[1])
import kernels

log = Path(sys.argv[2])
kernel = kernels.scale_kernel
jitted = kernel if isinstance(kernel, JITFunction) else JITFunction(kernel.fn)
signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "alpha": "fp32", "n": "i32", "BLOCK": "constexpr"}
target = GPUTarget("cuda", 90, 32)  # compiling for a GPU needs none: only launching does
hashes = {}


def compile_one(candidate):
    block = candidate.config["BLOCK"]
    compiled = triton.compile(ASTSource(jitted, signature, {"BLOCK": block}), target=target)
    if os.getpid() != parent:
        with log.open("a") as out:
            out.write(f"{block} {os.getpid()} {os.getppid()}\\n")
    else:
        hashes[block] = compiled.hash


class Quiet:
    def compile_started(self, event):
        pass

    def compile_finished(self, event):
        pass


parent = os.getpid()
blocks = (32, 64, 128, 256)
candidates = [Candidate(i, {"BLOCK": b}, str(b), f"BLOCK={b}") for i, b in enumerate(blocks)]
process = compiler.TritonCompileProcess(driver=None, device=0, target=target)
stage = CompileStage(
    compile_one, candidates, workers=4, timeout=120, header=Header("scale", "k", 0), observers=Quiet(),
    child=process,
)
try:
    problems = [stage.wait(candidate) for candidate in candidates]
finally:
    stage.close()
assert problems == [None] * 4, problems
rows = [line.split() for line in log.read_text().splitlines()]
assert sorted(int(block) for block, _, _ in rows) == list(blocks), rows
assert all(int(forker) != parent for _, _, forker in rows), "forked by the tree's forkers, not here"
assert sorted(hashes) == list(blocks) and len(set(hashes.values())) == 4, "each loaded here from the cache"
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_real_triton_compiles_run_in_a_fork_tree_and_load_here(tmp_path):
    # Four configs of a real kernel compiled for an sm_90 target (no GPU needed to compile): the probe
    # misses, the four compiles go to one fork tree, and each program loads here from Triton's cache.
    done = subprocess.run(
        [sys.executable, "-c", TREE_CHECK, str(Path(__file__).parent), str(tmp_path / "forked.log")],
        env={**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_compile_that_crashes_its_process_fails_that_candidate_and_never_runs_here(
    monkeypatch, isolated, tmp_path
):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch)
    backend = ForkedCompiles(tmp_path / "compiled.log", {"b": segfault})
    measured: list[str] = []
    best = drive(session, clock, backend.compile_one, measured, child=backend)
    assert best.config["name"] == "c" and "b" not in measured
    assert ("here", "b") not in backend.compiled() and ("child", "b") in backend.compiled()
    (record,) = stored_records(isolated, "work")
    assert (
        record["candidates"][1]["error"]
        == "CompilerCrashed: the compiler crashed (SIGSEGV) in a compile process"
    )


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_compile_that_raises_in_its_process_raises_again_here_with_the_backends_error(
    monkeypatch, isolated, tmp_path
):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch)

    def too_big() -> None:
        raise ValueError("needs 300000 bytes of shared memory")

    backend = ForkedCompiles(tmp_path / "compiled.log", {"b": too_big})
    best = drive(session, clock, backend.compile_one, [], child=backend)
    assert best.config["name"] == "c"
    assert {("child", "b"), ("here", "b")} <= set(backend.compiled())
    (record,) = stored_records(isolated, "work")
    assert record["candidates"][1]["error"] == "ValueError: needs 300000 bytes of shared memory"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_a_compile_process_that_outlasts_the_timeout_is_killed(monkeypatch, isolated, tmp_path):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_timeout=1)
    pids = tmp_path / "pids"

    def hang() -> None:
        pids.write_text(str(os.getpid()))
        time.sleep(60)

    backend = ForkedCompiles(tmp_path / "compiled.log", {"b": hang})
    started = time.monotonic()
    best = drive(session, clock, backend.compile_one, [], child=backend)
    assert time.monotonic() - started < 10
    assert best.config["name"] == "c"
    (record,) = stored_records(isolated, "work")
    assert (
        record["candidates"][1]["error"] == "CompileTimeout: compiling took longer than compile_timeout = 1 s"
    )
    deadline = time.monotonic() + 5
    while _alive(int(pids.read_text())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(pids.read_text())), "the hung compile process was killed"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_a_stuck_compile_process_is_stopped_and_its_candidate_compiles_here(monkeypatch, isolated, tmp_path):
    monkeypatch.setattr(siblings, "STALL_MIN_S", 0.5)
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=4)
    parent, pids = os.getpid(), tmp_path / "pids"

    def stuck_in_a_child() -> None:
        if os.getpid() != parent:  # as a child that inherited a lock nobody will release
            pids.write_text(str(os.getpid()))
            time.sleep(60)

    backend = ForkedCompiles(tmp_path / "compiled.log", {"b": stuck_in_a_child})
    started = time.monotonic()
    with pytest.warns(RuntimeWarning, match=r"a compile process ran \d+ s, 5 times its slowest sibling"):
        best = drive(session, clock, backend.compile_one, [], child=backend)
    assert time.monotonic() - started < 10
    assert best.config["name"] == "b", "not failed: compiled here instead"
    assert ("here", "b") in backend.compiled()
    assert not _alive(int(pids.read_text())), "the stuck process was stopped"
    assert all(error is None for _, error, _, _ in watch.finished)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_a_compile_process_far_slower_than_its_siblings_is_stopped_at_the_deadline(
    monkeypatch, isolated, tmp_path, caplog
):
    monkeypatch.setattr(siblings, "DEADLINE_MIN_S", 0.5)
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=4, compile_deadline=5)
    parent, pids = os.getpid(), tmp_path / "pids"

    def compiling_for_minutes() -> None:
        if os.getpid() != parent:  # busy, not stuck: only the deadline stops it
            pids.write_text(str(os.getpid()))
            while True:
                pass

    backend = ForkedCompiles(tmp_path / "compiled.log", {"b": compiling_for_minutes})
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CandidateFailedWarning)  # a deadline stop is an expected drop
        best = drive(session, clock, backend.compile_one, [], child=backend)
    assert time.monotonic() - started < 10
    assert best.config["name"] == "c", "b failed; the fastest of the rest"
    (record,) = stored_records(isolated, "work")
    # The deadline is 5 times the siblings' median, at least 0.5 s: more where a busy host slowed them.
    error = record["candidates"][1]["error"]
    took = re.fullmatch(
        r"CompileDeadline: compiling took longer than ([0-9.]+) s, compile_deadline = 5 times the median "
        r"compile of its siblings",
        error,
    )
    assert took is not None and float(took[1]) >= 0.5, error
    assert [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()] == [
        "kerneltune: work: 1 of 4 configs dropped for key 'key' (1 CompileDeadline); verbose lines name each"
    ]
    assert ("here", "b") not in backend.compiled(), "failed, not compiled again here"
    deadline = time.monotonic() + 5
    while _alive(int(pids.read_text())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(pids.read_text())), "the slow compile process was stopped"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_the_time_a_compile_waited_for_a_processor_is_not_counted_toward_the_deadline(
    monkeypatch, isolated, tmp_path
):
    # b takes 1.5 s, three times the 0.5 s deadline, and waited (as the system says) longer than that
    # for a processor that other work on the host held: it is not stopped (a deadline stop would be
    # remembered for every later key), and b is picked.
    monkeypatch.setattr(siblings, "DEADLINE_MIN_S", 0.5)
    monkeypatch.setattr(forks, "tree_usage", lambda pid: siblings.TreeUsage(0.0, True, 100.0))
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=4, compile_deadline=5)
    backend = ForkedCompiles(tmp_path / "compiled.log", {"b": slow(os.getpid(), 1.5)})
    best = drive(session, clock, backend.compile_one, [], child=backend)
    assert [error for _, error, _, _ in watch.finished] == [None] * len(NAMES)
    assert best.config["name"] == "b" and ("child", "b") in backend.compiled()


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or not Path("/proc/self/schedstat").exists(),
    reason="needs processor affinity and the scheduler's statistics",
)
def test_tree_usage_counts_the_time_a_process_waited_for_a_processor():
    # Three busy processes on one processor: each waits for it about two thirds of the time.
    cpu = min(os.sched_getaffinity(0))
    pinned = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    spinners = [_started(pinned) for _ in range(3)]
    try:
        time.sleep(1.0)
        usage = siblings.tree_usage(spinners[0].pid)
        assert usage is not None and usage.runnable, usage
        if usage.waited == 0.0:
            pytest.skip("this kernel keeps no run-queue wait (schedstat's second field stays 0)")
        assert usage.waited > 0.2, usage
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait(30)


def test_the_deadline_waits_for_a_quorum_and_a_floor():
    judge = siblings.Siblings(deadline=4.0)
    for _ in range(4):
        judge.started()
    for seconds in (1.0, 2.0):
        judge.ended(seconds)
    assert judge.past_deadline(100.0) is None, "two of four ended: no quorum yet"
    judge.ended(3.0)
    assert judge.past_deadline(8.0) is None and judge.past_deadline(8.5) == 8.0
    judge.seconds = [0.1, 0.1, 0.1]
    assert judge.past_deadline(siblings.DEADLINE_MIN_S - 0.1) is None, "never sooner than DEADLINE_MIN_S"
    assert judge.past_deadline(siblings.DEADLINE_MIN_S + 0.1) == siblings.DEADLINE_MIN_S
    judge.deadline = 0
    assert judge.past_deadline(1e9) is None, "compile_deadline = 0: none"
    # Compiles begun ahead (most of a search's) count once ended: they bring the quorum.
    ahead = siblings.Siblings(deadline=4.0)
    ahead.started()
    for seconds in (1.0, 1.0, 2.0):
        ahead.ended(seconds, ahead=True)
    assert ahead.forked == 4 and ahead.past_deadline(3.9) is None and ahead.past_deadline(4.1) == 4.0


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc for a process's processor time")
def test_a_slow_compile_process_that_keeps_a_processor_busy_is_not_taken_for_stuck(
    monkeypatch, isolated, tmp_path
):
    monkeypatch.setattr(siblings, "STALL_MIN_S", 0.5)
    clock, watch = FakeClock(), Watch()
    # The stall rule alone: past the deadline's floor (2 s), the deadline would stop it.
    session = engine_session(monkeypatch, clock, watch, compile_workers=4, compile_deadline=0)
    parent = os.getpid()

    def compiling_slowly() -> None:
        if os.getpid() != parent:  # a compile that takes far longer than its siblings, on a processor
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                pass

    backend = ForkedCompiles(tmp_path / "compiled.log", {"b": compiling_slowly})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        best = drive(session, clock, backend.compile_one, [], child=backend)
    assert [error for _, error, _, _ in watch.finished] == [None] * len(NAMES)
    assert backend.compiled().count(("child", "b")) == 1, "compiled in its process, not stopped"
    assert best.config["name"] == "b"


class LateCompile:
    """A compile process whose pid comes ``delay`` seconds after it was asked for (a tree's forker
    busy forking others first), then keeps a processor busy for ``busy`` seconds."""

    def __init__(self, delay: float, busy: float) -> None:
        self.pid: int | None = None
        self.status, self.processor_seconds, self.killed = 0, 0.0, False
        self._due, self._busy = time.monotonic() + delay, busy
        self._process: subprocess.Popen | None = None

    def ended(self, timeout: float) -> bool:
        if self._process is None and time.monotonic() >= self._due:
            loop = f"import time\nend = time.monotonic() + {self._busy}\nwhile time.monotonic() < end: pass"
            self._process = subprocess.Popen([sys.executable, "-c", loop])
            self.pid = self._process.pid
        if self._process is not None and self._process.poll() is not None:
            return True
        time.sleep(timeout)
        return False

    def kill(self) -> None:
        self.killed = True
        if self._process is not None:
            self._process.kill()
            self._process.wait()

    def release(self) -> None:
        pass


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc for a process's processor time")
def test_a_compile_process_forked_late_is_judged_stuck_from_when_it_began(monkeypatch, isolated, tmp_path):
    monkeypatch.setattr(siblings, "STALL_MIN_S", 0.5)
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=4, compile_deadline=0)
    late = LateCompile(delay=0.8, busy=1.0)  # its siblings end at once: 0.5 s is the stall floor
    spawn = forks.ForkSupervisor._spawn

    def spawning(supervisor, candidate, compile_one, behind):
        return late if candidate.config["name"] == "b" else spawn(supervisor, candidate, compile_one, behind)

    monkeypatch.setattr(forks.ForkSupervisor, "_spawn", spawning)
    backend = ForkedCompiles(tmp_path / "compiled.log")
    best = drive(session, clock, backend.compile_one, [], child=backend)
    assert late.pid is not None and not late.killed, "0.8 s unborn is no processor time unused"
    assert best.config["name"] == "b"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc for a process's processor time")
def test_tree_usage_counts_the_processor_time_of_the_children_still_running():
    # A shell (the compile process) waiting for a busy child (its ptxas): the shell uses no processor.
    busy = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass"
    shell = subprocess.Popen(["/bin/sh", "-c", f'{sys.executable} -c "{busy}"'])
    try:
        deadline = time.monotonic() + 30
        tree = 0.0
        while shell.poll() is None and time.monotonic() < deadline:
            tree = usage.seconds if (usage := siblings.tree_usage(shell.pid)) else tree
            if tree >= 0.3:
                break
            time.sleep(0.02)
        assert tree >= 0.3, tree
    finally:
        shell.wait(30)


def _started(command: str) -> subprocess.Popen:
    """A Python process running ``command``, once it has begun it (its start-up done)."""
    process = subprocess.Popen(
        [sys.executable, "-c", f"print(flush=True)\n{command}"], stdout=subprocess.PIPE
    )
    assert process.stdout is not None and process.stdout.readline() == b"\n"
    return process


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc for a process's processor time")
def test_a_runnable_compile_process_is_never_stuck_a_sleeping_one_past_the_limits_is():
    judge = siblings.Siblings()
    judge.ended(1.0)  # the slowest sibling: stuck is judged past max(STALL_MIN_S, 5 s)
    busy = _started("while True: pass")  # on a processor, or waiting for one however long
    # Its main thread waiting for a busy one (a compile whose work runs on a thread of its own).
    threaded = _started(
        "import threading\n"
        "threading.Thread(target=lambda: exec('while True: pass'), daemon=True).start()\n"
        "threading.Event().wait()"
    )
    asleep = _started("import time; time.sleep(60)")  # a child blocked on a lock nobody releases
    try:
        assert (usage := siblings.tree_usage(busy.pid)) is not None and usage.runnable, (
            "on a processor or waiting"
        )
        main_thread = Path(f"/proc/{threaded.pid}/stat")
        deadline = time.monotonic() + 10
        while siblings._stat_fields(main_thread)[0] != "S" and time.monotonic() < deadline:
            time.sleep(0.01)  # until its main thread waits
        assert not judge.stuck(10_000.0, threaded.pid), "a thread of it is runnable"
        deadline = time.monotonic() + 10
        while (usage := siblings.tree_usage(asleep.pid)) and usage.runnable and time.monotonic() < deadline:
            time.sleep(0.01)  # from its print to its sleep
        assert usage is not None and usage.seconds < 0.5 and not usage.runnable, usage
        # A busy loop given little of a processor (a niced compile on a host busy with other work).
        assert not judge.stuck(10_000.0, busy.pid)
        assert judge.stuck(10_000.0, asleep.pid)
        assert not judge.stuck(siblings.STALL_MIN_S, asleep.pid), "not past the stall floor"
    finally:
        for process in (busy, threaded, asleep):
            process.kill()
            process.wait(30)
    assert siblings.tree_usage(2**22 + 1) is None, "no such process"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_compile_pool_threads_keeps_every_compile_in_this_process(monkeypatch, isolated, tmp_path):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_pool="threads")
    backend = ForkedCompiles(tmp_path / "compiled.log")
    drive(session, clock, backend.compile_one, [], child=backend)
    assert backend.compiled() == sorted(("here", n) for n in NAMES)


def test_compile_pool_setting_reads_processes_or_threads():
    assert load_settings(environ={}).get("compile_pool") == "processes"
    assert load_settings(environ={"KERNELTUNE_COMPILE_POOL": "Threads"}).get("compile_pool") == "threads"
    with pytest.raises(
        ConfigError, match=r"KERNELTUNE_COMPILE_POOL.*expected 'processes' or 'threads', got 'forks'"
    ):
        load_settings(environ={"KERNELTUNE_COMPILE_POOL": "forks"})


def test_triton_compiles_stay_on_threads_where_nothing_is_compiled_or_the_cache_is_not_shared(monkeypatch):
    monkeypatch.setattr(compiler.adapter, "interpreting", lambda: True)
    assert compiler.forked_compiles() is None, "Triton's interpreter compiles nothing"
    monkeypatch.setattr(compiler.adapter, "interpreting", lambda: False)
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")
    assert compiler.forked_compiles() is None, "the parent would compile again instead of loading"
    monkeypatch.delenv("TRITON_ALWAYS_COMPILE")
    monkeypatch.setenv("TRITON_CACHE_MANAGER", "my.module:MyCache")
    assert compiler.forked_compiles() is None, "a custom cache may not reach another process"


def test_the_shared_memory_check_asks_each_driver_helper_once_per_device(monkeypatch):
    class Utils:
        def __init__(self, limit):
            self.limit, self.asked = limit, 0

        def get_device_properties(self, device):
            self.asked += 1
            return {"max_shared_mem": self.limit}

    class Driver:
        def __init__(self, utils):
            self.utils, self.device = utils, 0

        def get_current_device(self):
            return self.device

    monkeypatch.setattr(compile_device, "_shared_limits", {})
    first, second = Driver(Utils(1000)), Driver(Utils(4000))
    assert [compile_device._shared_memory_limit(first) for _ in range(3)] == [1000] * 3
    assert first.utils.asked == 1, "one query per process and device, not one per candidate"
    first.device = 1
    first.utils.limit = 2000
    assert compile_device._shared_memory_limit(first) == 2000 and first.utils.asked == 2, (
        "each device its own"
    )
    assert compile_device._shared_memory_limit(second) == 4000, "a new driver's limit, not the old one's"
    assert second.utils.asked == 1


def test_the_warm_up_compiles_once_off_the_calling_thread_and_forks_wait_for_it(monkeypatch):
    monkeypatch.setattr(warming, "_warm", warming._WarmUp())
    monkeypatch.setattr(compiler.adapter, "interpreting", lambda: False)
    monkeypatch.setattr(compiler.warm_cache, "holds_triton_key", lambda: False)  # a cache never used
    order = []
    hashing = threading.Thread(target=lambda: None)
    bind = lambda: None  # noqa: E731
    monkeypatch.setattr(warming, "_start_hashing", lambda: order.append("hash") or hashing)
    monkeypatch.setattr(warming, "_device_binding_or_none", lambda: order.append("driver") or bind)
    release, compiled = threading.Event(), []

    def compile_empty(binding):
        assert warming._warm.hashing is hashing, "the hash is kept for compiles to wait for"
        assert binding.result(timeout=10) is bind, "and the driver's binding, once made"
        release.wait(timeout=10)
        compiled.append(threading.current_thread().name)

    monkeypatch.setattr(warming, "_compile_empty", compile_empty)
    warming.warm_up()
    warming.warm_up()
    process = compiler.TritonCompileProcess(driver=None, device=0, target=None)
    waiting = threading.Thread(target=process.ready)
    waiting.start()
    waiting.join(timeout=0.2)
    assert waiting.is_alive(), "a fork waits while the warm-up runs"
    release.set()
    waiting.join(timeout=10)
    assert not waiting.is_alive() and compiled == ["kerneltune-warm-up"], "once, off the calling thread"
    assert order == ["hash", "driver"], "Triton hashes itself while the driver is built"


def test_over_a_used_triton_cache_the_warm_up_waits_for_the_first_fork(monkeypatch):
    # A restart finds its programs in the cache: loading them needs the hash and the
    # driver, not the code generators' imports and the empty kernel a fork inherits.
    monkeypatch.setattr(warming, "_warm", warming._WarmUp())
    monkeypatch.setattr(compiler.adapter, "interpreting", lambda: False)
    monkeypatch.setattr(compiler.warm_cache, "holds_triton_key", lambda: True)
    hashed = threading.Event()
    hashing = threading.Thread(target=hashed.wait, args=(10,))
    hashing.start()
    bind = lambda: None  # noqa: E731
    monkeypatch.setattr(warming, "_start_hashing", lambda: hashing)
    monkeypatch.setattr(warming, "_device_binding_or_none", lambda: bind)
    release, compiled = threading.Event(), []

    def compile_empty(binding):
        assert binding.result(timeout=10) is bind
        release.wait(timeout=10)
        compiled.append(threading.current_thread().name)

    monkeypatch.setattr(warming, "_compile_empty", compile_empty)
    warming.warm_up()
    assert warming._warm.thread is None, "nothing compiles until a fork needs it"
    probe = threading.Thread(target=warming.warmed)
    probe.start()
    probe.join(timeout=0.2)
    assert probe.is_alive(), "a probe's compile waits for the hash"
    hashed.set()
    probe.join(timeout=10)
    assert not probe.is_alive() and warming._warm.thread is None, "and only for the hash"
    process = compiler.TritonCompileProcess(driver=None, device=0, target=None)
    forks = [threading.Thread(target=process.ready) for _ in range(3)]
    for fork in forks:
        fork.start()
    forks[0].join(timeout=0.2)
    assert all(fork.is_alive() for fork in forks), "the first forks start the warm-up and wait for it"
    release.set()
    for fork in forks:
        fork.join(timeout=10)
    assert compiled == ["kerneltune-warm-up"], "once, off the calling thread"


def test_the_warm_up_imports_at_once_and_compiles_after_the_hash_and_the_driver(monkeypatch):
    events = []

    class Hashing:
        def join(self):
            events.append("hash joined")

    def jit(fn):
        events.append("compiled")
        raise RuntimeError("no device here")  # the warm-up swallows what its compile raises

    monkeypatch.setattr(triton, "jit", jit)
    monkeypatch.setattr(warming.importlib, "import_module", lambda name: events.append(name))
    monkeypatch.setattr(warming, "_warm", warming._WarmUp())
    warming._warm.hashing = Hashing()
    binding = concurrent.futures.Future()
    thread = threading.Thread(target=warming._compile_empty, args=(binding,))
    thread.start()
    deadline = time.monotonic() + 10
    while len(events) < len(warming.FIRST_IMPORTS) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert events == list(warming.FIRST_IMPORTS), "imports while the driver is still being built"
    binding.set_result(lambda: events.append("bound"))
    thread.join(timeout=10)
    assert events == [*warming.FIRST_IMPORTS, "hash joined", "bound", "compiled"]


def test_a_pool_compile_waits_for_the_whole_warm_up(monkeypatch):
    # Not only the hash: once the compiles have ended, nothing of the warm-up runs beside a measurement.
    warm = warming._WarmUp()
    monkeypatch.setattr(warming, "_warm", warm)
    release, ran = threading.Event(), []
    warm.hashing = threading.Thread(target=lambda: None)
    warm.hashing.start()
    warm.thread = threading.Thread(target=release.wait, args=(10,))
    warm.thread.start()

    class Kernel:
        def run(self, *args, **kwargs):
            ran.append(kwargs)

    kernel = Kernel()
    compiler._primed.add(kernel)
    compiling = threading.Thread(target=compiler._compile, args=(kernel, (), {"BLOCK": 8}))
    compiling.start()
    compiling.join(timeout=0.2)
    assert compiling.is_alive() and ran == [], "no compile while the warm-up is under way"
    release.set()
    compiling.join(timeout=10)
    assert ran == [{"BLOCK": 8, "warmup": True}]


@pytest.mark.parametrize("driver", ["none", "raises"])
def test_without_a_device_the_warm_up_compiles_nothing(monkeypatch, driver):
    monkeypatch.setattr(warming, "_warm", warming._WarmUp())
    monkeypatch.setattr(compiler.adapter, "interpreting", lambda: False)
    monkeypatch.setattr(warming, "_start_hashing", lambda: None)
    monkeypatch.setattr(triton, "jit", lambda fn: pytest.fail("compiled without a device"))

    def no_device():
        if driver == "raises":
            raise KeyboardInterrupt
        return None

    monkeypatch.setattr(warming, "_device_binding_or_none", no_device)
    if driver == "raises":
        with pytest.raises(KeyboardInterrupt):
            warming.warm_up()
    else:
        warming.warm_up()
    assert warming._warm.tried
    ready = threading.Thread(target=compiler.TritonCompileProcess(driver=None, device=0, target=None).ready)
    ready.start()
    ready.join(timeout=10)
    assert not ready.is_alive(), "the warm-up thread ends, handed no driver"


# -- the function-level tuner: launches recorded, then compiled ---------------------------------------


class FakeKernels:
    """A kernel library whose launches an interceptor can record, as Triton's can."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.launched: list[int] = []
        self.compiled: list[tuple[int, str]] = []

    def launch(self, block: int) -> None:
        recorded = getattr(self.local, "recorded", None)
        if recorded is not None:
            recorded.append(lambda: self.compiled.append((block, threading.current_thread().name)))
            return
        self.launched.append(block)


def recorder_plugin(kernels: FakeKernels):
    class Recorder:
        name = "fake-kernels"

        @classmethod
        def is_available(cls):
            return True

        def install(self, route):
            pass

        def uninstall(self):
            pass

        @contextlib.contextmanager
        def _record(self):
            kernels.local.recorded = []
            try:
                yield kernels.local.recorded
            finally:
                kernels.local.recorded = None

        def recording(self):
            return self._record()  # and no compile_process(): its thunks compile on threads

    class Plugin:
        @hookimpl
        def kerneltune_register_interceptors(self, register):
            register(Recorder)

    return Plugin()


def launcher(kernels: FakeKernels, clock: FakeClock, fails_unlaunched: tuple[int, ...] = ()):
    # It returns which config ran, on purpose: outputs unchecked.
    @autotune(config_space=[{"block": b} for b in (64, 128, 256)], key_fn=lambda x: x, check_outputs=False)
    def work(x, block):
        kernels.launch(block)
        if block in fails_unlaunched and getattr(kernels.local, "recorded", None) is not None:
            raise RuntimeError("reads the kernel's output on the host")
        clock.advance({64: 3.0, 128: 1.0, 256: 2.0}[block])
        return block

    return work


@pytest.fixture
def fake_kernels(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_PRECOMPILE", "1")  # the suite's default is off
    clock, kernels = FakeClock(), FakeKernels()
    install_session(
        monkeypatch,
        extra=(clock_plugin(clock), recorder_plugin(kernels)),
        timer="scripted",
        warmup=1,
        repeat=2,
    )
    return clock, kernels


def test_a_host_launcher_is_run_once_per_candidate_with_its_launches_compiled_ahead(fake_kernels, isolated):
    clock, kernels = fake_kernels
    assert launcher(kernels, clock)(0) == 128
    assert sorted(block for block, _ in kernels.compiled) == [64, 128, 256]
    assert all(thread.startswith("kerneltune-compile") for _, thread in kernels.compiled)
    # The recording pass launched nothing; measuring launched each 1 + 2 times, then the pick once.
    assert kernels.launched == [64] * 3 + [128] * 3 + [256] * 3 + [128]


def test_a_launcher_that_needs_its_launches_compiles_at_its_first_warm_up(fake_kernels, isolated):
    clock, kernels = fake_kernels
    assert launcher(kernels, clock, fails_unlaunched=(256,))(0) == 128
    assert sorted(block for block, _ in kernels.compiled) == [64, 128]
    assert kernels.launched.count(256) == 3, "measured as usual"


def test_the_recording_pass_resets_and_restores_in_place_arguments(fake_kernels, isolated):
    clock, kernels = fake_kernels
    seen = []

    @autotune(
        config_space=[{"block": b} for b in (64, 128)],
        key_fn=lambda acc, x: 0,
        reset_to_zero=["acc"],
        restore_value=["x"],
    )
    def work(acc, x, block):
        kernels.launch(block)
        seen.append((float(acc[0]), float(x[0])))
        acc += 1
        x += 1
        clock.advance(block / 64)

    acc, x = torch.full((1,), 9.0), torch.zeros(1)
    work(acc, x)

    assert sorted(block for block, _ in kernels.compiled) == [64, 128], "the recording pass ran"
    assert seen == [(0.0, 0.0)] * (2 + 2 * 3 + 1)
    assert (float(acc[0]), float(x[0])) == (1.0, 1.0)


def test_precompile_false_skips_the_recording_pass(monkeypatch, fake_kernels, isolated):
    clock, kernels = fake_kernels
    monkeypatch.setenv("KERNELTUNE_PRECOMPILE", "0")
    install_session(monkeypatch, extra=(clock_plugin(clock), recorder_plugin(kernels)), timer="scripted")
    assert launcher(kernels, clock)(0) == 128
    assert kernels.compiled == []


# -- the contextual tuner: a kernel's configs compiled for the launch's arguments --------------------------


def tune_scale_contextually() -> list[object]:
    """Tune a scale kernel's configs with ``contextual_autotune``, checking the result; the configs."""
    from test_contextual import launch_scale, make_scale_kernel, randn

    from triton_dist.autotuner import contextual_autotune

    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x):
        return launch_scale(scale_kernel, x, 2.0)

    x = randn(64)
    torch.testing.assert_close(run(x), 2.0 * x)
    return list(scale_kernel.configs)


def test_contextual_tuning_compiles_each_config_on_the_pool(monkeypatch):
    compiled: list[tuple[object, str]] = []

    def fake_compiler(tuner, args, kwargs):
        def compile_config(config):
            compiled.append((config, threading.current_thread().name))

        return compile_config

    monkeypatch.setattr(compiler, "config_compiler", fake_compiler)
    configs = tune_scale_contextually()
    assert sorted(id(c) for c, _ in compiled) == sorted(id(c) for c in configs)
    assert all(thread.startswith("kerneltune-compile") for _, thread in compiled)


def test_contextual_tuning_asks_for_compile_processes_before_the_compiler(monkeypatch):
    """Asking for compile processes starts the warm-up; asking for the compiler builds the driver."""
    asked: list[str] = []

    def fake_compiler(tuner, args, kwargs):
        asked.append("compiler")
        return lambda config: None

    monkeypatch.setattr(compiler, "config_compiler", fake_compiler)
    monkeypatch.setattr(compiler, "forked_compiles", lambda: asked.append("processes"))
    tune_scale_contextually()
    assert asked == ["processes", "compiler"]


# -- Triton's JIT launches, recorded ---------------------------------------------------------------------


def test_recording_catches_this_threads_jit_launches_and_restores_run():
    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)

    kernel = JITFunction(copy)  # compiled, not interpreted, even under TRITON_INTERPRET=1
    original = JITFunction.run
    x = torch.ones(8)
    elsewhere: list[BaseException] = []

    def launch_on_another_thread():
        try:
            kernel[(1,)](x, x, 8, BLOCK=8)
        except BaseException as exc:  # no GPU here: the real launch fails, which shows it was made
            elsewhere.append(exc)

    with compiler.recording() as compiles:
        assert kernel[(1,)](x, x, 8, BLOCK=8) is None
        other = threading.Thread(target=launch_on_another_thread)
        other.start()
        other.join()
    assert len(compiles) == 1 and callable(compiles[0])
    assert len(elsewhere) == 1, "another thread's launch is made, not recorded"
    assert JITFunction.run is original
    del triton


def test_each_round_of_an_adaptive_tuning_compiles_with_its_own_function(monkeypatch, isolated):
    # search_params hands COMPILE a function per round that knows only that round's candidates;
    # the stage once kept the first round's for every later one (KeyError on an H200).
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch)
    tuner = Tuner(Space.build("work", [{"name": n} for n in NAMES], "def work(name): ..."))
    compiled: list[tuple[str, str]] = []
    with tuner.begin(session, "key", adaptive=True) as tuning:
        for number, names in enumerate((["a", "b"], ["c", "d"])):
            batch = [c for c in tuner.space.candidates if c.config["name"] in names]
            known = {c.index: f"round {number}" for c in batch}
            tuning.request(batch)
            tuning.compile(lambda c, known=known: compiled.append((known[c.index], c.config["name"])), batch)
            while (candidate := tuning.next_candidate()) is not None:
                tuning.measure(candidate, functools.partial(clock.advance, COSTS[candidate.config["name"]]))
        assert tuning.finish().config["name"] == "b"
    assert sorted(compiled) == [("round 0", "a"), ("round 0", "b"), ("round 1", "c"), ("round 1", "d")]
    assert all(error is None for _, error, _, _ in watch.finished)


def test_the_pool_is_sized_for_later_rounds_not_by_the_first(monkeypatch):
    """An adaptive driver's first round of 2 must not cap a later round of 16 at 2 compiles at once."""
    monkeypatch.setattr(compile_stage.os, "cpu_count", lambda: 16)
    assert compile_stage.worker_count(0) == 16
    assert compile_stage.worker_count(3) == 3
    monkeypatch.setattr(compile_stage.os, "cpu_count", lambda: 64)
    assert compile_stage.worker_count(0) == compile_stage.MAX_AUTO_WORKERS


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_the_tuning_log_says_how_long_compile_took(monkeypatch, isolated, tmp_path):
    clock, watch = FakeClock(), Watch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=2)
    backend = ForkedCompiles(tmp_path / "compiled.log", {"c": lambda: time.sleep(0.2)})
    drive(session, clock, backend.compile_one, [], child=backend)
    (log,) = (isolated / "work").glob("tune-rank0.log")
    (line,) = [line for line in log.read_text().splitlines() if "compiled" in line]
    match = re.search(
        r"work: key 'key': compiled 4 candidate\(s\) in ([0-9.]+) s \(the slowest \[(\d)\] ([0-9.]+) s\)$",
        line,
    )
    assert match is not None, line
    assert float(match[1]) >= float(match[3]) >= 0.2 and match[2] == "2"


# -- compiles ahead: what an adaptive driver expects to ask for next ----------------------------------


class AheadWatch:
    """Observer of the compile events' ``ahead`` flag, by candidate index."""

    def __init__(self) -> None:
        self.started: list[tuple[int, bool]] = []
        self.finished: list[tuple[int, bool, int, int]] = []
        self.lock = threading.Lock()

    @hookimpl
    def kerneltune_compile_started(self, event):
        with self.lock:
            self.started.append((event.candidate.index, event.ahead))

    @hookimpl
    def kerneltune_compile_finished(self, event):
        with self.lock:
            self.finished.append((event.candidate.index, event.ahead, event.done, event.total))


def beating(folder: Path, seconds: float, parent: int):
    """A compile that, in a compile process, writes its niceness, then a heartbeat for ``seconds``."""

    def compile_c() -> None:
        if os.getpid() == parent:
            return
        (folder / "nice").write_text(str(os.nice(0)))
        (folder / "pid").write_text(str(os.getpid()))
        beats, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            beats += 1
            (folder / "beat").write_text(str(beats))
            time.sleep(0.005)
        (folder / "done").write_text("")

    return compile_c


def slow(parent: int, seconds: float):
    """A compile that takes ``seconds`` in a compile process (not in ``parent``, where it loads)."""

    def compile_slowly() -> None:
        if os.getpid() != parent:
            time.sleep(seconds)

    return compile_slowly


def by_name(tuning_space, names):
    return [c for c in tuning_space.candidates if c.config["name"] in names]


def adaptive_rounds(session, clock, backend, rounds, on_run=lambda name: None):
    """Each of ``rounds`` is (names to measure, names expected next); the pick."""
    tuner = Tuner(Space.build("work", [{"name": n} for n in NAMES], "def work(name): ..."))
    with tuner.begin(session, "key", adaptive=True) as tuning:
        for names, later in rounds:

            def run(candidate):
                name = candidate.config["name"]

                def thunk():
                    on_run(name)
                    clock.advance(COSTS[name])

                return thunk

            tuning.round(
                by_name(tuner.space, names),
                run,
                compile_one=backend.compile_one,
                child=backend,
                ahead=by_name(tuner.space, later),
            )
        return tuning.finish()


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or not hasattr(os, "fork"), reason="needs fork")
def test_a_compile_ahead_runs_niced_unwaited_stopped_while_measuring_and_is_not_redone(
    monkeypatch, isolated, tmp_path
):
    clock, watch = FakeClock(), AheadWatch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=4)
    parent = os.getpid()
    ended: list[bool] = []
    end = siblings.Siblings.ended

    def note(judge: siblings.Siblings, seconds: float, ahead: bool = False) -> None:
        ended.append(ahead)
        end(judge, seconds, ahead=ahead)

    monkeypatch.setattr(siblings.Siblings, "ended", note)

    def slow_a() -> None:  # round 1's compile outlasts the start of c's, ahead
        if os.getpid() != parent:
            time.sleep(0.5)

    backend = ForkedCompiles(tmp_path / "compiled.log", {"a": slow_a, "c": beating(tmp_path, 1.0, parent)})
    seen: list[tuple[str, bool, str, str]] = []

    def on_run(name: str) -> None:
        if name in ("a", "b") and name not in [n for n, *_ in seen]:
            before = (tmp_path / "beat").read_text()
            time.sleep(0.2)  # a heartbeat every 5 ms, were the process let run
            seen.append((name, (tmp_path / "done").exists(), before, (tmp_path / "beat").read_text()))

    best = adaptive_rounds(session, clock, backend, [(["a", "b"], ["c", "d"]), (["c", "d"], [])], on_run)
    assert best.config["name"] == "b"
    assert [name for name, *_ in seen] == ["a", "b"]
    assert not any(done for _, done, _, _ in seen), "round 1 was measured before c's compile ahead ended"
    assert all(before == after for _, _, before, after in seen), f"c's compile ran beside a timed run: {seen}"
    assert (tmp_path / "done").exists(), "resumed once round 2 asked for it"
    assert int((tmp_path / "nice").read_text()) >= min(19, os.nice(0) + 1), "ahead at a lower priority"
    compiled = backend.compiled()
    assert compiled.count(("child", "c")) == 1 and compiled.count(("child", "d")) == 1, "not compiled twice"
    assert sorted(watch.started) == [(0, False), (1, False), (2, True), (3, True)]
    # c and d began ahead: once ended they count among the siblings (by their processor time).
    assert sorted(ended) == [False, False, True, True]
    # The counts are of compiles a round waits for: a compile ahead counts once a round asks for it.
    round_one = [f for f in watch.finished if f[0] in (0, 1)]
    assert {(done, total) for _, _, done, total in round_one} <= {
        (1, 2),
        (2, 2),
        (1, 3),
        (2, 3),
        (1, 4),
        (2, 4),
    }


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or not hasattr(os, "fork"), reason="needs fork")
def test_loads_beside_measuring_and_compiles_ahead_in_processes_go_together(monkeypatch, isolated, tmp_path):
    # Round 1's programs are cached and load beside its measuring; the two its strategy names next
    # miss and compile ahead in processes, stopped while candidates are measured. Nothing waits forever.
    clock, watch = FakeClock(), AheadWatch()
    session = held_session(monkeypatch, clock, watch, compile_workers=4)
    backend = ProbedCompiles(tmp_path / "compiled.log", cached={"a", "b"})
    outcome: list[object] = []

    def tune() -> None:
        rounds = [(["a", "b"], ["c", "d"]), (["c", "d"], [])]
        outcome.append(adaptive_rounds(session, clock, backend, rounds, lambda name: time.sleep(0.01)))

    tuning = threading.Thread(target=tune, daemon=True)
    tuning.start()
    tuning.join(timeout=60)
    assert not tuning.is_alive(), "the tuning hung"
    (best,) = outcome
    assert best.config["name"] == "b"
    assert ("here", "a") in backend.compiled() and ("child", "c") in backend.compiled()


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or not hasattr(os, "fork"), reason="needs fork")
def test_a_compile_ahead_no_round_asks_for_is_stopped_when_the_tuning_ends(monkeypatch, isolated, tmp_path):
    clock, watch = FakeClock(), AheadWatch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=4)
    parent = os.getpid()
    backend = ForkedCompiles(tmp_path / "compiled.log", {"c": beating(tmp_path, 60.0, parent)})
    started = time.monotonic()
    best = adaptive_rounds(session, clock, backend, [(["a", "b"], ["c"]), (["d"], [])])
    assert best.config["name"] == "b" and time.monotonic() - started < 30
    deadline = time.monotonic() + 5
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int((tmp_path / "pid").read_text())
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the compile ahead was stopped with the tuning"
    assert ("here", "c") not in backend.compiled(), "never loaded here: no round asked for it"


@pytest.mark.parametrize("settings", [{"compile_ahead": False}, {"compile_pool": "threads"}], ids=str)
def test_nothing_compiles_ahead_when_compile_ahead_is_off_or_compiles_run_on_threads(
    monkeypatch, isolated, tmp_path, settings
):
    clock, watch = FakeClock(), AheadWatch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=2, **settings)
    backend = ForkedCompiles(tmp_path / "compiled.log")
    best = adaptive_rounds(session, clock, backend, [(["a", "b"], ["c", "d"]), (["d"], [])])
    assert best.config["name"] == "b"
    assert {name for _, name in backend.compiled()} == {"a", "b", "d"}
    assert not any(ahead for _, ahead in watch.started)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_drivers_new_word_on_what_comes_next_drops_the_earlier_compiles_ahead_not_started(
    monkeypatch, isolated, tmp_path
):
    clock, watch = FakeClock(), AheadWatch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=1)
    parent = os.getpid()

    # b is the one compile ahead at a time while c waits its turn; b ends while round 2's d compiles.
    backend = ForkedCompiles(tmp_path / "compiled.log", {"b": slow(parent, 0.2), "d": slow(parent, 0.8)})
    rounds = [(["a"], ["b", "c"]), (["d"], ["b"]), (["b", "c"], [])]
    best = adaptive_rounds(session, clock, backend, rounds)
    assert best.config["name"] == "b"
    assert backend.compiled().count(("child", "c")) == 1
    assert (2, False) in watch.started and (2, True) not in watch.started, "c was dropped before it started"
    assert (1, True) in watch.started, "b, started ahead, went on"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
def test_a_compile_begun_ahead_meets_the_deadline_by_the_processor_time_it_used_ahead(
    monkeypatch, isolated, tmp_path
):
    # As below, but d used (as the system says) 100 s of processor time before round 2 asked for it:
    # judged from the ask alone it would have the deadline over again; it fails at once.
    monkeypatch.setattr(siblings, "DEADLINE_MIN_S", 0.5)
    monkeypatch.setattr(forks, "tree_usage", lambda pid: siblings.TreeUsage(100.0, True, 0.0))
    clock, watch = FakeClock(), AheadWatch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=4, compile_deadline=5)
    parent = os.getpid()
    backend = ForkedCompiles(tmp_path / "compiled.log", {"a": slow(parent, 0.7), "d": slow(parent, 1.0)})
    with warnings.catch_warnings():
        warnings.simplefilter("error", CandidateFailedWarning)  # a deadline stop is an expected drop
        best = adaptive_rounds(session, clock, backend, [(["a", "b", "c"], ["d"]), (["d"], [])])
    assert best.config["name"] == "b"
    (record,) = stored_records(isolated, "work")
    assert "compile_deadline" in (record["candidates"][3]["error"] or ""), record["candidates"][3]
    assert ("here", "d") not in backend.compiled(), "stopped before it ended"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="compile processes need fork")
@pytest.mark.parametrize("d_takes, waiting", [(1.0, False), (2.0, True)], ids=["asked-for", "waiting"])
def test_a_compile_begun_ahead_meets_the_deadline_from_when_a_round_asks_for_it(
    monkeypatch, isolated, tmp_path, d_takes, waiting
):
    # Round 1 waits 0.7 s for a; d, ahead beside it, takes 1.0 s: past the 0.5 s deadline from its
    # fork, but within it from when round 2 asks for it. Or d takes 2.0 s, past the deadline from the
    # ask too, but its tree waits (as the system says) ten times as long as it runs for a processor
    # (niced, beside the round's other compiles): that wait is not its own.
    monkeypatch.setattr(siblings, "DEADLINE_MIN_S", 0.5)
    if waiting:
        monkeypatch.setattr(
            forks, "tree_usage", lambda pid: siblings.TreeUsage(0.0, True, 10 * time.monotonic())
        )
    clock, watch = FakeClock(), AheadWatch()
    session = engine_session(monkeypatch, clock, watch, compile_workers=4, compile_deadline=5)
    parent = os.getpid()
    backend = ForkedCompiles(tmp_path / "compiled.log", {"a": slow(parent, 0.7), "d": slow(parent, d_takes)})
    best = adaptive_rounds(session, clock, backend, [(["a", "b", "c"], ["d"]), (["d"], [])])
    assert best.config["name"] == "b"
    (record,) = stored_records(isolated, "work")
    assert record["candidates"][3]["error"] is None, record["candidates"][3]
    assert ("here", "d") in backend.compiled()
