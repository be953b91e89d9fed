"""The recipes of docs/plugins.md, run as written: each is loaded as a module and used as a plugin."""

from __future__ import annotations

import http.server
import re
import threading
import types
import warnings
from pathlib import Path

import attrs
import pytest
from kerneltune.core import PluginError, Session, Settings, Space, Tuner, load_settings
from kerneltune.core.search.geometry import SearchBudget, SearchGeometry
from kerneltune.core.search.strategies import search_strategies
from tuning_doubles import record_files

PLUGINS_MD = Path(__file__).resolve().parent.parent / "docs" / "plugins.md"


def recipe(title: str) -> types.ModuleType:
    """The python block under ``### title`` of the Recipes section, executed as a module."""
    section = PLUGINS_MD.read_text().split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    part = section.split(f"\n### {title}\n", 1)[1].split("\n### ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", part, re.DOTALL)
    module = types.ModuleType("recipe_" + re.sub(r"\W+", "_", title.lower()))
    exec(compile(code, f"{PLUGINS_MD}:{title}", "exec"), module.__dict__)
    return module


def test_the_search_strategy_recipe_measures_a_sample_and_returns_the_fastest():
    plugin = recipe("A search strategy")
    session = Session.create(attrs.evolve(load_settings(), cache="memory"), extra=(plugin,))
    strategy = search_strategies(session).select("random")()
    geometry = SearchGeometry(params=("BLOCK_M", "BLOCK_N"), axes=((16, 32, 64, 128), (16, 32, 64)))
    asked: list[object] = []

    def measure(points):
        asked.extend(points)
        return {point: float(sum(point[0])) for point in points}

    finalists = strategy.search(geometry, measure, SearchBudget(finalists=2), lambda line: None)
    assert len(asked) == 3 and len(finalists) == 2
    assert sorted(asked, key=lambda p: sum(p[0]))[:2] == finalists


class _Server(http.server.ThreadingHTTPServer):
    values: dict[str, bytes]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self):
        value = self.server.values.get(self.path)
        self.send_response(404 if value is None else 200)
        self.end_headers()
        if value is not None:
            self.wfile.write(value)

    def do_PUT(self):
        self.server.values[self.path] = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    server = _Server(("127.0.0.1", 0), _Handler)
    server.values = {}
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _tune(session: Session, cost: dict[int, float]) -> int:
    space = Space.build("work", [{"block": 64}, {"block": 128}], source="def work(x, block): ...")
    with Tuner(space).begin(session, 7) as tuning:
        while (candidate := tuning.next_candidate()) is not None:
            tuning.record(candidate, [cost[candidate.index]])
        return tuning.finish().index


def test_the_remote_store_recipe_shares_picks_through_an_http_server(http_server, tmp_path, monkeypatch):
    plugin = recipe("A cache backend: a remote store")
    url = f"http://127.0.0.1:{http_server.server_address[1]}/picks"
    monkeypatch.setenv("KERNELTUNE_HTTP_STORE_URL", url)
    node_a = attrs.evolve(load_settings(), cache="http", timer="wallclock", cache_dir=tmp_path / "a")
    assert _tune(Session.create(node_a, extra=(plugin,)), {0: 2.0, 1: 1.0}) == 1
    (stored,) = http_server.values
    assert stored.startswith("/picks/kerneltune%3Av1%3Awork%3A")

    # Another node, with no local files: the server's pick serves, and is kept locally.
    node_b = Session.create(attrs.evolve(node_a, cache_dir=tmp_path / "b"), extra=(plugin,))
    assert node_b.cache_load("work", stored.rsplit("%3A", 1)[1]) is not None
    assert len(record_files(tmp_path / "b", "work")) == 1
    assert node_b.settings.source("http_store_url") == "environment variable KERNELTUNE_HTTP_STORE_URL"

    # The server gone: one warning, and the local cache carries on.
    http_server.shutdown()
    http_server.server_close()
    node_c = Session.create(attrs.evolve(node_a, cache_dir=tmp_path / "c"), extra=(plugin,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _tune(node_c, {0: 1.0, 1: 2.0}) == 0
    assert [str(w.message) for w in caught if "http cache at" in str(w.message)]
    assert len(record_files(tmp_path / "c", "work")) == 1


def test_the_remote_store_recipe_needs_its_url():
    with pytest.raises(Exception, match="cache 'http' needs http_store_url"):
        Session.create(Settings(cache="http"), extra=(recipe("A cache backend: a remote store"),))


def test_the_accelerator_recipe_registers_a_device_and_its_timer():
    plugin = recipe("A timer for a new accelerator")
    session = Session.create(Settings(cache="memory"), extra=(plugin,))
    assert session.registries.devices.owners["xpu"] == session.registries.timers.owners["xpu-event"]
    if not plugin.XpuDevice.is_available():
        with pytest.raises(PluginError, match=r"timer 'xpu-event' .* cannot run here"):
            Session.create(Settings(cache="memory", timer="xpu-event"), extra=(plugin,))
        return
    session = Session.create(Settings(cache="memory", timer="xpu-event"), extra=(plugin,))
    assert session.device.name == "xpu"
    timer = session.make_timer()
    timer.sample(lambda: None)
    (elapsed,) = timer.collect()
    assert elapsed >= 0
