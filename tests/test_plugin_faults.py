"""Plugins that misbehave, and configuration that names what does not exist: each is a warning or
an error naming the plugin, file or variable, and a finished tuning is never thrown away."""

from __future__ import annotations

import math
import re
import traceback

import pytest
import torch
from kerneltune.core import ConfigError, PluginError, Session, add_plugin, load_settings, remove_plugin
from kerneltune.core.driving import current_session
from kerneltune.core.plugin_system.seam import PluginFaultWarning
from tuning_doubles import CALLS, fresh_tuner, install_session, plugin_module

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("quick", "unchecked")


def flaky_cache_plugin(**broken):
    """A plugin registering cache 'flaky', a dict cache whose named methods raise."""

    class FlakyCache:
        name = "flaky"

        @classmethod
        def is_available(cls):
            return True

        def __init__(self, root):
            self.entries = {}

        def directory(self, namespace):
            if "directory" in broken:
                raise broken["directory"]
            return None

        def load(self, namespace, digest):
            if "load" in broken:
                raise broken["load"]
            return self.entries.get(digest)

        def store(self, namespace, digest, data):
            if "store" in broken:
                raise broken["store"]
            self.entries[digest] = data

    return plugin_module(
        "flaky_cache_plugin", kerneltune_register_caches=lambda register: register(FlakyCache)
    )


@pytest.mark.parametrize(
    "error", [ValueError("bad data"), TypeError("not JSON"), RuntimeError("server gone")]
)
def test_a_cache_whose_store_raises_anything_keeps_the_finished_tuning(monkeypatch, error):
    install_session(monkeypatch, extra=(flaky_cache_plugin(store=error),), cache="flaky")
    tuned = fresh_tuner()

    with pytest.warns(
        RuntimeWarning,
        match=rf"work: cannot store the pick \(cache 'flaky' \(plugin flaky_cache_plugin\): "
        rf"{type(error).__name__}: .*serves this process only",
    ):
        first = tuned(3)

    assert tuned(3) == first
    assert len(CALLS) == 3 + 1, "tuned once, then the pick serves"


def test_a_cache_whose_load_raises_is_a_warning_and_a_miss(monkeypatch):
    install_session(monkeypatch, extra=(flaky_cache_plugin(load=KeyError("shard 3")),), cache="flaky")
    with pytest.warns(RuntimeWarning, match=r"cache 'flaky' \(plugin flaky_cache_plugin\) failed to load"):
        assert fresh_tuner()(3) in (3, 6)
    assert len(CALLS) == 3


def test_a_cache_whose_directory_raises_is_a_warning_and_no_log(monkeypatch, isolated):
    install_session(monkeypatch, extra=(flaky_cache_plugin(directory=OSError("no mount")),), cache="flaky")
    with pytest.warns(RuntimeWarning, match=r"cache 'flaky' \(plugin flaky_cache_plugin\) failed to name"):
        assert fresh_tuner()(3) in (3, 6)
    assert len(CALLS) == 3
    assert not isolated.exists()


@pytest.mark.parametrize("hook", ["kerneltune_hardware_info", "kerneltune_software_versions"])
def test_a_fact_hook_that_raises_is_a_plugin_error_naming_the_plugin(hook):
    def broken():
        raise RuntimeError("no driver")

    plugin = plugin_module("facts_plugin", **{hook: broken})
    raised = rf"^plugin facts_plugin \(added in the program\): {hook} raised RuntimeError: no driver$"
    with pytest.raises(PluginError, match=raised):
        Session.create(load_settings(), extra=(plugin,))


def test_a_registry_hook_that_raises_is_a_plugin_error_naming_the_plugin():
    def broken(register):
        raise ImportError("cannot import name 'Timer'")

    plugin = plugin_module("timers_plugin", kerneltune_register_timers=broken)
    raised = r"^plugin timers_plugin \(added in the program\): kerneltune_register_timers raised Import"
    with pytest.raises(PluginError, match=raised):
        Session.create(load_settings(), extra=(plugin,))


class FaultyDevice:
    name = "faulty"
    #: what is_available raises, or None; what the constructor raises, or None.
    availability: Exception | None = None
    construction: Exception | None = None

    @classmethod
    def is_available(cls):
        if cls.availability is not None:
            raise cls.availability
        return True

    def __init__(self):
        if self.construction is not None:
            raise self.construction


@pytest.mark.parametrize(
    ("part", "what"),
    [("availability", "is_available()"), ("construction", "its constructor")],
)
def test_a_device_that_raises_when_asked_or_made_is_a_plugin_error_naming_the_plugin(monkeypatch, part, what):
    monkeypatch.setattr(FaultyDevice, part, OSError("no bus"))
    plugin = plugin_module(
        "faulty_device_plugin", kerneltune_register_devices=lambda register: register(FaultyDevice)
    )
    raised = (
        f"plugin faulty_device_plugin (added in the program): device 'faulty': {what} raised OSError: no bus"
    )
    with pytest.raises(PluginError, match=f"^{re.escape(raised)}$"):
        Session.create(load_settings(), extra=(plugin,))


def test_a_search_strategy_whose_constructor_raises_is_a_plugin_error_naming_the_plugin():
    from kerneltune.core.driving import choose_strategy

    class FaultyStrategy:
        name = "faulty"

        @classmethod
        def is_available(cls):
            return True

        def __init__(self):
            raise RuntimeError("no model file")

    plugin = plugin_module(
        "faulty_strategy_plugin",
        kerneltune_register_search_strategies=lambda register: register(FaultyStrategy),
    )
    session = Session.create(load_settings(), extra=(plugin,))
    with pytest.raises(
        PluginError,
        match=r"faulty_strategy_plugin .*: search strategy 'faulty': its constructor "
        r"raised RuntimeError: no model file",
    ):
        choose_strategy(session, "faulty", "a test")


def test_two_plugin_objects_registering_one_name_are_both_named():
    class ImpostorTimer:
        name = "wallclock"

        @classmethod
        def is_available(cls):
            return True

    class TimerPlugin:
        def __init__(self, cls):
            self.cls = cls

        def kerneltune_register_timers(self, register):
            register(self.cls)

    from kerneltune.core import hookimpl

    TimerPlugin.kerneltune_register_timers = hookimpl(TimerPlugin.kerneltune_register_timers)
    with pytest.raises(PluginError) as info:
        Session.create(load_settings(), extra=(TimerPlugin(ImpostorTimer),))
    assert str(info.value) == (
        "timer 'wallclock' is registered by two plugins: kerneltune.plugins.timers.wallclock and "
        f"{__name__}.test_two_plugin_objects_registering_one_name_are_both_named.<locals>.TimerPlugin"
    )

    class TwiceTimer(ImpostorTimer):
        name = "twice"

    with pytest.raises(
        PluginError, match=r"registered by two plugins: .*\.TimerPlugin and .*\.TimerPlugin#2$"
    ):
        Session.create(load_settings(), extra=(TimerPlugin(TwiceTimer), TimerPlugin(TwiceTimer)))


# -- configuration naming what does not exist ----------------------------------------------------


def test_a_block_entry_that_names_no_plugin_warns_naming_it_and_the_file(tmp_path):
    (tmp_path / "kerneltune.toml").write_text('block = ["kerneltune.plugins.timers.walclock"]\n')
    with pytest.warns(RuntimeWarning) as caught:
        Session.create(load_settings())
    (message,) = [str(w.message) for w in caught if "block entry" in str(w.message)]
    where = f"{tmp_path / 'kerneltune.toml'} (key 'block')"
    assert message.startswith(
        f"kerneltune: block entry 'kerneltune.plugins.timers.walclock' (set by {where}) names no plugin; "
    )
    assert "kerneltune.plugins.timers.wallclock" in message


def test_a_block_entry_from_the_environment_names_the_variable(monkeypatch, recwarn):
    monkeypatch.setenv("KERNELTUNE_BLOCK_PLUGINS", "kerneltune.plugins.caches.memory, nothing-here")
    Session.create(load_settings())
    messages = [str(w.message) for w in recwarn if "block entry" in str(w.message)]
    assert len(messages) == 1
    assert "'nothing-here' (set by environment variable KERNELTUNE_BLOCK_PLUGINS)" in messages[0]


@pytest.mark.parametrize(
    ("variable", "family"),
    [("KERNELTUNE_TIMER", "timer"), ("KERNELTUNE_CACHE", "cache"), ("KERNELTUNE_REDUCER", "reducer")],
)
def test_an_unknown_plugin_name_says_which_variable_set_it(monkeypatch, variable, family):
    monkeypatch.setenv(variable, "s3")
    with pytest.raises(
        PluginError,
        match=rf"^{family} 's3' is not available \(installed: .*\); set by "
        rf"environment variable {variable}$",
    ):
        current_session()


def _frames(exc: BaseException) -> list[str]:
    return [frame.filename for frame in traceback.extract_tb(exc.__traceback__)]


def test_a_configuration_error_at_a_call_is_one_line_naming_its_source(tmp_path):
    path = tmp_path / "kerneltune.toml"
    path.write_text("warmup = 0\nrepeat = [\n")
    tuned = fresh_tuner()
    with pytest.raises(ConfigError) as info:
        tuned(3)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: not valid TOML")
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert not [f for f in _frames(info.value) if f.endswith(("settings.py", "registry.py"))]


def test_an_unknown_name_at_a_call_is_one_line_naming_its_source(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CACHE", "s3")
    with pytest.raises(PluginError) as info:
        fresh_tuner()(3)
    assert "\n" not in str(info.value) and str(info.value).endswith("KERNELTUNE_CACHE")
    assert not [f for f in _frames(info.value) if f.endswith("registry.py")]


def test_a_plugin_failing_at_a_call_keeps_its_own_traceback_as_the_cause():
    def broken():
        raise RuntimeError("no driver")

    plugin = plugin_module("facts_plugin", kerneltune_hardware_info=broken)
    add_plugin(plugin)
    try:
        with pytest.raises(PluginError, match="plugin facts_plugin") as info:
            fresh_tuner()(3)
    finally:
        remove_plugin(plugin)
    assert isinstance(info.value.__cause__, RuntimeError)


# -- the seam: answers a record cannot hold ------------------------------------------------------


def facts_device(facts):
    """A plugin registering the device ``odd``, available and first for auto, whose facts() are ``facts``."""

    class Odd:
        name = "odd"
        auto_priority = 1000
        shares_memory = False

        @classmethod
        def is_available(cls):
            return True

        def owns(self, tensor):
            return False

        def index_of(self, tensor):
            return 0

        def in_use(self):
            return False

        def current(self):
            return 0

        def set_current(self, index):
            pass

        def synchronize(self):
            pass

        def check_health(self):
            pass

        def release(self):
            pass

        def facts(self):
            return facts

    return plugin_module("odd_device", kerneltune_register_devices=lambda register: register(Odd))


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (math.nan, "'clock' is nan, not a finite number"),
        (math.inf, "'clock' is inf, not a finite number"),
        ({1, 2}, "'clock' is a builtins.set, not plain data"),
        (b"\x00", "'clock' is a builtins.bytes, not plain data"),
        (torch.zeros(1), "'clock' is a torch.Tensor, not plain data"),
        ({1: "x"}, "'clock' has the key 1, not a string"),
    ],
    ids=["nan", "inf", "set", "bytes", "tensor", "int-key"],
)
def test_device_facts_a_record_cannot_hold_are_left_out_with_one_warning_naming_the_plugin(
    monkeypatch, isolated, value, why
):
    plugin = facts_device({"device": "odd", "count": 2, "clock": value})
    with pytest.warns(PluginFaultWarning) as caught:
        session = install_session(monkeypatch, extra=(plugin,), cache="msgpack")
        assert fresh_tuner()(3) in (3, 6)
        fresh_tuner()(3)
    assert {k: v for k, v in session.hardware.items() if k != "machine"} == {"device": "odd", "count": 2}
    (warning,) = caught
    assert str(warning.message) == (
        f"kerneltune: plugin odd_device (added in the program): device 'odd': facts(): {why}; "
        "that fact is left out of cache keys (a record could not hold it)"
    )
    assert len(CALLS) == 1, "the record was stored and read back: the second tuner measured nothing"


def test_facts_nested_past_what_a_record_holds_are_left_out(monkeypatch):
    deep: dict = {}
    for _ in range(120):
        deep = {"x": deep}
    with pytest.warns(PluginFaultWarning, match="nested more than 100 levels deep"):
        session = install_session(monkeypatch, extra=(facts_device({"device": "odd", "deep": deep}),))
    assert "deep" not in session.hardware and session.hardware["device"] == "odd"


def test_a_priority_that_is_no_number_ranks_as_zero_with_a_warning(monkeypatch):
    class Odd:
        name = "odd-timer"
        auto_priority = "high"

        @classmethod
        def is_available(cls):
            return True

    plugin = plugin_module("odd_timer", kerneltune_register_timers=lambda register: register(Odd))
    with pytest.warns(PluginFaultWarning, match=r"timer 'odd-timer': auto_priority is 'high', not a number"):
        session = Session.create(load_settings(), extra=(plugin,))
    assert session.registries.timers.select("auto").name != "odd-timer"
