"""The `kerneltune` command, against cache folders filled by real tunings on this CPU."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import kerneltune
import pytest
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.cli import archive as archive_module
from kerneltune.cli import cache_commands
from kerneltune.core import CandidateFailedWarning
from tuning_doubles import record_files

from triton_dist.tune import autotune

PAUSES = (0.012, 0.0, 0.003, -1.0)  # fastest is [1], then [2], then [0]; [3] fails


def _fill() -> list[object]:
    """Tune two functions for real (wallclock timer) and return the configs each call ran with."""
    calls: list[object] = []

    @autotune(config_space=[{"pause": p} for p in PAUSES], key_fn=lambda size: (size, "float32"))
    def matmul(size, pause):
        calls.append(pause)
        if pause < 0:
            raise RuntimeError("out of shared memory")
        time.sleep(pause)
        return size

    @autotune(config_space=[{"block": 64}, {"block": 128}], key_fn=lambda alpha: (alpha,))
    def scale(alpha, block):
        calls.append(block)
        return alpha

    matmul(64)
    matmul(128)
    scale(1.5)
    return calls


@pytest.fixture
def filled(isolated, tmp_path):
    """The cache directory in force, holding three records; few runs per candidate keep it quick."""
    (tmp_path / "kerneltune.toml").write_text("warmup = 1\nrepeat = 3\n")
    with pytest.warns(CandidateFailedWarning, match="out of shared memory"):  # matmul's [3], tuning each key
        _fill()
    return isolated


def _invoke(*arguments: str, **options):
    return CliRunner().invoke(cli.main, list(arguments), catch_exceptions=False, **options)


def _digests(cache: Path, function: str) -> list[str]:
    return [path.stem for path in record_files(cache, function)]


# -- the console script and python -m -------------------------------------------------------


def test_console_script_and_module_exit_codes(filled, tmp_path):
    script = Path(sys.executable).with_name("kerneltune")
    listed = subprocess.run(
        [str(script), "cache", "list", "--json"], capture_output=True, text=True, timeout=60, check=False
    )
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert sorted((row["function"], row["key_text"]) for row in rows) == [
        ("matmul", "(128, 'float32')"),
        ("matmul", "(64, 'float32')"),
        ("scale", "(1.5,)"),
    ]

    module = [sys.executable, "-m", "kerneltune"]
    version = subprocess.run([*module, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert version.returncode == 0 and kerneltune.__version__ in version.stdout

    usage = subprocess.run(
        [*module, "cache", "list", "--no-such-option"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert usage.returncode == 2
    assert "No such option" in usage.stderr

    failure = subprocess.run(
        [*module, "cache", "show", "ffffffffff"], capture_output=True, text=True, timeout=60, check=False
    )
    assert failure.returncode == 1
    assert failure.stderr.strip().splitlines() == [
        f"Error: no record file, digest starting with 'ffffffffff' or function named so in {filled}"
    ]


def test_version_is_the_installed_distributions():
    assert kerneltune.__version__ == importlib.metadata.version("kerneltune")


# -- cache list / show -------------------------------------------------------------------------


def test_list_has_one_row_per_record_and_filters_by_function(filled):
    table = _invoke("cache", "list")
    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    assert lines[0] == f"records in {filled}:"
    headers = ["function", "key", "pick", "time", "confidence", "measured", "date", "source", "file"]
    assert lines[1].split() == headers
    assert len(lines) == 5
    # Sorted by function, then key by value: (64, ...) before (128, ...).
    assert [line.split()[:2] for line in lines[2:]] == [
        ["matmul", "(64,"],
        ["matmul", "(128,"],
        ["scale", "(1.5,)"],
    ]
    row = lines[2]
    # Functions defined inside _fill cannot be imported: each key's one record is its newest.
    assert "pause=<0.0>" in row and "3/4" in row and " newest " in row and " matmul/" in row

    only = json.loads(_invoke("cache", "list", "matmul", "--json").stdout)
    assert [row["function"] for row in only] == ["matmul", "matmul"]
    assert all(row["pick"] == {"index": 1, "label": "pause=<0.0>"} for row in only)
    assert all(row["measured"] == 3 and row["candidates"] == 4 for row in only)
    assert all(row["created_at"].endswith("+00:00") for row in only)

    (filled.parent / "elsewhere").mkdir()
    empty = _invoke("cache", "list", "--dir", str(filled.parent / "elsewhere"))
    assert empty.exit_code == 0 and "no records" in empty.stdout


def test_list_skips_an_unreadable_file_with_a_note(filled):
    broken = filled / "matmul" / ("0" * 32 + ".json")
    broken.write_text("{ not json")
    listed = _invoke("cache", "list", "--json")
    assert listed.exit_code == 0
    assert len(json.loads(listed.stdout)) == 3
    assert f"skipping {broken}" in listed.stderr


def test_show_sorts_candidates_and_names_errors_method_and_date(filled):
    digest = _digests(filled, "matmul")[0]
    by_prefix = _invoke("cache", "show", digest[:8])
    assert by_prefix.exit_code == 0
    out = by_prefix.stdout
    order = [out.index(f"[{i}]  pause=<{PAUSES[i]}>") for i in (1, 2, 0, 3)]
    assert order == sorted(order)
    assert "RuntimeError: out of shared memory" in out
    assert "*[1]" in out
    assert re.search(r"^date: +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$", out, re.MULTILINE)
    assert re.search(r"^measured with: ", out, re.MULTILINE)
    assert digest in out

    by_path = _invoke("cache", "show", str(filled / "matmul" / f"{digest}.json"))
    assert by_path.exit_code == 0 and by_path.stdout == out


def test_show_refuses_an_ambiguous_prefix(filled):
    shown = CliRunner().invoke(cli.main, ["cache", "show", ""])
    assert shown.exit_code == 1
    assert "matches 3 records" in shown.stderr


# -- cache clear -------------------------------------------------------------------------------


def test_clear_without_yes_refuses_when_there_is_no_terminal(filled):
    refused = CliRunner().invoke(cli.main, ["cache", "clear"])
    assert refused.exit_code == 1
    assert "without --yes" in refused.stderr
    assert len(_digests(filled, "matmul")) == 2


def test_clear_asks_on_a_terminal(filled, monkeypatch):
    monkeypatch.setattr(cache_commands, "_interactive", lambda: True)
    declined = CliRunner().invoke(cli.main, ["cache", "clear"], input="n\n")
    assert declined.exit_code == 1
    assert len(_digests(filled, "matmul")) == 2
    accepted = CliRunner().invoke(cli.main, ["cache", "clear", "scale"], input="y\n")
    assert accepted.exit_code == 0
    assert "removed 1 record(s) of scale" in accepted.stdout
    assert _digests(filled, "scale") == []


def test_clear_with_yes_removes_one_functions_records_or_all(filled):
    assert _invoke("cache", "clear", "matmul", "--yes").exit_code == 0
    assert _digests(filled, "matmul") == []
    assert (filled / "matmul" / "tune-rank0.log").is_file()
    assert not list((filled / "matmul").glob("*.lock"))
    assert len(_digests(filled, "scale")) == 1
    assert _invoke("cache", "clear", "--yes").exit_code == 0
    assert _digests(filled, "scale") == []


def test_clear_follows_no_link_and_removes_only_records(filled, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # A record as clear would remove it in the cache, and a file that is no record.
    record = record_files(filled, "matmul")[0]
    shutil.copy(record, elsewhere / record.name)
    (elsewhere / "package.json").write_text('{"name": "mine"}')
    (elsewhere / "lock-target").write_text("keep")
    (filled / "linked").symlink_to(elsewhere, target_is_directory=True)
    linked_record = filled / "matmul" / ("ab" * 16 + ".json")
    linked_record.symlink_to(elsewhere / record.name)
    damaged = filled / "matmul" / ("cd" * 16 + ".json")
    damaged.write_text("{ not a record")
    (scale,) = record_files(filled, "scale")
    linked_lock = scale.with_name(scale.name + ".lock")
    linked_lock.unlink()
    linked_lock.symlink_to(elsewhere / "lock-target")

    cleared = CliRunner().invoke(cli.main, ["cache", "clear", "--yes"])
    assert cleared.exit_code == 0, cleared.stderr
    assert "removed 4 record(s)" in cleared.stdout
    assert sorted(p.name for p in elsewhere.iterdir()) == sorted([record.name, "package.json", "lock-target"])
    assert (elsewhere / "lock-target").read_text() == "keep"
    # Links stay, each named; a damaged record goes, named.
    assert (filled / "linked").is_symlink() and linked_record.is_symlink() and linked_lock.is_symlink()
    assert not damaged.exists()
    assert f"kerneltune: removing a damaged record, {damaged}: " in cleared.stderr
    for kept in (linked_record, linked_lock):
        assert f"not removing {kept}" in cleared.stderr
    assert record_files(filled, "matmul") == [linked_record]
    assert record_files(filled, "scale") == []


# -- cache export / import ---------------------------------------------------------------------


def _rehash(entry: dict) -> None:
    text = json.dumps(entry["record"], sort_keys=True, separators=(",", ":"), allow_nan=False)
    entry["sha256"] = hashlib.sha256(text.encode()).hexdigest()


def test_exported_picks_serve_another_machine_without_measuring(filled, tmp_path, monkeypatch):
    archive = tmp_path / "picks.bundle"
    exported = _invoke("cache", "export", str(archive))
    assert exported.exit_code == 0 and "exported 3 record(s)" in exported.stdout

    other = tmp_path / "other-machine"
    imported = _invoke("cache", "import", str(archive), "--dir", str(other))
    assert imported.exit_code == 0 and "imported 3 of 3" in imported.stdout
    assert sorted(_digests(other, "matmul")) == sorted(_digests(filled, "matmul"))

    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(other))
    # Each call is served by its imported pick: nothing runs but the pick, once per call.
    calls = _fill()
    assert len(calls) == 3 and calls[:2] == [0.0, 0.0]


def test_import_skips_records_of_other_hardware(filled, tmp_path):
    archive = tmp_path / "picks.json"
    _invoke("cache", "export", str(archive))
    payload = json.loads(archive.read_text())
    foreign = next(e for e in payload["records"] if e["record"]["function"] == "scale")
    foreign["record"]["hardware"]["name"] = "Some Other Accelerator"
    _rehash(foreign)
    archive.write_text(json.dumps(payload))

    other = tmp_path / "other"
    imported = _invoke("cache", "import", str(archive), "--dir", str(other))
    assert imported.exit_code == 0
    assert "skipped scale (1.5,): other hardware: name 'Some Other Accelerator'" in imported.stdout
    assert "imported 2 of 3" in imported.stdout
    assert _digests(other, "scale") == [] and len(_digests(other, "matmul")) == 2


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda entry: entry["record"]["candidates"][0].update(time_ms=0.0001), "checksum mismatch"),
        (lambda entry: (entry["record"].pop("best"), _rehash(entry)), "not a valid record"),
        (lambda entry: entry.update(digest="../../escape"), "not a cache entry name"),
    ],
)
def test_a_tampered_archive_is_refused_whole(filled, tmp_path, tamper, message):
    archive = tmp_path / "picks.json"
    _invoke("cache", "export", str(archive))
    payload = json.loads(archive.read_text())
    tamper(payload["records"][-1])
    archive.write_text(json.dumps(payload))

    target = tmp_path / "target" / "cache"
    refused = CliRunner().invoke(cli.main, ["cache", "import", str(archive), "--dir", str(target)])
    assert refused.exit_code == 1
    assert message in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "target").exists()


def test_import_never_replaces_a_record_with_one_a_lookup_would_reject(filled, tmp_path, caplog):
    archive = tmp_path / "picks.json"
    _invoke("cache", "export", str(archive))
    payload = json.loads(archive.read_text())
    entry = next(e for e in payload["records"] if e["record"]["key"] == [64, "float32"])
    # A pick that is not the fastest of its own times, with the checksum made to match.
    entry["record"]["best"] = {"index": 0, "label": entry["record"]["candidates"][0]["label"]}
    _rehash(entry)
    archive.write_text(json.dumps(payload))
    (stored,) = [p for p in record_files(filled, "matmul") if p.stem == entry["digest"]]
    before = stored.read_bytes()

    imported = CliRunner().invoke(cli.main, ["cache", "import", str(archive)])
    assert imported.exit_code == 1
    assert "imported 2 of 3" in imported.stdout
    rejected = "not importing matmul (64, 'float32'): a lookup would reject it: the stored pick [0]"
    assert rejected in imported.stderr
    assert imported.stderr.strip().splitlines()[-1] == (
        f"Error: {archive}: 1 record(s) not imported: a lookup would reject them"
    )
    assert stored.read_bytes() == before
    with caplog.at_level(logging.INFO, logger="kerneltune"):
        calls = _fill()
    # Each call served by its stored pick, the one the import left alone among them.
    assert len(calls) == 3 and "rejected" not in caplog.text


@pytest.mark.parametrize("hostile", ["linked function folder", "root writable by others"])
def test_import_into_a_folder_a_lookup_would_not_use_is_one_line(filled, tmp_path, hostile):
    archive = tmp_path / "picks.json"
    _invoke("cache", "export", str(archive))
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if hostile == "linked function folder":
        (target / "matmul").symlink_to(elsewhere, target_is_directory=True)
    else:
        target.chmod(0o777)

    refused = CliRunner().invoke(cli.main, ["cache", "import", str(archive), "--dir", str(target)])
    assert refused.exit_code == 1 and isinstance(refused.exception, SystemExit)
    *notes, error = refused.stderr.strip().splitlines()
    assert error.startswith("Error: cache 'json' does not use its folder for ")
    assert error.endswith("nothing imported")
    # The cache's own warning says why, on one line.
    assert len(notes) == 1 and notes[0].startswith(f"kerneltune: not using {target}")
    assert list(elsewhere.iterdir()) == []
    assert record_files(target, "scale") == []


@pytest.mark.parametrize(
    "content",
    ["[" * 100_000 + "]" * 100_000, '{"format": "kerneltune-archive", "x": ' + "[" * 500 + "]" * 500 + "}"],
    ids=["deeper than Python's recursion limit", "deeper than an archive may be"],
)
def test_import_refuses_an_archive_nested_too_deep_in_one_line(isolated, tmp_path, content):
    archive = tmp_path / "deep.json"
    archive.write_text(content)
    refused = CliRunner().invoke(cli.main, ["cache", "import", str(archive)])
    assert refused.exit_code == 1 and isinstance(refused.exception, SystemExit)
    assert refused.stderr.strip().splitlines() == [
        f"Error: {archive}: not a kerneltune archive (nested more than 128 levels deep)"
    ]


def test_import_reads_no_device_even_through_a_link(isolated, tmp_path):
    archive = tmp_path / "picks.json"
    archive.symlink_to("/dev/zero")
    refused = CliRunner().invoke(cli.main, ["cache", "import", str(archive)])
    assert refused.exit_code == 1 and isinstance(refused.exception, SystemExit)
    assert refused.stderr.strip().splitlines() == [f"Error: {archive}: not a regular file or a pipe"]


def test_import_reads_a_pipe_with_a_writer_and_standard_input(filled, tmp_path):
    exported = tmp_path / "picks.json"
    assert CliRunner().invoke(cli.main, ["cache", "export", str(exported)]).exit_code == 0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # The writer has the pipe open before the import opens it, as a shell's ``<(...)`` has: a pipe
    # without a writer reads as empty. A reader of the test's own lets the writer's open return.
    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    opened = threading.Event()

    def write() -> None:
        with fifo.open("wb") as out:
            opened.set()
            out.write(exported.read_bytes())

    writer = threading.Thread(target=write)
    writer.start()
    assert opened.wait(10)
    through_pipe = CliRunner().invoke(cli.main, ["cache", "import", str(fifo), "--dir", str(tmp_path / "a")])
    writer.join(timeout=10)
    os.close(keep)
    assert through_pipe.exit_code == 0, through_pipe.output
    assert "imported 3 of 3 record(s)" in through_pipe.stdout
    from_stdin = CliRunner().invoke(
        cli.main, ["cache", "import", "-", "--dir", str(tmp_path / "b")], input=exported.read_bytes()
    )
    assert from_stdin.exit_code == 0, from_stdin.output
    assert "imported 3 of 3 record(s)" in from_stdin.stdout
    # A pipe nobody writes to reads as empty, and is no archive: refused, never waited on.
    os.mkfifo(tmp_path / "silent")
    silent = CliRunner().invoke(cli.main, ["cache", "import", str(tmp_path / "silent")])
    assert silent.exit_code == 1 and "not a kerneltune archive (not JSON" in silent.stderr


def test_an_archive_over_the_size_cap_is_refused(isolated, tmp_path, monkeypatch):
    monkeypatch.setattr(archive_module, "MAX_BYTES", 64)
    archive = tmp_path / "picks.json"
    archive.write_text(json.dumps({"format": "kerneltune-archive", "padding": "x" * 64}))
    refused = CliRunner().invoke(cli.main, ["cache", "import", str(archive)])
    assert refused.exit_code == 1
    assert refused.stderr.strip().splitlines() == [
        f"Error: {archive}: larger than 64 bytes, more than an archive may hold"
    ]


def test_import_refuses_what_is_not_an_archive(filled, tmp_path):
    stray = tmp_path / "notes.txt"
    stray.write_text("hello")
    refused = CliRunner().invoke(cli.main, ["cache", "import", str(stray)])
    assert refused.exit_code == 1 and "not a kerneltune archive" in refused.stderr
    missing = CliRunner().invoke(cli.main, ["cache", "import", str(tmp_path / "absent.json")])
    assert missing.exit_code == 2


# -- report ------------------------------------------------------------------------------------


def test_report_sorts_each_key_with_spread_and_plots(filled, tmp_path):
    picture = tmp_path / "report.png"
    reported = _invoke("report", "matmul", "--plot", str(picture))
    assert reported.exit_code == 0
    blocks = reported.stdout.split("\n\n")
    assert len(blocks) == 3 and blocks[2] == f"wrote {picture}\n"
    for block in blocks[:2]:
        order = [block.index(f"pause=<{PAUSES[i]}>") for i in (1, 2, 0, 3)]
        assert order == sorted(order)
        assert "median" in block and "3 samples" in block
    assert picture.read_bytes().startswith(b"\x89PNG")


def test_report_plot_without_matplotlib_says_so(filled, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    reported = CliRunner().invoke(cli.main, ["report", "--plot", str(tmp_path / "r.png")])
    assert reported.exit_code == 1
    assert "--plot needs matplotlib" in reported.stderr and "pip install matplotlib" in reported.stderr


def test_report_with_nothing_stored_fails(isolated):
    reported = CliRunner().invoke(cli.main, ["report"])
    assert reported.exit_code == 1 and "no records" in reported.stderr


# -- plugins -----------------------------------------------------------------------------------


def test_plugins_lists_plugins_choices_and_where_settings_come_from(tmp_path, monkeypatch, cpu_host):
    (tmp_path / "kerneltune.toml").write_text('cache = "msgpack"\nrepeat = 7\n')
    monkeypatch.setenv("KERNELTUNE_VERIFY_PICK", "1")
    shown = _invoke("plugins")
    assert shown.exit_code == 0
    listing, settings = shown.stdout.split("\nsettings:\n")

    def line_of(start: str, text: str = listing) -> str:
        return next(line for line in text.splitlines() if line.strip().startswith(start))

    assert "built-in, kerneltune " in line_of("kerneltune.plugins.observers.tuning_log")
    version = importlib.metadata.version("kerneltune-example-plugin")
    assert f"entry point, kerneltune-example-plugin {version}" in line_of("example-cputime")
    assert "timers (in force: wallclock, auto's choice)" in shown.stdout
    config_file = tmp_path / "kerneltune.toml"
    assert (
        f"caches (in force: msgpack, set by {config_file} (key 'cache'); auto would take json)"
        in shown.stdout
    )
    assert "available, in force" in line_of("msgpack")
    assert "not available here" in line_of("cuda-event")
    assert "available, auto" in line_of("wallclock")
    assert "available, auto" in line_of("local")
    config = str(tmp_path / "kerneltune.toml")
    assert line_of("cache ", settings).split(maxsplit=2)[1:] == ['"msgpack"', f"{config} (key 'cache')"]
    assert line_of("repeat", settings).split(maxsplit=2)[1:] == ["7", f"{config} (key 'repeat')"]
    variable = "environment variable KERNELTUNE_VERIFY_PICK"
    assert line_of("verify_pick", settings).split(maxsplit=2)[1:] == ["true", variable]
    assert line_of("warmup", settings).split()[1:] == ["5", "default"]
    assert "environment variable TRITON_DIST_AUTOTUNE_CACHE_DIR" in line_of("cache_dir", settings)


def test_plugins_lists_the_search_strategies_and_the_default(tmp_path, monkeypatch, cpu_host):
    monkeypatch.setenv("KERNELTUNE_SEARCH_STRATEGY", "staged")
    shown = _invoke("plugins")
    assert shown.exit_code == 0
    heading = (
        "search strategies (in force: staged, set by environment variable KERNELTUNE_SEARCH_STRATEGY; "
        "auto would take pattern):\n"
    )
    strategies = shown.stdout.split(heading)[1].split("\n\n")[0]
    rows = {line.split()[0]: line for line in strategies.splitlines()[1:]}
    assert set(rows) >= {"pattern", "staged", "exhaustive", "example-random"}
    assert "available, auto" in rows["pattern"] and "kerneltune.plugins.search.pattern" in rows["pattern"]
    assert "example-random-search" in rows["example-random"]
    chosen = next(line for line in shown.stdout.splitlines() if line.strip().startswith("search_strategy"))
    assert chosen.split(maxsplit=2)[1:] == ['"staged"', "environment variable KERNELTUNE_SEARCH_STRATEGY"]


def test_a_bad_config_is_one_line_and_status_1(tmp_path):
    (tmp_path / "kerneltune.toml").write_text("repeat = 0\n")
    failed = CliRunner().invoke(cli.main, ["cache", "list"])
    assert failed.exit_code == 1
    assert failed.stderr.strip().splitlines() == [
        f"Error: {tmp_path / 'kerneltune.toml'}: key 'repeat': expected an integer >= 1, got 0"
    ]


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("not UTF-8", "kerneltune.toml: not UTF-8 text (at byte offset 8: invalid start byte)"),
        ("5000 deep", "kerneltune.toml: not valid TOML: arrays or tables nested too deeply"),
        ("variable", "environment variable KERNELTUNE_TIE_ROUNDS: expected an integer >= 0, got '²'"),
    ],
)
def test_plugins_with_a_hostile_config_is_one_line_and_status_1(tmp_path, monkeypatch, where, message):
    if where == "not UTF-8":
        (tmp_path / "kerneltune.toml").write_bytes(b"cache = \xff\n")
    elif where == "5000 deep":
        (tmp_path / "kerneltune.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    else:
        monkeypatch.setenv("KERNELTUNE_TIE_ROUNDS", "²")
    failed = CliRunner().invoke(cli.main, ["plugins"])
    assert failed.exit_code == 1 and isinstance(failed.exception, SystemExit)
    prefix = "" if where == "variable" else f"{tmp_path}/"
    assert failed.stderr.strip().splitlines() == [f"Error: {prefix}{message}"]
