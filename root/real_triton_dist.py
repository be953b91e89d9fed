"""Run the real Triton-distributed's tuning decorators on kerneltune's engine.

Triton-distributed (``triton-dist``) and kerneltune's facade
(``kerneltune-triton-dist``) both install a top-level ``triton_dist``
package, so beside Triton-distributed kerneltune is installed without its
facade, and :func:`use_with_triton_dist` points the real package's
documented decorators (:data:`DECORATORS`) at kerneltune's, changing
attributes of the imported modules, never a file. The real package's
private machinery is left as it is: it passes every launch through to
Triton while no real ``ContextualAutoTuner`` runs, and the documented
decorator starts none after the call. docs/guide.md ("Beside the real
Triton-distributed") is the user's page.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import sys
import types
import warnings
from typing import NamedTuple

PACKAGE = "triton_dist"
#: The distributions that install a ``triton_dist`` package: Triton-distributed's and kerneltune's facade.
REAL_DISTRIBUTION = "triton-dist"
FACADE_DISTRIBUTION = "kerneltune-triton-dist"
#: The kerneltune module that holds the decorators: the engine's door for drivers.
ENGINE = "kerneltune.core.driving"


class Decorator(NamedTuple):
    """One documented decorator, served by the attribute of the same name of :data:`ENGINE`."""

    #: the ``triton_dist`` module the documented API puts it in
    module: str
    #: its name there
    name: str
    #: what the module holds where the real package lacks it, as kerneltune's facade's module does
    exports: tuple[str, ...]


DECORATORS = (
    Decorator("triton_dist.autotuner", "contextual_autotune", ("ContextualAutoTuner", "contextual_autotune")),
    Decorator("triton_dist.tune", "autotune", ("AutoTuner", "autotune")),
)


def use_with_triton_dist() -> list[str]:
    """Make the installed ``triton_dist`` package's tuning decorators run on kerneltune's engine.

    For each of :data:`DECORATORS`, kerneltune's decorator replaces the
    module's attribute, or, where the package lacks the module (the
    ``triton-dist`` 0.0.0 wheel has no ``tune``), a module holding what the
    facade's holds takes its place for this process. A second call changes nothing.

    Call it before importing code that binds a decorator's name at import
    (``from triton_dist.autotuner import contextual_autotune`` at the top of
    a module): a name bound before the call keeps the real decorator. The
    modules' other names, such as the real ``ContextualAutoTuner`` class,
    stay the real ones.

    :returns: what now runs on kerneltune that did not before, as dotted
        names (``["triton_dist.autotuner.contextual_autotune",
        "triton_dist.tune"]`` beside ``triton-dist`` 0.0.0); empty where
        everything already did, as under kerneltune's own facade.
    :raises ModuleNotFoundError: when no ``triton_dist`` package can be imported.
    :raises ImportError: when the installed package cannot be imported with this Triton (the real
        one needs Triton-distributed's own build of Triton), naming what it lacks.
    """
    _import_package()
    if _installed(REAL_DISTRIBUTION) and _installed(FACADE_DISTRIBUTION):
        warnings.warn(
            f"both {REAL_DISTRIBUTION} and {FACADE_DISTRIBUTION} are installed, and each installs the "
            f"{PACKAGE} package: the one installed second overwrote the other's files. Beside "
            f"Triton-distributed keep kerneltune without its facade: pip uninstall {FACADE_DISTRIBUTION}, "
            f"then reinstall {REAL_DISTRIBUTION}",
            RuntimeWarning,
            stacklevel=2,
        )
    served = []
    engine = importlib.import_module(ENGINE)
    for decorator in DECORATORS:
        ours = getattr(engine, decorator.name)
        module = _module(decorator.module)
        if module is None:
            _put_in_place(decorator, engine)
            served.append(decorator.module)
        elif getattr(module, decorator.name, None) is not ours:
            setattr(module, decorator.name, ours)
            served.append(f"{decorator.module}.{decorator.name}")
    return served


def _import_package() -> None:
    try:
        importlib.import_module(PACKAGE)
    except ImportError as exc:
        if importlib.util.find_spec(PACKAGE) is not None:
            missing = exc.name if exc.name and exc.name != PACKAGE else None
            lacking = f"it imports {missing}, which is not here" if missing else str(exc)
            raise ImportError(
                f"use_with_triton_dist: the installed {PACKAGE} package ({_version(REAL_DISTRIBUTION)}) "
                f"cannot be imported: {lacking}. Triton-distributed runs on its own build of Triton, not "
                f"on a release of Triton from the package index (this one: {_version('triton')}): install "
                f"it as its documents say, with that Triton, or use kerneltune's own {PACKAGE} without "
                f"it ({FACADE_DISTRIBUTION}: pip install ./triton_dist in a clone)",
                name=exc.name,
            ) from exc
        raise ModuleNotFoundError(
            f"use_with_triton_dist: no {PACKAGE} package is installed. Install Triton-distributed "
            f"({REAL_DISTRIBUTION}), or, without it, kerneltune's own {PACKAGE} "
            f"({FACADE_DISTRIBUTION}: pip install ./triton_dist in a clone), which needs no such call",
            name=PACKAGE,
        ) from exc


def _version(distribution: str) -> str:
    try:
        return f"{distribution} {importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return f"no {distribution} distribution installed"


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _module(name: str) -> types.ModuleType | None:
    """The package's module ``name``, imported; ``None`` where the package has no such module."""
    if name in sys.modules:
        return sys.modules[name]
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def _put_in_place(decorator: Decorator, engine: types.ModuleType) -> None:
    """Make ``decorator.module`` importable in this process, holding kerneltune's ``exports``."""
    module = types.ModuleType(decorator.module, f"``{decorator.module}``, served by kerneltune's {ENGINE}.")
    module.__spec__ = importlib.machinery.ModuleSpec(decorator.module, None)
    module.__all__ = list(decorator.exports)  # type: ignore[attr-defined]
    for name in decorator.exports:
        setattr(module, name, getattr(engine, name))
    parent, _, child = decorator.module.rpartition(".")
    sys.modules[decorator.module] = module
    setattr(sys.modules[parent], child, module)
