"""A Redis (or Valkey) cache shared by a fleet, layered over the local JSON cache.

``cache = "redis"`` with ``redis_url`` set. Every pick lives in two places:
the local JSON files under ``cache_dir`` (exactly what ``cache = "json"``
keeps, logs included) and one key on the server,
``kerneltune:v<schema>:<namespace>:<digest>``, whose value is the same
plain-data record as compact JSON. ``<digest>`` is the file's digest (function
source, candidates, hardware and key), so nodes of other hardware sharing a
server never meet each other's picks, and a new record schema uses new keys.

A lookup reads the local file first and asks the server only on a local miss;
a remote hit is checked as a record and written locally, so the next process
on that node does not ask again. A store writes the local file, then the key
(with ``redis_ttl`` as its lifetime when not 0). Each command gets
:data:`TIMEOUT_SECONDS` in all, connecting included, with no retries: an
unreachable, slow, trickling or refusing server costs a tuning at most that
per command it asks, gives one warning per process, and leaves the server
alone for :data:`RETRY_SECONDS` while the local cache carries on. A value that is not a
record (garbage, another type, too large) is a :class:`CacheReadError`, which
the engine logs as a miss and retunes over. Nothing read is executed.

The local layer is the cache registered as ``json``, taken from the cache
registry the session hands over (see the cache hookspec), not imported: this
module is written as a third-party plugin would be. It has no ``entries``:
the hookspec's ``entries`` names the one file that holds a record, and the
``kerneltune`` command clears a record by deleting that file, which would
leave the server's copy to come back. The ``json`` cache lists, exports and
clears the same local files.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kerneltune.core import CacheReadError, ConfigError, Settings, TuningRecord, hookimpl
from kerneltune.core.machine.records import SCHEMA
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.registry import Registry
from kerneltune.core.plugin_system.settings import redacted_url
from kerneltune.core.private_files import MAX_READ

#: Seconds one command may take in all: connecting if need be, sending, and the whole answer.
TIMEOUT_SECONDS = 0.2
#: After a failure, how long this process uses the local cache alone before asking the server again.
RETRY_SECONDS = 30.0

_Answer = TypeVar("_Answer")


class RedisCache:
    """Local JSON files first, then one Redis key per record; writes go to both."""

    name = "redis"
    # Never the automatic choice: it needs a server's URL.
    auto_priority = -10

    @classmethod
    def is_available(cls) -> bool:
        """Whether redis-py can be imported (the ``redis`` extra)."""
        return importlib.util.find_spec("redis") is not None

    def __init__(self, root: Path, settings: Settings, caches: Registry) -> None:
        """Set up both layers; nothing connects until the first lookup or store.

        :raises ConfigError: when ``redis_url`` is unset or not a URL redis-py reads.
        :raises PluginError: when no ``json`` cache is registered (it was blocked).
        """
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.local = caches.get("json")(root=root)
        self.url = redacted_url(settings.redis_url)
        self.ttl = settings.redis_ttl
        where = settings.source("redis_url") or "redis_url"
        if not settings.redis_url:
            raise ConfigError(
                "cache 'redis' needs the server's URL: set redis_url in a config file or "
                "KERNELTUNE_REDIS_URL (e.g. redis://cache-host:6379/0)"
            )
        try:
            # No retries: a retry would multiply the time an outage costs each tuning.
            self.client = redis.Redis.from_url(
                settings.redis_url,
                socket_connect_timeout=TIMEOUT_SECONDS,
                socket_timeout=TIMEOUT_SECONDS,
                retry=Retry(NoBackoff(), 0),
            )
        except ValueError as exc:
            raise ConfigError(f"{where}: redis-py cannot use {self.url}: {exc}") from None
        self._quiet_until = 0.0
        # One thread runs the commands, so that the caller can stop waiting at the deadline.
        self._commands = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kerneltune-redis")

    def _within_deadline(self, command: Callable[[], _Answer]) -> _Answer:
        """``command()``'s answer, or :class:`TimeoutError` once it took :data:`TIMEOUT_SECONDS`.

        redis-py's timeouts bound each connect and each read, not a command:
        a server that trickles its answer a byte at a time within each read's
        timeout held one lookup for seconds. Past the deadline the client's
        connections are closed, which ends the read in flight on the
        command's thread too.
        """
        future = self._commands.submit(command)
        try:
            return future.result(timeout=TIMEOUT_SECONDS)
        except concurrent.futures.TimeoutError:
            future.cancel()
            self.client.connection_pool.disconnect()
            raise TimeoutError(f"no whole answer within {TIMEOUT_SECONDS:g} s") from None

    def key(self, namespace: str, digest: str) -> bytes:
        """The server's key for a record: schema version, namespace, then the file's digest."""
        return f"kerneltune:v{SCHEMA}:{namespace}:{digest}".encode("utf-8", "surrogatepass")

    def directory(self, namespace: str) -> Path | None:
        """The local folder, where the JSON files and the tuning logs go."""
        return self.local.directory(namespace)

    def load(self, namespace: str, digest: str) -> Any:
        """The local record, else the server's (then also written locally), else ``None``.

        :raises CacheReadError: for a server value that is not a valid
            record, or a local file that cannot be read when the server has
            no record either.
        """
        try:
            data = self.local.load(namespace, digest)
        except CacheReadError as exc:
            # The server may hold a good copy; if it does, that copy replaces the bad file.
            unreadable: CacheReadError | None = exc
            data = None
        else:
            unreadable = None
        if data is not None:
            return data
        data = self._fetch(namespace, digest)
        if data is None:
            if unreadable is not None:
                raise unreadable
            return None
        try:
            self.local.store(namespace, digest, data)
        except Exception as exc:
            warn_once(
                ("redis cache local copy", str(self.local.root)),
                f"kerneltune: cannot keep a copy of a pick from {self.url} under {self.local.root} "
                f"({type(exc).__name__}: {exc}); the server's copy is used",
            )
        return data

    def store(self, namespace: str, digest: str, data: Any) -> None:
        """Write the local file, then the server's key; a failing server is a warning.

        :raises OSError: as the local cache raises it, after the server's key
            was written; the session turns it into a warning.
        """
        try:
            self.local.store(namespace, digest, data)
        finally:
            self._send(namespace, digest, data)

    def _fetch(self, namespace: str, digest: str) -> Any:
        key = self.key(namespace, digest)
        if time.monotonic() < self._quiet_until:
            return None
        try:
            # GETRANGE bounds what a hostile value can make this process hold.
            payload = self._within_deadline(lambda: self.client.getrange(key, 0, MAX_READ))
        except Exception as exc:
            if str(exc).startswith("WRONGTYPE"):
                raise CacheReadError(f"redis key {key.decode(errors='replace')} holds no string") from exc
            self._failed("cannot read", exc)
            return None
        # GETRANGE answers an empty string for a missing key.
        if not payload:
            return None
        where = f"redis key {key.decode(errors='replace')} at {self.url}"
        if len(payload) > MAX_READ:
            raise CacheReadError(f"{where}: larger than {MAX_READ} bytes")
        try:
            data = json.loads(payload)
            TuningRecord.from_data(data).check_pick()
        except CacheReadError as exc:
            raise CacheReadError(f"{where}: {exc}") from exc
        except Exception as exc:
            raise CacheReadError(f"{where}: cannot decode: {type(exc).__name__}: {exc}") from exc
        return data

    def _send(self, namespace: str, digest: str, data: Any) -> None:
        if time.monotonic() < self._quiet_until:
            return
        payload = json.dumps(data, sort_keys=True, allow_nan=False, separators=(",", ":")).encode()
        try:
            key = self.key(namespace, digest)
            self._within_deadline(lambda: self.client.set(key, payload, ex=self.ttl or None))
        except Exception as exc:
            self._failed("cannot write to", exc)

    def _failed(self, what: str, exc: Exception) -> None:
        # Whatever went wrong (refused, timed out, an error reply), the local cache must carry on.
        self._quiet_until = time.monotonic() + RETRY_SECONDS
        warn_once(
            ("redis cache", self.url),
            f"kerneltune: {what} the redis cache at {self.url} ({type(exc).__name__}: {exc}); "
            f"using the local cache under {self.local.root} alone, and asking the server again "
            f"after {RETRY_SECONDS:.0f} s (no further warnings in this process)",
        )


@hookimpl
def kerneltune_register_caches(register):
    register(RedisCache)
