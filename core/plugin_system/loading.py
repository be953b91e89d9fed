"""Loading: the plugins some settings allow, and the settings those plugins declare.

:func:`load_plugins` loads the plugins that core's settings
(:func:`~kerneltune.core.plugin_system.settings.load_settings`) allow and
resolves the settings the plugins declare. :class:`~kerneltune.core.Session`
and the ``kerneltune`` command both load this way.
"""

from __future__ import annotations

import attrs
import pluggy
from kerneltune.core.plugin_system.manager import make_plugin_manager
from kerneltune.core.plugin_system.registry import Registries, collect_registries, collect_settings
from kerneltune.core.plugin_system.settings import DeclaredSettings, Settings, resolve_declared


@attrs.frozen
class Plugins:
    """The plugins loaded for some settings, and those settings with the values the plugins declare."""

    settings: Settings
    manager: pluggy.PluginManager = attrs.field(repr=False)
    registries: Registries = attrs.field(repr=False)
    declared: DeclaredSettings = attrs.field(repr=False)


def load_plugins(settings: Settings, extra: tuple[object, ...] = (), *, deferring: bool = False) -> Plugins:
    """Load the plugins ``settings`` allow (and ``extra``), collect their registries and settings.

    :param deferring: leave the deferred built-ins unimported until their family is first read
        (:data:`~kerneltune.core.plugin_system.manager.DEFERRED_PLUGINS`; a Session's plugins).

    :raises ConfigError: for a key of the files that no setting has, or a
        plugin's setting whose value its parser refuses.
    :raises PluginError: for an unknown or clashing plugin name, or a
        registry or settings hook that raises (naming the plugin).
    """
    manager = make_plugin_manager(settings, extra, deferring=deferring)
    declared = collect_settings(manager)
    return Plugins(
        settings=resolve_declared(settings, declared),
        manager=manager,
        registries=collect_registries(manager),
        declared=declared,
    )
