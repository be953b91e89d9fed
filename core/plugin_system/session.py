"""A resolved set of plugins for one configuration: what a tuning runs with."""

from __future__ import annotations

import math
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pluggy
from kerneltune.core.errors import CacheReadError, ConfigError, PluginError
from kerneltune.core.notices import user_stacklevel
from kerneltune.core.plugin_system.cache_choice import build_cache, cache_root
from kerneltune.core.plugin_system.contracts import (
    AmendingCache,
    Cache,
    Device,
    DeviceTimer,
    PreciseTimer,
    Reducer,
    Timer,
    provides,
)
from kerneltune.core.plugin_system.layered_cache import LayeredCache
from kerneltune.core.plugin_system.loading import load_plugins
from kerneltune.core.plugin_system.manager import register_deferred
from kerneltune.core.plugin_system.observers import Observers
from kerneltune.core.plugin_system.options import REDUCER, TIMER
from kerneltune.core.plugin_system.registry import Registries, merged_facts
from kerneltune.core.plugin_system.seam import first_answer, origin, plain_facts
from kerneltune.core.plugin_system.settings import Settings, load_settings


@attrs.frozen
class Session:
    """Plugins and facts for one :class:`Settings`: built once, shared by tunings.

    The one way the engine reaches its plugins: every registry, the
    observer hooks (:attr:`observers`) and the first-result hooks
    (:meth:`describe_value`, :meth:`key_distance`). The classes' contracts
    are in :mod:`kerneltune.core.plugin_system.contracts`.
    """

    settings: Settings
    manager: pluggy.PluginManager
    #: every family's registry (timers, caches, devices, ...), each collected once.
    registries: Registries
    cache: Cache | LayeredCache
    hardware: dict[str, Any]
    versions: dict[str, str]
    #: an instance of every available device, the session's own (:attr:`device`) first, then
    #: the others by the registry's rule: the order isolation asks them in (``kerneltune_register_devices``).
    placement: tuple[Device, ...]
    #: the observer hooks, one method each (``session.observers.candidate_measured(event)``).
    observers: Observers
    #: the modules this process had not imported when ``auto`` chose, and whose import would
    #: widen its choice (``"torch"``): :func:`current_session` makes a fresh session once one is.
    awaiting: frozenset[str] = frozenset()
    #: the timer class chosen when the session was made, and every timer's ``auto_priority`` then
    #: (:attr:`timer`): asking every timer whether it can run, per measurement, cost more than the timing.
    timer_choice: tuple[type[Any], tuple[Any, ...]] | None = None

    @classmethod
    def create(cls, settings: Settings, extra: tuple[object, ...] = ()) -> Session:
        """Make a fresh plugin manager for ``settings`` and resolve the cache.

        The session's :attr:`settings` are ``settings`` with the values of
        the settings its plugins declare (``kerneltune_add_settings``); the
        cache is :func:`build_cache`'s.

        :raises ConfigError: for a key of the files that no setting has, or
            a plugin's setting whose value its parser refuses.
        :raises PluginError: for an unknown or clashing plugin name, a
            registry or fact hook that raises (naming the plugin), or no
            device that can run here.
        """
        loaded = load_plugins(settings, extra, deferring=True)
        settings, manager, registries = loaded.settings, loaded.manager, loaded.registries
        # Fail at set-up, not mid-tuning, on a misspelt timer name.
        timer = registries.timers.select(settings[TIMER], settings.source("timer"))
        placement = resolve_devices(registries, settings, timer)
        session = cls(
            settings=settings,
            manager=manager,
            registries=registries,
            cache=build_cache(settings, registries.caches, registries.remote_stores),
            hardware=hardware_facts(manager, placement[0], registries.devices.owners.get(placement[0].name)),
            versions={k: str(v) for k, v in merged_facts(manager, "kerneltune_software_versions").items()},
            placement=placement,
            observers=Observers(manager.hook, settings),
            awaiting=registries.awaited_imports(),
            timer_choice=(timer, _auto_priorities(registries, settings)),
        )
        if settings[REDUCER] != "auto":
            session.registries.reducers.get(settings[REDUCER], settings.source("reducer"))
        return session

    def is_outdated(self) -> bool:
        """Whether this process has since imported a module ``auto`` waited for (:attr:`awaiting`)."""
        return any(module in sys.modules for module in self.awaiting)

    @property
    def device(self) -> Device:
        """The device the Session tunes on: the one the timer names, else ``auto``'s choice.

        Its facts are part of every cache key; a timer whose constructor
        takes ``device`` gets it.
        """
        return self.placement[0]

    @property
    def cache_plugin(self) -> str:
        """The cache in use as an error message names it: its name and the plugin that registered it."""
        name = self.cache.name
        if isinstance(self.cache, LayeredCache):
            return f"cache {name!r} (plugin {self.cache.owner})"
        owner = self.registries.caches.owners.get(name, "?")
        return f"cache {name!r} (plugin {owner})"

    def cache_directory(self, namespace: str) -> Path | None:
        """The cache's folder for ``namespace``, where logs go; ``None`` for none.

        A cache plugin whose ``directory`` raises gets a warning naming it,
        and the tuning goes on without a folder.
        """
        try:
            return self.cache.directory(namespace)
        except Exception as exc:
            self._cache_failed(namespace, "name its folder", exc, "tuning without a log file")
            return None

    def cache_load(self, namespace: str, digest: str) -> dict[str, Any] | None:
        """The cache's data for ``digest``, ``None`` when absent.

        A cache plugin whose ``load`` raises anything but
        :class:`CacheReadError` gets a warning naming it, and it is a miss.

        :raises CacheReadError: as the plugin raised it (a logged miss).
        """
        try:
            return self.cache.load(namespace, digest)
        except CacheReadError:
            raise
        except Exception as exc:
            self._cache_failed(namespace, "load a pick", exc, "retuning")
            return None

    def cache_store(self, namespace: str, digest: str, data: dict[str, Any]) -> None:
        """Store ``data`` with the cache; never raises.

        A finished tuning is worth more than its copy on disk: whatever the
        plugin raises (a full disk, a read-only folder, a bug) is a warning
        naming it, and the pick serves this process only.
        """
        try:
            self.cache.store(namespace, digest, data)
        except Exception as exc:
            warnings.warn(
                f"kerneltune: {namespace}: cannot store the pick ({self.cache_plugin}: "
                f"{type(exc).__name__}: {exc}); it serves this process only and will be tuned again "
                "by the next one",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )

    def cache_amend(self, namespace: str, digest: str, change: Callable[[Any], Any]) -> None:
        """Read, change and write one entry: under the cache's lock where it is an ``AmendingCache``,
        else in two steps (``change`` gets ``None`` for an entry that does not read).

        :raises Exception: what the plugin raised; the caller says what it means.
        """
        if provides(self.cache, AmendingCache):
            self.cache.amend(namespace, digest, change)
            return
        try:
            current = self.cache.load(namespace, digest)
        except CacheReadError:
            current = None
        data = change(current)
        if data is not None:
            self.cache.store(namespace, digest, data)

    def _cache_failed(self, namespace: str, what: str, exc: Exception, instead: str) -> None:
        warnings.warn(
            f"kerneltune: {namespace}: {self.cache_plugin} failed to {what} "
            f"({type(exc).__name__}: {exc}); {instead}",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )

    def describe_value(self, value: Any) -> str | None:
        """``kerneltune_describe_value``: the first plugin's readable form of ``value``, or ``None``."""
        described: str | None = self.manager.hook.kerneltune_describe_value(value=value)
        return described

    def plain_value(self, value: Any) -> Any:
        """``kerneltune_plain_value``: the first plugin's plain-data form of ``value``, or ``None``."""
        return self.manager.hook.kerneltune_plain_value(value=value)

    def failure_kind(self, error: BaseException) -> str | None:
        """``kerneltune_failure_kind``: why ``error`` would fail every key, or ``None``.

        A plugin that raises or answers other than a non-empty string is a fault, and the next is asked.
        """
        register_deferred(self.manager, "kerneltune_failure_kind")  # no cache hit asks: imported now
        kind: str | None = first_answer(
            self.manager,
            "kerneltune_failure_kind",
            lambda answer: None if isinstance(answer, str) and answer else f"{answer!r}, not a name or None",
            "the failure is not remembered",
            error=error,
        )
        return kind

    @property
    def plugs_key_distance(self) -> bool:
        """Whether a plugin implements ``kerneltune_key_distance`` (else the default distance is used)."""
        return bool(self.manager.hook.kerneltune_key_distance.get_hookimpls())

    def key_distance(self, function: str, key: Any, other: Any) -> float | None:
        """``kerneltune_key_distance``: the first plugin's good answer; ``None`` where none gives one.

        A plugin that raises, or answers other than a number of at least 0,
        is a fault (one warning naming it) and the next is asked. An int too
        large for a float is as far as keys can be (``math.inf``).
        """
        answer = first_answer(
            self.manager,
            "kerneltune_key_distance",
            _distance_problem,
            "the default distance is used",
            function=function,
            key=key,
            other=other,
        )
        if answer is None:
            return None
        try:
            return float(answer)
        except OverflowError:
            return math.inf

    @property
    def timer(self) -> type[Any]:
        """The class of the Session's timers: the ``timer`` setting, resolved when the session was made.

        Chosen again only where ``auto`` chooses and a timer's
        ``auto_priority`` has changed since (``npu-profiler``'s follows
        ``TRITON_BENCH_METHOD``); whether a timer can run is not asked again.
        """
        choice = self.timer_choice
        if choice is not None and choice[1] == _auto_priorities(self.registries, self.settings):
            return choice[0]
        return self.registries.timers.select(self.settings[TIMER], self.settings.source("timer"))

    def make_timer(self, precise: bool = True) -> Timer:
        """A new timer of the configured (or automatically chosen) kind.

        A timer that provides :class:`~kerneltune.core.plugin_system.contracts.DeviceTimer`
        is constructed with :attr:`device`, any other with nothing.

        :param precise: for a near-tie or finalist round; elsewhere a
            :class:`~kerneltune.core.plugin_system.contracts.PreciseTimer`
            hands over to the timer it names.
        """
        cls = self.timer
        if not precise and provides(cls, PreciseTimer):
            cls = self.registries.timers.classes[cls.first_pass]
        # Asked apart from the call: provides() narrows its argument to an instance's type.
        takes_device = provides(cls, DeviceTimer)
        timer: Timer = cls(device=self.device) if takes_device else cls()
        return timer

    def make_reducer(self, group: Any = None) -> Reducer:
        """A reducer over exactly the ranks of ``group`` (``None``: the default group, if any).

        ``auto`` takes the first reducer that can run over ``group`` by the
        registry's rule (:meth:`Registry.ranked`); a named one is constructed
        as asked, and refuses a group it cannot serve.

        :raises PluginError: when no reducer can run over ``group``, or this
            process is not one of the group's ranks.
        """
        name = self.settings[REDUCER]
        if name == "auto":
            fitting = self.registries.reducers.ranked(lambda c: c.is_available(group))
            if not fitting:
                installed = ", ".join(self.registries.reducers.names())
                raise PluginError(f"no reducer can run over autotune_pg={group!r} (installed: {installed})")
            cls = fitting[0]
        else:
            cls = self.registries.reducers.get(name, self.settings.source("reducer"))
        reducer = cls(group=group)
        if not 0 <= reducer.rank < reducer.world_size:
            # torch.distributed reports rank -1 to a process outside the group it is given.
            raise PluginError(
                f"this process is not one of the ranks of autotune_pg (reducer {cls.name!r} reports rank "
                f"{reducer.rank} of {reducer.world_size}); pass a process group only on the ranks in it"
            )
        return reducer


def _auto_priorities(registries: Registries, settings: Settings) -> tuple[Any, ...]:
    """Every timer's ``auto_priority`` where ``auto`` chooses the timer (its choice reads them); else ()."""
    if settings[TIMER].casefold() != "auto":
        return ()
    return tuple(getattr(cls, "auto_priority", None) for cls in registries.timers.classes.values())


def resolve_devices(
    registries: Registries, settings: Settings, timer: type[Any] | None = None
) -> tuple[Device, ...]:
    """An instance of each available device, in isolation's order.

    The selected timer's device (its ``device`` attribute) comes first, else
    the one ``auto`` takes; then the others by the registry's rule.

    :param timer: the timer class, where the caller has resolved it already.
    :raises PluginError: when the timer names a device that is not
        registered or cannot run here, or no device is available at all.
    """
    devices = registries.devices
    if timer is None:
        timer = registries.timers.select(settings[TIMER], settings.source("timer"))
    if provides(timer, DeviceTimer):
        first = devices.select(timer.device, f"the device attribute of timer {timer.name!r}")
    else:
        first = devices.select("auto")
    return tuple(devices.build(cls) for cls in (first, *(c for c in devices.ranked() if c is not first)))


def _distance_problem(answer: Any) -> str | None:
    if isinstance(answer, bool) or not isinstance(answer, int | float) or not answer >= 0:
        return f"{answer!r}, not a number >= 0 (math.inf: never start from it), or None"
    return None


def hardware_facts(manager: pluggy.PluginManager, device: Device, owner: str | None = None) -> dict[str, Any]:
    """What a cache key holds of the hardware: ``device.facts()``, under every ``kerneltune_hardware_info``.

    A fact a record cannot hold (not plain data, a NaN, nested too deep) is
    left out, with one warning naming the plugin (:func:`~kerneltune.core.plugin_system.seam.plain_facts`).

    :param owner: the plugin that registered ``device``, for messages.
    :raises PluginError: naming the device's plugin (and distribution) or
        the fact hook's plugin, for facts that raise: without them a key
        could not say what hardware its pick is for.
    """
    owner = owner or type(device).__module__
    try:
        given = device.facts()
    except Exception as exc:
        raise PluginError(
            f"{origin(manager, owner)}: device {device.name!r}: facts() raised {type(exc).__name__}: {exc}"
        ) from exc
    own = plain_facts(manager, owner, given, f"device {device.name!r}: facts()")
    return {**own, **merged_facts(manager, "kerneltune_hardware_info")}


#: by the settings and the cache root they expand to now (:func:`current_session`).
_sessions: dict[tuple[Settings, Path | None], Session] = {}
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


def current_session(settings: Settings | None = None, **overrides: Any) -> Session:
    """The session for the settings in force now (files and environment).

    :param settings: those settings, where the caller has just read them
        (:func:`load_settings`) to decide its overrides; default: read here.
    :param overrides: settings fields a driver imposes over every source,
        e.g. the contextual tuner's ``cache="memory"``.

    Sessions are memoised per distinct :class:`Settings` and cache root, so
    changing a variable (``HOME`` included) between calls selects a fresh
    plugin manager; so does importing a module that ``auto`` waited for
    (:attr:`Session.awaiting`: torch, imported after a first tuning of host
    work). Plugins added with :func:`add_plugin` are registered after
    the built-ins and entry points.

    :raises ConfigError: for a bad file or variable, naming it.
    :raises PluginError: for an unknown plugin name (naming what set it) or a
        plugin that fails while the session is made.
    """
    try:
        if settings is None:
            settings = load_settings()
        if overrides:
            settings = attrs.evolve(settings, **overrides)
        memo = (settings, cache_root(settings))
        session = _sessions.get(memo)
        if session is None or session.is_outdated():
            with _sessions_lock:
                session = _sessions.get(memo)
                if session is None or session.is_outdated():
                    session = _sessions[memo] = Session.create(settings, extra=tuple(_added))
    except (ConfigError, PluginError) as exc:
        # The message names the file, variable or plugin; the frames that read settings
        # and load plugins would only bury it. A plugin's own traceback stays as the cause.
        raise exc.with_traceback(None) from exc.__cause__
    return session
