"""The recipes of docs/plugins.md, run as written: each is loaded as a module and used as a plugin."""

from __future__ import annotations

import ast
import http.server
import json
import re
import threading
import types
import warnings
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import PluginError, Session, Settings, load_settings
from kerneltune.core.driving import Space, Tuner
from kerneltune.core.values.geometry import SearchBudget, SearchGeometry
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
    strategy = session.registries.search_strategies.select("random")()
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
    (stored,) = [path for path in http_server.values if not path.endswith("%3Astored-keys")]  # the record
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


def _doc_block(heading: str) -> str:
    """The first python block under ``heading`` (a whole heading line) of docs/plugins.md."""
    part = PLUGINS_MD.read_text().split(f"\n{heading}\n", 1)[1]
    return re.findall(r"```python\n(.*?)```", part, re.DOTALL)[0]


def _kerneltune_imports(source: str) -> set[str]:
    """The kerneltune modules a source file imports from."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kerneltune"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kerneltune"))
    return found


def test_an_outside_package_written_from_the_docs_imports_only_kerneltune_core_and_works(
    http_server, tmp_path, monkeypatch
):
    # A package as a plugin author writes it from docs/plugins.md alone: the
    # register pattern's timer, the strategy, the remote store and the cache
    # recipes, shipped through the entry-point group as an installed distribution is.
    modules = {
        "process_timer": _doc_block("## The register pattern"),
        "random_search": _doc_block("### A search strategy"),
        "http_store": _doc_block("### A cache backend: a remote store"),
        "gzip_cache": _doc_block("### A cache: compressed record files"),
    }
    site = tmp_path / "site"
    package = site / "my_package"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, source in modules.items():
        assert _kerneltune_imports(source) == {"kerneltune.core"}, name
        (package / f"{name}.py").write_text(source)
    info = site / "my_package-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-package\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[kerneltune]\n" + "".join(f"{name.replace('_', '-')} = my_package.{name}\n" for name in modules)
    )
    monkeypatch.syspath_prepend(str(site))
    url = f"http://127.0.0.1:{http_server.server_address[1]}/picks"
    settings = attrs.evolve(
        load_settings(environ={"KERNELTUNE_HTTP_STORE_URL": url}),
        autoload=True,
        cache="http",
        timer="process-time",
        search_strategy="random",
        cache_dir=tmp_path / "cache",
    )
    session = Session.create(settings)
    assert type(session.make_timer()).__module__ == "my_package.process_timer"
    assert session.registries.search_strategies.owners["random"] == "random-search"

    # The timer measures, the store keeps the pick on the server.
    space = Space.build("spin", [{"n": 200_000}, {"n": 2_000}], source="def spin(n): ...")
    assert _tune_spin(session, space) == {"n": 2_000}
    assert [path for path in http_server.values if path.startswith("/picks/kerneltune%3Av1%3Aspin%3A")]

    # The cache keeps the pick in a compressed file of its own; a new tuner reads it back,
    # and the command lists it.
    monkeypatch.setenv("KERNELTUNE_CACHE", "gzip")
    monkeypatch.setenv("KERNELTUNE_TIMER", "process-time")
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(tmp_path / "gzipped"))
    local = Session.create(load_settings())
    assert type(local.cache).__module__ == "my_package.gzip_cache"
    assert _tune_spin(local, space) == {"n": 2_000}
    (stored,) = (tmp_path / "gzipped").rglob("[0-9a-f]*.json.gz")
    with Tuner(space).begin(local, 3) as tuning:
        assert tuning.hit and tuning.finish().config == {"n": 2_000}
    listed = CliRunner().invoke(cli.main, ["cache", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [row["function"] for row in json.loads(listed.output)] == ["spin"]
    assert stored.stem.split(".")[0] in listed.output

    # The strategy searches a space through the measure function it is handed.
    strategy = session.registries.search_strategies.select("random")()
    geometry = SearchGeometry(params=("BLOCK", "WARPS"), axes=((16, 32, 64, 128), (1, 2, 4, 8)))
    asked: list[tuple[tuple[int, ...], int]] = []

    def measure(points):
        asked.extend(points)
        return {point: float(sum(point[0])) for point in points}

    finalists = strategy.search(geometry, measure, SearchBudget(finalists=1), lambda line: None)
    assert len(asked) == 4 and finalists == [min(asked, key=lambda point: sum(point[0]))]


def _tune_spin(session: Session, space: Space) -> dict:
    """Tune ``space`` (sums of ``n`` numbers) with the session's timer; the pick's config."""
    with Tuner(space).begin(session, 3) as tuning:
        while (candidate := tuning.next_candidate()) is not None:
            timer = session.make_timer()
            for _ in range(3):
                timer.sample(lambda n=candidate.config["n"]: sum(range(n)))
            tuning.record(candidate, timer.collect())
        return dict(tuning.finish().config)


def test_the_protocol_check_of_testing_a_plugin_runs_on_the_recipes_classes():
    register_pattern = types.ModuleType("process_timer")
    exec(compile(_doc_block("## The register pattern"), str(PLUGINS_MD), "exec"), register_pattern.__dict__)
    namespace = {
        "ProcessTimer": register_pattern.ProcessTimer,
        "GzipCache": recipe("A cache: compressed record files").GzipCache,
        "HttpStore": recipe("A cache backend: a remote store").HttpStore,
    }
    testing = PLUGINS_MD.read_text().split("\n## Testing a plugin\n", 1)[1]
    (protocols,) = [
        code for code in re.findall(r"```python\n(.*?)```", testing, re.DOTALL) if "type[" in code
    ]
    assert _kerneltune_imports(protocols) == {"kerneltune.core"}
    exec(compile(protocols, f"{PLUGINS_MD}:Testing a plugin", "exec"), namespace)
    assert namespace["remote_stores"] == [namespace["HttpStore"]]
