"""The session's cache: the plugin the ``cache`` setting names, constructed with what its parts ask for.

:func:`build_cache` chooses (a cache, or the local one layered over a remote
store, or ``memory`` where ``cache_dir`` has no home to expand to);
:func:`make_cache` constructs a cache class with its root, settings and inner
cache. The ``kerneltune cache`` commands construct theirs with it too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kerneltune.core.errors import PluginError
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.contracts import (
    Cache,
    ConfiguredCache,
    LayeringCache,
    RemoteStore,
    provides,
)
from kerneltune.core.plugin_system.layered_cache import LayeredCache
from kerneltune.core.plugin_system.options import CACHE, CACHE_DIR
from kerneltune.core.plugin_system.registry import Registry
from kerneltune.core.plugin_system.settings import Settings


def build_cache(
    settings: Settings, caches: Registry[Cache], remotes: Registry[RemoteStore]
) -> Cache | LayeredCache:
    """The session's cache: the one the ``cache`` setting names, or the local one layered over a remote store.

    A remote store's name (``redis``) layers that store under the cache
    registered as ``json`` (:class:`LayeredCache`). Where ``cache_dir``
    starts with ``~`` and there is no home directory (no ``HOME``, no
    passwd entry), the ``memory`` cache stands in, with one warning per
    process.

    :raises PluginError: for a name that is neither a cache nor a remote
        store (listing both), one that is both (naming both plugins), or one
        that cannot run here.
    :raises ConfigError: as the cache or store raises it for its settings.
    """
    for name in sorted(caches.classes.keys() & remotes.classes.keys()):
        raise PluginError(
            f"cache {name!r} is registered by two plugins: {caches.owners[name]} (a cache) and "
            f"{remotes.owners[name]} (a remote store)"
        )
    source = settings.source("cache")
    if settings[CACHE] == "auto" or settings[CACHE] in caches.classes:
        chosen: type[Any] = caches.select(settings[CACHE], source)
    else:
        both = Registry(
            family="cache",
            classes={**caches.classes, **remotes.classes},
            owners={**caches.owners, **remotes.owners},
        )
        chosen = both.select(settings[CACHE], source)
    root = cache_root(settings)
    if root is None:
        if chosen.name != "memory":
            warn_once(
                "no home",
                f"kerneltune: cannot expand cache_dir {settings[CACHE_DIR]} (HOME is unset and uid "
                f"{os.getuid()} has no passwd entry); tuning without a disk cache, picks serve this "
                "process only (set TRITON_DIST_AUTOTUNE_CACHE_DIR to keep them)",
            )
        return make_cache(caches.get("memory"), settings[CACHE_DIR], settings, caches)
    if chosen.name in remotes.classes:
        local = make_cache(caches.get("json"), root, settings, caches)
        return LayeredCache(local, chosen(settings=settings), remotes.owners[chosen.name])
    return make_cache(chosen, root, settings, caches)


def make_cache(
    cache_class: type, root: Path, settings: Settings, caches: Registry, _over: tuple[str, ...] = ()
) -> Any:
    """Construct a cache plugin's class with ``root``, and what its optional parts ask for
    (``settings``, ``inner``: :class:`~kerneltune.core.plugin_system.contracts.ConfiguredCache`,
    :class:`~kerneltune.core.plugin_system.contracts.LayeringCache`).

    :raises PluginError: naming the cache's plugin, for a setting it reads
        that no plugin declared, a ``layers_over`` that names no cache or
        runs in a circle, or a constructor that refuses those arguments.
    """
    name = getattr(cache_class, "name", cache_class.__name__)
    owner = caches.owners.get(name, cache_class.__module__)
    given: dict[str, Any] = {"root": root}
    if provides(cache_class, ConfiguredCache):
        declared = dict(settings.declared)
        missing = [setting for setting in cache_class.reads_settings if setting not in declared]
        if missing:
            raise PluginError(
                f"plugin {owner}: cache {name!r} reads the setting(s) {', '.join(missing)}, which no "
                f"plugin declares (declared: {', '.join(sorted(declared)) or 'none'})"
            )
        given["settings"] = settings
    if provides(cache_class, LayeringCache):
        if name in _over:
            raise PluginError(f"plugin {owner}: caches layer over each other in a circle: {', '.join(_over)}")
        inner = caches.get(cache_class.layers_over, f"the layers_over attribute of cache {name!r}")
        given["inner"] = make_cache(inner, root, settings, caches, (*_over, name))
    try:
        return cache_class(**given)
    except TypeError as exc:
        raise PluginError(
            f"plugin {owner}: cache {name!r} refused {cache_class.__name__}({', '.join(given)}): {exc}; "
            "a cache constructed with more than root says so by the optional parts it provides "
            "(ConfiguredCache, LayeringCache: docs/plugins.md)"
        ) from exc


def cache_root(settings: Settings) -> Path | None:
    """``settings.cache_root``, or ``None`` when ``~`` has no home to expand to."""
    try:
        return settings.cache_root
    except RuntimeError:
        return None
