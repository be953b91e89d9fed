"""The wheels hold what the tree holds: setup.py derives the package list from the folders.

kerneltune's wheel holds no ``triton_dist`` file: its facade is a wheel of its
own (``triton_dist/``), so that kerneltune installs beside the real
Triton-distributed (tests/test_beside_triton_dist.py installs it there).
"""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

#: Where each folder of the tree lands in the wheel.
INSTALLED_AS = {
    "root": "kerneltune",
    "cli": "kerneltune/cli",
    "core": "kerneltune/core",
    "plugins": "kerneltune/plugins",
}
FACADE = ROOT / "triton_dist"


def tree_modules(installed_as: dict[str, str] = INSTALLED_AS) -> set[str]:
    """Every module and typing marker of the installed folders, by its path in the wheel."""
    expected = set()
    for folder, prefix in installed_as.items():
        for path in (ROOT / folder).rglob("*"):
            if "build" in path.relative_to(ROOT / folder).parts:  # a build of triton_dist/, its own package
                continue
            if path.suffix == ".py" or path.name == "py.typed":
                expected.add(f"{prefix}/{path.relative_to(ROOT / folder).as_posix()}")
    return expected


def build_wheel(project: Path, into: Path) -> Path:
    """``project``'s wheel, built without its dependencies in this environment."""
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
            str(into),
            str(project),
        ],
        check=True,
        timeout=60,
    )
    (wheel,) = into.glob("*.whl")
    return wheel


def test_the_wheel_holds_every_module_and_the_command(tmp_path):
    wheel = build_wheel(ROOT, tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = configparser.ConfigParser()
        scripts.read_string(archive.read(entry_points).decode())
    missing = sorted(tree_modules() - names)
    assert not missing, f"left out of the wheel: {missing}"
    stray = sorted(n for n in names if n.endswith(".py") and not n.startswith("kerneltune/"))
    assert not stray, f"modules outside kerneltune/: {stray}"
    assert scripts["console_scripts"]["kerneltune"] == "kerneltune.cli:main"


def test_the_facade_wheel_holds_triton_dist_alone_and_needs_this_kerneltune(tmp_path):
    wheel = build_wheel(FACADE, tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        fields = Parser().parsestr(archive.read(metadata).decode())
    packaged = {n for n in names if ".dist-info/" not in n}
    assert packaged == tree_modules({"triton_dist": "triton_dist"})
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert fields["Name"] == "kerneltune-triton-dist"
    assert fields.get_all("Requires-Dist") == [f"kerneltune=={version}"]
