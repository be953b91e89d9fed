"""Keep kerneltune plugins that this repository does not ship, but the environment holds, out of the tests.

As pytest's own suite turns plugin autoload off: a third-party kerneltune plugin installed beside
kerneltune must not change what the tests see. The plugin managers find entry points through
``importlib.metadata.distributions`` (pluggy's ``load_setuptools_entrypoints``, and kerneltune's
list of known names), so the distributions that bring such plugins are left out of it: in the test
process (tests/conftest.py), and in every Python process the tests start, through a
``sitecustomize`` module put ahead on ``PYTHONPATH`` (:func:`isolate_children`).
"""

from __future__ import annotations

import atexit
import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

#: The distributions of this repository whose entry-point plugins the tests load.
OWN_DISTRIBUTIONS = ("kerneltune", "kerneltune-example-plugin", "kerneltune-example-device")
#: The entry-point group kerneltune's plugin managers load (manager.py's ENTRY_POINT_GROUP).
GROUP = "kerneltune"

_ALL_DISTRIBUTIONS = importlib.metadata.distributions
#: The distributions installed when the tests began that bring kerneltune plugins of others (a
#: test may make one of its own later: that one is seen).
FOREIGN = frozenset(
    dist.metadata["Name"]
    for dist in _ALL_DISTRIBUTIONS()
    if dist.metadata["Name"] not in OWN_DISTRIBUTIONS
    and any(entry.group == GROUP for entry in dist.entry_points)
)


def _without_foreign_plugins(**options):
    return (dist for dist in _ALL_DISTRIBUTIONS(**options) if dist.metadata["Name"] not in FOREIGN)


def hide_foreign_plugins() -> None:
    """Leave the distributions that bring foreign kerneltune plugins out of this process's view."""
    if FOREIGN:
        importlib.metadata.distributions = _without_foreign_plugins


def isolate_children() -> None:
    """Make every Python process started from here on hide them too: a ``sitecustomize`` on ``PYTHONPATH``."""
    site = Path(tempfile.mkdtemp(prefix="kerneltune-tests-site-"))
    atexit.register(shutil.rmtree, site, ignore_errors=True)
    (site / "sitecustomize.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('own_plugins', {str(Path(__file__))!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "module.hide_foreign_plugins()\n"
    )
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))
