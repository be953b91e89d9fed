"""kerneltune: measure candidate configurations, agree across ranks, pick, remember.

The engine is :mod:`kerneltune.core`, the built-in plugins live in
:mod:`kerneltune.plugins`, and :mod:`kerneltune.cli` is the ``kerneltune``
command, whose commands are the modules beside it (:mod:`kerneltune.plugins_command`,
:mod:`kerneltune.cache_commands`, :mod:`kerneltune.report_command`, reading
through :mod:`kerneltune.loading`). Importing this package loads none of them.
"""

import importlib.metadata

try:
    __version__: str = importlib.metadata.version("kerneltune")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a checkout used without installing
    __version__ = "0+unknown"
