"""README.md's tested-versions table and layout agree with the Makefile and with the tree."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def _make_variable(name: str) -> str:
    """A Makefile variable's value, continuation lines joined."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(rf"^{name}\s*[?:]?=\s*(.*)$", text, re.MULTILINE)
    assert match, f"the Makefile sets no {name}"
    return match.group(1).strip()


def _rows() -> list[dict[str, str]]:
    lines = [line for line in _section("Tested versions").splitlines() if line.startswith("|")]
    headers = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert headers[:3] == ["package", "release", "where"]
    return [
        dict(zip(headers, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        for line in lines[2:]
    ]


def _ci_releases(package: str) -> set[str]:
    return {
        row["release"].split()[0] for row in _rows() if row["package"] == package and "CI" in row["where"]
    }


def test_the_table_names_exactly_the_triton_releases_ci_runs():
    assert set(_make_variable("TRITONS").split()) == _ci_releases("Triton")


def test_the_table_names_every_triton_ascend_and_torch_release_the_makefile_pins():
    assert set(_make_variable("TRITON_ASCENDS").split()) == _ci_releases("triton-ascend")
    (torch,) = re.findall(r"torch==([\w.]+)", _make_variable("TORCH"))
    assert torch in _ci_releases("torch")


def test_the_guide_links_to_the_table_instead_of_keeping_its_own():
    guide = (ROOT / "docs" / "guide.md").read_text()
    assert "(../README.md#tested-versions)" in guide
    assert "| Triton |" not in guide


def _layout() -> list[str]:
    block = re.search(r"^```\n(.*?)^```$", _section("Layout"), re.DOTALL | re.MULTILINE)
    assert block
    return [line.split()[0] for line in block.group(1).splitlines() if line and not line[0].isspace()]


def test_every_path_the_layout_names_exists():
    missing = [name for name in _layout() if not (ROOT / name).exists()]
    assert not missing, f"README.md's layout names what the tree does not hold: {missing}"


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)
def test_the_layout_names_every_folder_of_the_tree():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    folders = {path.split("/")[0] for path in tracked if "/" in path}
    listed = {name.rstrip("/") for name in _layout()} | {name.split("/")[0] for name in _layout()}
    assert folders <= listed, f"README.md's layout leaves out {sorted(folders - listed)}"
