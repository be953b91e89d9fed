"""kerneltune: measure candidate configurations, agree across ranks, pick, remember.

The engine is :mod:`kerneltune.core`, the built-in plugins live in
:mod:`kerneltune.plugins`, and :mod:`kerneltune.cli` is the ``kerneltune``
command, one module per command beside it. Importing this package loads none
of them.

:func:`use_with_triton_dist` (from :mod:`kerneltune.real_triton_dist`) makes
the real Triton-distributed's tuning decorators run on kerneltune's engine;
its module imports nothing of kerneltune's until it is called.
"""

import importlib.metadata

from kerneltune.real_triton_dist import use_with_triton_dist

__all__ = ["__version__", "use_with_triton_dist"]

try:
    __version__: str = importlib.metadata.version("kerneltune")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a checkout used without installing
    __version__ = "0+unknown"
