"""The settings that choose and load plugins, declared where they are read.

:mod:`~kerneltune.core.plugin_system.registry` reads ``block`` and
``autoload`` to load the plugins; :mod:`~kerneltune.core.plugin_system.session`
reads ``timer``, ``cache``, ``reducer`` and ``cache_dir`` to build a session.
Core declares its settings through ``kerneltune_add_settings``, as a
plugin does (:mod:`kerneltune.core.plugin_system.loading` collects them).
"""

from __future__ import annotations

from collections.abc import Callable

from kerneltune.core.plugin_system.hookspecs.markers import hookimpl
from kerneltune.core.plugin_system.parsers import boolean, directory, plugin_name, plugin_names
from kerneltune.core.plugin_system.settings import DEFAULT_CACHE_DIR


@hookimpl
def kerneltune_add_settings(add: Callable[..., None]) -> None:
    """Declare the settings that choose and load plugins."""
    add(
        "timer",
        default="auto",
        parse=plugin_name,
        help="how candidates are timed: a registered timer's name, or auto (the best one available here)",
        env=("KERNELTUNE_TIMER",),
    )
    add(
        "cache",
        default="auto",
        parse=plugin_name,
        help="where picks are stored: a registered cache's or remote store's name, or auto (json)",
        env=("KERNELTUNE_CACHE",),
    )
    add(
        "reducer",
        default="auto",
        parse=plugin_name,
        help="how ranks combine their times: a registered reducer's name, or auto",
        env=("KERNELTUNE_REDUCER",),
    )
    add(
        "cache_dir",
        default=DEFAULT_CACHE_DIR,
        parse=directory,
        help="the folder that holds one folder per tuned function",
        env=("TRITON_DIST_AUTOTUNE_CACHE_DIR",),
    )
    add(
        "block",
        default=(),
        parse=plugin_names,
        help="plugins not to load: built-in module names or entry-point names",
        env=("KERNELTUNE_BLOCK_PLUGINS",),
    )
    add(
        "autoload",
        default=True,
        parse=boolean,
        help="load the plugins of the kerneltune entry-point group; false: built-ins only",
        negated_env=("KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD",),
    )
