"""Test doubles and small helpers shared by the CPU test modules.

* :func:`scripted_timer_plugin`: a timer whose samples a test decides, so
  picks are deterministic; :class:`FakeClock` and :func:`clock_plugin` make
  one whose samples are whatever the candidate adds to a fake clock.
* :func:`steps_plugin`: a timer named ``steps`` that can flush and hold the
  device and notes every flush, hold and start mark in order.
* :func:`plugin_module`: a plugin module implementing the given hooks;
  :func:`family_plugin`: one registering compile-profile families.
* :func:`install_session`: make ``triton_dist.tune.autotune`` run with a
  session built from given settings and extra plugin objects.
* :func:`stored_records`: the records a file cache holds for a function.
* :func:`fresh_tuner` and :data:`CALLS`: a small autotuned function and what it ran.
* :func:`make_record`: a :class:`TuningRecord` with given times, as the engine would store it.
"""

from __future__ import annotations

import json
import math
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import msgpack
from kerneltune.core import Session, hookimpl, load_settings
from kerneltune.core.drivers import function_tuner
from kerneltune.core.driving import TuningRecord, flush_marks
from kerneltune.core.values.key_index import KEY_INDEX_ENTRY, KEY_INDEX_KIND
from kerneltune.core.values.portfolio import PORTFOLIO_ENTRY
from kerneltune.core.values.records import Measurement


class FakeClock:
    """Milliseconds that pass only when a candidate says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, ms: float) -> None:
        self.now += ms


def scripted_timer_plugin(
    time_of: Callable[[Callable[[], object]], float],
    name: str = "scripted",
    module: str | None = None,
    *,
    holds: bool = False,
) -> types.ModuleType:
    """A plugin module registering the timer ``name``, whose sample of ``fn`` is ``time_of(fn)``.

    ``time_of`` runs ``fn`` and says how many milliseconds it took. The timer
    never wins ``auto``; ``module`` names the plugin (default: from ``name``).
    With ``holds``, it has a ``hold`` that holds nothing but says it did, as
    a device event timer's does.
    """

    class ScriptedTimer:
        auto_priority = -100

        @classmethod
        def is_available(cls) -> bool:
            return True

        def __init__(self) -> None:
            self._samples: list[float] = []

        def sample(self, fn: Callable[[], object], *, before: Callable[[], object] | None = None) -> None:
            if before is not None:
                before()
            self._samples.append(time_of(fn))

        def collect(self) -> list[float]:
            samples, self._samples = self._samples, []
            return samples

    ScriptedTimer.name = name
    if holds:
        ScriptedTimer.hold = lambda self, microseconds: True  # type: ignore[attr-defined]
    plugin = types.ModuleType(module or f"tests_{name.replace('-', '_')}_timer")

    @hookimpl
    def kerneltune_register_timers(register):
        register(ScriptedTimer)

    plugin.kerneltune_register_timers = kerneltune_register_timers
    return plugin


def clock_plugin(clock: FakeClock, name: str = "scripted", *, holds: bool = False) -> types.ModuleType:
    """A plugin module registering a timer that reads ``clock`` (with ``holds``, one that holds)."""

    def time_of(fn: Callable[[], object]) -> float:
        start = clock.now
        fn()
        return clock.now - start

    return scripted_timer_plugin(time_of, name, holds=holds)


def steps_plugin(
    steps: list[tuple[str, float]], *, sample_ms: float | Callable[[], float] = 1.0
) -> types.ModuleType:
    """A plugin registering the timer ``steps``: ``flush``, ``hold`` and start marks go to ``steps``.

    Each step is ``(name, value)``: ``("flush", 0.0)``, ``("hold", microseconds)``
    or ``("start", 0.0)``. Every sample reads ``sample_ms`` (called at each collect, if callable).
    """

    class StepsTimer:
        name = "steps"
        auto_priority = -100

        @classmethod
        def is_available(cls) -> bool:
            return True

        def __init__(self) -> None:
            self._count = 0

        def flush(self) -> None:
            steps.append(("flush", 0.0))

        def hold(self, microseconds: float) -> None:
            steps.append(("hold", microseconds))

        def sample(self, fn, *, before=None):
            if before is not None:
                before()
            steps.append(("start", 0.0))
            fn()
            self._count += 1

        def collect(self) -> list[float]:
            reading = sample_ms() if callable(sample_ms) else sample_ms
            samples, self._count = [reading] * self._count, 0
            return samples

    plugin = types.ModuleType("tests_steps_timer")

    @hookimpl
    def kerneltune_register_timers(register):
        register(StepsTimer)

    plugin.kerneltune_register_timers = kerneltune_register_timers
    return plugin


def plugin_module(name: str, **hooks: Any) -> types.ModuleType:
    """A plugin module named ``name`` implementing each given hook (``hook_name=function``)."""
    module = types.ModuleType(name)
    for hook_name, function in hooks.items():
        setattr(module, hook_name, hookimpl(function))
    return module


def family_plugin(*families: type, name: str = "tests_profile_families") -> types.ModuleType:
    """A plugin module named ``name`` registering compile-profile families."""
    plugin = types.ModuleType(name)

    @hookimpl
    def kerneltune_register_profile_families(register):
        for family in families:
            register(family)

    plugin.kerneltune_register_profile_families = kerneltune_register_profile_families
    return plugin


def install_session(monkeypatch, *, extra: tuple[object, ...] = (), **overrides: Any) -> Session:
    """Route every autotuned call of this test through one explicit session."""
    settings = attrs.evolve(load_settings(), **overrides)
    session = Session.create(settings, extra=extra)
    monkeypatch.setattr(function_tuner, "current_session", lambda: session)
    return session


def record_files(cache_dir: Path, function: str, suffix: str = "json") -> list[Path]:
    """The cache files of ``function``'s keys (not its key index or portfolio, nor lock, log or
    temporary files)."""
    folder = cache_dir / function
    found = sorted(folder.glob(f"*.{suffix}")) if folder.is_dir() else []
    return [path for path in found if path.stem not in (KEY_INDEX_ENTRY, PORTFOLIO_ENTRY)]


def load_file(path: Path) -> Any:
    """Decode a json or msgpack cache file as plain data."""
    if path.suffix == ".msgpack":
        return msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
    return json.loads(path.read_text())


def stored_records(cache_dir: Path, function: str, suffix: str = "json") -> list[dict[str, Any]]:
    """Every record stored for ``function``, decoded, and the pending marks, all written by now
    (not its remembered failed configs or key index)."""
    flush_marks()
    decoded = (load_file(path) for path in record_files(cache_dir, function, suffix))
    return [data for data in decoded if data.get("kind") not in ("failed configs", KEY_INDEX_KIND)]


def only_record_file(cache_dir: Path, function: str, suffix: str = "json") -> Path:
    files = record_files(cache_dir, function, suffix)
    assert len(files) == 1, files
    return files[0]


def make_record(times=(2.0, 1.0, 3.0), finalists=None, best=None) -> TuningRecord:
    """A record of ``len(times)`` candidates; the pick is SELECT's unless ``best`` forces one.

    An infinite time is a candidate that failed with error "boom".
    """
    finite = [i for i in (finalists or range(len(times))) if math.isfinite(times[i])]
    best = min(finite, key=lambda i: (times[i], i)) if best is None else best
    return TuningRecord(
        function="work",
        key=[1, {"float": "0x1.8p+1"}],
        fingerprints=tuple(f"{i:032x}" for i in range(len(times))),
        labels=tuple(f"n={i}" for i in range(len(times))),
        best_index=best,
        times=tuple(times),
        measurements=tuple(
            Measurement(i, samples=() if math.isinf(t) else (t,), error="boom" if math.isinf(t) else None)
            for i, t in enumerate(times)
        ),
        versions={"python": "3"},
        hardware={"device": "cpu", "count": 1},
        created=1.7e9,
        finalists=finalists,
    )


CALLS: list[int] = []


def _multiply(x: int, n: int) -> int:
    CALLS.append(n)
    return x * n


def fresh_tuner(name: str = "work") -> Any:
    """A new autotuned ``x * n`` over n in (1, 2), keyed by ``x`` and named ``name``, as a new
    process would make it; :data:`CALLS` is emptied and then lists the ``n`` of each run."""
    from triton_dist.tune import autotune

    CALLS.clear()

    def work(x: int, n: int) -> int:
        return _multiply(x, n)

    work.__name__ = name
    return autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)(work)
