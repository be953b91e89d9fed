"""kerneltune: measure candidate configurations, agree across ranks, pick, remember.

The engine is :mod:`kerneltune.core`, the built-in plugins :mod:`kerneltune.plugins`,
the command :mod:`kerneltune.cli`; importing this package loads none of them.
:func:`use_with_triton_dist` (:mod:`kerneltune.real_triton_dist`) imports the engine only when called.
"""

import importlib.metadata

from kerneltune.real_triton_dist import use_with_triton_dist

__all__ = ["__version__", "use_with_triton_dist"]

try:
    __version__: str = importlib.metadata.version("kerneltune")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a checkout used without installing
    __version__ = "0+unknown"
