"""What the ``kerneltune`` commands read: the plugins for the settings here, and the stored records.

Records are read through the cache plugins that can enumerate their files
(:class:`~kerneltune.core.driving.ListingCache`), so a third-party file
cache works here too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import attrs
import click
import pluggy
from kerneltune.core import CacheReadError, Settings, load_settings, provides
from kerneltune.core.driving import (
    KEY_INDEX_ENTRY,
    PORTFOLIO_ENTRY,
    DeclaredSettings,
    FailedConfigs,
    ListingCache,
    PendingMark,
    Registries,
    Registry,
    TuningRecord,
    hardware_facts,
    is_failed_configs,
    is_pending,
    load_plugins,
    make_cache,
    resolve_devices,
)


@attrs.frozen
class _Plugins:
    """The plugins and registries for the settings here, without a Session (which needs a working cache)."""

    settings: Settings
    manager: pluggy.PluginManager
    registries: Registries
    declared: DeclaredSettings

    @classmethod
    def load(cls) -> _Plugins:
        """Load the plugins as a Session does (:func:`kerneltune.core.driving.load_plugins`)."""
        loaded = load_plugins(load_settings())
        return cls(
            settings=loaded.settings,
            manager=loaded.manager,
            registries=loaded.registries,
            declared=loaded.declared,
        )

    def listed(self) -> tuple[Registry[Any], ...]:
        """The registries ``kerneltune plugins`` lists, in its order."""
        r = self.registries
        return (r.timers, r.caches, r.reducers, r.devices, r.remote_stores, r.search_strategies)

    def hardware(self) -> dict[str, Any]:
        """The hardware facts a tuning here would key its picks by."""
        return hardware_facts(self.manager, resolve_devices(self.registries, self.settings)[0])

    def file_cache_names(self) -> list[str]:
        """The caches that can enumerate their records (asked of the class: its instances list too)."""
        classes = self.registries.caches.classes
        return [name for name in sorted(classes) if provides(classes[name], ListingCache)]

    def writing_cache(self, root: Path) -> ListingCache:
        """The configured cache at ``root``, which tunings here read; a failure unless it keeps files."""
        caches = self.registries.caches
        cache = self.settings.get("cache")
        listing = ", ".join(self.file_cache_names())
        if cache in self.registries.remote_stores.classes:
            raise click.ClickException(f"cache {cache!r} keeps no files; set cache to one of: {listing}")
        target = make_cache(caches.select(cache), root, self.settings, caches)
        if not provides(target, ListingCache):
            raise click.ClickException(
                f"cache {target.name!r} keeps no files; set cache to one of: {listing}"
            )
        return target

    def file_caches(self, root: Path) -> list[ListingCache]:
        """One instance per cache that can enumerate its records."""
        caches = self.registries.caches
        return [
            cast(ListingCache, make_cache(caches.classes[name], root, self.settings, caches))
            for name in self.file_cache_names()
        ]


@attrs.frozen
class Stored:
    """A record file and what reading it gave: a record, or the reason it could not."""

    namespace: str
    digest: str
    path: Path
    data: Any = attrs.field(repr=False)
    record: TuningRecord | None
    problem: str | None
    #: the cache plugin instance that holds the file.
    cache: ListingCache = attrs.field(repr=False)
    #: the pending mark the file holds instead of a record: a key served unmeasured, not yet tuned.
    pending: PendingMark | None = None
    #: a function's remembered failed configs, where the file holds those instead of a record.
    failed: FailedConfigs | None = None


def stored_records(caches: Sequence[ListingCache], function: str | None) -> Iterator[Stored]:
    """Every record file of ``caches`` (only ``function``'s, when given), read or not.

    A function's portfolio and key index, stored beside its records, are no records and are not
    listed. A pending mark comes with ``pending`` set, a file of remembered failed configs with
    ``failed``; neither has a ``record``.
    """
    for cache in caches:
        for namespace, digest, path in cache.entries(function):
            if digest in (PORTFOLIO_ENTRY, KEY_INDEX_ENTRY):
                continue
            failed = None
            try:
                data = cache.load(namespace, digest)
                if is_pending(data):
                    mark = PendingMark.from_data(data)
                    if function is None or mark.function == function:
                        yield Stored(namespace, digest, path, data, None, None, cache, pending=mark)
                    continue
                if is_failed_configs(data):
                    failed = FailedConfigs.from_data(data)
                record = None if failed is not None else TuningRecord.from_data(data)
            except CacheReadError as exc:
                yield Stored(namespace, digest, path, None, None, str(exc), cache)
                continue
            named = failed.function if failed is not None else record.function if record is not None else None
            if function is None or named == function:
                yield Stored(namespace, digest, path, data, record, None, cache, failed=failed)


def side_files(caches: Sequence[ListingCache], function: str | None) -> list[Path]:
    """The files stored beside the records: portfolios and key indexes (only ``function``'s, when given)."""
    return [
        path
        for cache in caches
        for _, digest, path in cache.entries(function)
        if digest in (PORTFOLIO_ENTRY, KEY_INDEX_ENTRY) and not path.is_symlink()
    ]


def readable(caches: Sequence[ListingCache], function: str | None) -> list[Stored]:
    """The records that read back, with a note on stderr for each file that did not; no pending mark."""
    kept = []
    for stored in stored_records(caches, function):
        if stored.pending is not None or stored.failed is not None:
            continue  # no record: `cache show` shows a pending mark and remembered failures apart
        if stored.record is None:
            click.echo(f"kerneltune: skipping {stored.path}: {stored.problem}", err=True)
        else:
            kept.append(stored)
    return kept


def find_records(loaded: _Plugins, reference: str, directory: Path | None) -> list[Stored]:
    """The records a path, a digest prefix or a function name names; at least one, or a failure.

    A path or a digest prefix names one record; a function name every record of that function.
    """
    given = Path(reference).expanduser()
    if given.is_file():
        path = given.resolve()
        caches = loaded.file_caches(path.parent.parent)
        matches = [s for s in stored_records(caches, None) if s.path.resolve() == path]
        if not matches:
            raise click.ClickException(
                f"{reference}: not a record file of any cache ({', '.join(loaded.file_cache_names())})"
            )
    else:
        root = existing_cache_dir(directory, loaded)
        matches = [
            s
            for s in stored_records(loaded.file_caches(root), None)
            if s.digest.startswith(reference) and s.failed is None
        ]
        if not matches:
            named = readable(loaded.file_caches(root), reference)
            if named:
                return named
            raise click.ClickException(
                f"no record file, digest starting with {reference!r} or function named so in {root}"
            )
        if len(matches) > 1:
            listed = ", ".join(s.digest for s in matches[:5])
            raise click.ClickException(
                f"{reference!r} matches {len(matches)} records ({listed}); give more digits"
            )
    if matches[0].record is None and matches[0].pending is None:
        raise click.ClickException(f"{matches[0].path}: {matches[0].problem}")
    return matches[:1]


def dir_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--dir`` option of every command that reads or writes records."""
    return click.option(
        "--dir",
        "directory",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="The cache directory (default: the configured cache_dir).",
    )(command)


def cache_dir(directory: Path | None, plugins: _Plugins) -> Path:
    """The cache directory to work on: ``--dir``, else the configured one."""
    return plugins.settings.cache_root if directory is None else directory.expanduser()


def existing_cache_dir(directory: Path | None, plugins: _Plugins) -> Path:
    """The cache directory to read.

    One given with ``--dir`` that does not exist is an error, not empty; the
    configured ``cache_dir`` may be missing (nothing tuned yet: no records),
    but one that is not a directory or cannot be read is an error.
    """
    root = cache_dir(directory, plugins)
    if directory is not None and not root.exists():
        raise click.ClickException(f"--dir {directory}: no such directory")
    where = f"--dir {directory}" if directory is not None else f"cache_dir {root}"
    blocking = next((p for p in (root, *root.parents) if p.exists() or p.is_symlink()), None)
    if blocking is not None and not blocking.is_dir():
        named = "" if blocking == root else f" ({blocking} is a file)"
        raise click.ClickException(f"{where}: not a directory{named}")
    if root.is_dir():
        try:
            with os.scandir(root):
                pass
        except OSError as exc:
            raise click.ClickException(f"{where}: cannot read it ({exc.strerror or exc})") from exc
    return root
