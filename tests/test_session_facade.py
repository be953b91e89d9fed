"""The Session as the one way to the plugins: registries, observer methods, optional parts."""

from __future__ import annotations

import inspect
import logging
import types

import attrs
from kerneltune.core import Session, hookimpl, load_settings
from kerneltune.core.plugin_system import hookspecs
from kerneltune.core.plugin_system.contracts import DeviceTimer, FlushingTimer, ListingCache, provides
from kerneltune.core.plugin_system.observers import Observers


def session(*plugins):
    return Session.create(attrs.evolve(load_settings(), cache="memory"), extra=plugins)


def test_every_registry_is_built_once_on_the_session():
    made = session()
    families = [
        (made.registries.timers, "timer"),
        (made.registries.caches, "cache"),
        (made.registries.remote_stores, "remote store"),
        (made.registries.reducers, "reducer"),
        (made.registries.devices, "device"),
        (made.registries.interceptors, "interceptor"),
        (made.registries.profile_families, "profile family"),
        (made.registries.search_strategies, "search strategy"),
        (made.registries.features, "feature"),
    ]
    assert [registry.family for registry, _ in families] == [family for _, family in families]
    assert "search_params" in made.registries.features.names()
    assert "redis" in made.registries.remote_stores.names()


def test_every_observer_hook_has_a_method():
    observed = {
        name.removeprefix("kerneltune_")
        for name, spec in vars(hookspecs).items()
        if name.startswith("kerneltune_")
        and list(inspect.signature(spec).parameters) == ["event", "settings"]
    }
    methods = {name for name in vars(Observers) if not name.startswith("_")}
    assert methods == observed


def test_an_observer_that_raises_is_logged_with_its_hook(caplog):
    plugin = types.ModuleType("tests_raising_observer")

    def kerneltune_pick_loaded(event):
        raise ValueError("an observer's own bug")

    plugin.kerneltune_pick_loaded = hookimpl(kerneltune_pick_loaded)
    event = types.SimpleNamespace(function="f")
    with caplog.at_level(logging.ERROR, logger="kerneltune"):
        session(plugin).observers.pick_loaded(event)  # type: ignore[arg-type]
    assert "f: an observer of kerneltune_pick_loaded failed" in caplog.text


def test_provides_checks_what_an_optional_part_adds():
    class Plain:
        name = "plain"

        def sample(self, fn, *, before=None): ...

    class Flushing(Plain):
        def flush(self): ...

    class Unset(Plain):
        flush = None

    class Named:
        device = "cuda"

    assert not provides(Plain(), FlushingTimer)
    assert provides(Flushing(), FlushingTimer)
    assert not provides(Unset(), FlushingTimer), "None counts as absent"
    assert provides(Named, DeviceTimer), "a registered class, before it is constructed"
    assert not provides(Named, ListingCache)
