"""The settings that choose and load plugins, declared where they are read.

:mod:`~kerneltune.core.plugin_system.registry` reads ``block`` and
``autoload`` to load the plugins; :mod:`~kerneltune.core.plugin_system.session`
reads ``timer``, ``cache``, ``reducer`` and ``cache_dir`` to build a session.
Each is a :class:`~kerneltune.core.plugin_system.settings.SettingSpec`, read
as ``settings[TIMER]``.
"""

from __future__ import annotations

from pathlib import Path

from kerneltune.core.plugin_system.parsers import boolean, directory, plugin_name, plugin_names
from kerneltune.core.plugin_system.settings import SettingSpec

TIMER = SettingSpec(
    "timer",
    default="auto",
    parse=plugin_name,
    help="how candidates are timed: a registered timer's name, or auto (the best one available here)",
    env=("KERNELTUNE_TIMER",),
)
CACHE = SettingSpec(
    "cache",
    default="auto",
    parse=plugin_name,
    help="where picks are stored: a registered cache's or remote store's name, or auto (json)",
    env=("KERNELTUNE_CACHE",),
)
REDUCER = SettingSpec(
    "reducer",
    default="auto",
    parse=plugin_name,
    help="how ranks combine their times: a registered reducer's name, or auto",
    env=("KERNELTUNE_REDUCER",),
)
CACHE_DIR = SettingSpec(
    "cache_dir",
    # The folder Triton-distributed's documents name.
    default=Path("~/.triton_dist/autotune"),
    parse=directory,
    help="the folder that holds one folder per tuned function",
    env=("TRITON_DIST_AUTOTUNE_CACHE_DIR",),
)
BLOCK: SettingSpec[tuple[str, ...]] = SettingSpec(
    "block",
    default=(),
    parse=plugin_names,
    help="plugins not to load: built-in module names or entry-point names",
    env=("KERNELTUNE_BLOCK_PLUGINS",),
)
AUTOLOAD = SettingSpec(
    "autoload",
    default=True,
    parse=boolean,
    help="load the plugins of the kerneltune entry-point group; false: built-ins only",
    negated_env=("KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD",),
)
