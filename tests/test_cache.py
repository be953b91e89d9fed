"""The disk and in-process caches: what is stored, where, how, and what a bad file does."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import msgpack
import pytest
from kerneltune.core import CacheReadError, CandidateFailedWarning, NoStoredPickError
from kerneltune.plugins.caches.files import JsonCache, MsgpackCache
from kerneltune.plugins.caches.memory import MemoryCache
from tuning_doubles import load_file, only_record_file, record_files, stored_records

from triton_dist.tune import autotune

TUNED = 2 * (5 + 10) + 1
# Their tuned functions return which config ran (its n, its cost), on purpose: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

SCRIPT = """
import json
import sys

from triton_dist.tune import autotune

calls = []


@autotune(config_space=[{"n": 1}, {"n": 2}, {"n": 3}], key_fn=lambda x: (x, "cpu"))
def tuned_in_a_script(x, n):
    calls.append(n)
    return x * n


result = tuned_in_a_script(int(sys.argv[1]))
print(json.dumps({"calls": calls, "result": result}))
"""


def _run_script(path: Path, argument: int) -> dict:
    done = subprocess.run(
        [sys.executable, str(path), str(argument)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=path.parent,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_hits_the_disk_cache(tmp_path, isolated):
    script = tmp_path / "tuned_script.py"
    script.write_text(SCRIPT)

    first = _run_script(script, 4)
    # 15 runs of each candidate, then the pick; a busy host may retake a timed run or a few.
    assert sorted(set(first["calls"])) == [1, 2, 3] and len(first["calls"]) >= 3 * 15 + 1
    (record,) = stored_records(isolated, "tuned_in_a_script")
    best_n = [1, 2, 3][record["best"]["index"]]
    assert first["result"] == 4 * best_n

    second = _run_script(script, 4)
    assert second == {"calls": [best_n], "result": 4 * best_n}, "the second process must not measure"


# -- what a record holds ----------------------------------------------------------------


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_record_holds_versions_hardware_key_and_every_candidate(cpu_host, isolated):
    import torch
    import triton

    @autotune(
        config_space=[{"n": 1}, {"n": 0}, {"n": 2}],
        key_fn=lambda x: (x, "k"),
        prune_fn=lambda c, x: c["n"] < 2,
    )
    def work(x, n):
        return x // n

    work(8)

    (path,) = record_files(isolated, "work")
    record = json.loads(path.read_text())
    assert record["schema"] == 1
    assert record["function"] == "work"
    assert record["key"] == [8, "k"]
    assert record["best"] == {"index": 0, "label": "n=<1>", "values": {"n": 1}}

    versions = record["versions"]
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))
    assert versions["torch"] == torch.__version__
    assert versions["triton"] == triton.__version__
    assert versions["kerneltune"]
    assert record["hardware"]["device"] == "cpu"

    ok, failed, pruned = record["candidates"]
    assert [row["index"] for row in record["candidates"]] == [0, 1, 2]
    assert [row["label"] for row in record["candidates"]] == ["n=<1>", "n=<0>", "n=<2>"]
    assert len({row["fingerprint"] for row in record["candidates"]}) == 3
    assert ok["error"] is None and len(ok["samples_ms"]) == 10
    kept = sorted(ok["samples_ms"])[2:-2]
    assert math.isclose(ok["time_ms"], sum(kept) / len(kept)), "the 20% trimmed mean"
    assert failed == {
        "index": 1,
        "fingerprint": failed["fingerprint"],
        "label": "n=<0>",
        "time_ms": None,
        "samples_ms": [],
        "error": "ZeroDivisionError: integer division or modulo by zero",
    }
    assert pruned["error"] == "pruned" and pruned["time_ms"] is None
    assert "NaN" not in path.read_text() and "Infinity" not in path.read_text()


VERSION_1 = """
def shared_name(x, n):
    CALLS.append(n)
    return x * n
"""

VERSION_2 = """
def shared_name(x, n):
    CALLS.append(n)
    return n * x
"""


def _load_module(path: Path, source: str, calls: list):
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    module.CALLS = calls
    spec.loader.exec_module(module)
    return module.shared_name


def test_the_source_names_the_disk_entry_and_the_candidate_list_does_not(tmp_path, isolated):
    calls: list[int] = []
    v1 = _load_module(tmp_path / "version_one.py", VERSION_1, calls)
    v1_again = _load_module(tmp_path / "version_one_again.py", VERSION_1, calls)
    v2 = _load_module(tmp_path / "version_two.py", VERSION_2, calls)

    def tune(fn, space):
        return autotune(config_space=space, key_fn=lambda x: x)(fn)

    tune(v1, [{"n": 1}, {"n": 2}])(3)
    tune(v1_again, [{"n": 1}, {"n": 2}])(3)
    assert len(calls) == TUNED + 1, "same source, same list: a hit"

    tune(v2, [{"n": 1}, {"n": 2}])(3)
    assert len(calls) == 2 * TUNED + 1, "other source: a miss"
    assert len(record_files(isolated, "shared_name")) == 2

    calls.clear()
    tune(v1, [{"n": 1}, {"n": 3}])(3)
    # n=2 left the list: whether or not it was the pick, n=1 is the one stored candidate left,
    # and it is timed with the new n=3 in two interleaved rounds (5 + 5 runs, then 1 + 5).
    assert set(calls) == {1, 3}, "other candidate list: the record is found, only n=3 is new"
    assert len(calls) == 2 * (5 + 5 + 1 + 5) + 1
    calls.clear()
    tune(v1, [{"n": 1}, {"n": 3}])(3)
    assert len(calls) == 1, "the list just tuned: a hit"
    assert len(record_files(isolated, "shared_name")) == 2, "one entry per source and key"


# -- bad files -----------------------------------------------------------------------


def _work_body(x, n):
    _work_body.calls.append(n)
    return x * n


def _fresh(space=({"n": 1}, {"n": 2})):
    _work_body.calls = []
    return autotune(config_space=list(space), key_fn=lambda x: x)(_work_body)


def _edit(path: Path, change) -> None:
    data = load_file(path)
    change(data)
    _replace_with(path, data)


def _replace_with(path: Path, data) -> None:
    if path.suffix == ".msgpack":
        path.write_bytes(msgpack.packb(data, use_bin_type=True))
    else:
        path.write_text(json.dumps(data))


def _set(field, value):
    def change(data):
        data[field] = value

    return change


def _other_fingerprints(data):
    for row in data["candidates"]:
        row["fingerprint"] = "0" * 32


DAMAGE = {
    "missing": lambda path: path.unlink(),
    "empty": lambda path: path.write_bytes(b""),
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2]),
    "garbage": lambda path: path.write_bytes(b"\xc1\xff\x00not a record{{"),
    "not-a-mapping": lambda path: _replace_with(path, [1, 2]),
    "other-schema": lambda path: _edit(path, _set("schema", 99)),
    "other-candidates": lambda path: _edit(path, _other_fingerprints),
    "other-key": lambda path: _edit(path, _set("key", 4)),
    "missing-field": lambda path: _edit(path, lambda data: data.pop("versions")),
    "best-out-of-range": lambda path: _edit(path, _set("best", {"index": 7, "label": "?"})),
}


@pytest.mark.parametrize("cache", ["json", "msgpack"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_bad_cache_file_is_a_logged_miss_and_a_retune(monkeypatch, caplog, isolated, cache, damage):
    monkeypatch.setenv("KERNELTUNE_CACHE", cache)
    _fresh()(3)
    path = only_record_file(isolated, "_work_body", cache)
    DAMAGE[damage](path)

    tuner = _fresh()
    with caplog.at_level(logging.INFO, logger="kerneltune"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tuner(3) in (3, 6)

    assert len(_work_body.calls) == TUNED, "a bad file must lead to a retune"
    damaged = [str(w.message) for w in caught if "is damaged" in str(w.message)]
    if damage != "missing":
        assert "retuning" in caplog.text
    if damage in ("missing", "other-key", "other-candidates"):  # no record, or a sound one of another
        assert damaged == []
    else:
        (message,) = damaged  # not silent: one warning names the record and what is wrong
        assert message.startswith(f"kerneltune: _work_body: the stored record {path.stem} (cache ")
    assert load_file(path)["schema"] == 1, "the retune rewrites a good record"
    _fresh()(3)
    assert len(_work_body.calls) == 1


@pytest.mark.parametrize("cache", ["json", "msgpack"])
@pytest.mark.parametrize("damage", ["garbage", "missing-field", "best-out-of-range"])
def test_tune_fail_names_the_damaged_record_and_what_is_wrong(monkeypatch, isolated, cache, damage):
    monkeypatch.setenv("KERNELTUNE_CACHE", cache)
    _fresh()(3)
    path = only_record_file(isolated, "_work_body", cache)
    DAMAGE[damage](path)
    monkeypatch.setenv("KERNELTUNE_TUNE", "fail")

    with warnings.catch_warnings(), pytest.raises(NoStoredPickError) as info:
        warnings.simplefilter("ignore")
        _fresh()(3)

    message = str(info.value)
    assert message.startswith("_work_body: the stored record for key 3 is damaged"), message
    assert f"({path}: " in message, "the record's file, then what is wrong with it"
    assert ": )" not in message, "what is wrong is never left blank"
    assert "tune = 'fail'" in message
    assert _work_body.calls == []


def test_a_corrupt_file_never_raises_even_on_verbose_calls(isolated, capsys):
    _fresh()(3)
    only_record_file(isolated, "_work_body").write_text('{"schema": 1, "candidates": "oops"')
    assert _fresh()(3, autotune_verbose=True) in (3, 6)
    assert "tuning key 3" in capsys.readouterr().out


# -- software versions -------------------------------------------------------------------


def _pretend_tuned_with_other_torch_and_pick(index: int):
    def change(data):
        data["versions"]["torch"] = "0.0.1-elsewhere"
        data["best"] = {"index": index, "label": data["candidates"][index]["label"]}
        # A pick must be the fastest stored time, or the record is rejected.
        data["candidates"][index]["time_ms"] = 0.0

    return change


def test_version_mismatch_warns_and_uses_the_stored_pick(isolated):
    _fresh([{"n": 1}, {"n": 2}, {"n": 3}])(3)
    path = only_record_file(isolated, "_work_body")
    stored_best = load_file(path)["best"]["index"]
    forced = (stored_best + 1) % 3
    _edit(path, _pretend_tuned_with_other_torch_and_pick(forced))

    tuner = _fresh([{"n": 1}, {"n": 2}, {"n": 3}])
    with pytest.warns(RuntimeWarning, match=r"torch 0\.0\.1-elsewhere -> .*VERSION_CHECK"):
        result = tuner(3)

    assert result == 3 * [1, 2, 3][forced]
    assert _work_body.calls == [[1, 2, 3][forced]], "no measuring: the stored pick is used"


def test_version_check_turns_a_mismatch_into_a_retune(monkeypatch, isolated, recwarn, cpu_host):
    # On a CPU host's clock: a GPU's event timer would warn (rightly) that this host work leaves it idle.
    _fresh([{"n": 1}, {"n": 2}, {"n": 3}])(3)
    path = only_record_file(isolated, "_work_body")
    _edit(path, _pretend_tuned_with_other_torch_and_pick(0))
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_VERSION_CHECK", "1")

    _fresh([{"n": 1}, {"n": 2}, {"n": 3}])(3)

    assert len(_work_body.calls) == 3 * 15 + 1
    assert load_file(path)["versions"]["torch"] != "0.0.1-elsewhere", "the retune is persisted"
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


# -- the cache plugins themselves ---------------------------------------------------------

RECORD = {"schema": 1, "key": [1, {"float": "0x1.8p+1"}, None, True], "rows": [{"t": 1.5, "e": None}]}


@pytest.mark.parametrize("cls", [JsonCache, MsgpackCache])
def test_file_cache_round_trip_and_private_directories(tmp_path, cls):
    root = tmp_path / "fresh" / "root"
    cache = cls(root=root)

    assert cache.load("fn", "abc") is None
    cache.store("fn", "abc", RECORD)
    assert cache.load("fn", "abc") == RECORD

    folder = cache.directory("fn")
    assert folder == root / "fn"
    for created in (tmp_path / "fresh", root, folder):
        assert stat.S_IMODE(created.stat().st_mode) == 0o700, created
    files = sorted(p.name for p in folder.iterdir())
    assert files == [f"abc.{cls.suffix}", f"abc.{cls.suffix}.lock"], "no temporary file is left behind"


def test_json_cache_writes_readable_plain_json(tmp_path):
    JsonCache(root=tmp_path).store("fn", "abc", RECORD)
    text = (tmp_path / "fn" / "abc.json").read_text()
    assert json.loads(text) == RECORD
    assert "\n  " in text, "indented for people"


def test_json_cache_writes_a_field_a_line_and_a_list_item_a_line(tmp_path):
    record = {"b": [{"index": 1, "ms": 0.5}, {"index": 0, "ms": 2.0}], "a": {"k": [1, 2]}, "e": [], "n": None}
    JsonCache(root=tmp_path).store("fn", "abc", record)
    text = (tmp_path / "fn" / "abc.json").read_text()
    assert text.splitlines() == [
        "{",
        '  "a": {"k": [1, 2]},',
        '  "b": [',
        '    {"index": 1, "ms": 0.5},',
        '    {"index": 0, "ms": 2.0}',
        "  ],",
        '  "e": [],',
        '  "n": null',
        "}",
    ]
    assert json.loads(text) == record
    for other in ([1, 2], {1: "a"}, "text"):  # not a record: one line of plain JSON
        JsonCache(root=tmp_path).store("fn", "other", other)
        assert json.loads((tmp_path / "fn" / "other.json").read_text()) == json.loads(json.dumps(other))
    with pytest.raises(ValueError):
        JsonCache(root=tmp_path).store("fn", "nan", {"ms": [float("nan")]})


def test_msgpack_cache_writes_msgpack(tmp_path):
    MsgpackCache(root=tmp_path).store("fn", "abc", RECORD)
    assert msgpack.unpackb((tmp_path / "fn" / "abc.msgpack").read_bytes(), raw=False) == RECORD


def test_namespace_is_made_safe_for_the_file_system(tmp_path):
    cache = JsonCache(root=tmp_path)
    cache.store("../outside/fn", "../x", RECORD)
    written = [p for p in tmp_path.rglob("*.json")]
    assert len(written) == 1 and tmp_path in written[0].parents
    assert not (tmp_path.parent / "outside").exists()


@pytest.mark.parametrize("cls", [JsonCache, MsgpackCache])
def test_a_failed_write_keeps_the_old_record_and_no_temporary_file(tmp_path, monkeypatch, cls):
    cache = cls(root=tmp_path)
    cache.store("fn", "abc", RECORD)

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        cache.store("fn", "abc", {"schema": 1, "other": True})

    assert cache.load("fn", "abc") == RECORD
    assert not [p for p in (tmp_path / "fn").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("cls", [JsonCache, MsgpackCache])
def test_undecodable_file_is_a_cache_read_error(tmp_path, cls):
    cache = cls(root=tmp_path)
    cache.store("fn", "abc", RECORD)
    path = tmp_path / "fn" / f"abc.{cls.suffix}"
    path.write_bytes(b"\xc1")
    with pytest.raises(CacheReadError, match=str(path)):
        cache.load("fn", "abc")


def test_memory_cache_keeps_copies_and_no_directory(tmp_path):
    cache = MemoryCache(root=tmp_path)
    data = {"rows": [1, 2]}
    cache.store("fn", "abc", data)
    data["rows"].append(3)
    loaded = cache.load("fn", "abc")
    assert loaded == {"rows": [1, 2]}
    loaded["rows"].clear()
    assert cache.load("fn", "abc") == {"rows": [1, 2]}
    assert cache.load("fn", "other") is None
    assert cache.directory("fn") is None


def test_memory_cache_selected_by_environment_writes_nothing(monkeypatch, isolated):
    monkeypatch.setenv("KERNELTUNE_CACHE", "memory")
    _fresh()(3)
    assert len(_work_body.calls) == TUNED
    _fresh()(3)
    assert len(_work_body.calls) == 1, "a new tuner in the same process hits the memory cache"
    assert not isolated.exists(), "neither records nor logs touch the disk"


def test_msgpack_cache_selected_by_environment_round_trips(monkeypatch, isolated):
    monkeypatch.setenv("KERNELTUNE_CACHE", "msgpack")
    _fresh()(3)
    assert record_files(isolated, "_work_body", "json") == []
    assert load_file(only_record_file(isolated, "_work_body", "msgpack"))["function"] == "_work_body"
    monkeypatch.setenv("KERNELTUNE_CACHE", "msgpack")
    _fresh()(3)
    assert len(_work_body.calls) == 1


def test_a_tuning_creates_every_cache_directory_private(monkeypatch, tmp_path):
    base = tmp_path / "home" / ".triton_dist" / "autotune"
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(base))

    _fresh()(3)

    folders = [tmp_path / "home", tmp_path / "home" / ".triton_dist", base, base / "_work_body"]
    assert {str(f): oct(stat.S_IMODE(f.stat().st_mode)) for f in folders} == {
        str(f): "0o700" for f in folders
    }
    assert record_files(base, "_work_body")


@pytest.mark.expected_warning(RuntimeWarning, match="cannot write the tuning log")
def test_an_unwritable_cache_keeps_the_pick_in_process_and_warns(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(blocker / "cache"))
    tuned = _fresh()

    with pytest.warns(RuntimeWarning, match=r"_work_body: cannot store the pick .* serves this process only"):
        first = tuned(3)

    assert len(_work_body.calls) == TUNED
    assert tuned(3) == first
    assert len(_work_body.calls) == TUNED + 1, "the pick serves later calls without retuning"
