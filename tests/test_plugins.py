"""The plugin system: discovery, selection, blocking, clashes, observers, and a real third-party plugin."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import time

import pytest
from kerneltune.core import (
    CandidateFailedWarning,
    CandidateMeasured,
    PluginError,
    Session,
    Settings,
    TuningFinished,
    TuningStarted,
    hookimpl,
    load_settings,
)
from kerneltune.core.driving import Space, Tuner
from kerneltune.core.plugin_system.manager import (
    BUILTIN_PLUGINS,
    DEFERRED_PLUGINS,
    ENTRY_POINT_GROUP,
    make_plugin_manager,
)
from kerneltune.plugins.caches.files import JsonCache
from kerneltune.plugins.reducers.local import LocalReducer
from kerneltune.plugins.timers.wallclock import WallclockTimer
from tuning_doubles import FakeClock, clock_plugin, install_session, plugin_module, stored_records

from triton_dist.tune import autotune

EXAMPLE = "example-cputime"

# Their tuned functions return which config ran (its n, its cost), on purpose: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")


def _settings(**values) -> Settings:
    return Settings(
        cache_dir=load_settings().get("cache_dir"), tie_rounds=load_settings().get("tie_rounds"), **values
    )


# -- selection by name ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "family", "known"),
    [
        (
            "timer",
            "timer",
            ["cuda-event", "cuda-graph", EXAMPLE, "npu-event", "npu-profiler", "toy-clock", "wallclock"],
        ),
        ("cache", "cache", ["json", "memory", "msgpack", "none", "redis"]),
        ("reducer", "reducer", ["local", "world-max"]),
    ],
)
def test_unknown_name_lists_the_known_ones(field, family, known):
    with pytest.raises(PluginError) as info:
        Session.create(_settings(**{field: "s3"}))
    assert str(info.value) == f"{family} 's3' is not available (installed: {', '.join(known)})"


def test_unknown_name_from_the_environment_fails_the_tuned_call(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CACHE", "s3")
    calls = []

    @autotune(config_space=[{"n": 1}], key_fn=lambda x: x)
    def work(x, n):
        calls.append(n)

    with pytest.raises(
        PluginError, match=r"cache 's3' is not available \(installed: json, memory, msgpack, none, redis\)"
    ):
        work(1)
    assert calls == []


def test_a_named_timer_that_cannot_run_here_says_so(cpu_host):
    with pytest.raises(
        PluginError,
        match=r"timer 'cuda-event' \(from plugin kerneltune\.plugins\.timers\.events\) cannot run here "
        r"\(torch\.cuda\.is_available\(\) is false: .*\); available: .*wallclock",
    ):
        Session.create(_settings(timer="cuda-event"))


def test_auto_picks_the_cpu_defaults(cpu_host):
    session = Session.create(_settings())
    assert type(session.make_timer()) is WallclockTimer
    assert type(session.cache) is JsonCache
    assert type(session.make_reducer()) is LocalReducer


def test_two_plugins_registering_one_name_is_an_error_naming_both():
    class ImpostorTimer:
        name = "wallclock"

        @classmethod
        def is_available(cls):
            return True

    impostor = plugin_module(
        "impostor_plugin", kerneltune_register_timers=lambda register: register(ImpostorTimer)
    )

    with pytest.raises(PluginError) as info:
        Session.create(_settings(), extra=(impostor,))
    assert str(info.value) == (
        "timer 'wallclock' is registered by two plugins: "
        "kerneltune.plugins.timers.wallclock and impostor_plugin"
    )


def test_a_registered_class_needs_a_name():
    nameless = plugin_module("nameless_plugin", kerneltune_register_caches=lambda register: register(object))
    with pytest.raises(PluginError, match="plugin nameless_plugin registered a cache without a name"):
        Session.create(_settings(), extra=(nameless,))


def test_a_hook_that_matches_no_spec_is_refused_naming_the_plugin():
    misspelt = plugin_module("misspelt_plugin", kerneltune_tuning_finishd=lambda event: None)
    with pytest.raises(PluginError) as info:
        make_plugin_manager(_settings(), extra=(misspelt,))
    assert str(info.value) == (
        "plugin misspelt_plugin implements kerneltune_tuning_finishd (did you mean "
        "kerneltune_tuning_finished?), which matches no kerneltune hook; the hooks are specified in "
        "kerneltune.core.plugin_system.hookspecs"
    )


def test_every_built_in_plugin_implements_only_specified_hooks():
    manager = make_plugin_manager(_settings(autoload=False))
    assert {name for name, _ in manager.list_name_plugin()} == set(BUILTIN_PLUGINS)


def test_a_deferred_built_in_implements_only_the_hook_of_its_family():
    # Deferring it then changes no answer but its family's, which is collected before it is read.
    for name, hook in DEFERRED_PLUGINS.items():
        module = importlib.import_module(name)
        assert [attr for attr in dir(module) if hasattr(getattr(module, attr), "kerneltune_impl")] == [hook]


def test_deferred_built_ins_keep_their_place_before_the_plugins_registered_after_them():
    class Later:
        name = "later"

    plugin = plugin_module(
        "later_strategy", kerneltune_register_search_strategies=lambda register: register(Later)
    )
    session = Session.create(_settings(autoload=False), extra=(plugin,))
    assert list(session.registries.search_strategies.classes) == ["pattern", "staged", "exhaustive", "later"]
    assert (
        Session.create(_settings(autoload=False)).manager.get_plugin("kerneltune.plugins.search.pattern")
        is None
    )


# -- auto: highest priority, then registration order -----------------------------------------


def _ranked_timer(name: str, priority: int | None, available: bool = True) -> type:
    members = {"name": name, "is_available": classmethod(lambda cls: available)}
    if priority is not None:
        members["auto_priority"] = priority
    return type(name.title().replace("-", ""), (), members)


def test_auto_takes_the_highest_priority_then_the_class_registered_first():
    first, second = _ranked_timer("tie-first", 50), _ranked_timer("tie-second", 50)
    unavailable = _ranked_timer("best-but-absent", 90, available=False)
    plugin = plugin_module(
        "ranked_timers",
        kerneltune_register_timers=lambda register: [register(c) for c in (unavailable, first, second)],
    )
    later = plugin_module(
        "later_timers", kerneltune_register_timers=lambda register: register(_ranked_timer("z", 50))
    )
    session = Session.create(_settings(), extra=(plugin, later))
    assert session.registries.timers.ranked()[:3] == [first, second, session.registries.timers.get("z")]
    assert type(session.make_timer()) is first


def test_a_class_without_a_priority_counts_as_zero_and_loses_ties_to_earlier_ones(cpu_host):
    unranked = _ranked_timer("unranked", None)
    plugin = plugin_module("unranked_timer", kerneltune_register_timers=lambda register: register(unranked))
    session = Session.create(_settings(), extra=(plugin,))
    ranked = session.registries.timers.ranked()
    assert ranked.index(WallclockTimer) < ranked.index(unranked)
    assert type(session.make_timer()) is WallclockTimer


def test_auto_reducer_follows_the_same_rule():
    class EagerReducer(LocalReducer):
        name = "eager"
        auto_priority = 5

    class LateReducer(LocalReducer):
        name = "late"
        auto_priority = 5

    plugin = plugin_module(
        "ranked_reducers",
        kerneltune_register_reducers=lambda register: [register(EagerReducer), register(LateReducer)],
    )
    session = Session.create(_settings(), extra=(plugin,))
    assert type(session.make_reducer()) is EagerReducer


def test_every_configuration_gets_a_fresh_manager():
    settings = _settings()
    first, second = make_plugin_manager(settings), make_plugin_manager(settings)
    assert first is not second
    assert {name for name, _ in first.list_name_plugin()} >= set(BUILTIN_PLUGINS)


# -- blocking and autoload -------------------------------------------------------------------


def test_config_file_blocks_a_built_in_plugin_by_name(tmp_path):
    (tmp_path / "kerneltune.toml").write_text(
        'cache = "memory"\nblock = ["kerneltune.plugins.caches.memory"]\n'
    )
    with pytest.raises(
        PluginError, match=r"cache 'memory' is not available \(installed: json, msgpack, none, redis\)"
    ):
        Session.create(load_settings())


def test_config_file_blocks_an_entry_point_plugin_by_name(tmp_path):
    (tmp_path / "kerneltune.toml").write_text(f'timer = "{EXAMPLE}"\nblock = ["{EXAMPLE}"]\n')
    with pytest.raises(
        PluginError,
        match=r"timer 'example-cputime' is not available "
        r"\(installed: cuda-event, cuda-graph, npu-event, npu-profiler, toy-clock, wallclock\); "
        r"blocked plugins, whose classes are not loaded: example-cputime; set by ",
    ):
        Session.create(load_settings())


def test_disabling_autoload_skips_entry_point_plugins(monkeypatch, tmp_path):
    (tmp_path / "kerneltune.toml").write_text(f'timer = "{EXAMPLE}"\n')
    assert Session.create(load_settings()).registries.timers.owners[EXAMPLE] == EXAMPLE

    monkeypatch.setenv("KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD", "1")
    with pytest.raises(PluginError) as info:
        Session.create(load_settings())
    assert str(info.value) == (
        "timer 'example-cputime' is not available "
        "(installed: cuda-event, cuda-graph, npu-event, npu-profiler, wallclock); "
        f"set by {tmp_path / 'kerneltune.toml'} (key 'timer')"
    )
    manager = make_plugin_manager(load_settings())
    assert manager.get_plugin(EXAMPLE) is None
    assert manager.get_plugin("kerneltune.plugins.timers.wallclock") is not None


# -- the third-party example package --------------------------------------------------------


def test_example_plugin_is_discovered_through_its_entry_point():
    points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert points.get(EXAMPLE) == "kerneltune_example_plugin"
    import kerneltune_example_plugin

    manager = make_plugin_manager(_settings())
    assert manager.get_plugin(EXAMPLE) is kerneltune_example_plugin
    session = Session.create(_settings(timer=EXAMPLE))
    assert type(session.make_timer()) is kerneltune_example_plugin.CpuTimeTimer


def test_example_plugin_is_never_the_automatic_choice(cpu_host):
    assert type(Session.create(_settings()).make_timer()) is WallclockTimer


def test_example_timer_selected_in_kerneltune_toml_runs_a_real_tuning(monkeypatch, tmp_path, isolated):
    from kerneltune_example_plugin import CpuTimeTimer

    (tmp_path / "kerneltune.toml").write_text(f'timer = "{EXAMPLE}"\nwarmup = 1\nrepeat = 4\n')
    sampled = []
    original = CpuTimeTimer.sample

    def spy(self, fn):
        sampled.append(type(self))
        original(self, fn)

    monkeypatch.setattr(CpuTimeTimer, "sample", spy)

    @autotune(config_space=[{"rounds": 200_000}, {"rounds": 10}], key_fn=lambda x: x)
    def spin(x, rounds):
        total = 0
        for i in range(rounds):
            total += i * x
        return total

    assert spin(1) == sum(range(10))
    assert sampled == [CpuTimeTimer] * 8
    (record,) = stored_records(isolated, "spin")
    assert [len(row["samples_ms"]) for row in record["candidates"]] == [4, 4]
    assert record["best"]["index"] == 1


def test_example_timer_counts_cpu_time_not_sleep():
    from kerneltune_example_plugin import CpuTimeTimer

    assert CpuTimeTimer.is_available()
    timer = CpuTimeTimer()
    timer.sample(lambda: time.sleep(0.05))

    def burn(ms):
        end = time.process_time_ns() + ms * 1_000_000
        while time.process_time_ns() < end:
            pass

    timer.sample(lambda: burn(20))
    slept, burnt = timer.collect()
    assert slept < 50, "sleeping is not CPU time"
    assert burnt >= 20
    assert timer.collect() == []


# -- observer hooks ----------------------------------------------------------------------------


class Recorder:
    """An observer plugin that keeps every event."""

    def __init__(self) -> None:
        self.events: list[object] = []

    @hookimpl
    def kerneltune_tuning_started(self, event):
        self.events.append(event)

    @hookimpl
    def kerneltune_candidate_measured(self, event):
        self.events.append(event)

    @hookimpl
    def kerneltune_tuning_finished(self, event):
        self.events.append(event)


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_observer_hooks_fire_in_order_when_driving_the_engine(isolated):
    recorder = Recorder()
    session = Session.create(_settings(warmup=0, repeat=2), extra=(recorder,))
    tuner = Tuner(Space.build("observed", ["a", "b", "c"], source="def observed(): ..."))

    with tuner.begin(session, ("k", 1), keep=lambda c: c.config != "c", verbose=True) as tuning:
        first = tuning.next_candidate()
        tuning.record(first, [2.0, 4.0])
        second = tuning.next_candidate()
        tuning.fail(second, RuntimeError("no resources"))
        assert tuning.next_candidate() is None
        best = tuning.finish()

    assert best.config == "a"
    started, measured_a, measured_b, finished = recorder.events
    assert isinstance(started, TuningStarted)
    assert started.function == "observed" and started.key == ("k", 1)
    assert [c.config for c in started.candidates] == ["a", "b"]
    assert (started.rank, started.world_size, started.verbose) == (0, 1, True)
    assert started.log_dir == isolated / "observed"
    assert isinstance(measured_a, CandidateMeasured) and measured_a.candidate.config == "a"
    assert measured_a.measurement.samples == (2.0, 4.0) and measured_a.measurement.mean == 3.0
    assert measured_b.measurement.error == "RuntimeError: no resources"
    assert isinstance(finished, TuningFinished)
    assert finished.best.config == "a"
    assert finished.times[0] == 3.0 and finished.times[1] == finished.times[2] == float("inf")
    assert finished.seconds >= 0

    recorder.events.clear()
    with tuner.begin(session, ("k", 1)) as tuning:
        assert tuning.hit and tuning.next_candidate() is None
        assert tuning.finish().config == "a"
    assert recorder.events == [], "a hit is not a tuning"


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_observer_hooks_fire_for_the_function_tuner_and_on_total_failure(monkeypatch):
    recorder = Recorder()
    clock = FakeClock()
    install_session(monkeypatch, extra=(recorder, clock_plugin(clock)), timer="scripted", warmup=0, repeat=1)

    @autotune(config_space=[{"cost": 2.0}, {"cost": -1.0}], key_fn=lambda x: x)
    def observed(x, cost):
        if cost < 0 or x == "fail":
            raise ValueError("negative cost")
        clock.advance(cost)

    observed("ok")
    assert [type(e) for e in recorder.events] == [
        TuningStarted,
        CandidateMeasured,
        CandidateMeasured,
        TuningFinished,
    ]
    assert recorder.events[-1].best.index == 0

    recorder.events.clear()
    with pytest.raises(RuntimeError, match="cannot find valid config"):
        observed("fail")
    assert [type(e) for e in recorder.events] == [
        TuningStarted,
        CandidateMeasured,
        CandidateMeasured,
        TuningFinished,
    ]
    assert recorder.events[-1].best is None


def test_plugin_hardware_facts_split_the_cache_and_versions_are_stored(monkeypatch, isolated):
    work_calls = []

    def make():
        @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
        def facts(x, n):
            work_calls.append(n)
            return n

        return facts

    versions = plugin_module("versions_plugin", kerneltune_software_versions=lambda: {"mylib": "1.2"})
    install_session(monkeypatch, extra=(versions,), warmup=0, repeat=1)
    make()(1)
    make()(1)
    assert len(work_calls) == 3 + 1, "same hardware: a hit"
    (record,) = stored_records(isolated, "facts")
    assert record["versions"]["mylib"] == "1.2"

    interconnect = plugin_module("fabric_plugin", kerneltune_hardware_info=lambda: {"interconnect": "hccs"})
    install_session(monkeypatch, extra=(versions, interconnect), warmup=0, repeat=1)
    make()(1)
    assert len(work_calls) == 3 + 1 + 3, "other hardware: a miss"
    hardware = [r["hardware"] for r in stored_records(isolated, "facts")]
    assert sorted(h.get("interconnect", "-") for h in hardware) == ["-", "hccs"]


# -- import hygiene --------------------------------------------------------------------------


def test_importing_the_engine_loads_neither_torch_nor_triton_nor_plugins():
    probe = (
        "import json, pkgutil, sys, importlib\n"
        "import kerneltune.core\n"
        "for info in pkgutil.iter_modules(kerneltune.core.__path__, 'kerneltune.core.'):\n"
        "    importlib.import_module(info.name)\n"
        "heavy = ('torch', 'triton', 'torch_npu')\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in heavy or m.startswith('kerneltune.plugins.'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_a_plugin_added_at_run_time_observes_tunings_until_removed():
    from kerneltune.core import add_plugin, remove_plugin

    seen = []

    class Observer:
        @hookimpl
        def kerneltune_tuning_finished(self, event):
            seen.append((event.function, event.key))

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def observed(x, n):
        return x * n

    observer = Observer()
    add_plugin(observer)
    add_plugin(observer)
    try:
        observed(1)
    finally:
        remove_plugin(observer)
    observed(2)

    assert seen == [("observed", 1)], "seen once while added, not after removal"
