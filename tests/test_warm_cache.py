"""What a filled Triton cache saves a restarted process: Triton's hash of itself, kept beside its cache.

The probe of Triton's program cache is tested with COMPILE in tests/test_compile.py.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
import triton
from kerneltune.plugins.triton import warm_cache


def test_a_value_is_kept_and_served_while_nothing_under_its_root_changes(tmp_path):
    root, store = tmp_path / "triton", tmp_path / "cache" / "key.json"
    root.mkdir()
    (root / "compiler.py").write_text("one")
    computed: list[str] = []

    def compute() -> str:
        computed.append("key")
        return f"key-{len(computed)}"

    assert warm_cache.remembered(compute, root, store) == "key-1"
    assert warm_cache.remembered(compute, root, store) == "key-1"
    assert len(computed) == 1, "served from the store"
    assert oct(store.parent.stat().st_mode & 0o777) == "0o700"

    (root / "compiler.py").write_text("two, longer")  # an upgraded Triton
    assert warm_cache.remembered(compute, root, store) == "key-2"
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "compiler.pyc").write_text("bytecode")  # written by imports: no change
    assert warm_cache.remembered(compute, root, store) == "key-2"
    assert len(computed) == 2


@pytest.mark.parametrize("damage", ["not json", json.dumps({"fingerprint": "other", "key": "stale"}), "[]"])
def test_a_damaged_or_stale_store_computes_again(tmp_path, damage):
    root, store = tmp_path / "triton", tmp_path / "key.json"
    root.mkdir()
    store.write_text(damage)
    assert warm_cache.remembered(lambda: "fresh", root, store) == "fresh"
    assert json.loads(store.read_text())["key"] == "fresh"


def test_a_store_that_cannot_be_written_leaves_the_value_computed(tmp_path):
    root = tmp_path / "triton"
    root.mkdir()
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    assert warm_cache.remembered(lambda: "value", root, blocker / "key.json") == "value"


def _computed_soon(root: Path, store: Path) -> str:
    """``remembered`` over ``store``, run in a thread that must end within seconds."""
    result: list[str] = []
    thread = threading.Thread(
        target=lambda: result.append(warm_cache.remembered(lambda: "fresh", root, store))
    )
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "reading the kept key blocked"
    return result[0]


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "link to a good file"])
def test_a_kept_key_that_is_no_regular_file_of_its_own_is_not_read(tmp_path, kind):
    root, store = tmp_path / "triton", tmp_path / "key.json"
    root.mkdir()
    if kind == "fifo":
        os.mkfifo(store)
    elif kind == "link to /dev/zero":
        store.symlink_to("/dev/zero")
    else:
        good = tmp_path / "elsewhere.json"
        good.write_text(json.dumps({"fingerprint": warm_cache.fingerprint(root), "key": "planted"}))
        store.symlink_to(good)
    assert _computed_soon(root, store) == "fresh"


def test_the_fingerprint_follows_linked_folders_once_each(tmp_path):
    root, backend = tmp_path / "triton", tmp_path / "checkout" / "backend"
    backend.mkdir(parents=True)
    (backend / "compiler.py").write_text("one")
    root.mkdir()
    (root / "backends").symlink_to(backend)  # an editable Triton links its backends
    (backend / "loop").symlink_to(root)  # and a link back up ends the walk, not the process
    before = warm_cache.fingerprint(root)
    (backend / "compiler.py").write_text("two")
    assert warm_cache.fingerprint(root) != before


def test_the_fingerprint_sees_a_rebuild_that_restores_size_and_modification_time(tmp_path):
    root = tmp_path / "triton"
    root.mkdir()
    library = root / "libtriton.so"
    library.write_bytes(b"build one")
    status = library.stat()
    before = warm_cache.fingerprint(root)
    time.sleep(0.01)
    library.write_bytes(b"build two")  # the same size
    os.utime(library, ns=(status.st_atime_ns, status.st_mtime_ns))  # cp -p, rsync -t
    assert library.stat().st_mtime_ns == status.st_mtime_ns
    assert warm_cache.fingerprint(root) != before


@pytest.fixture
def holders(tmp_path, monkeypatch):
    """Triton's modules that hold its ``triton_key``, restored after the test; a fresh cache folder."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    found = [
        module
        for name, module in list(sys.modules.items())
        if (name == "triton" or name.startswith("triton.")) and hasattr(module, "triton_key")
    ]
    for module in found:
        monkeypatch.setattr(module, "triton_key", module.triton_key)
    monkeypatch.setattr(warm_cache, "_key_installed", False)
    return found


def test_tritons_own_key_is_served_from_the_file_beside_its_cache(tmp_path, holders):
    original = next(sys.modules[name].triton_key for name in warm_cache.KEY_MODULES if name in sys.modules)
    assert not warm_cache.holds_triton_key(), "a cache never used keeps no record"
    warm_cache.remember_triton_key()
    patched = [module for module in holders if module.triton_key is not original]
    assert patched, "every module holding Triton's triton_key now holds the remembering one"
    assert patched[0].triton_key() == original()
    kept = json.loads((tmp_path / "triton-cache" / warm_cache.KEY_FILE).read_text())
    assert kept["key"] == original()
    assert kept["fingerprint"] == warm_cache.fingerprint(Path(triton.__file__).parent)
    assert warm_cache.holds_triton_key(), "the record says this install has used the cache"


def test_search_params_lets_a_probes_miss_through_without_dropping_the_candidate():
    # A search's compile function drops a candidate whose compile fails; a miss under the probe
    # is no failure: it must reach COMPILE, which forks a compile process for it instead.
    from kerneltune.core import CompileMiss
    from kerneltune.core.driving import Candidate
    from kerneltune.plugins.triton.search_params.launcher import Launcher

    launcher = object.__new__(Launcher)
    launcher.noting, launcher.dropped, launcher.failures = threading.Lock(), set(), {}
    launcher.say = lambda line: None
    candidate = Candidate(index=3, config={"BLOCK": 64}, label="BLOCK=64", fingerprint="f")

    def missing(config):
        raise CompileMiss("not in Triton's cache")

    launcher.compile_config = missing
    with pytest.raises(CompileMiss):
        launcher.build(candidate)
    assert launcher.dropped == set() and launcher.failures == {}

    def broken(config):
        raise ValueError("bad IR")

    launcher.compile_config = broken
    with pytest.raises(ValueError):
        launcher.build(candidate)
    assert launcher.dropped == {3} and launcher.failures == {3: "ValueError: bad IR"}


def test_threads_asking_for_tritons_key_at_once_compute_it_once(holders, monkeypatch):
    computed, started = [], threading.Barrier(4)

    def slow_key() -> str:
        computed.append(threading.current_thread().name)
        time.sleep(0.2)  # Triton's own hash: a third of a second on an H200's host
        return "the key"

    for module in holders:
        module.triton_key = slow_key  # the fixture restores Triton's own
    warm_cache.remember_triton_key()
    patched = next(module.triton_key for module in holders if module.triton_key is not slow_key)
    answers = []

    def ask() -> None:
        started.wait()
        answers.append(patched())

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert answers == ["the key"] * 4 and len(computed) == 1
