"""The registries (timers, caches, reducers, devices, ...) a plugin manager fills.

A family whose deferred built-ins (:data:`~kerneltune.core.plugin_system.manager.DEFERRED_PLUGINS`)
are not registered yet is collected when first read; the manager is
:mod:`~kerneltune.core.plugin_system.manager`'s.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs
import pluggy
from kerneltune.core.errors import PluginError
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
from kerneltune.core.plugin_system.manager import BUILTIN_PLUGINS, deferred_lock, pending, register_deferred
from kerneltune.core.plugin_system.seam import fault, origin, plain_facts
from kerneltune.core.plugin_system.settings import (
    PLUGIN_VARIABLE_PREFIX,
    DeclaredSettings,
    SettingSpec,
    core_settings,
    core_variables,
)

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
            with deferred_lock:
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
        if isinstance(family, _Family) and not pending(manager, family.hook_name):
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
    readers = {variable: f"core setting {field!r}" for variable, field in core_variables().items()}
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
