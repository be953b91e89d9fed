"""Serving unseen shapes: ``tune = "nearest"`` serves a key without a stored pick unmeasured, by
the nearest stored key's pick, and marks it pending; ``tune = "pending"`` tunes the marked keys.

The landscape is tests/test_warm_start.py's: configs ``n`` in 1..8, a key ``m`` fastest with
``n = log2(m) - 3``, on a fake clock.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import signal

import kernels
import pytest
import serving_worker
import torch
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import NoStoredPickError, add_plugin, background, hookimpl, remove_plugin
from kerneltune.core.driving import flush_marks
from kerneltune.core.machine import stored_keys
from kerneltune.plugins.caches.files import JsonCache
from search_doubles import Script, by_block, timer_plugin, use_session
from test_contextual_disk import fresh_kernel, tuned_outer
from test_search_params import launch_double, make_double
from test_warm_start import NS, distance_plugin, landscape
from tuning_doubles import stored_records

pytestmark = pytest.mark.usefixtures("unchecked")


def index_keys(index):
    """The keys of a key index's rows, all facts together."""
    return [key for group in index["groups"] for key in group["keys"]]


def marks(cache, function):
    """The pending marks stored for ``function``."""
    return [r["pending"] for r in stored_records(cache, function) if "pending" in r]


def test_nearest_serves_the_nearest_stored_keys_pick_unmeasured_and_marks_it_pending(monkeypatch, isolated):
    swept = landscape(monkeypatch)
    tuned = swept.tuner()
    for m in (64, 1024):
        tuned(m)
    swept.measured()

    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    serving = landscape(monkeypatch)
    fresh = serving.tuner()
    assert fresh(96) == 3, "64's pick (n = 3) serves 96"
    assert serving.calls == [3], "one run: the call itself, nothing measured"
    assert fresh(700) == 7 and serving.calls == [3, 7]
    mark = {m["key"]: m for m in marks(isolated, "swept")}
    assert set(mark) == {96, 700}
    assert mark[96]["served_by"] == 64 and mark[96]["config"] == "n=<3>" and mark[96]["count"] == 1
    assert mark[700]["served_by"] == 1024


def test_a_forked_child_writes_its_marks_on_a_writer_of_its_own(monkeypatch, isolated):
    landscape(monkeypatch).tuner()(64)
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    fresh = landscape(monkeypatch).tuner()
    fresh(96)
    flush_marks()  # the parent's writer thread runs; a fork copies none of it
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's result is its exit code
        code = 1
        try:
            signal.alarm(30)  # a flush waiting on a writer that never started would hang
            fresh(700)
            flush_marks()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert {m["key"] for m in marks(isolated, "swept")} == {96, 700}


def test_a_cache_without_a_key_index_is_listed_once_per_process_and_function(monkeypatch, isolated):
    tuned = landscape(monkeypatch).tuner()
    for m in (64, 1024):
        tuned(m)
    (isolated / "swept" / "stored-keys.json").unlink()  # a cache filled before the index existed
    listings = []
    listing = JsonCache.entries
    monkeypatch.setattr(JsonCache, "entries", lambda self, *a: listings.append(a) or listing(self, *a))
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    serving = landscape(monkeypatch)
    fresh = serving.tuner()
    assert [fresh(m) for m in (96, 300, 700)] == [3, 7, 7] and serving.calls == [3, 7, 7]
    assert listings == [("swept",)], "one listing, kept for the later keys"
    assert (isolated / "swept" / "stored-keys.json").is_file(), "and stored for the next process"


def run_cli(*arguments):
    result = CliRunner().invoke(cli.main, list(arguments), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def reads(monkeypatch):
    """The cache entries JsonCache.load reads, and its listings, from now on."""
    loads, listings = [], []
    load, listing = JsonCache.load, JsonCache.entries
    monkeypatch.setattr(
        JsonCache, "load", lambda self, ns, entry: loads.append(entry) or load(self, ns, entry)
    )
    monkeypatch.setattr(JsonCache, "entries", lambda self, *a: listings.append(a) or listing(self, *a))
    return loads, listings


def test_a_stored_keys_call_reads_the_index_ahead_for_the_first_new_key(monkeypatch, isolated):
    tuned = landscape(monkeypatch).tuner()
    for m in (64, 1024):
        tuned(m)
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    loads = []
    load = JsonCache.load

    def traced(self, namespace, entry):
        loads.append(entry)
        return load(self, namespace, entry)

    monkeypatch.setattr(JsonCache, "load", traced)
    serving = landscape(monkeypatch)
    fresh = serving.tuner()
    assert fresh(64) == 3 and "stored-keys" in loads, "its pick stored: the index is read in that call"
    loads.clear()
    assert fresh(96) == 3 and serving.calls == [3, 3], "served from the index read ahead"
    assert "stored-keys" not in loads
    assert fresh(1024) == 7 and "stored-keys" not in loads, "read once per tuner"
    loads.clear()
    assert fresh(64) == 3 and not loads, "a hit reads nothing"

    monkeypatch.setenv("KERNELTUNE_TUNE", "auto")
    other = landscape(monkeypatch).tuner()
    assert other(1024) == 7
    assert "stored-keys" not in loads, "read ahead only where keys are served"


def test_a_stored_keys_call_starts_the_thread_a_served_keys_mark_needs(monkeypatch, isolated):
    tuned = landscape(monkeypatch).tuner()
    for m in (64, 1024):
        tuned(m)
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    pid = os.fork()  # a process whose background thread has not started (the parent's is not its)
    if pid == 0:  # pragma: no cover - the child's result is its exit code
        code = 1
        try:
            signal.alarm(30)
            fresh = landscape(monkeypatch).tuner()
            before = background._pid == os.getpid()
            fresh(64)
            started = background._pid == os.getpid()
            fresh(96)
            flush_marks()
            code = 0 if started and not before else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "started in the stored key's call"


def test_tunings_keep_the_key_index_and_a_serving_process_reads_it_not_the_records(monkeypatch, isolated):
    tuned = landscape(monkeypatch).tuner()
    for m in (64, 1024):
        tuned(m)
    index = isolated / "swept" / "stored-keys.json"
    assert index_keys(json.loads(index.read_text())) == [64, 1024], "each record adds its row"
    records = {r["digest"] for r in json.loads(run_cli("cache", "list", "--json"))}
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")

    loads, listings = reads(monkeypatch)
    assert landscape(monkeypatch).tuner()(96) == 3 and landscape(monkeypatch).tuner()(700) == 7
    assert not listings and "stored-keys" in loads
    assert not records & set(loads), "no record read: the index holds what serving needs"

    monkeypatch.delenv("KERNELTUNE_TUNE")
    assert landscape(monkeypatch).tuner()(4096) == 8  # tuned: its row joins the index
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    loads.clear()
    serving = landscape(monkeypatch)
    assert serving.tuner()(3000) == 8 and serving.calls == [8], "served by 4096's pick, from the index"
    assert not listings and not records & set(loads)


def test_a_damaged_key_index_is_listed_again_and_replaced(monkeypatch, isolated):
    tuned = landscape(monkeypatch).tuner()
    for m in (64, 1024):
        tuned(m)
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    landscape(monkeypatch).tuner()(96)
    index = isolated / "swept" / "stored-keys.json"
    index.write_text(json.dumps({"kind": "kerneltune stored keys", "schema": 1, "rows": 3}))
    _, listings = reads(monkeypatch)
    assert landscape(monkeypatch).tuner()(700) == 7, "served from the records, listed"
    assert listings == [("swept",)]
    assert len(index_keys(json.loads(index.read_text()))) == 2, "listed again, replacing the damaged one"


@pytest.mark.parametrize("before", ["none", "damaged"])
def test_a_tuning_that_stores_into_a_cache_without_a_readable_index_lists_the_records_into_one(
    monkeypatch, isolated, before
):
    tuned = landscape(monkeypatch).tuner()
    tuned(64)
    index = isolated / "swept" / "stored-keys.json"
    if before == "none":
        index.unlink()
    else:
        index.write_text(json.dumps({"kind": "kerneltune stored keys", "schema": 7}))
    tuned(1024)
    assert sorted(index_keys(json.loads(index.read_text()))) == [64, 1024]


def test_a_listing_another_process_stored_first_still_gets_this_records_row(monkeypatch, isolated):
    tuned = landscape(monkeypatch).tuner()
    tuned(64)
    index = isolated / "swept" / "stored-keys.json"
    theirs = index.read_text()  # an index of 64 alone: what another process listed
    index.unlink()
    listing = stored_keys._list_into_index

    def raced(*args):
        index.write_text(theirs)  # stored while this process was listing
        return listing(*args)

    monkeypatch.setattr(stored_keys, "_list_into_index", raced)
    tuned(1024)
    assert sorted(index_keys(json.loads(index.read_text()))) == [64, 1024]


@pytest.mark.parametrize("cache", ["none", "memory"])
def test_a_cache_that_keeps_no_index_is_listed_at_its_first_store_only(monkeypatch, isolated, cache):
    monkeypatch.setenv("KERNELTUNE_CACHE", cache)
    listings = []
    listing = stored_keys._list_into_index
    monkeypatch.setattr(stored_keys, "_list_into_index", lambda *a: listings.append(1) or listing(*a))
    tuned = landscape(monkeypatch).tuner()
    for m in (16, 32, 64, 128, 256):
        tuned(m)
    # none keeps nothing: one listing finds that out, not one per store; memory keeps the index.
    assert len(listings) == 1


def served_then_pending(monkeypatch, isolated):
    """64 and 1024 tuned, 96 and 700 served under nearest: the fake clock's landscape, afresh."""
    tuned = landscape(monkeypatch).tuner()
    for m in (64, 1024):
        tuned(m)
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    serving = landscape(monkeypatch).tuner()
    for m in (96, 700):
        serving(m)
    assert {m["key"] for m in marks(isolated, "swept")} == {96, 700}


def test_pending_tunes_exactly_the_pending_keys_and_their_marks_go(monkeypatch, isolated):
    served_then_pending(monkeypatch, isolated)
    monkeypatch.setenv("KERNELTUNE_TUNE", "pending")
    replay = landscape(monkeypatch)
    tuned = replay.tuner()

    assert tuned(96) == 4 and replay.measured() == set(NS), "pending: tuned in full, its own best"
    assert tuned(64) == 3 and replay.measured() == {3}, "stored: served, nothing measured"
    assert tuned(700) == 6 and replay.measured() == set(NS)
    assert tuned(72) == 3 and replay.measured() == {3}, "neither: served as nearest serves it"
    assert [m["key"] for m in marks(isolated, "swept")] == [72], "tuned keys lose their marks"
    assert {r["key"] for r in stored_records(isolated, "swept") if "pending" not in r} == {64, 96, 700, 1024}


def test_a_key_served_again_by_another_process_counts_twice(monkeypatch, isolated):
    served_then_pending(monkeypatch, isolated)
    (before,) = [m for m in marks(isolated, "swept") if m["key"] == 96]
    again = landscape(monkeypatch).tuner()
    again(96)
    again(96)
    (after,) = [m for m in marks(isolated, "swept") if m["key"] == 96]
    assert after["count"] == 2, "once per process: the second call is a hit"
    assert after["first"] == before["first"] and after["last"] >= before["last"]


def test_processes_marking_one_key_at_once_lose_no_mark(monkeypatch, isolated):
    serving_worker.work(64)  # the stored neighbour, tuned here
    (record,) = stored_records(isolated, "work")
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    processes = 4
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(processes), context.Queue()
    workers = [
        context.Process(target=serving_worker.serve, args=(start, 96, results)) for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0] * processes
    ran = {results.get(timeout=5) for _ in range(processes)}
    assert ran == {serving_worker.SIZES[record["best"]["index"]]}, "each served by the neighbour's pick"
    (mark,) = marks(isolated, "work")
    assert mark["key"] == 96 and mark["count"] == processes, "every process's mark counted"


def test_processes_tuning_other_keys_at_once_each_add_their_row_to_the_key_index(isolated):
    keys = (16, 32, 128, 256)
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(len(keys)), context.Queue()
    workers = [context.Process(target=serving_worker.serve, args=(start, key, results)) for key in keys]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0] * len(keys)
    index = json.loads((isolated / "work" / "stored-keys.json").read_text())
    assert sorted(index_keys(index)) == list(keys), "under the index's lock, no row lost"


# -- what the command, the log and the verbose lines say --------------------------------------


def test_cache_list_show_and_report_name_the_pending_keys_and_their_neighbours(monkeypatch, isolated):
    served_then_pending(monkeypatch, isolated)
    runner = CliRunner()
    listed = json.loads(runner.invoke(cli.main, ["cache", "list", "--json"], catch_exceptions=False).stdout)
    pending = {row["key"]: row for row in listed if row["status"] == "pending"}
    assert set(pending) == {96, 700} and {row["key"] for row in listed} == {64, 96, 700, 1024}
    assert pending[96]["pending"]["served_by"] == 64 and pending[96]["pending"]["times_served"] == 1
    table = runner.invoke(cli.main, ["cache", "list"], catch_exceptions=False).stdout
    assert "pending keys in" in table and "records in" in table

    shown = runner.invoke(cli.main, ["cache", "show", pending[96]["digest"]], catch_exceptions=False)
    assert shown.exit_code == 0
    assert "from a neighbour: the pick of the nearest stored key 64, n=<3>" in shown.stdout
    reported = runner.invoke(cli.main, ["report", "swept"], catch_exceptions=False).stdout
    assert (
        "swept 700\n  pending: served without measuring by the pick of the nearest stored key 1024"
        in reported
    )


def test_verbose_lines_and_the_tuning_log_say_what_served_a_key(monkeypatch, isolated, capsys):
    landscape(monkeypatch).tuner()(64)
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    serving = landscape(monkeypatch).tuner()
    serving(96, autotune_verbose=True)
    line = "swept: key 96: no stored pick, and tune = 'nearest': served without measuring by the pick of "
    line += "the nearest stored key 64, [2] n=<3>; marked pending"
    assert line in capsys.readouterr().out
    flush_marks()  # the log line, like the mark, is written by the background thread
    assert line in (isolated / "swept" / "tune-rank0.log").read_text()


def test_a_served_keys_log_line_that_cannot_be_written_warns_from_the_background(
    monkeypatch, isolated, tmp_path
):
    landscape(monkeypatch).tuner()(64)
    log = isolated / "swept" / "tune-rank0.log"
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    log.unlink()
    log.symlink_to(precious)
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    with pytest.warns(RuntimeWarning, match=r"cannot write the tuning log .*symbolic link"):
        assert landscape(monkeypatch).tuner()(96) == 3  # served all the same
        flush_marks()  # the line is written, and fails, on the background thread
    assert precious.read_text() == "keep me\n"
    assert marks(isolated, "swept"), "the mark is stored all the same"


def test_nothing_stored_serves_the_first_config_and_marks_it(monkeypatch, isolated, capsys):
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    serving = landscape(monkeypatch)
    assert serving.tuner()(96) == 1 and serving.calls == [1]
    (mark,) = marks(isolated, "swept")
    assert mark["served_by"] is None and mark["config"] == "n=<1>"
    assert "served without measuring by the first config (nothing stored near it)" in capsys.readouterr().out


# -- hostile marks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [{"pending": 5}, {"pending": {"function": "swept"}}, "count"],
    ids=["not a mapping", "fields missing", "a count that is no count"],
)
def test_a_damaged_mark_is_a_logged_miss_and_the_next_serve_replaces_it(monkeypatch, isolated, damage):
    served_then_pending(monkeypatch, isolated)
    (path,) = [
        p
        for p in (isolated / "swept").glob("[0-9a-f]*.json")
        if json.loads(p.read_text()).get("pending", {}).get("key") == 96
    ]
    data = json.loads(path.read_text())
    if damage == "count":
        data["pending"]["count"] = "many"
    else:
        data = damage
    path.write_text(json.dumps(data))
    listed = CliRunner().invoke(cli.main, ["cache", "list"])
    assert f"skipping {path}" in listed.stderr and "pending" in listed.stderr

    serving = landscape(monkeypatch)
    with pytest.warns(RuntimeWarning, match="is damaged .*pending"):
        assert serving.tuner()(96) == 3 and serving.calls == [3]
    flush_marks()
    assert json.loads(path.read_text())["pending"]["count"] == 1, "a fresh mark replaced it"

    monkeypatch.setenv("KERNELTUNE_TUNE", "fail")
    path.write_text(json.dumps({"pending": 5}))
    with pytest.raises(NoStoredPickError, match=r"is damaged .*pending is a int"):
        landscape(monkeypatch).tuner()(96)


# -- contextual_autotune, its picks on disk ------------------------------------------------


class Served:
    """What the contextual tuner measured, and each pick it served without measuring."""

    def __init__(self):
        self.measured = 0
        self.loaded = []

    @hookimpl
    def kerneltune_launch_measured(self, event):
        self.measured += 1

    @hookimpl
    def kerneltune_pick_loaded(self, event):
        self.loaded.append(event)


@pytest.fixture
def served(request):
    observer = Served()
    add_plugin(observer)
    request.addfinalizer(lambda: remove_plugin(observer))
    return observer


def test_contextual_nearest_serves_a_new_size_from_the_stored_one_measuring_nothing(
    monkeypatch, isolated, served, capsys
):
    monkeypatch.setenv("KERNELTUNE_CONTEXTUAL_CACHE", "disk")
    first = fresh_kernel()
    x = torch.randn(100, device=kernels.DEVICE)
    torch.testing.assert_close(tuned_outer(first)(x), 2.0 * x)
    (record,) = stored_records(isolated, "scale_kernel")
    measured = served.measured
    assert measured > 0

    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    again = fresh_kernel()
    y = torch.randn(200, device=kernels.DEVICE)
    torch.testing.assert_close(tuned_outer(again)(y), 2.0 * y)
    assert served.measured == measured, "nothing measured for the new size"
    (event,) = served.loaded
    assert event.source == "neighbour" and event.served_by == record["key"]
    assert event.best.label == record["best"]["label"]
    (mark,) = marks(isolated, "scale_kernel")
    assert mark["key"] == [200, *record["key"][1:]]
    assert mark["served_by"] == record["key"] and mark["count"] == 1
    out = capsys.readouterr().out
    assert "Triton autotuning for function scale_kernel" in out
    assert f"served without measuring by the pick of the nearest stored key {record['key']!r}" in out


# -- search_params ----------------------------------------------------------------------


@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="interpreter test, as test_search_params"
)
def test_search_params_nearest_serves_a_new_size_from_the_stored_one_measuring_nothing(monkeypatch, isolated):
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    hints = {"search_params": {"params": ["BLOCK"], "values": [16, 32]}}
    use_session(monkeypatch, timer_plugin(script), cache="json")
    launch_double(make_double(hints, pre_hook=script.hook), n=32)
    (record,) = stored_records(isolated, "double_kernel")
    assert record["best"]["label"] == "BLOCK=32"

    use_session(monkeypatch, timer_plugin(script), cache="json", tune="nearest")
    launched = len(script.launches)
    kernel = make_double(hints, pre_hook=script.hook)  # a new process's kernel
    launch_double(kernel, n=48)
    assert len(script.launches) == launched, "nothing measured"
    (mark,) = marks(isolated, "double_kernel")
    assert mark["served_by"] == record["key"] and mark["key"][0][0] == 48
    assert mark["config"] == "BLOCK=32", "the neighbour's pick, not the first config"


def test_a_distance_plugin_decides_which_stored_key_serves(monkeypatch, isolated):
    tuned = landscape(monkeypatch).tuner()
    for m in (64, 1024):
        tuned(m)
    monkeypatch.setenv("KERNELTUNE_TUNE", "nearest")
    # Keys under 100 and above it never share picks: 96 is served by 1024's, far as it is.
    plugin = distance_plugin(lambda key, other: math.inf if (key < 100) == (other < 100) else 1.0)
    serving = landscape(monkeypatch, extra=(plugin,))
    assert serving.tuner()(96) == 7 and serving.calls == [7]
