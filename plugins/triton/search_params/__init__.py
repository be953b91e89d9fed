"""The ``search_params`` feature: ``triton.autotune(..., hints={"search_params": {...}})``.

This package's own module is the plugin kerneltune registers; it imports
nothing from Triton until the feature is enabled (``import
triton_dist.autotune_hooks``). Its modules import only those before them in
this order: hints, classify, decorated, space, launcher, seam, reference,
summary, run (one fresh tuning through the engine's round API), kernel
(``triton.autotune`` wrapped). What both Triton features share (the adapter,
configs, compiling, isolation) lives in :mod:`kerneltune.plugins.triton`.
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
