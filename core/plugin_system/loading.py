"""Loading: core's settings through the settings hook, then the plugins for them, one way for every caller.

Core declares its settings as plugins do, through ``kerneltune_add_settings``,
in the ``options`` module beside the code that reads them
(:data:`CORE_SETTING_MODULES`, loaded by name as pytest loads its default
plugins). :func:`load_settings` reads them from the files and variables;
:func:`load_plugins` loads the plugins those settings allow and resolves
the settings the plugins declare. :class:`~kerneltune.core.Session` and the
``kerneltune`` command both load this way.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs
import pluggy
from kerneltune.core.plugin_system import hookspecs
from kerneltune.core.plugin_system.registry import (
    Registries,
    collect_registries,
    collect_settings,
    make_plugin_manager,
)
from kerneltune.core.plugin_system.settings import (
    DeclaredSettings,
    Settings,
    SettingSpec,
    read_settings,
    resolve_declared,
)

#: The modules that declare core's settings, each next to the code that reads them.
CORE_SETTING_MODULES: tuple[str, ...] = (
    "kerneltune.core.plugin_system.options",
    "kerneltune.core.machine.options",
    "kerneltune.core.isolation.options",
    "kerneltune.core.search.options",
    "kerneltune.core.drivers.options",
)


@functools.cache
def core_settings() -> Mapping[str, SettingSpec]:
    """Core's settings by name, as :data:`CORE_SETTING_MODULES` declare them (collected once per process).

    :raises RuntimeError: for a setting two core modules declare: a defect of kerneltune.
    """
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    for name in CORE_SETTING_MODULES:
        manager.register(importlib.import_module(name), name=name)
    found: dict[str, SettingSpec] = {}

    def add(name: str, **fields: Any) -> None:
        if name in found:
            raise RuntimeError(f"core setting {name!r} is declared twice")
        found[name] = SettingSpec(name=name, **fields)

    manager.hook.kerneltune_add_settings(add=add)
    return MappingProxyType(found)


def load_settings(cwd: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Resolve core's settings from every source, later sources winning.

    Sources: the defaults, ``[tool.kerneltune]`` in ./pyproject.toml,
    ./kerneltune.toml, the file ``$KERNELTUNE_CONFIG`` names, then each
    setting's variables. Keys and ``KERNELTUNE_*`` variables that no core
    setting has are kept for the plugins' settings, and checked once the
    plugins are loaded (:func:`load_plugins`).

    :param cwd: where to look for pyproject.toml and kerneltune.toml
        (default: the current directory).
    :param environ: the environment to read (default: ``os.environ``).
    :raises ConfigError: naming the file (or variable) and the key at fault.
    """
    return read_settings(core_settings(), cwd, environ)


@attrs.frozen
class Plugins:
    """The plugins loaded for some settings, and those settings with the values the plugins declare."""

    settings: Settings
    manager: pluggy.PluginManager = attrs.field(repr=False)
    registries: Registries = attrs.field(repr=False)
    declared: DeclaredSettings = attrs.field(repr=False)


def load_plugins(settings: Settings, extra: tuple[object, ...] = ()) -> Plugins:
    """Load the plugins ``settings`` allow (and ``extra``), collect their registries and settings.

    :raises ConfigError: for a key of the files that no setting has, or a
        plugin's setting whose value its parser refuses.
    :raises PluginError: for an unknown or clashing plugin name, or a
        registry or settings hook that raises (naming the plugin).
    """
    manager = make_plugin_manager(settings, extra)
    declared = collect_settings(manager, core_settings())
    return Plugins(
        settings=resolve_declared(settings, declared, core_settings()),
        manager=manager,
        registries=collect_registries(manager),
        declared=declared,
    )
