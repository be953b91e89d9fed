"""The wheel holds what the tree holds: setup.py derives the package list from the folders."""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Where each folder of the tree lands in the wheel.
INSTALLED_AS = {
    "cli": "kerneltune",
    "core": "kerneltune/core",
    "plugins": "kerneltune/plugins",
    "triton_dist": "triton_dist",
}


def tree_modules() -> set[str]:
    """Every module and typing marker of the installed folders, by its path in the wheel."""
    expected = set()
    for folder, prefix in INSTALLED_AS.items():
        for path in (ROOT / folder).rglob("*"):
            if path.suffix == ".py" or path.name == "py.typed":
                expected.add(f"{prefix}/{path.relative_to(ROOT / folder).as_posix()}")
    return expected


def test_the_wheel_holds_every_module_and_the_command(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        timeout=60,
    )
    (wheel,) = tmp_path.glob("kerneltune-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = configparser.ConfigParser()
        scripts.read_string(archive.read(entry_points).decode())
    missing = sorted(tree_modules() - names)
    assert not missing, f"left out of the wheel: {missing}"
    stray = sorted(
        n for n in names if n.endswith(".py") and not n.startswith(("kerneltune/", "triton_dist/"))
    )
    assert not stray, f"modules outside kerneltune/ and triton_dist/: {stray}"
    assert scripts["console_scripts"]["kerneltune"] == "kerneltune.cli:main"
