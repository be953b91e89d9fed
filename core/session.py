"""A resolved set of plugins for one configuration: what a tuning runs with."""

from __future__ import annotations

import threading
from typing import Any

import attrs
import pluggy
from kerneltune.core.errors import PluginError
from kerneltune.core.registry import Registry, collect_registry, make_plugin_manager, merged_facts
from kerneltune.core.settings import Settings, load_settings


@attrs.frozen
class Session:
    """Plugins and facts for one :class:`Settings`: built once, shared by tunings."""

    settings: Settings
    manager: pluggy.PluginManager
    timers: Registry
    caches: Registry
    reducers: Registry
    cache: Any
    hardware: dict[str, Any]
    versions: dict[str, str]

    @classmethod
    def create(cls, settings: Settings, extra: tuple[object, ...] = ()) -> Session:
        """Make a fresh plugin manager for ``settings`` and resolve the cache.

        :raises PluginError: for an unknown or clashing plugin name.
        """
        manager = make_plugin_manager(settings, extra)
        caches = collect_registry(manager, "cache", "kerneltune_register_caches")
        session = cls(
            settings=settings,
            manager=manager,
            timers=collect_registry(manager, "timer", "kerneltune_register_timers"),
            caches=caches,
            reducers=collect_registry(manager, "reducer", "kerneltune_register_reducers"),
            cache=caches.select(settings.cache)(root=settings.cache_root),
            hardware=merged_facts(manager, "kerneltune_hardware_info"),
            versions={k: str(v) for k, v in merged_facts(manager, "kerneltune_software_versions").items()},
        )
        # Fail at set-up, not mid-tuning, on a misspelt timer or reducer name.
        session.timers.select(settings.timer)
        if settings.reducer != "auto":
            session.reducers.get(settings.reducer)
        return session

    def make_timer(self) -> Any:
        """A new timer of the configured (or automatically chosen) kind."""
        return self.timers.select(self.settings.timer)()

    def make_reducer(self, group: Any = None) -> Any:
        """A reducer over exactly the ranks of ``group`` (``None``: the default group, if any).

        ``auto`` takes the available reducer of highest ``auto_priority``; a
        named one is constructed as asked, and refuses a group it cannot serve.

        :raises PluginError: when no reducer can run over ``group``, or this
            process is not one of the group's ranks.
        """
        name = self.settings.reducer
        if name == "auto":
            ranked = sorted(self.reducers.classes.values(), key=lambda c: -getattr(c, "auto_priority", 0))
            cls = next((c for c in ranked if c.is_available(group)), None)
            if cls is None:
                installed = ", ".join(self.reducers.names())
                raise PluginError(f"no reducer can run over autotune_pg={group!r} (installed: {installed})")
        else:
            cls = self.reducers.get(name)
        reducer = cls(group=group)
        if not 0 <= reducer.rank < reducer.world_size:
            # torch.distributed reports rank -1 to a process outside the group it is given.
            raise PluginError(
                f"this process is not one of the ranks of autotune_pg (reducer {cls.name!r} reports rank "
                f"{reducer.rank} of {reducer.world_size}); pass a process group only on the ranks in it"
            )
        return reducer


_sessions: dict[Settings, Session] = {}
_sessions_lock = threading.Lock()
_added: list[object] = []


def add_plugin(plugin: object) -> None:
    """Register ``plugin`` (a module or object with hook implementations) in every session.

    For plugins that live in the program itself rather than in an installed
    package (an observer in a script, a timer in a test). Sessions made
    before the call are dropped, so the next tuning builds a fresh plugin
    manager that includes it. Adding the same object twice is a no-op.
    """
    with _sessions_lock:
        if any(p is plugin for p in _added):
            return
        _added.append(plugin)
        _sessions.clear()


def remove_plugin(plugin: object) -> None:
    """Undo :func:`add_plugin`; unknown plugins are ignored."""
    with _sessions_lock:
        kept = [p for p in _added if p is not plugin]
        if len(kept) != len(_added):
            _added[:] = kept
            _sessions.clear()


def current_session(**overrides: Any) -> Session:
    """The session for the settings in force now (files and environment).

    :param overrides: settings fields a driver imposes over every source,
        e.g. the contextual tuner's ``cache="memory"``.

    Sessions are memoised per distinct :class:`Settings`, so changing a
    variable between calls selects a fresh plugin manager. Plugins added with
    :func:`add_plugin` are registered after the built-ins and entry points.
    """
    settings = load_settings()
    if overrides:
        settings = attrs.evolve(settings, **overrides)
    session = _sessions.get(settings)
    if session is None:
        with _sessions_lock:
            session = _sessions.get(settings)
            if session is None:
                session = _sessions[settings] = Session.create(settings, extra=tuple(_added))
    return session
