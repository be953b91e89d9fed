"""Python's garbage collector is held off while a key is tuned, and given back as it was."""

from __future__ import annotations

import gc
import threading

import pytest
from kerneltune.core import NoValidConfigError
from kerneltune.core.machine import collector
from tuning_doubles import install_session

from triton_dist.tune import autotune

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def tuned(seen: list[bool], fail: bool = False):
    def work(n: int, c: int) -> int:
        seen.append(gc.isenabled())
        if fail:
            raise RuntimeError("out of memory")
        return c

    return autotune(config_space=[{"c": c} for c in range(3)], key_fn=lambda n: n)(work)


def test_a_tuning_runs_with_the_collector_off_and_gives_it_back(monkeypatch, isolated):
    install_session(monkeypatch, timer="wallclock")
    seen: list[bool] = []
    function = tuned(seen)
    function(1)
    assert len(seen) > 3 and not any(seen[:-1]), "every measured run with the collector off"
    assert seen[-1], "the call that follows the tuning runs with it on again"
    assert gc.isenabled()
    seen.clear()
    function(1)
    assert seen == [True], "a stored pick: no tuning, nothing held off"


def test_pause_gc_false_leaves_the_collector_alone(monkeypatch, isolated):
    install_session(monkeypatch, timer="wallclock", pause_gc=False)
    seen: list[bool] = []
    tuned(seen)(1)
    assert all(seen)


def test_a_collector_the_program_turned_off_stays_off(monkeypatch, isolated):
    install_session(monkeypatch, timer="wallclock")
    gc.disable()
    seen: list[bool] = []
    tuned(seen)(1)
    assert not any(seen) and not gc.isenabled()


def test_a_tuning_that_fails_gives_the_collector_back(monkeypatch, isolated):
    install_session(monkeypatch, timer="wallclock")
    seen: list[bool] = []
    with pytest.raises(NoValidConfigError), pytest.warns(Warning):
        tuned(seen, fail=True)(1)
    assert seen and not any(seen)
    assert gc.isenabled()


def test_overlapping_tunings_give_it_back_when_the_last_ends():
    collector.hold_off()
    collector.hold_off()
    assert not gc.isenabled()
    collector.let_go()
    assert not gc.isenabled(), "another tuning still runs"
    collector.let_go()
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="without a hold_off"):
        collector.let_go()


def test_tunings_in_threads_leave_it_on(monkeypatch, isolated):
    install_session(monkeypatch, timer="wallclock")
    seen: list[bool] = []
    threads = [threading.Thread(target=tuned(seen), args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen and gc.isenabled()
