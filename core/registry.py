"""Plugin managers and the timer/cache/reducer registries they fill.

Built-in plugins are listed explicitly in :data:`BUILTIN_PLUGINS` and are
imported only when a manager is made, never when kerneltune is imported.
Third-party plugins come from the entry-point group ``kerneltune`` unless
``settings.autoload`` is off (``KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD=1``). Every :class:`Settings` value gets
its own manager; nothing is loaded globally.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

import attrs
import pluggy
from kerneltune.core import hookspecs
from kerneltune.core.errors import PluginError
from kerneltune.core.settings import Settings

ENTRY_POINT_GROUP = "kerneltune"

BUILTIN_PLUGINS: tuple[str, ...] = (
    "kerneltune.plugins.timers.wallclock",
    "kerneltune.plugins.timers.events",
    "kerneltune.plugins.caches.files",
    "kerneltune.plugins.caches.memory",
    "kerneltune.plugins.reducers.local",
    "kerneltune.plugins.reducers.world",
    "kerneltune.plugins.observers.tuning_log",
    "kerneltune.plugins.observers.contextual_log",
    "kerneltune.plugins.observers.progress",
    "kerneltune.plugins.triton.interceptor",
    "kerneltune.plugins.triton.search_params",
    "kerneltune.plugins.profiles.nvidia",
    "kerneltune.plugins.profiles.ascend",
    "kerneltune.plugins.environment",
)


def make_plugin_manager(settings: Settings, extra: Iterable[object] = ()) -> pluggy.PluginManager:
    """A new manager with the built-ins, entry-point plugins and ``extra`` registered.

    :param settings: ``settings.block`` names plugins (built-in module names or
        entry-point names) that must not be registered.
    :param extra: plugin objects to register after the others, mainly for tests.
    """
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    for name in settings.block:
        manager.set_blocked(name)
    for module_name in BUILTIN_PLUGINS:
        if not manager.is_blocked(module_name):
            manager.register(importlib.import_module(module_name), name=module_name)
    if settings.autoload:
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for plugin in extra:
        manager.register(plugin)
    return manager


@attrs.frozen
class Registry:
    """The classes of one family (timers, caches or reducers), by name."""

    family: str
    classes: dict[str, type]
    owners: dict[str, str]

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self.classes)

    def get(self, name: str) -> type:
        """The class registered as ``name``.

        :raises PluginError: listing the names that exist.
        """
        try:
            return self.classes[name]
        except KeyError:
            raise PluginError(
                f"{self.family} {name!r} is not available (installed: {', '.join(self.names())})"
            ) from None

    def select(self, name: str) -> type:
        """Resolve ``name``, where ``auto`` means the available class of highest
        ``auto_priority``.

        :raises PluginError: for an unknown name, or a named class whose
            ``is_available()`` is false.
        """
        if name == "auto":
            available = [cls for cls in self.classes.values() if cls.is_available()]
            if not available:
                raise PluginError(f"no {self.family} is available (installed: {', '.join(self.names())})")
            return max(available, key=lambda cls: getattr(cls, "auto_priority", 0))
        cls = self.get(name)
        if not cls.is_available():
            raise PluginError(
                f"{self.family} {name!r} (from plugin {self.owners[name]}) cannot run here; "
                f"available: {', '.join(n for n, c in sorted(self.classes.items()) if c.is_available())}"
            )
        return cls


def collect_registry(manager: pluggy.PluginManager, family: str, hook_name: str) -> Registry:
    """Call every implementation of a ``kerneltune_register_*`` hook.

    :raises PluginError: when two plugins register the same name, naming both.
    """
    classes: dict[str, type] = {}
    owners: dict[str, str] = {}
    for impl in getattr(manager.hook, hook_name).get_hookimpls():

        def register(cls: type, _owner: str = impl.plugin_name) -> None:
            name = getattr(cls, "name", None)
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin {_owner} registered a {family} without a name: {cls!r}")
            if name in owners:
                raise PluginError(
                    f"{family} {name!r} is registered by two plugins: {owners[name]} and {_owner}"
                )
            classes[name] = cls
            owners[name] = _owner

        impl.function(register=register)
    return Registry(family=family, classes=classes, owners=owners)


def merged_facts(manager: pluggy.PluginManager, hook_name: str) -> dict[str, Any]:
    """Merge the dicts returned by a fact hook; later plugins win on a shared key."""
    merged: dict[str, Any] = {}
    for part in reversed(getattr(manager.hook, hook_name)()):
        if part:
            merged.update(part)
    return merged
