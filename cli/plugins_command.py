"""``kerneltune plugins``: what a tuning here would run with.

It answers as a program that has not imported torch would be answered:
``auto`` and the listing pass over the classes that wait for a module not
imported (``auto_requires_import``); ``--probe`` imports those first.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from pathlib import Path
from typing import Any

import click
from kerneltune import __version__
from kerneltune.cli import views
from kerneltune.cli.loading import _Plugins
from kerneltune.core import KernelTuneError
from kerneltune.core.driving import setting_sources

#: The setting that chooses each family's class by name (the others are always auto's choice).
_SETTING_OF = {"timer": "timer", "cache": "cache", "reducer": "reducer", "search strategy": "search_strategy"}


def _in_force(loaded: _Plugins, field: str | None, chosen: str, automatic: str | None) -> str:
    """The heading's note: the class a tuning here takes, and why (the setting ``field``, or auto)."""
    if field is None or chosen.casefold() == "auto":
        return f"in force: {automatic or 'none available'}, auto's choice"
    source = loaded.settings.source(field) or "a setting"
    return f"in force: {chosen}, set by {source}; auto would take {automatic or 'none available'}"


def _plugin_origin(plugins: _Plugins, name: str, plugin: object) -> str:
    distributions = {id(p): dist for p, dist in plugins.manager.list_plugin_distinfo()}
    dist = distributions.get(id(plugin))
    if dist is not None:
        return f"entry point, {dist.project_name} {dist.version}"
    return f"built-in, kerneltune {__version__}" if name.startswith("kerneltune.plugins.") else "added"


@click.command()
@click.option(
    "--probe",
    is_flag=True,
    help="Import the modules auto waits for (torch) and ask every class, as in a program that uses torch.",
)
def plugins(probe: bool) -> None:
    """List the plugins loaded; the timers, caches, reducers, devices and search strategies; the settings."""
    loaded = _Plugins.load()
    if probe:
        _import_awaited(loaded)
    waited: set[str] = set()
    click.echo("plugins loaded:")
    named = [(name, plugin) for name, plugin in loaded.manager.list_name_plugin() if name != "hookspecs"]
    for line in views.table(["  name", "from"], [[f"  {n}", _plugin_origin(loaded, n, p)] for n, p in named]):
        click.echo(line)
    if loaded.settings.get("block"):
        click.echo(f"  blocked: {', '.join(loaded.settings.get('block'))}")
    for registry in loaded.listed():
        automatic = chosen = None
        if registry is loaded.registries.remote_stores:
            click.echo('\nremote stores (cache = "<name>" layers one under the json cache; never auto):')
        else:
            with contextlib.suppress(KernelTuneError):
                automatic = registry.select("auto").name
            field = _SETTING_OF.get(registry.family)
            chosen = loaded.settings.get(field) if field is not None else "auto"
            click.echo(f"\n{_plural(registry.family)} ({_in_force(loaded, field, chosen, automatic)}):")
        rows = []
        for name in registry.names():
            cls = registry.classes[name]
            awaited = registry.awaited_import(cls)
            if awaited is not None:
                waited.add(awaited)
                available = f"not asked: waits for {awaited}"
            else:
                available = "available" if cls.is_available() else "not available here"
            marks = (", auto" if name == automatic else "") + (
                ", in force" if chosen is not None and chosen.casefold() == name.casefold() else ""
            )
            rows.append([f"  {name}", available + marks, registry.owners[name]])
        for line in views.table([f"  {registry.family}", "here", "plugin"], rows):
            click.echo(line)
    if waited:
        modules = " and ".join(sorted(waited))
        click.echo(
            f"\nnot asked: auto passes these over in a program that has not imported {modules}, as here; "
            "kerneltune plugins --probe imports and asks"
        )
    hardware = loaded.hardware()
    click.echo("\nhardware: " + ", ".join(f"{k} {v}" for k, v in sorted(hardware.items())))
    click.echo("\nsettings:")
    rows = [
        [f"  {name}", json.dumps(_plain(loaded.settings.get(name))), where]
        for name, where in setting_sources(loaded.settings).items()
    ]
    for line in views.table(["  setting", "value", "from"], rows):
        click.echo(line)
    _plugin_settings(loaded)


def _import_awaited(loaded: _Plugins) -> None:
    """Import every module some class waits for; one that fails is a note, and its classes stay unasked."""
    for module in sorted(loaded.registries.awaited_imports()):
        try:
            importlib.import_module(module)
        except Exception as exc:
            click.echo(f"kerneltune: --probe: cannot import {module} ({type(exc).__name__}: {exc})", err=True)


def _plugin_settings(loaded: _Plugins) -> None:
    """The settings the plugins declare: value, where it comes from, the plugin and what it does."""
    if not loaded.declared.specs:
        return
    click.echo("\nsettings of plugins:")
    rows = []
    for name, spec in sorted(loaded.declared.specs.items()):
        value = loaded.settings.get(name)
        shown = spec.display(value) if spec.display is not None else _plain(value)
        variables = f" ({', '.join(spec.env)})" if spec.env else ""
        rows.append(
            [
                f"  {name}",
                json.dumps(shown),
                loaded.settings.source(name) or "default",
                loaded.declared.owners[name],
                spec.help + variables,
            ]
        )
    for line in views.table(["  setting", "value", "from", "plugin", "about"], rows):
        click.echo(line)


def _plural(family: str) -> str:
    return f"{family[:-1]}ies" if family.endswith("y") else f"{family}s"


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value
