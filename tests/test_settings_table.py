"""One settings table: core's settings are the specs its modules declare, and the docs list exactly those.

Core declares each setting once, as a :class:`SettingSpec` constant next to
the code that reads it; :class:`Settings` holds a value for each, read
through the spec. These tests hold the view, docs/configuration.md's two tables and the
guide's configuration reference to the specs (core's and the built-in
plugins'), name for name, default for default and variable for variable.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
from kerneltune.core import ConfigError, Settings, load_settings
from kerneltune.core.plugin_system.manager import make_plugin_manager
from kerneltune.core.plugin_system.registry import collect_settings
from kerneltune.core.plugin_system.settings import CORE_SETTING_MODULES, SettingSpec, core_settings

ROOT = Path(__file__).resolve().parents[1]


def every_spec() -> dict[str, SettingSpec]:
    """Core's settings and those the built-in plugins declare."""
    builtins = collect_settings(make_plugin_manager(Settings(autoload=False))).specs
    return {**core_settings(), **builtins}


def shown(value: Any) -> str:
    """A default as the docs' tables write it, between backticks."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[]" if not value else repr(list(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value == "":
        return '""'
    return str(value)


def rows(text: str, columns: int) -> list[list[str]]:
    """The body rows of ``text``'s Markdown tables with ``columns`` cells, the first backticked."""
    found = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == columns:
            found.append(cells)
    return found


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]*)`", cell)


def section(path: Path, start: str, end: str) -> str:
    return path.read_text().split(start, 1)[1].split(end, 1)[0]


def test_the_typed_view_holds_every_core_setting_at_its_default():
    specs = core_settings()
    settings = Settings()
    assert {name: settings[spec] for name, spec in specs.items()} == {n: s.default for n, s in specs.items()}
    assert dict(settings.values) == {name: spec.default for name, spec in specs.items()}
    assert load_settings(environ={}) == Settings()
    with pytest.raises(TypeError, match="'warmpu'"):
        Settings(warmpu=2)


def test_every_core_module_declares_settings_with_help_and_variables():
    for module_name in CORE_SETTING_MODULES:
        module = vars(importlib.import_module(module_name))
        assert any(isinstance(v, SettingSpec) for v in module.values()), f"{module_name} declares none"
    for spec in core_settings().values():
        assert spec.help and spec.variables(), spec.name
    variables = [v for spec in core_settings().values() for v in spec.variables()]
    assert len(variables) == len(set(variables)), "a variable sets one setting"


def test_a_core_spec_parses_what_the_files_and_variables_hold(tmp_path):
    (tmp_path / "kerneltune.toml").write_text('isolate = "subprocess"\nsearch-effort = "full"\n')
    settings = load_settings(tmp_path, {"KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD": "1", "KERNELTUNE_WARMUP": "2"})
    assert (
        settings.get("isolate"),
        settings.get("search_effort"),
        settings.get("autoload"),
        settings.get("warmup"),
    ) == (
        "subprocess",
        "full",
        False,
        2,
    )
    assert settings.source("autoload") == "environment variable KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD"
    with pytest.raises(ConfigError, match=r"key 'isolate_timeout': expected an integer >= 1, got 0"):
        (tmp_path / "kerneltune.toml").write_text("isolate_timeout = 0\n")
        load_settings(tmp_path, {})


def test_the_configuration_page_lists_every_setting_with_its_default():
    listed = rows(section(ROOT / "docs" / "configuration.md", "## Settings", "## Environment variables"), 3)
    table = {cells[0].strip("`"): cells[1] for cells in listed}
    assert len(table) == len(listed), "a setting listed twice"
    specs = every_spec()
    assert set(table) == set(specs)
    assert {name: ticked(cell)[0] for name, cell in table.items()} == {
        n: shown(s.default) for n, s in specs.items()
    }


def test_the_configuration_page_lists_every_variable_with_the_setting_it_sets():
    text = section(ROOT / "docs" / "configuration.md", "## Environment variables", "\n## ")
    listed = rows(text, 2)
    table = {cells[0].strip("`"): cells[1] for cells in listed}
    assert len(table) == len(listed), "a variable listed twice"
    expected = {"KERNELTUNE_CONFIG": None}
    for name, spec in every_spec().items():
        for variable, negated in spec.variables().items():
            expected[variable] = name
            if negated:
                assert "inverted" in table.get(variable, ""), variable
    assert set(table) == set(expected)
    assert all(ticked(table[v])[0] == name for v, name in expected.items() if name is not None)


def test_the_guides_reference_lists_every_setting_its_default_and_variable():
    text = section(ROOT / "docs" / "guide.md", "## Configuration reference", "\n## ")
    listed = rows(text, 4)
    table = {cells[0].strip("`"): cells for cells in listed}
    assert len(table) == len(listed), "a setting listed twice"
    specs = every_spec()
    assert set(table) == set(specs)
    for name, spec in specs.items():
        _, default, variable, _ = table[name]
        assert ticked(default)[0] == shown(spec.default), name
        assert ticked(variable)[0] in spec.variables(), name
