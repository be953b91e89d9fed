"""The plugin seam: what core checks of the answers plugins give it, and what a bad one costs.

A plugin's answer that a record cannot hold, or that is not what its
contract says, or an exception it raises, must neither reach a cache file
nor surface as a raw ``TypeError`` from deep inside the engine. Here such a
fault becomes one warning naming the plugin, the distribution that ships
it and what was wrong (:func:`fault`), once per process, and the engine
goes on without that answer where it can: docs/plugins.md ("What the seam
checks") lists each case and its cost.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import Any

import pluggy
from kerneltune.core.errors import PluginError
from kerneltune.core.notices import warn_once
from kerneltune.core.values.checked import MAX_DEPTH  # plain data from a plugin nests as a record may

logger = logging.getLogger("kerneltune")


class PluginFaultWarning(RuntimeWarning):
    """A plugin answered what the seam refuses, or raised; its answer was ignored (the message says which)."""


def origin(manager: pluggy.PluginManager | None, plugin_name: str) -> str:
    """``plugin NAME (DISTRIBUTION VERSION)``, or ``(built in)`` / ``(added in the program)`` without one."""
    if manager is not None:
        plugin = manager.get_plugin(plugin_name)
        for owned, dist in manager.list_plugin_distinfo():
            if owned is plugin:
                return f"plugin {plugin_name} ({dist.project_name} {dist.version})"
    where = "built in" if plugin_name.startswith("kerneltune.plugins.") else "added in the program"
    return f"plugin {plugin_name} ({where})"


def fault(manager: pluggy.PluginManager | None, plugin_name: str, what: str, consequence: str) -> PluginError:
    """Warn once that a plugin's answer is ignored, and log it; the :class:`PluginError` that says so.

    :param what: what was wrong ("facts() returned NaN for 'clock'").
    :param consequence: what the engine does instead ("the fact is left out of cache keys").
    """
    error = PluginError(f"{origin(manager, plugin_name)}: {what}; {consequence}")
    logger.warning("kerneltune: %s", error)
    warn_once(("plugin fault", plugin_name, what), f"kerneltune: {error}", PluginFaultWarning)
    return error


def plain_problem(value: Any, where: str, depth: int = 0) -> str | None:
    """Why ``value`` is no plain data a record can hold (``None`` when it is).

    Plain: ``None``, bools, ints, finite floats, strings, and lists and
    dicts with string keys of those, at most :data:`MAX_DEPTH` deep.
    """
    if depth > MAX_DEPTH:
        return f"{where} is nested more than {MAX_DEPTH} levels deep"
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value!r}, not a finite number"
    if isinstance(value, list | tuple):
        return next(
            (p for i, item in enumerate(value) if (p := plain_problem(item, f"{where}[{i}]", depth + 1))),
            None,
        )
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has the key {key!r}, not a string"
            problem = plain_problem(item, f"{where}.{key}", depth + 1)
            if problem is not None:
                return problem
        return None
    return f"{where} is a {type(value).__module__}.{type(value).__qualname__}, not plain data"


def plain_facts(
    manager: pluggy.PluginManager | None, plugin_name: str, facts: Any, source: str
) -> dict[str, Any]:
    """The facts a plugin gave that a record can hold; each that it cannot is a :func:`fault`, left out.

    :param source: what gave them, for messages ("facts()", "kerneltune_hardware_info").
    """
    if not isinstance(facts, dict):
        fault(manager, plugin_name, f"{source} returned a {type(facts).__name__}, not a dict", "ignored")
        return {}
    kept = {}
    for name, value in facts.items():
        problem = plain_problem(value, repr(name)) if isinstance(name, str) else f"key {name!r} is no string"
        if problem is None:
            kept[name] = value
        else:
            fault(
                manager,
                plugin_name,
                f"{source}: {problem}",
                "that fact is left out of cache keys (a record could not hold it)",
            )
    return kept


def first_answer(
    manager: pluggy.PluginManager,
    hook_name: str,
    check: Callable[[Any], str | None],
    consequence: str,
    **kwargs: Any,
) -> Any:
    """A first-result hook's answer, one plugin at a time: a plugin that raises or answers badly is skipped.

    As pluggy calls them (the last registered first); ``None`` is no answer.
    A plugin that raises, or whose answer ``check`` says is wrong (a
    reason), is a :func:`fault` with ``consequence``, and the next is asked.

    :returns: the first good answer, or ``None``.
    """
    implementations: Iterable[Any] = reversed(getattr(manager.hook, hook_name).get_hookimpls())
    for impl in implementations:
        if impl.hookwrapper or impl.wrapper:
            continue
        try:
            answer = impl.function(**{name: kwargs[name] for name in impl.argnames})
        except Exception as exc:
            fault(manager, impl.plugin_name, f"{hook_name} raised {type(exc).__name__}: {exc}", consequence)
            continue
        if answer is None:
            continue
        problem = check(answer)
        if problem is None:
            return answer
        fault(manager, impl.plugin_name, f"{hook_name} returned {problem}", consequence)
    return None
