"""Records that know whether they are live: `cache list`, `report` and `cache prune` after an edit."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import CacheReadError
from kerneltune.core.driving import TuningRecord
from tuning_doubles import record_files

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

MODULE = "live_records_gemm"
SOURCE = '''"""A tuned function, as a user's module holds it."""

from triton_dist.tune import autotune

CALLS = []


@autotune(config_space=[{{"n": 1}}, {{"n": 2}}], key_fn=lambda size: (size,))
def gemm(size, n):
    CALLS.append(n)
    return size * n{edit}
'''
# A tuned function made inside another: its records name it, but nothing can import it.
NESTED = "live_records_nested"
NESTED_SOURCE = """from triton_dist.tune import autotune


def make():
    @autotune(config_space=[{{"n": 1}}, {{"n": 2}}], key_fn=lambda size: (size,))
    def scale(size, n):
        return size * n{edit}

    return scale
"""


def _invoke(*arguments: str):
    return CliRunner().invoke(cli.main, list(arguments), catch_exceptions=False)


def _listed(*arguments: str) -> list[dict]:
    listed = _invoke("cache", "list", "--json", *arguments)
    assert listed.exit_code == 0, listed.output
    return json.loads(listed.stdout)


class UserModule:
    """A module in a folder on the import path, written again for each edit and imported afresh."""

    def __init__(self, folder: Path, name: str, source: str) -> None:
        self.path = folder / f"{name}.py"
        self.name = name
        self.source = source

    def write(self, edit: str = "") -> None:
        # Each edit changes the file's size, so no cached bytecode or source lines outlive it.
        self.path.write_text(self.source.format(edit=edit))
        sys.modules.pop(self.name, None)
        importlib.invalidate_caches()

    def load(self, edit: str = "") -> Any:
        self.write(edit)
        return importlib.import_module(self.name)


@pytest.fixture
def src(isolated, tmp_path, monkeypatch):
    """A folder on the import path for the user's modules; the modules are forgotten afterwards."""
    (tmp_path / "kerneltune.toml").write_text("warmup = 0\nrepeat = 2\n")
    folder = tmp_path / "src"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in (MODULE, NESTED):
        sys.modules.pop(name, None)


@pytest.fixture
def edited(src, isolated):
    """One function tuned for one key, edited, imported again and tuned again: two records."""
    module = UserModule(src, MODULE, SOURCE)
    module.load().gemm(64)
    # Records are dated to the second and sorted by date: the later one is later on any clock.
    time.sleep(1.05)
    module.load("  # edited").gemm(64)
    assert len(record_files(isolated, "gemm")) == 2
    return module


def test_list_marks_the_record_of_the_current_source(edited):
    rows = _listed()
    assert [(row["function"], row["key_text"]) for row in rows] == [("gemm", "(64,)")] * 2
    # Sorted by date within the key: the first tuning's record first.
    assert [row["status"] for row in rows] == ["stale", "current"]
    assert [row["live"] for row in rows] == [False, True]
    assert rows[0]["created_at"] < rows[1]["created_at"]
    assert rows[0]["source"] != rows[1]["source"]
    assert all(row["origin"] == {"module": MODULE, "qualname": "gemm"} for row in rows)

    table = _invoke("cache", "list").stdout.splitlines()
    headers = ["function", "key", "pick", "time", "confidence", "measured", "date", "source", "file"]
    assert table[1].split() == headers
    assert [line.split()[-2] for line in table[2:]] == ["stale", "current"]

    # Undoing the edit makes the first record the current one again.
    edited.load()
    assert [row["status"] for row in _listed()] == ["current", "stale"]


def test_report_says_which_source_each_record_is_of(edited):
    reported = _invoke("report", "gemm")
    assert reported.exit_code == 0
    blocks = reported.stdout.split("\n\n")
    assert len(blocks) == 2
    assert f"  source: stale ({MODULE}.gemm was edited since; kerneltune cache prune drops it)" in blocks[0]
    assert f"  source: current ({MODULE}.gemm as it is now)" in blocks[1]


def test_show_says_where_the_function_is_defined_and_which_source_each_record_is_of(edited, isolated):
    shown = _invoke("cache", "show", "gemm")
    assert shown.exit_code == 0, shown.output
    sources = [line for line in shown.stdout.splitlines() if line.startswith("source:")]
    assert [line.split()[1] for line in sources] == ["stale", "current"]
    assert shown.stdout.count(f"defined as:    {MODULE}.gemm") == 2
    # One record named by its file still says how it stands among its function's records.
    stale = min(record_files(isolated, "gemm"), key=lambda path: json.loads(path.read_text())["created"])
    one = _invoke("cache", "show", str(stale))
    assert f"source:        stale ({MODULE}.gemm was edited since" in one.stdout


def test_prune_dry_run_lists_the_stale_record_and_removes_nothing(edited, isolated):
    before = record_files(isolated, "gemm")
    (stale,) = [row for row in _listed() if row["status"] == "stale"]
    pruned = _invoke("cache", "prune", "--dry-run")
    assert pruned.exit_code == 0, pruned.output
    assert record_files(isolated, "gemm") == before
    lines = pruned.stdout.splitlines()
    assert lines[0] == f"stale records in {isolated} (their function was edited after they were made):"
    assert lines[1].split() == ["function", "key", "date", "defined", "as", "file"]
    assert lines[2].split() == [
        "gemm",
        "(64,)",
        stale["created_at"],
        f"{MODULE}.gemm",
        f"gemm/{stale['digest']}.json",
    ]
    assert lines[3:] == [
        "would drop 1 stale record(s) of 1 function(s) (--dry-run: nothing removed); "
        "would keep 1 record(s): 1 of a current source"
    ]


def test_prune_drops_the_stale_record_only(edited, isolated):
    (current,) = [row for row in _listed() if row["status"] == "current"]
    pruned = _invoke("cache", "prune")
    assert pruned.exit_code == 0, pruned.output
    assert pruned.stdout.splitlines()[-1] == (
        "dropped 1 stale record(s) of 1 function(s); kept 1 record(s): 1 of a current source"
    )
    assert [row["digest"] for row in _listed()] == [current["digest"]]
    assert record_files(isolated, "gemm") == [isolated / "gemm" / f"{current['digest']}.json"]

    again = _invoke("cache", "prune", "gemm")
    assert again.exit_code == 0
    assert again.stdout == (
        f"nothing to drop in {isolated}: no stale records of gemm; kept 1 record(s): 1 of a current source\n"
    )
    # A new process of the current source still finds its pick: one call, with the pick, no measuring.
    module = edited.load("  # edited")
    module.gemm(64)
    assert [current["pick"]["index"] + 1] == module.CALLS


def test_records_of_a_function_that_cannot_be_imported_are_judged_by_date_and_kept(src):
    nested = UserModule(src, NESTED, NESTED_SOURCE)
    scale = nested.load().make()
    scale(1024)
    scale(8)
    time.sleep(1.05)
    scale = nested.load(" + 0").make()
    scale(1024)
    scale(8)

    rows = _listed("scale")
    # Keys sort by value, not as text: (8,) before (1024,); each key's records by date.
    assert [row["key_text"] for row in rows] == ["(8,)", "(8,)", "(1024,)", "(1024,)"]
    assert [row["status"] for row in rows] == ["older", "newest"] * 2
    assert all(row["origin"] == {"module": NESTED, "qualname": "make.<locals>.scale"} for row in rows)

    pruned = _invoke("cache", "prune")
    assert pruned.exit_code == 0
    assert pruned.stdout.startswith("nothing to drop")
    assert "4 whose source cannot be checked here (kept whatever their date)" in pruned.stdout
    assert len(_listed("scale")) == 4
    # Nothing is said about a function that no tool could import.
    assert pruned.stderr == ""


SCRIPT = """from triton_dist.tune import autotune


@autotune(config_space=[{{"n": 1}}, {{"n": 2}}], key_fn=lambda size: (size,))
def tile(size, n):
    return size * n{edit}


if __name__ == "__main__":
    print(tile(64))
"""


def test_a_scripts_records_are_judged_by_its_file_and_the_stale_one_pruned(src, isolated):
    script = src / "tile_script.py"

    def run(edit: str = "") -> None:
        script.write_text(SCRIPT.format(edit=edit))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr

    run()
    time.sleep(1.05)  # records are dated to the second
    run("  # edited")
    rows = _listed("tile")
    assert [row["status"] for row in rows] == ["stale", "current"]
    assert rows[0]["origin"] == {"module": "__main__", "qualname": "tile", "path": str(script)}

    pruned = _invoke("cache", "prune")
    assert pruned.exit_code == 0, pruned.output
    assert [row["status"] for row in _listed("tile")] == ["current"]
    script.write_text("print('tile is gone')\n")
    assert [row["status"] for row in _listed("tile")] == ["newest"], "judged by date, as an import that fails"


def test_a_module_that_fails_to_import_is_named_once_and_its_records_kept(edited, isolated):
    edited.write('\nraise RuntimeError("no GPU here")')
    listed = _invoke("cache", "list", "--json")
    assert listed.exit_code == 0
    assert [row["status"] for row in json.loads(listed.stdout)] == ["older", "newest"]
    assert listed.stderr.count(f"kerneltune: {MODULE}.gemm: cannot import it") == 1
    assert "(RuntimeError: no GPU here); its records are marked by date" in listed.stderr

    pruned = _invoke("cache", "prune")
    assert pruned.exit_code == 0
    assert len(record_files(isolated, "gemm")) == 2


def test_a_module_that_prints_on_import_leaves_the_json_readable(edited):
    # The function's own source is the first tuning's again; the print is outside it.
    edited.write('\nprint("hello from the module")')
    listed = _invoke("cache", "list", "--json")
    assert [row["status"] for row in json.loads(listed.stdout)] == ["current", "stale"]
    assert "hello from the module" in listed.stderr


def test_a_record_naming_a_standard_library_module_is_not_imported(edited, isolated, monkeypatch):
    (stale,) = [row for row in _listed() if row["status"] == "stale"]
    path = isolated / "gemm" / f"{stale['digest']}.json"
    data = json.loads(path.read_text())
    data["origin"] = {"module": "antigravity", "qualname": "gemm"}
    path.write_text(json.dumps(data))
    monkeypatch.delitem(sys.modules, "antigravity", raising=False)
    listed = _invoke("cache", "list", "--json")
    assert "antigravity" not in sys.modules
    assert "not importing antigravity, a module of the standard library" in listed.stderr
    assert [row["status"] for row in json.loads(listed.stdout)] == ["newest", "current"]


def test_a_record_keeps_its_origin_and_refuses_one_that_is_not_a_module_name(edited, isolated):
    data = json.loads(record_files(isolated, "gemm")[0].read_text())
    assert data["origin"] == {"module": MODULE, "qualname": "gemm"}
    record = TuningRecord.from_data(data)
    assert record.origin is not None and str(record.origin) == f"{MODULE}.gemm"
    assert TuningRecord.from_data(record.to_data()) == record
    assert TuningRecord.from_data({**data, "origin": None}).origin is None
    with pytest.raises(CacheReadError, match=r"origin\.module is .* not a dotted module name"):
        TuningRecord.from_data({**data, "origin": {"module": "os; rm", "qualname": "gemm"}})
