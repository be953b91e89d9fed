"""The package list, derived from the folders; pyproject.toml holds everything else.

The top-level folders install under one import root, ``kerneltune``:
``root/`` holds the root package itself (a top-level folder named
``kerneltune`` would shadow the installed package when running from a
checkout), ``cli/`` the command (``kerneltune.cli``), ``core/`` and
``plugins/`` the engine and the built-in plugins. setuptools' package
finder names a package after the folder it finds it in, so it cannot
produce ``kerneltune.plugins.timers`` from ``plugins/timers``; listing the
packages by hand left every new subpackage out of the wheel until someone
remembered to add it. Here each folder under a root that holds an
``__init__.py`` is a package, named by its path below the root.

The ``triton_dist`` facade is not among them: it is a distribution of its own
(``triton_dist/``), so that kerneltune installs beside the real Triton-distributed,
whose ``triton_dist`` package it would otherwise overwrite.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: Import name -> folder, relative to this file.
ROOTS = {
    "kerneltune": "root",
    "kerneltune.cli": "cli",
    "kerneltune.core": "core",
    "kerneltune.plugins": "plugins",
}


def find_packages(roots: dict[str, str], base: Path) -> list[str]:
    """Every package under ``roots``: its import name and each subfolder with an ``__init__.py``."""
    found = []
    for name, folder in roots.items():
        top = base / folder
        for init in sorted(top.rglob("__init__.py")):
            found.append(".".join((name, *init.parent.relative_to(top).parts)))
    return found


class BuildOnlyListedPackages(build_py):
    """``build_py`` that first removes from ``build/lib`` the top-level packages this build no longer has.

    setuptools keeps ``build/lib`` from one build to the next and packs all of
    it into the wheel, so a package moved out of this distribution (as
    ``triton_dist`` moved to its own distribution) would stay in the wheel of a clone that
    had built one before, and overwrite the real Triton-distributed's files.
    """

    def run(self) -> None:
        listed = {package.partition(".")[0] for package in self.packages or ()}
        for entry in Path(self.build_lib).glob("*"):
            if entry.is_dir() and entry.name not in listed:
                shutil.rmtree(entry)
        super().run()


setup(
    package_dir=ROOTS,
    packages=find_packages(ROOTS, Path(__file__).resolve().parent),
    cmdclass={"build_py": BuildOnlyListedPackages},
)
