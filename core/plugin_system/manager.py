"""The plugin manager: built-ins, entry-point plugins and a program's own, registered per Settings.

Built-in plugins (:data:`BUILTIN_PLUGINS`) are imported only when a manager
is made, those of :data:`DEFERRED_PLUGINS` (for a Session's manager) only
when their family is first collected (:mod:`~kerneltune.core.plugin_system.registry`);
third-party ones come from the entry-point group ``kerneltune`` unless the
``autoload`` setting is off. Every :class:`Settings` value gets its own
manager; nothing is loaded globally.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import threading
from collections.abc import Iterable

import pluggy
from kerneltune.core.errors import PluginError
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system import hookspecs
from kerneltune.core.plugin_system.options import AUTOLOAD, BLOCK
from kerneltune.core.plugin_system.settings import Settings

ENTRY_POINT_GROUP = "kerneltune"

BUILTIN_PLUGINS: tuple[str, ...] = (
    "kerneltune.plugins.timers.wallclock",
    "kerneltune.plugins.timers.events",
    "kerneltune.plugins.timers.npu_profiler",
    "kerneltune.plugins.caches.files",
    "kerneltune.plugins.caches.memory",
    "kerneltune.plugins.caches.none",
    "kerneltune.plugins.caches.redis",
    "kerneltune.plugins.reducers.local",
    "kerneltune.plugins.reducers.world",
    "kerneltune.plugins.devices.accelerators",
    "kerneltune.plugins.devices.host",
    "kerneltune.plugins.observers.tuning_log",
    "kerneltune.plugins.observers.contextual_log",
    "kerneltune.plugins.observers.uncertain",
    "kerneltune.plugins.observers.progress",
    "kerneltune.plugins.observers.failures",
    "kerneltune.plugins.observers.print_autotuning",
    "kerneltune.plugins.triton.interceptor",
    "kerneltune.plugins.triton.labels",
    "kerneltune.plugins.triton.failures",
    "kerneltune.plugins.triton.search_params",
    "kerneltune.plugins.profiles.nvidia",
    "kerneltune.plugins.profiles.ascend",
    "kerneltune.plugins.search.pattern",
    "kerneltune.plugins.search.staged",
    "kerneltune.plugins.search.exhaustive",
    "kerneltune.plugins.environment",
)

#: The built-ins that only register classes of a family no cache hit asks for, or answer a hook no cache
#: hit asks (a failed candidate's kind), each with the one hook it implements. A manager made
#: ``deferring`` imports them when :class:`Registries` first collects their family (the session first
#: asks that hook), or at once where another plugin implements it too (a clash of names is then found
#: as the manager is made): the first call that finds its pick on disk imports none of them, nor
#: Triton's adapter.
DEFERRED_PLUGINS: dict[str, str] = {
    "kerneltune.plugins.triton.interceptor": "kerneltune_register_interceptors",
    "kerneltune.plugins.triton.search_params": "kerneltune_register_features",
    "kerneltune.plugins.triton.failures": "kerneltune_failure_kind",
    "kerneltune.plugins.profiles.nvidia": "kerneltune_register_profile_families",
    "kerneltune.plugins.profiles.ascend": "kerneltune_register_profile_families",
    "kerneltune.plugins.search.pattern": "kerneltune_register_search_strategies",
    "kerneltune.plugins.search.staged": "kerneltune_register_search_strategies",
    "kerneltune.plugins.search.exhaustive": "kerneltune_register_search_strategies",
}

#: Held while deferred built-ins are registered and a family collected: two threads may ask at once.
deferred_lock = threading.RLock()


def make_plugin_manager(
    settings: Settings, extra: Iterable[object] = (), *, deferring: bool = False
) -> pluggy.PluginManager:
    """A new manager with the built-ins, entry-point plugins and ``extra`` registered.

    :param settings: its ``block`` setting names plugins (built-in module names or
        entry-point names) that must not be registered; a name that no plugin
        has is a warning naming where it was set.
    :param extra: plugin objects to register after the others, mainly for tests;
        each is named by its ``__name__`` (a module's) or its class's qualified name.
    :param deferring: leave the built-ins of :data:`DEFERRED_PLUGINS` whose family no other
        plugin registers in for :func:`register_deferred` (a Session's manager).
    :raises PluginError: naming the plugin, when one implements a hook that
        :mod:`kerneltune.core.plugin_system.hookspecs` does not specify (a misspelt name
        would otherwise never be called).
    """
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    for name in settings[BLOCK]:
        manager.set_blocked(name)
    for module_name in BUILTIN_PLUGINS:
        if not manager.is_blocked(module_name) and not (deferring and module_name in DEFERRED_PLUGINS):
            manager.register(importlib.import_module(module_name), name=module_name)
    if settings[AUTOLOAD]:
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    known = {*BUILTIN_PLUGINS, *(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))}
    for plugin in extra:
        name = _readable_name(manager, plugin)
        manager.register(plugin, name=name)
        known.add(name)
    for hook_name in set(DEFERRED_PLUGINS.values()):
        if getattr(manager.hook, hook_name).get_hookimpls():
            register_deferred(manager, hook_name)
    where = settings.source("block") or "Settings.block"
    for name in settings[BLOCK]:
        if name not in known:
            warn_once(
                ("block", name, where),
                f"kerneltune: block entry {name!r} (set by {where}) names no plugin; "
                f"plugins: {', '.join(sorted(known))}",
            )
    _check_hooks(manager)
    return manager


def register_deferred(manager: pluggy.PluginManager, hook_name: str) -> None:
    """Import and register the deferred built-ins (:data:`DEFERRED_PLUGINS`) of ``hook_name`` not yet in."""
    with deferred_lock:
        for module_name in pending(manager, hook_name):
            manager.register(importlib.import_module(module_name), name=module_name)
        _check_hooks(manager)


def pending(manager: pluggy.PluginManager, hook_name: str) -> list[str]:
    """The deferred built-ins of ``hook_name`` not registered yet (nor blocked)."""
    return [
        name
        for name, hook in DEFERRED_PLUGINS.items()
        if hook == hook_name and not manager.is_blocked(name) and not manager.has_plugin(name)
    ]


def _check_hooks(manager: pluggy.PluginManager) -> None:
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        callers = manager.get_hookcallers(exc.plugin) or []
        specified = [name for name in vars(hookspecs) if name.startswith(f"{hookspecs.PROJECT}_")]
        unknown = []
        for hook in sorted(caller.name for caller in callers if not caller.has_spec()):
            close = difflib.get_close_matches(hook, specified, n=1)
            unknown.append(f"{hook} (did you mean {close[0]}?)" if close else hook)
        raise PluginError(
            f"plugin {manager.get_name(exc.plugin)} implements {', '.join(unknown)}, which matches no "
            "kerneltune hook; the hooks are specified in kerneltune.core.plugin_system.hookspecs"
        ) from None


def _readable_name(manager: pluggy.PluginManager, plugin: object) -> str:
    # pluggy's default for an object without __name__ is its id(), which says nothing in an error.
    name = getattr(plugin, "__name__", None)
    if not isinstance(name, str):
        name = f"{type(plugin).__module__}.{type(plugin).__qualname__}"
    unique, count = name, 1
    while manager.has_plugin(unique):
        count += 1
        unique = f"{name}#{count}"
    return unique
