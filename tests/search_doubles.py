"""Test doubles for search_params kernels: scripted times per config and test families.

A kernel under test is decorated with ``pre_hook=script.hook``, so every
launch the tuner makes records its meta-parameters (block sizes and compile
options) in a :class:`Script`; the ``scripted`` timer, registered through
the plugin system, then reports the time the script assigns to that config.
Picks are therefore deterministic, whatever the interpreter's speed.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

import attrs
from kerneltune.core import Session, load_settings
from kerneltune.plugins.triton.search_params import kernel as search_kernel
from tuning_doubles import scripted_timer_plugin

Meta = dict[str, Any]


class Script:
    """What each config costs, and every launch the tuner made, in order."""

    def __init__(self, cost: Callable[[Meta], float]) -> None:
        self.cost = cost
        self.launches: list[Meta] = []

    def hook(self, named: dict[str, Any], reset_only: bool = False) -> None:
        """A Triton ``pre_hook``: note the plain values of this launch."""
        if not reset_only:
            self.launches.append({k: v for k, v in named.items() if isinstance(v, int | str | bool)})

    def last_cost(self) -> float:
        return self.cost(self.launches[-1])

    def seen(self, *names: str) -> list[tuple[Any, ...]]:
        """Each launch's values of ``names``, in launch order."""
        return [tuple(launch.get(n) for n in names) for launch in self.launches]


def by_block(table: dict[Any, float], *names: str, default: float = math.inf) -> Callable[[Meta], float]:
    """A cost function looking the launch's ``names`` up in ``table`` (one name: plain values)."""

    def cost(meta: Meta) -> float:
        values = tuple(meta.get(n) for n in names)
        return table.get(values[0] if len(values) == 1 else values, default)

    return cost


def timer_plugin(script: Script) -> types.ModuleType:
    """A plugin registering the ``scripted`` timer, which reads ``script``."""

    def time_of(fn: Callable[[], object]) -> float:
        fn()
        return script.last_cost()

    return scripted_timer_plugin(time_of, module="tests_scripted_search_timer")


def interpreter_family(
    name: str,
    operator: str,
    profiles: list[dict[str, Any]],
    probes: list[dict[str, Any]] | None = None,
) -> type:
    """A profile family serving Triton's interpreter, with fixed profiles (and probes, when given)."""

    def give(self, target):
        return [dict(p) for p in profiles]

    members = {
        "name": name,
        "operator": operator,
        "backends": ("interpreter",),
        "is_available": classmethod(lambda cls: True),
        "profiles": give,
    }
    if probes is not None:
        members["probe_profiles"] = lambda self, target: [dict(p) for p in probes]
    return type(name, (), members)


def use_session(monkeypatch, *plugins: object, **overrides: Any) -> Session:
    """Make search_params kernels tune with one explicit session (memory cache, 1 timed run)."""
    values = {"timer": "scripted", "cache": "memory", "warmup": 0, "repeat": 1, **overrides}
    session = Session.create(attrs.evolve(load_settings(), **values), extra=plugins)
    monkeypatch.setattr(search_kernel, "current_session", lambda: session)
    return session
