"""Host work tunes, and the command lists, without importing torch (issue 38's smaller items).

Each check runs a fresh interpreter: the test process itself has torch
imported (conftest asks it whether there is a GPU). A program that never
imported torch holds no torch tensor and has no process group, so ``auto``
passes over the classes that wait for torch instead of paying for its
import; where the program has imported torch, or names a torch timer,
everything is as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import pytest
from kerneltune.core.plugin_system.registry import Registry
from kerneltune.core.plugin_system.seam import PluginFaultWarning

PROGRAM = """
import json
import sys

import numpy as np
from triton_dist.tune import autotune

if "--torch" in sys.argv:
    import torch


@autotune(config_space=[{"rows": rows} for rows in (16, 64, 256)], key_fn=lambda a: a.shape)
def blocked_sum(a, rows):
    return sum(float(a[i : i + rows].sum()) for i in range(0, a.shape[0], rows))


if __name__ == "__main__":
    total = blocked_sum(np.ones((512, 8)))
    print(json.dumps({"total": total, "torch": "torch" in sys.modules}))
"""


def _python(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run(
        [sys.executable, *arguments], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert ran.returncode == 0, ran.stderr
    return ran


#: What the ``isolated`` fixture sets to keep tests' tunings short and countable.
SHORTENED = ("KERNELTUNE_TIE_ROUNDS", "KERNELTUNE_PRECOMPILE", "KERNELTUNE_RECHECK", "KERNELTUNE_TWINS")


def _run_program(tmp_path: Path, *flags: str, defaults: bool = False) -> tuple[dict, str]:
    """Run PROGRAM in a fresh interpreter: its JSON line, and the rest of its output.

    :param defaults: run with kerneltune's defaults, not the ``isolated`` fixture's shortened ones.
    """
    program = tmp_path / "host_work.py"
    program.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not (defaults and k in SHORTENED)}
    ran = _python("-W", "ignore", str(program), *flags, env=env)
    *log, last = ran.stdout.strip().splitlines()
    return json.loads(last), "\n".join(log)


def _run(code: str) -> str:
    return _python("-c", textwrap.dedent(code)).stdout


@pytest.mark.parametrize("setting", ["timer=auto", "timer=wallclock", "isolate=subprocess"])
def test_a_cold_tuning_of_host_work_leaves_torch_unimported(tmp_path, monkeypatch, setting):
    name, value = setting.split("=")
    monkeypatch.setenv(f"KERNELTUNE_{name.upper()}", value)
    monkeypatch.setenv("KERNELTUNE_VERBOSE", "1")
    # Every stage a user's tuning runs: compiling ahead (precompile), near-tie rounds, twins.
    result, log = _run_program(tmp_path, defaults=True)
    assert result == {"total": 4096.0, "torch": False}
    assert "tuning key (512, 8): 3 candidates" in log


def test_a_cache_hit_leaves_torch_unimported(tmp_path, monkeypatch):
    _run_program(tmp_path)
    monkeypatch.setenv("KERNELTUNE_VERBOSE", "1")
    result, log = _run_program(tmp_path)
    assert result == {"total": 4096.0, "torch": False}
    assert "using the stored pick" in log and "tuning key" not in log


@pytest.mark.parametrize("order", ["with torch, then without", "without torch, then with"])
def test_a_pick_serves_programs_with_and_without_torch(tmp_path, monkeypatch, order):
    # The version of torch in a record is read from its files when torch is not imported: it must
    # equal torch.__version__, or version_check would retune.
    first, second = (["--torch"], []) if order.startswith("with torch") else ([], ["--torch"])
    monkeypatch.setenv("KERNELTUNE_VERSION_CHECK", "1")
    assert _run_program(tmp_path, *first)[0]["torch"] == bool(first)
    monkeypatch.setenv("KERNELTUNE_VERBOSE", "1")
    result, log = _run_program(tmp_path, *second)
    assert result["torch"] == bool(second)
    assert "using the stored pick" in log and "tuning key" not in log


def test_the_torch_version_is_read_without_importing_torch():
    shown = _run(
        """
        import sys
        from kerneltune.plugins.environment import kerneltune_software_versions

        read = kerneltune_software_versions()["torch"]
        imported = "torch" in sys.modules
        import torch

        print(read == torch.__version__, imported)
        """
    )
    assert shown.split() == ["True", "False"]


def test_importing_torch_after_a_tuning_makes_a_fresh_session():
    shown = _run(
        """
        from kerneltune.core.plugin_system.session import current_session

        before = current_session()
        print(sorted(before.awaiting), before is current_session())
        import torch

        after = current_session()
        print(after is not before, "torch" in after.awaiting, after is current_session())
        """
    )
    assert shown.splitlines() == ["['torch', 'torch.distributed'] True", "True False True"]


_COMMAND = """
import sys
from kerneltune.cli import main

try:
    main({arguments!r})
except SystemExit as done:
    assert not done.code, done.code
print("torch imported:", "torch" in sys.modules)
"""


def test_the_plugins_command_lists_everything_without_importing_torch():
    shown = _run(_COMMAND.format(arguments=["plugins"]))
    assert shown.rstrip().endswith("torch imported: False")
    rows = {line.split()[0]: line for line in shown.splitlines() if line.startswith("  ")}
    for waiting in ("cuda-event", "npu-event", "cuda", "npu"):
        assert "not asked: waits for torch" in rows[waiting]
    assert "not asked: waits for torch.distributed" in rows["world-max"]
    assert "available, auto" in rows["wallclock"] and "available, auto" in rows["cpu"]
    assert "available, auto" in rows["json"] and "available, auto" in rows["pattern"]
    assert "timers (in force: wallclock, auto's choice):" in shown
    assert "kerneltune plugins --probe imports and asks" in shown
    assert "kerneltune.plugins.timers.events" in rows and "cache_dir" in rows


def test_plugins_probe_imports_torch_and_asks_every_class():
    shown = _run(
        _COMMAND.format(arguments=["plugins", "--probe"])
        + "\nimport torch\nprint('cuda available:', torch.cuda.is_available())\n"
    )
    assert "not asked" not in shown and "torch imported: True" in shown
    rows = {line.split()[0]: line for line in shown.splitlines() if line.startswith("  ")}
    cuda = "cuda available: True" in shown
    assert ("not available here" in rows["cuda-event"]) is not cuda
    assert ("not available here" in rows["cuda"]) is not cuda


@pytest.mark.parametrize("command", [["cache", "list"], ["report"], ["cache", "show", "blocked_sum"]])
def test_reading_records_leaves_torch_unimported(tmp_path, command):
    _run_program(tmp_path)
    shown = _run(_COMMAND.format(arguments=command))
    assert "blocked_sum" in shown and shown.rstrip().endswith("torch imported: False")


# -- the rule itself, on registries of stand-in classes -------------------------------------------


AWAITED = "kerneltune_test_module_nobody_imports"


class _Asked:
    """A stand-in class that counts how often it is asked whether it can run."""

    asked: ClassVar[int] = 0
    auto_priority: ClassVar[int] = 10

    @classmethod
    def is_available(cls) -> bool:
        cls.asked += 1
        return True


def _registry(auto_requires_import: object) -> tuple[Registry, type[_Asked]]:
    waiting = type("Waiting", (_Asked,), {"name": "waiting", "auto_requires_import": auto_requires_import})
    plain = type("Plain", (_Asked,), {"name": "plain", "auto_priority": 0})
    registry = Registry(family="timer", classes={"waiting": waiting, "plain": plain}, owners={})
    return registry, waiting


def test_auto_passes_over_a_class_whose_module_is_not_imported_without_asking_it():
    registry, waiting = _registry(AWAITED)
    assert registry.select("auto").name == "plain" and waiting.asked == 0
    assert registry.awaited_import(waiting) == AWAITED
    # Named, it is asked as always: the program wants it.
    assert registry.select("waiting") is waiting and waiting.asked == 1


def test_auto_takes_a_class_once_its_module_is_imported(monkeypatch):
    registry, waiting = _registry(AWAITED)
    monkeypatch.setitem(sys.modules, AWAITED, type(sys)(AWAITED))
    assert registry.awaited_import(waiting) is None
    assert registry.select("auto") is waiting and waiting.asked == 1


@pytest.mark.parametrize("value", ["", 3, ("torch",)])
def test_an_auto_requires_import_that_is_no_module_name_is_a_fault(value):
    registry, waiting = _registry(value)
    with pytest.warns(PluginFaultWarning, match="auto_requires_import is .*, not a module name"):
        assert registry.select("auto") is waiting
