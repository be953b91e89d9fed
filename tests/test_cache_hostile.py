"""Cache files as an attacker or an unlucky user leaves them: hostile records, links, FIFOs,
other users' folders, odd function names, killed and concurrent writers, no home directory."""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kerneltune.core import CacheReadError, private_files
from kerneltune.core.driving import TuningRecord
from kerneltune.plugins.caches.files import JsonCache, MsgpackCache, folder_name
from tuning_doubles import CALLS, fresh_tuner, load_file, make_record, only_record_file, record_files

OTHER_UID = 12345
# Two candidates, no warm-up, one timed run each, then the pick once more.
TUNED = 3


# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("quick", "unchecked")


# -- records whose numbers lie, read back through a tuning ------------------------------------


JSON_TEXT = {
    "index-Infinity": ('"index": 0', '"index": Infinity'),
    "index-1e400": ('"index": 0', '"index": 1e400'),
    "index-0.9": ('"index": 0', '"index": 0.9'),
    "index-true": ('"index": 0', '"index": true'),
    "created-400-digits": ('"created": ', '"created": ' + "9" * 400 + ', "was": '),
    "sample-400-digits": ('"samples_ms": [', '"samples_ms": [' + "9" * 400 + ", "),
    "sample-NaN": ('"samples_ms": [', '"samples_ms": [NaN, '),
}


@pytest.mark.parametrize("damage", sorted(JSON_TEXT))
def test_a_file_with_overflowing_or_false_numbers_is_a_logged_miss_and_a_retune(caplog, isolated, damage):
    fresh_tuner()(3)
    path = only_record_file(isolated, "work")
    data = load_file(path)
    # Make candidate 0 the stored pick so that the edit below hits the pick's index.
    data["best"] = {"index": 0, "label": data["candidates"][0]["label"]}
    data["candidates"][0]["time_ms"] = 0.0
    text = json.dumps(data)
    old, new = JSON_TEXT[damage]
    assert old in text
    path.write_text(text.replace(old, new, 1))

    with caplog.at_level(logging.INFO, logger="kerneltune"):
        assert fresh_tuner()(3) in (3, 6)

    assert len(CALLS) == TUNED, "a hostile file means a retune"
    assert "retuning" in caplog.text
    TuningRecord.from_data(load_file(path)).check_pick()


def test_an_in_range_pick_that_contradicts_the_stored_times_is_retuned(caplog, isolated):
    fresh_tuner()(3)
    path = only_record_file(isolated, "work")
    data = load_file(path)
    # Distinct times whatever the timer measured (a GPU's event timer gives a
    # host function two equal times, and then either pick agrees with them).
    data["candidates"][0]["time_ms"], data["candidates"][1]["time_ms"] = 1.0, 2.0
    data["best"] = {"index": 1, "label": data["candidates"][1]["label"]}
    path.write_text(json.dumps(data))

    with caplog.at_level(logging.INFO, logger="kerneltune"):
        fresh_tuner()(3)

    assert len(CALLS) == TUNED
    assert "is not the fastest of the stored times" in caplog.text


# -- what is read: regular files only, without links, bounded ------------------------------


@pytest.mark.parametrize("cls", [JsonCache, MsgpackCache])
def test_a_record_path_linked_to_dev_zero_is_a_read_error_not_a_memory_error(tmp_path, cls):
    cache = cls(root=tmp_path)
    cache.store("fn", "abc", {"x": 1})
    path = tmp_path / "fn" / f"abc.{cls.suffix}"
    path.unlink()
    path.symlink_to("/dev/zero")
    with pytest.raises(CacheReadError, match="symbolic link"):
        cache.load("fn", "abc")


def test_a_link_to_a_good_record_is_not_followed_either(tmp_path):
    cache = JsonCache(root=tmp_path)
    cache.store("fn", "good", {"x": 1})
    (tmp_path / "fn" / "abc.json").symlink_to(tmp_path / "fn" / "good.json")
    with pytest.raises(CacheReadError, match="symbolic link"):
        cache.load("fn", "abc")


@pytest.mark.timeout(20)
def test_a_fifo_at_the_record_path_is_a_read_error_without_blocking(tmp_path):
    cache = JsonCache(root=tmp_path)
    cache.store("fn", "other", {"x": 1})
    os.mkfifo(tmp_path / "fn" / "abc.json", 0o600)
    started = time.monotonic()
    with pytest.raises(CacheReadError, match="not a regular file"):
        cache.load("fn", "abc")
    assert time.monotonic() - started < 5


def test_a_file_over_the_size_cap_is_a_read_error(tmp_path, monkeypatch):
    monkeypatch.setattr(private_files, "MAX_READ", 64)
    cache = JsonCache(root=tmp_path)
    cache.store("fn", "small", {"x": 1})
    cache.store("fn", "big", {"x": "y" * 100})
    assert cache.load("fn", "small") == {"x": 1}
    with pytest.raises(CacheReadError, match="larger than 64 bytes"):
        cache.load("fn", "big")


def test_a_linked_record_is_retuned_and_replaced_by_a_regular_file(caplog, isolated, tmp_path):
    fresh_tuner()(3)
    path = only_record_file(isolated, "work")
    target = tmp_path / "elsewhere.json"
    target.write_text(path.read_text())
    path.unlink()
    path.symlink_to(target)

    with caplog.at_level(logging.INFO, logger="kerneltune"):
        fresh_tuner()(3)

    assert len(CALLS) == TUNED
    assert "symbolic link" in caplog.text
    assert not path.is_symlink() and path.is_file()


# -- logs ---------------------------------------------------------------------------------------


def test_a_linked_log_is_not_followed_and_warns_once(isolated, tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    folder = isolated / "work"
    folder.mkdir(parents=True, mode=0o700)
    (folder / "tune-rank0.log").symlink_to(target)

    with pytest.warns(RuntimeWarning, match=r"cannot write the tuning log .*tune-rank0.log .*symbolic link"):
        assert fresh_tuner()(3) in (3, 6)
    assert target.read_text() == "keep me\n"
    assert record_files(isolated, "work"), "the record is stored all the same"


def test_a_log_replaced_by_a_link_between_tunings_is_not_followed(isolated, tmp_path):
    fresh_tuner()(3)  # the log is open now, kept for the next line
    log = isolated / "work" / "tune-rank0.log"
    assert "tuning key 3" in log.read_text()
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    log.unlink()
    log.symlink_to(target)
    with pytest.warns(RuntimeWarning, match=r"cannot write the tuning log .*symbolic link"):
        fresh_tuner()(4)
    assert target.read_text() == "keep me\n"


def test_a_log_removed_between_tunings_is_made_again(isolated):
    fresh_tuner()(3)
    log = isolated / "work" / "tune-rank0.log"
    log.rename(log.with_suffix(".old"))
    fresh_tuner()(4)
    assert "tuning key 4" in log.read_text() and "tuning key 3" not in log.read_text()
    assert "tuning key 4" not in log.with_suffix(".old").read_text(), "no line went to the renamed file"


def test_an_appender_keeps_a_few_files_open_and_loses_no_line(tmp_path):
    appender = private_files.PrivateAppender(keep=2)
    paths = [tmp_path / "logs" / f"{i}.log" for i in range(3)]
    opened = len(os.listdir("/proc/self/fd"))
    for line in range(4):
        for path in paths:
            appender.write(path, f"line {line}\n")
    assert len(os.listdir("/proc/self/fd")) == opened + 2, "the one written longest ago is closed"
    assert stat.S_IMODE((tmp_path / "logs").stat().st_mode) == 0o700
    assert stat.S_IMODE(paths[0].stat().st_mode) == 0o600
    appender.close()
    assert len(os.listdir("/proc/self/fd")) == opened
    assert all(path.read_text() == "".join(f"line {i}\n" for i in range(4)) for path in paths)


def test_a_plugin_opens_a_private_file_to_append_to_and_no_link(tmp_path):
    path = tmp_path / "plugin" / "notes.txt"
    private_files.make_private_dirs(path.parent)  # the folder is the caller's to make
    kept = os.umask(0o022)
    try:
        with private_files.open_private_append(path) as out:
            out.write("first\n")
        with private_files.open_private_append(path) as out:
            out.write("second\n")
    finally:
        os.umask(kept)
    assert path.read_text() == "first\nsecond\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "whatever the umask"
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    link = path.with_name("linked.txt")
    link.symlink_to(target)
    with pytest.raises(OSError):
        private_files.open_private_append(link)
    assert target.read_text() == "keep me\n"


def test_an_unwritable_log_is_one_warning_per_process(isolated, recwarn):
    (isolated / "work" / "tune-rank0.log").mkdir(parents=True)

    fresh_tuner()(3)
    fresh_tuner()(4)
    fresh_tuner()(5)

    messages = [str(w.message) for w in recwarn if "tuning log" in str(w.message)]
    assert len(messages) == 1, messages
    assert "tune-rank0.log" in messages[0]
    assert len(record_files(isolated, "work")) == 3


# -- other users' folders and files ------------------------------------------------------------


def _refusals(recwarn) -> list[str]:
    return [str(w.message) for w in recwarn if "not using" in str(w.message)]


def _other_users_folder(root: Path) -> Path:
    folder = root / "work"
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder, OTHER_UID, OTHER_UID)
    return folder


def test_a_folder_of_another_user_is_refused_with_one_warning(isolated, recwarn):
    folder = _other_users_folder(isolated)

    tuned = fresh_tuner()
    first = tuned(3)
    assert tuned(3) == first
    fresh_tuner()(3)

    (message,) = _refusals(recwarn)
    assert str(folder) in message and f"owned by uid {OTHER_UID}" in message
    assert list(folder.iterdir()) == [], "nothing is written into it, not even a log"
    assert len(CALLS) == TUNED, "a new tuner in the process still has the pick (memory)"


@pytest.mark.parametrize("mode", [0o770, 0o702, 0o777])
def test_a_folder_writable_by_others_is_refused(isolated, recwarn, mode):
    folder = isolated / "work"
    folder.mkdir(parents=True)
    folder.chmod(mode)

    fresh_tuner()(3)

    (message,) = _refusals(recwarn)
    assert "writable by group or others" in message
    assert list(folder.iterdir()) == []


def test_a_folder_found_private_is_checked_again_before_each_write(isolated, recwarn):
    cache = JsonCache(isolated)
    cache.store("work", "a", {"n": 1})
    assert cache.load("work", "a") == {"n": 1}
    folder = isolated / "work"
    folder.chmod(0o777)  # as only its owner could, after the process found it private

    cache.store("work", "b", {"n": 2})

    (message,) = _refusals(recwarn)
    assert "writable by group or others" in message
    assert sorted(path.name for path in folder.glob("*.json")) == ["a.json"], "nothing written"


def test_a_folder_that_is_a_link_is_refused(isolated, tmp_path, recwarn):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    isolated.mkdir(mode=0o700)
    (isolated / "work").symlink_to(real)

    fresh_tuner()(3)

    (message,) = _refusals(recwarn)
    assert "symbolic link" in message
    assert list(real.iterdir()) == []


def test_a_stored_record_of_another_user_is_not_read_and_is_replaced(isolated, recwarn):
    fresh_tuner()(3)
    path = only_record_file(isolated, "work")
    os.chown(path, OTHER_UID, OTHER_UID)

    fresh_tuner()(3)

    assert len(CALLS) == TUNED, "not trusted: retuned"
    assert any(f"not reading {path}" in str(w.message) for w in recwarn)
    assert path.stat().st_uid == os.geteuid(), "the new pick replaced it"


def _shared_root(tmp_path: Path, monkeypatch, mode: int) -> Path:
    root = tmp_path / "scratch"
    root.mkdir()
    root.chmod(mode)
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(root))
    return root


def test_a_shared_root_with_the_sticky_bit_is_used_and_each_folder_is_private(tmp_path, monkeypatch, recwarn):
    root = _shared_root(tmp_path, monkeypatch, 0o1777)

    fresh_tuner()(3)
    fresh_tuner()(3)

    assert _refusals(recwarn) == []
    assert len(CALLS) == 1, "the second tuner hits the disk"
    assert stat.S_IMODE((root / "work").stat().st_mode) == 0o700


def test_a_shared_root_without_the_sticky_bit_is_refused(tmp_path, monkeypatch, recwarn):
    root = _shared_root(tmp_path, monkeypatch, 0o777)

    fresh_tuner()(3)

    (message,) = _refusals(recwarn)
    assert str(root) in message and "without the sticky bit" in message
    assert list(root.iterdir()) == []


# -- folder names -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["..", ".", "../outside", "a/b", "-rf", "x" * 300, "Foo.<locals>.bar", "é"])
def test_any_function_name_is_cached_in_a_bounded_folder_under_the_root(isolated, name):
    fresh_tuner(name)(3)
    fresh_tuner(name)(3)

    assert len(CALLS) == 1, f"{name!r} was not cached"
    (folder,) = [p for p in isolated.iterdir() if p.is_dir()]
    assert folder.parent == isolated and len(folder.name) <= 64
    assert folder.name == folder_name(name) and not folder.name.startswith((".", "-"))
    assert not (isolated.parent / "outside").exists()


def test_plain_names_keep_their_folder_and_others_get_a_prefix_and_a_hash():
    assert folder_name("my_kernel.v2") == "my_kernel.v2"
    assert folder_name("Foo.<locals>.bar") == f"Foo._locals_.bar-{folder_name('Foo.<locals>.bar')[-12:]}"
    assert folder_name("a/b") != folder_name("a_b"), "names that sanitise alike stay apart"
    assert folder_name("..") != folder_name(".")


@pytest.mark.parametrize("suffix", ["json", "msgpack"])
def test_under_umask_000_every_file_a_tuning_makes_is_private(isolated, monkeypatch, suffix):
    monkeypatch.setenv("KERNELTUNE_CACHE", suffix)
    previous = os.umask(0)
    try:
        fresh_tuner()(1)
    finally:
        os.umask(previous)
    folder = isolated / "work"
    record = only_record_file(isolated, "work", suffix)
    modes = {path.name: stat.S_IMODE(path.lstat().st_mode) for path in folder.iterdir()}
    index = f"stored-keys.{suffix}"
    made = (record.name, f"{record.name}.lock", index, f"{index}.lock", "tune-rank0.log")
    assert modes == dict.fromkeys(made, 0o600)
    assert stat.S_IMODE(folder.stat().st_mode) == stat.S_IMODE(isolated.stat().st_mode) == 0o700


# -- writers that die or race -------------------------------------------------------------------


def test_stale_temporary_files_are_removed_when_writing_but_live_ones_survive(tmp_path):
    cache = JsonCache(root=tmp_path)
    cache.store("fn", "abc", {"x": 1})
    folder = tmp_path / "fn"
    stale = folder / "abc.jsonk2j4h5g6.tmp"
    live = folder / "abc.jsonq9w8e7r6.tmp"
    unrelated = folder / "notes.tmp"
    for path in (stale, live, unrelated):
        path.write_text("{")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    os.utime(unrelated, (hour_ago, hour_ago))

    cache.store("fn", "other", {"x": 2})
    assert stale.exists(), "a cache object sweeps a folder once, at its first write there"

    JsonCache(root=tmp_path).store("fn", "other", {"x": 2})  # the next process's

    assert not stale.exists()
    assert live.exists() and unrelated.exists()


KILLED_WRITER = """
import os, sys, time
from pathlib import Path
from kerneltune.plugins.caches.files import JsonCache

cache = JsonCache(root=Path(sys.argv[1]))
cache.store("fn", "abc", {"generation": 1})

def stuck(src, dst):
    print("written", flush=True)
    time.sleep(60)

os.replace = stuck
cache.store("fn", "abc", {"generation": 2, "padding": "x" * 100000})
"""


def test_a_writer_killed_mid_write_leaves_the_old_record_and_its_temporary_file_is_cleaned(tmp_path):
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "written"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    folder = tmp_path / "fn"
    (leftover,) = folder.glob("abc.json*.tmp")

    cache = JsonCache(root=tmp_path)
    assert cache.load("fn", "abc") == {"generation": 1}, "a reader sees the last whole record"
    hour_ago = time.time() - 3600
    os.utime(leftover, (hour_ago, hour_ago))
    cache.store("fn", "abc", {"generation": 3})  # the killed writer's lock died with it
    assert cache.load("fn", "abc") == {"generation": 3}
    assert list(folder.glob("*.tmp")) == []


CONCURRENT_WRITER = """
import sys
from pathlib import Path
from kerneltune.core.driving import TuningRecord
from kerneltune.plugins.caches.files import JsonCache

root, writer = Path(sys.argv[1]), int(sys.argv[2])
data = TuningRecord.from_data(__import__("json").loads(sys.argv[3])).to_data()
cache = JsonCache(root=root)
for i in range(50):
    data["created"] = 1.7e9 + writer * 1000 + i
    cache.store("shared", f"entry{i % 5}", data)
"""


def test_four_processes_storing_into_one_folder_leave_only_clean_records(tmp_path):
    record = json.dumps(make_record().to_data())
    writers = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT_WRITER, str(tmp_path), str(w), record])
        for w in range(4)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0, 0]

    cache = JsonCache(root=tmp_path)
    for i in range(5):
        TuningRecord.from_data(cache.load("shared", f"entry{i}")).check_pick()
    names = sorted(p.name for p in (tmp_path / "shared").iterdir())
    assert names == sorted([f"entry{i}.json" for i in range(5)] + [f"entry{i}.json.lock" for i in range(5)])


# -- where the cache is: HOME ------------------------------------------------------------------


def test_without_home_or_passwd_entry_tuning_goes_on_without_disk_and_warns_once(monkeypatch, recwarn):
    import pwd

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("TRITON_DIST_AUTOTUNE_CACHE_DIR")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)

    first = fresh_tuner()(3)
    assert fresh_tuner()(3) == first

    assert len(CALLS) == 1, "the pick serves the process"
    messages = [str(w.message) for w in recwarn if "cache_dir" in str(w.message)]
    assert len(messages) == 1 and "HOME is unset" in messages[0]


def test_a_process_that_changes_home_gets_the_new_location(monkeypatch, tmp_path):
    monkeypatch.delenv("TRITON_DIST_AUTOTUNE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "first"))
    fresh_tuner()(3)
    monkeypatch.setenv("HOME", str(tmp_path / "second"))
    fresh_tuner()(3)

    for home in ("first", "second"):
        assert record_files(tmp_path / home / ".triton_dist" / "autotune", "work"), home
