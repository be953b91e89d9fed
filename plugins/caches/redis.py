"""A Redis (or Valkey) server as a remote store: the ``redis`` cache.

The client only (docs/fleet.md): core layers it under the local JSON cache.
Each command gets :data:`TIMEOUT_SECONDS` in all, connecting included, with
no retries, so that an unreachable, slow or trickling server costs a tuning
at most that per command.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import urllib.parse
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from kerneltune.core import MAX_READ, CacheReadError, ConfigError, Settings, hookimpl, integer, text

#: Seconds one command may take in all: connecting if need be, sending, and the whole answer.
TIMEOUT_SECONDS = 0.2

_Answer = TypeVar("_Answer")


def redacted_url(url: str) -> str:
    """``url`` with its password, if it holds one, shown as ``***``: for messages and listings."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    # redis-py also takes the password as a query parameter (the only way for unix:// URLs).
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(name == "password" for name, _ in query):
        hidden = [(name, "***" if name == "password" else value) for name, value in query]
        parts = parts._replace(query=urllib.parse.urlencode(hidden, safe="*"))
    shown = parts.geturl()
    # geturl() writes unix:///path as unix:/path; keep the form the user wrote.
    return shown.replace("unix:/", "unix:///", 1) if url.startswith("unix:///") else shown


def redis_url(value: Any, where: str) -> str:
    """``value`` as a server URL: ``redis://``, ``rediss://`` (TLS) or ``unix://``; ``""`` for none."""
    url = text(value, where)
    if url and not url.startswith(("redis://", "rediss://", "unix://")):
        shown = redacted_url(url)
        raise ConfigError(f"{where}: expected a redis://, rediss:// or unix:// URL, got {shown!r}")
    return url


class RedisStore:
    """One Redis key per record; the value is the record as compact JSON."""

    name: ClassVar[str] = "redis"

    @classmethod
    def is_available(cls) -> bool:
        """Whether redis-py can be imported (the ``redis`` extra)."""
        return importlib.util.find_spec("redis") is not None

    def __init__(self, settings: Settings) -> None:
        """Make the client; nothing connects until the first command.

        :raises ConfigError: when ``redis_url`` is unset or not a URL redis-py reads.
        """
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        url = settings.get("redis_url")
        if not url:
            raise ConfigError(
                "cache 'redis' needs the server's URL: set redis_url in a config file or "
                "KERNELTUNE_REDIS_URL (e.g. redis://cache-host:6379/0)"
            )
        self.location = redacted_url(url)
        self.ttl = settings.get("redis_ttl") or None
        try:
            # No retries: a retry would multiply the time an outage costs each tuning.
            self.client = redis.Redis.from_url(
                url,
                socket_connect_timeout=TIMEOUT_SECONDS,
                socket_timeout=TIMEOUT_SECONDS,
                retry=Retry(NoBackoff(), 0),
            )
        except ValueError as exc:
            where = settings.source("redis_url") or "redis_url"
            raise ConfigError(f"{where}: redis-py cannot use {self.location}: {exc}") from None
        # One thread runs the commands, so that the caller can stop waiting at the deadline.
        self._commands = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kerneltune-redis")

    def get(self, key: str) -> bytes | None:
        """The key's value (at most ``MAX_READ`` bytes), ``None`` when missing.

        :raises CacheReadError: for a key that holds another type than a string, or
            a value larger than a record may be, refused before it is read.
        """
        try:
            # Its length first, as the file cache refuses a file by its size: a hostile value
            # is never sent. GETRANGE still bounds one that grew between the two commands.
            size = self._within_deadline(lambda: self.client.strlen(key))
            if not isinstance(size, int):
                raise CacheReadError(f"STRLEN answered {size!r}, not a length")
            if size > MAX_READ:
                raise CacheReadError(f"holds {size} bytes, more than a record's {MAX_READ}")
            payload = self._within_deadline(lambda: self.client.getrange(key, 0, MAX_READ))
        except CacheReadError:
            raise
        except Exception as exc:
            if str(exc).startswith("WRONGTYPE"):
                raise CacheReadError("holds no string") from exc
            raise
        # The client decodes no responses (no decode_responses), so redis-py answers bytes.
        assert isinstance(payload, bytes)
        # GETRANGE answers an empty string for a missing key.
        return payload or None

    def put(self, key: str, value: bytes, ttl: int | None) -> None:
        """Set the key, expiring after ``ttl`` seconds unless ``None``."""
        self._within_deadline(lambda: self.client.set(key, value, ex=ttl))

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


@hookimpl
def kerneltune_add_settings(add):
    add(
        "redis_url",
        default="",
        parse=redis_url,
        help="with cache = 'redis': the server, redis://[user:password@]host:port/db, rediss:// or unix://",
        env=("KERNELTUNE_REDIS_URL",),
        display=redacted_url,
    )
    add(
        "redis_ttl",
        default=0,
        parse=integer(0),
        help="with cache = 'redis': seconds a pick lives on the server; 0 keeps it until deleted",
        env=("KERNELTUNE_REDIS_TTL",),
    )


@hookimpl
def kerneltune_register_remote_stores(register):
    register(RedisStore)
