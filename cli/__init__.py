"""kerneltune: measure candidate configurations, agree across ranks, pick, remember.

The engine is :mod:`kerneltune.core`, the built-in plugins live in
:mod:`kerneltune.plugins`, and :mod:`kerneltune.cli` is the ``kerneltune``
command. Importing this package loads none of them.
"""

import importlib.metadata

try:
    __version__: str = importlib.metadata.version("kerneltune")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a checkout used without installing
    __version__ = "0+unknown"
