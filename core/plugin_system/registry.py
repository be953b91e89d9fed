"""Plugin managers and the registries (timers, caches, reducers, devices, ...) they fill.

Built-in plugins (:data:`BUILTIN_PLUGINS`) are imported only when a manager
is made, those of :data:`DEFERRED_PLUGINS` (for a Session's manager) only
when their family is first collected; third-party ones come from the
entry-point group ``kerneltune`` unless the ``autoload`` setting is off.
Every :class:`Settings` value gets its own manager; nothing is loaded globally.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import attrs
import pluggy
from kerneltune.core.errors import PluginError
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system import hookspecs
from kerneltune.core.plugin_system.contracts import (
    Cache,
    Device,
    Feature,
    Interceptor,
    ProfileFamily,
    Reducer,
    Registrable,
    RemoteStore,
    SearchStrategy,
    Timer,
)
from kerneltune.core.plugin_system.options import AUTOLOAD, BLOCK
from kerneltune.core.plugin_system.seam import fault, origin, plain_facts
from kerneltune.core.plugin_system.settings import (
    PLUGIN_VARIABLE_PREFIX,
    DeclaredSettings,
    Settings,
    SettingSpec,
    core_settings,
    core_variables,
)

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
    "kerneltune.plugins.triton.search_params",
    "kerneltune.plugins.profiles.nvidia",
    "kerneltune.plugins.profiles.ascend",
    "kerneltune.plugins.search.pattern",
    "kerneltune.plugins.search.staged",
    "kerneltune.plugins.search.exhaustive",
    "kerneltune.plugins.environment",
)

#: The built-ins that only register classes of a family no cache hit asks for, each with the one hook it
#: implements. A manager made ``deferring`` imports them when :class:`Registries` first collects their
#: family, or at once where another plugin registers in it too (a clash of names is then found as the
#: manager is made): the first call that finds its pick on disk imports none of them, nor Triton's adapter.
DEFERRED_PLUGINS: dict[str, str] = {
    "kerneltune.plugins.triton.interceptor": "kerneltune_register_interceptors",
    "kerneltune.plugins.triton.search_params": "kerneltune_register_features",
    "kerneltune.plugins.profiles.nvidia": "kerneltune_register_profile_families",
    "kerneltune.plugins.profiles.ascend": "kerneltune_register_profile_families",
    "kerneltune.plugins.search.pattern": "kerneltune_register_search_strategies",
    "kerneltune.plugins.search.staged": "kerneltune_register_search_strategies",
    "kerneltune.plugins.search.exhaustive": "kerneltune_register_search_strategies",
}

#: Held while deferred built-ins are registered and a family collected: two threads may ask at once.
_collecting = threading.RLock()


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
    with _collecting:
        for module_name in _pending(manager, hook_name):
            manager.register(importlib.import_module(module_name), name=module_name)
        _check_hooks(manager)


def _pending(manager: pluggy.PluginManager, hook_name: str) -> list[str]:
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


P = TypeVar("P", bound=Registrable)

#: What a class without the priority attribute that ``auto`` reads counts as.
DEFAULT_PRIORITY = 0


@attrs.frozen
class Registry(Generic[P]):
    """The classes of one family (timers, caches, reducers, ...), by name, in registration order.

    Registration order is the order of the plugins (the built-ins in
    :data:`BUILTIN_PLUGINS` order, then entry-point plugins, then plugins
    added in the program), then the order each calls ``register``.
    """

    family: str
    classes: dict[str, type[P]]
    owners: dict[str, str]
    #: the manager the classes came from, for naming a plugin's distribution in messages.
    manager: pluggy.PluginManager | None = attrs.field(default=None, eq=False, repr=False)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self.classes)

    def ranked(
        self, fits: Callable[[type[P]], bool] | None = None, *, priority: str = "auto_priority"
    ) -> list[type[P]]:
        """The classes ``fits`` accepts, best first: the one rule every ``auto`` choice follows.

        The highest value of the class attribute ``priority`` first
        (:data:`DEFAULT_PRIORITY` where a class has none), ties to the class
        registered first; one :meth:`awaited_import` waits for is passed over.

        :param fits: which classes may be chosen; default: those whose
            ``is_available()`` is true.
        :param priority: the class attribute ranked by (``"priority"`` for
            profile families).
        """
        accepted = [
            c
            for c in self.classes.values()
            if self.awaited_import(c) is None and (self.available(c) if fits is None else fits(c))
        ]
        # sorted() is stable, so equal priorities keep registration order.
        return sorted(accepted, key=lambda cls: -self._priority(cls, priority))

    def _priority(self, cls: type[P], attribute: str) -> int | float:
        value = getattr(cls, attribute, DEFAULT_PRIORITY)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            owner = self.owners.get(getattr(cls, "name", ""), type(cls).__module__)
            fault(
                self.manager,
                owner,
                f"{self.family} {getattr(cls, 'name', cls)!r}: {attribute} is {value!r}, not a number",
                f"it ranks as {DEFAULT_PRIORITY} for auto",
            )
            return DEFAULT_PRIORITY
        return value

    def awaited_import(self, cls: type[P]) -> str | None:
        """The module ``auto`` waits for before it may take ``cls``; ``None`` where it waits for none.

        That is the class attribute ``auto_requires_import`` while this
        process has not imported that module: a program that never imported
        torch holds no torch tensor, and asking would cost torch's import. A
        value that is not a module name is a fault (one warning naming the
        plugin) and counts as absent.
        """
        module = getattr(cls, "auto_requires_import", None)
        if module is None:
            return None
        if not isinstance(module, str) or not module:
            owner = self.owners.get(getattr(cls, "name", ""), cls.__module__)
            fault(
                self.manager,
                owner,
                f"{self.family} {getattr(cls, 'name', cls)!r}: auto_requires_import is {module!r}, "
                "not a module name",
                "auto asks it whatever this process has imported",
            )
            return None
        return None if module in sys.modules else module

    def get(self, name: str, source: str | None = None) -> type[P]:
        """The class registered as ``name``, compared without case (as every enumerated name is).

        :param source: the file and key, or the variable, that asked for
            ``name`` (:meth:`Settings.source`), for the error message.
        :raises PluginError: listing the names that exist, and naming ``source``.
        """
        found = self.classes.get(name) or next(
            (cls for known, cls in self.classes.items() if known.casefold() == name.casefold()), None
        )
        if found is None:
            raise PluginError(
                f"{self.family} {name!r} is not available (installed: {', '.join(self.names())})"
                + self._blocked_note()
                + _set_by(source)
            )
        return found

    def _blocked_note(self) -> str:
        """What ``block`` kept from loading: a class asked for by name may be one of theirs."""
        listed = self.manager.list_name_plugin() if self.manager is not None else []
        blocked = sorted(name for name, plugin in listed if plugin is None)
        return f"; blocked plugins, whose classes are not loaded: {', '.join(blocked)}" if blocked else ""

    def select(self, name: str, source: str | None = None) -> type[P]:
        """Resolve ``name``, where ``auto`` means the first available class of :meth:`ranked`.

        :param source: as for :meth:`get`.
        :raises PluginError: for an unknown name, or a named class whose
            ``is_available()`` is false.
        """
        if name.casefold() == "auto":
            available = self.ranked()
            if not available:
                raise PluginError(f"no {self.family} is available (installed: {', '.join(self.names())})")
            return available[0]
        cls = self.get(name, source)
        if not self.available(cls):
            reason = _unavailable_reason(cls)
            raise PluginError(
                f"{self.family} {name!r} (from plugin {self.owners[cls.name]}) cannot run here"
                + (f" ({reason})" if reason else "")
                + "; "
                f"available: {', '.join(n for n, c in sorted(self.classes.items()) if self.available(c))}"
                + _set_by(source)
            )
        return cls

    def available(self, cls: type[P]) -> bool:
        """``cls.is_available()``; what it raises is a :class:`PluginError` naming the plugin."""
        return bool(self._asked(cls, "is_available()", cls.is_available))

    def build(self, cls: type[P]) -> P:
        """A new ``cls``; what its constructor raises is a :class:`PluginError` naming the plugin."""
        return self._asked(cls, "its constructor", cls)

    def _asked(self, cls: type[P], what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except PluginError:
            raise
        except Exception as exc:
            name = getattr(cls, "name", cls.__qualname__)
            owner = self.owners.get(name, cls.__module__)
            raise PluginError(
                f"{origin(self.manager, owner)}: {self.family} {name!r}: {what} raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc


def _unavailable_reason(cls: type) -> str | None:
    """Why a class cannot run here, by its optional ``unavailable_reason()``; ``None`` if it says nothing."""
    explain = getattr(cls, "unavailable_reason", None)
    if not callable(explain):
        return None
    try:
        reason = explain()
    except Exception:
        return None  # the refusal stands; a reason that fails only leaves it unexplained
    return reason if isinstance(reason, str) and reason else None


def _set_by(source: str | None) -> str:
    return "" if source is None else f"; set by {source}"


def _call(
    impl: pluggy.HookImpl, hook_name: str, manager: pluggy.PluginManager | None = None, **kwargs: Any
) -> Any:
    """One plugin's implementation of a hook; what it raises becomes a PluginError naming it."""
    try:
        return impl.function(**kwargs)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(
            f"{origin(manager, impl.plugin_name)}: {hook_name} raised {type(exc).__name__}: {exc}"
        ) from exc


def collect_registry(manager: pluggy.PluginManager, family: str, hook_name: str) -> Registry[Any]:
    """Call every implementation of a ``kerneltune_register_*`` hook.

    :raises PluginError: when two plugins register the same name, naming both.
    """
    classes: dict[str, type[Any]] = {}
    owners: dict[str, str] = {}
    # A deferred built-in is registered after the other plugins; its classes keep their place all the same.
    builtin = {name: index for index, name in enumerate(BUILTIN_PLUGINS)}
    impls = getattr(manager.hook, hook_name).get_hookimpls()
    for impl in sorted(impls, key=lambda impl: builtin.get(impl.plugin_name, len(builtin))):

        def register(cls: type[Any], _owner: str = impl.plugin_name) -> None:
            name = getattr(cls, "name", None)
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin {_owner} registered a {family} without a name: {cls!r}")
            # Names are compared without case: two that differ only in case are one name.
            taken = next((known for known in owners if known.casefold() == name.casefold()), None)
            if taken is not None:
                raise PluginError(
                    f"{family} {name!r} is registered by two plugins: {owners[taken]} and {_owner}"
                    + ("" if taken == name else f" (as {taken!r})")
                )
            classes[name] = cls
            owners[name] = _owner

        _call(impl, hook_name, manager, register=register)
    return Registry(family=family, classes=classes, owners=owners, manager=manager)


class _Family(Generic[P]):
    """A family of :class:`Registries`: its registry, collected once, when first read."""

    def __init__(self, family: str, hook_name: str) -> None:
        self.family, self.hook_name = family, hook_name

    def __get__(self, registries: Registries, owner: type | None = None) -> Registry[P]:
        collected = registries.collected.get(self.hook_name)
        if collected is None:
            with _collecting:
                collected = registries.collected.get(self.hook_name)
                if collected is None:
                    register_deferred(registries.manager, self.hook_name)
                    collected = collect_registry(registries.manager, self.family, self.hook_name)
                    registries.collected[self.hook_name] = collected
        return collected


class Registries:
    """Every family's registry for one plugin manager, each collected once.

    What :class:`~kerneltune.core.plugin_system.session.Session` holds, and
    what the ``kerneltune`` command lists without making a Session (which
    needs a working cache and device). A family whose deferred built-ins
    (:data:`DEFERRED_PLUGINS`) are not registered yet is collected when first
    read; :func:`collect_registries` collects every other one at once.
    """

    caches = _Family[Cache]("cache", "kerneltune_register_caches")
    remote_stores = _Family[RemoteStore]("remote store", "kerneltune_register_remote_stores")
    timers = _Family[Timer]("timer", "kerneltune_register_timers")
    devices = _Family[Device]("device", "kerneltune_register_devices")
    reducers = _Family[Reducer]("reducer", "kerneltune_register_reducers")
    interceptors = _Family[Interceptor]("interceptor", "kerneltune_register_interceptors")
    profile_families = _Family[ProfileFamily]("profile family", "kerneltune_register_profile_families")
    search_strategies = _Family[SearchStrategy]("search strategy", "kerneltune_register_search_strategies")
    features = _Family[Feature]("feature", "kerneltune_register_features")

    def __init__(self, manager: pluggy.PluginManager) -> None:
        """:param manager: the manager whose ``kerneltune_register_*`` hooks fill the registries."""
        self.manager = manager
        #: the registries collected so far, by their hook's name.
        self.collected: dict[str, Registry[Any]] = {}

    def awaited_imports(self) -> frozenset[str]:
        """The modules whose import would widen what ``auto`` may take among the families collected so far
        (:meth:`Registry.awaited_import`)."""
        awaited = (
            registry.awaited_import(cls)
            for registry in list(self.collected.values())
            for cls in registry.classes.values()
        )
        return frozenset(module for module in awaited if module is not None)


def collect_registries(manager: pluggy.PluginManager) -> Registries:
    """Call every ``kerneltune_register_*`` hook once, but those whose deferred built-ins wait to be read.

    :raises PluginError: for a registry hook that raises (naming the plugin),
        or two plugins registering one name (naming both).
    """
    registries = Registries(manager)
    for family in vars(Registries).values():
        if isinstance(family, _Family) and not _pending(manager, family.hook_name):
            family.__get__(registries)
    return registries


def collect_settings(manager: pluggy.PluginManager) -> DeclaredSettings:
    """Call every implementation of ``kerneltune_add_settings``: the settings the plugins declare.

    No plugin may declare one of core's own settings again, or set one
    through a variable of its own.

    :raises PluginError: naming the plugin, for a setting that a core setting
        or another plugin (named too) has already, a variable that does not
        begin with ``KERNELTUNE_`` or that another setting reads, or a
        declaration that is not one.
    """
    core = core_settings()
    declared = DeclaredSettings()
    readers = {variable: f"core setting {field!r}" for variable, field in core_variables(core).items()}
    for impl in manager.hook.kerneltune_add_settings.get_hookimpls():

        def add(name: str, *, _owner: str = impl.plugin_name, **fields: Any) -> None:
            try:
                spec = SettingSpec(name=name, **fields)
            except TypeError as exc:
                raise PluginError(f"plugin {_owner}: setting {name!r}: {exc}") from None
            if name in core:
                raise PluginError(f"plugin {_owner} declares the setting {name!r}, which is a core setting")
            if name in declared.owners:
                raise PluginError(
                    f"setting {name!r} is declared by two plugins: {declared.owners[name]} and {_owner}"
                )
            for variable in spec.variables():
                if not variable.startswith(PLUGIN_VARIABLE_PREFIX):
                    raise PluginError(
                        f"plugin {_owner}: setting {name!r}: variable {variable!r} must begin with "
                        f"{PLUGIN_VARIABLE_PREFIX}"
                    )
                if variable in readers:
                    raise PluginError(
                        f"plugin {_owner}: setting {name!r}: variable {variable} already sets "
                        f"{readers[variable]}"
                    )
                readers[variable] = f"setting {name!r} of plugin {_owner}"
            declared.specs[name] = spec
            declared.owners[name] = _owner

        _call(impl, "kerneltune_add_settings", manager, add=add)
    return declared


def merged_facts(manager: pluggy.PluginManager, hook_name: str) -> dict[str, Any]:
    """Merge the dicts returned by a fact hook; later plugins win on a shared key.

    :raises PluginError: naming the plugin whose implementation raised.
    """
    merged: dict[str, Any] = {}
    # One implementation at a time, in registration order, so that a failure names its plugin.
    for impl in getattr(manager.hook, hook_name).get_hookimpls():
        if impl.hookwrapper or impl.wrapper:
            continue  # a wrapper has no dict of its own to add
        part = _call(impl, hook_name, manager)
        if part:
            merged.update(plain_facts(manager, impl.plugin_name, part, hook_name))
    return merged
