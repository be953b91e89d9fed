"""The ``search_params`` feature: ``triton.autotune(..., hints={"search_params": {...}})``.

This package's own module is the plugin kerneltune registers; it imports
nothing from Triton until the feature is enabled (``import
triton_dist.autotune_hooks``), so sessions on machines without Triton stay
cheap. Its modules, each importing only those above it:

- :mod:`.hints` and :mod:`.classify`: the hint, checked; the kernel's operator class;
- :mod:`.decorated`: a kernel as the decorator checked it (configs, seeds, base, hooks);
- :mod:`.space`: the candidates, every block shape times every compile-option profile;
- :mod:`.launcher`: one round's candidates screened, compiled and launched;
- :mod:`.seam`: what a search strategy is handed and what it returns, checked;
- :mod:`.reference`: the finalists gated by ``reference_fn``;
- :mod:`.summary`: ``kernel.last_search`` and the ``TRITON_PRINT_AUTOTUNING`` lines;
- :mod:`.run`: one fresh tuning of one key, through the engine's round API;
- :mod:`.kernel`: ``triton.autotune`` wrapped, and the kernel it makes.

The interception room, :mod:`kerneltune.plugins.triton`, holds what both
features share: the adapter and its version table, configs, compiling and
isolation.
"""

from __future__ import annotations

import importlib.util
from typing import ClassVar

from kerneltune.core import hookimpl


class SearchParamsFeature:
    """Makes ``triton.autotune`` accept ``hints={"search_params": ...}``."""

    name: ClassVar[str] = "search_params"

    @classmethod
    def is_available(cls) -> bool:
        """Whether Triton can be imported."""
        return importlib.util.find_spec("triton") is not None

    def enable(self) -> None:
        """Wrap ``triton.autotune`` once; kernels without the hint keep stock behaviour."""
        install_search_params()


def install_search_params() -> None:
    """Wrap ``triton.autotune`` once here; an isolation worker calls this by name, as its parent did."""
    from kerneltune.plugins.triton import autotune
    from kerneltune.plugins.triton.search_params.kernel import make_autotune

    autotune.install_autotune(make_autotune, installer=f"{__name__}:install_search_params")


@hookimpl
def kerneltune_register_features(register):
    register(SearchParamsFeature)
