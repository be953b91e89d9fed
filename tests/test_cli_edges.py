"""The `kerneltune cache` rough edges a new user met: names, missing folders, exports."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from kerneltune import cli
from test_cli import filled  # noqa: F401  (the fixture: three records, two functions)

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")


def _run(*arguments: str):
    return CliRunner().invoke(cli.main, list(arguments))


def test_show_takes_a_function_name_and_shows_each_of_its_records(filled):  # noqa: F811
    shown = _run("cache", "show", "matmul")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.count("function:      matmul") == 2
    assert "(64, 'float32')" in shown.stdout and "(128, 'float32')" in shown.stdout
    missing = _run("cache", "show", "no_such_function")
    assert missing.exit_code == 1 and "function named so" in missing.stderr


def test_clearing_a_function_with_no_records_fails(filled):  # noqa: F811
    cleared = _run("cache", "clear", "no_such_function", "--yes")
    assert cleared.exit_code == 1 and "no records of no_such_function" in cleared.stderr
    assert _run("cache", "list", "--json").stdout.count('"function"') == 3, "nothing was removed"


def test_a_missing_dir_is_an_error_not_an_empty_cache(filled, tmp_path):  # noqa: F811
    absent = tmp_path / "absent"
    for command in (["cache", "list"], ["cache", "show", "matmul"], ["cache", "clear", "--yes"], ["report"]):
        done = _run(*command, "--dir", str(absent))
        assert done.exit_code == 1, (command, done.output)
        assert f"--dir {absent}: no such directory" in done.stderr


def test_export_refuses_to_overwrite_and_exports_one_function(filled, tmp_path):  # noqa: F811
    archive = tmp_path / "picks.json"
    archive.write_text("keep me")
    refused = _run("cache", "export", str(archive))
    assert refused.exit_code == 1 and "--force" in refused.stderr and archive.read_text() == "keep me"
    done = _run("cache", "export", str(archive), "scale", "--force")
    assert done.exit_code == 0, done.output
    records = json.loads(archive.read_text())["records"]
    assert [r["record"]["function"] for r in records] == ["scale"]


def test_an_export_that_cannot_be_written_names_the_archive_not_a_temporary_file(filled, tmp_path):  # noqa: F811
    target = tmp_path / "no" / "such" / "folder" / "picks.json"
    done = _run("cache", "export", str(target))
    assert done.exit_code == 1
    assert f"cannot write {target}" in done.stderr and ".tmp" not in done.stderr


def test_list_prints_the_whole_key(isolated, tmp_path):
    from triton_dist.tune import autotune

    (tmp_path / "kerneltune.toml").write_text("warmup = 0\nrepeat = 1\n")
    long_key = ("a_rather_long_layout_name", 4096, 8192, "bfloat16", "row_major")

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda: long_key)
    def work(n):
        return n

    work()
    listed = _run("cache", "list")
    assert listed.exit_code == 0 and repr(long_key) in listed.stdout, listed.stdout
