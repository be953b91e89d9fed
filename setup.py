"""The package list, derived from the folders; pyproject.toml holds everything else.

The top-level folders ``core/`` and ``plugins/`` install under one import
root, ``kerneltune``, whose own modules live in ``cli/`` (a top-level folder
named ``kerneltune`` would shadow the installed package when running from a
checkout). setuptools' package finder names a package after the folder it
finds it in, so it cannot produce ``kerneltune.plugins.timers`` from
``plugins/timers``; listing the packages by hand left every new subpackage
out of the wheel until someone remembered to add it. Here each folder under a
root that holds an ``__init__.py`` is a package, named by its path below the
root.
"""

from pathlib import Path

from setuptools import setup

#: Import name -> folder, relative to this file.
ROOTS = {
    "kerneltune": "cli",
    "kerneltune.core": "core",
    "kerneltune.plugins": "plugins",
    "triton_dist": "triton_dist",
}


def find_packages(roots: dict[str, str], base: Path) -> list[str]:
    """Every package under ``roots``: its import name and each subfolder with an ``__init__.py``."""
    found = []
    for name, folder in roots.items():
        top = base / folder
        for init in sorted(top.rglob("__init__.py")):
            found.append(".".join((name, *init.parent.relative_to(top).parts)))
    return found


setup(package_dir=ROOTS, packages=find_packages(ROOTS, Path(__file__).resolve().parent))
