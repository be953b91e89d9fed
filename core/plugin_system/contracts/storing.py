"""Storage contracts: the cache a pick is kept in, and the remote store layered under it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from kerneltune.core.plugin_system.settings import Settings
from kerneltune.core.plugin_system.contracts.base import Registrable


class Cache(Registrable, Protocol):
    """Where picks live; registered by ``kerneltune_register_caches``.

    Built-in priorities: json 10, msgpack 5, memory 0. Records are plain
    data: dicts, lists, str, int, float, bool, None.
    """

    def __init__(self, root: Path) -> None:
        """:param root: the folder all tuned functions share; it may not exist yet."""
        ...

    def load(self, namespace: str, digest: str) -> dict[str, Any] | None:
        """The record stored for ``digest`` in ``namespace`` (one namespace per tuned function).

        :returns: the plain-data record, or ``None`` when there is none.
        :raises kerneltune.core.CacheReadError: when a stored record cannot be
            read or decoded; the engine turns that into a logged miss.
        """
        ...

    def store(self, namespace: str, digest: str, data: dict[str, Any]) -> None:
        """Persist ``data`` so that a reader never sees a partial record."""
        ...

    def directory(self, namespace: str) -> Path | None:
        """Where the namespace's files live, for log files; ``None`` for a cache that keeps no files."""
        ...


@runtime_checkable
class RemoteStore(Registrable, Protocol):
    """A server that several nodes share picks through; registered by ``kerneltune_register_remote_stores``.

    A thin client: bytes in and out by key. The layering is core's
    (:class:`kerneltune.core.plugin_system.layered_cache.LayeredCache`): it
    names the keys, encodes and checks the records, keeps a local copy,
    and turns a store's failure into a warning and a pause. Selected as
    ``cache = "<name>"``; ``is_available()`` says whether its client
    library can be imported. Construction connects to nothing.
    """

    #: Where the store is, for messages: a URL with any password hidden.
    location: str
    #: Seconds a stored value lives; ``None``: until deleted.
    ttl: int | None

    def __init__(self, settings: Settings) -> None:
        """:param settings: the session's settings, with the store's own (:meth:`Settings.get`).

        :raises kerneltune.core.ConfigError: for a missing or bad setting of its own.
        """
        ...

    def get(self, key: str) -> bytes | None:
        """The value stored under ``key``, ``None`` when there is none.

        At most :data:`kerneltune.core.private_files.MAX_READ` + 1 bytes need
        be read: a longer value is refused anyway.

        :raises kerneltune.core.CacheReadError: for a value that is not bytes
            (another type under the key): a logged miss.
        :raises Exception: anything else for an outage (unreachable, too
            slow, refused): a warning, and the store is left alone a while.
            Give up within a fraction of a second rather than retry.
        """
        ...

    def put(self, key: str, value: bytes, ttl: int | None) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (``None``: until deleted).

        :raises Exception: for an outage, as :meth:`get`.
        """
        ...


@runtime_checkable
class ListingCache(Cache, Protocol):
    """A cache whose records can be listed (optional part of :class:`Cache`).

    The ``kerneltune`` command lists, shows, exports, imports and clears only
    caches that have it.
    """

    def entries(self, namespace: str | None = None) -> Iterable[tuple[str, str, Path]]:
        """One ``(namespace, digest, path)`` per stored record (in ``namespace`` only, when given).

        ``load(namespace, digest)`` reads the record and ``path`` is the one
        file that holds it; the command removes a record by deleting ``path``.
        """
        ...

    def update(self, namespace: str, digest: str, change: Callable[[Any], Any]) -> bool:
        """Read, change and write back one record, with no store of another process in between.

        ``change`` gets the stored data and returns the data to write, or
        ``None`` to write nothing. Returns whether it wrote; an absent or
        unreadable record is left alone. ``kerneltune cache verify`` marks
        records through it.
        """
        ...


@runtime_checkable
class AmendingCache(Cache, Protocol):
    """A cache that changes one entry under its lock, made where absent (optional part of :class:`Cache`).

    The engine records pending marks through it (docs/guide.md, "Serving
    unseen shapes"), so that processes marking one key at once lose no mark;
    a cache without it is read and written in two steps.
    """

    def amend(self, namespace: str, digest: str, change: Callable[[Any], Any]) -> bool:
        """Read, change and write one entry, with no store of another process in between.

        ``change`` gets the stored data (``None`` where there is none, or it
        cannot be read) and returns the data to write, or ``None`` to write
        nothing. Returns whether it wrote.
        """
        ...


@runtime_checkable
class ConfiguredCache(Cache, Protocol):
    """A cache with settings of its own (optional part of :class:`Cache`).

    It declares them through ``kerneltune_add_settings``, names them in
    :attr:`reads_settings`, and is constructed with the session's settings
    too, reading its own with :meth:`Settings.get`. It raises
    ``kerneltune.core.ConfigError`` for a missing or bad one, and connects
    to nothing yet.
    """

    #: The declared settings it reads; the engine refuses it where one of them is not declared.
    reads_settings: ClassVar[tuple[str, ...]]

    def __init__(self, root: Path, settings: Settings) -> None:
        """:param root: as for :class:`Cache`. :param settings: the session's settings."""
        ...


@runtime_checkable
class LayeringCache(Cache, Protocol):
    """A cache over another registered cache (optional part of :class:`Cache`).

    It is constructed with an instance of the cache registered as
    :attr:`layers_over`, at the same ``root``, so that it can keep its
    records there too without importing that plugin.
    """

    #: The registered name of the cache it is built over.
    layers_over: ClassVar[str]

    def __init__(self, root: Path, inner: Cache) -> None:
        """:param root: as for :class:`Cache`. :param inner: the cache named by :attr:`layers_over`."""
        ...
