"""The code blocks of README.md and the pages that took its reference parts run as written.

README.md's first example, docs/plugins.md's ten-line plugin and docs/configuration.md's config
file and variable table: none of them can drift from the code.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import torch
from kerneltune.core import add_plugin, load_settings, remove_plugin

from triton_dist.tune import autotune

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PLUGINS = ROOT / "docs" / "plugins.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
# The example's tensor line; off a GPU it is swapped for a small CPU tensor.
GPU_TENSOR = 'x = torch.randn(1 << 18, device="cuda")'
CPU_TENSOR = 'x = torch.randn(1 << 10, device="cpu")'


def block(language: str, marker: str, page: Path = README) -> str:
    """The one fenced ``language`` block of ``page`` that contains ``marker``."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", page.read_text(), re.DOTALL | re.MULTILINE)
    found = [text for text in blocks if marker in text]
    assert len(found) == 1, f"expected one {language} block with {marker!r}, found {len(found)}"
    return found[0]


def test_scale_example_runs_and_tunes(tmp_path):
    code = block("python", "def scale(")
    assert code.count(GPU_TENSOR) == 1
    env = dict(os.environ)
    if not torch.cuda.is_available():
        # Triton's interpreter runs the kernel on the CPU; it is slow, so the tensor is small.
        code = code.replace(GPU_TENSOR, CPU_TENSOR)
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    # A real file: Triton and the tuner both read the kernel's source.
    script = tmp_path / "readme_scale.py"
    script.write_text(code)
    cache = tmp_path / "cache"
    env["TRITON_DIST_AUTOTUNE_CACHE_DIR"] = str(cache)
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[kerneltune] scale: tuning key" in done.stdout
    assert "picked [" in done.stdout
    assert len(list((cache / "scale").glob("[0-9a-f]*.json"))) == 1


def test_plugin_example_reports_a_finished_tuning(tmp_path, capsys):
    path = tmp_path / "tuning_report.py"
    path.write_text(block("python", "def kerneltune_tuning_finished(", PLUGINS))
    spec = importlib.util.spec_from_file_location("tuning_report", path)
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def double(x, n):  # n changes nothing here: every config computes the same
        return 2 * x

    add_plugin(plugin)
    try:
        double(3)
    finally:
        remove_plugin(plugin)
    assert re.search(r"^double: picked n=<[12]> \(\d+\.\d{3} ms\)$", capsys.readouterr().out, re.MULTILINE)


def test_config_file_example_is_valid(tmp_path):
    (tmp_path / "pyproject.toml").write_text(block("toml", "[tool.kerneltune]", CONFIGURATION))
    settings = load_settings(cwd=tmp_path, environ={})
    assert (settings.get("timer"), settings.get("cache"), settings.get("warmup"), settings.get("repeat")) == (
        "auto",
        "msgpack",
        3,
        20,
    )
    assert settings.get("cache_dir") == Path("/scratch/autotune")


def test_environment_table_lists_exactly_the_variables_the_code_reads():
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", CONFIGURATION.read_text(), re.MULTILINE))
    source = "\n".join(
        path.read_text() for folder in ("core", "plugins") for path in (ROOT / folder).rglob("*.py")
    )
    # A name ending in "_" is a prefix (settings.WATCHED_PREFIXES), not a variable.
    read = set(re.findall(r'"((?:KERNELTUNE|TRITON_DIST)_[A-Z_]*[A-Z])"', source))
    assert documented == read
