"""The ``kerneltune`` command: the plugins in force, and the picks stored on disk.

``kerneltune plugins`` shows what a tuning here would run with. ``kerneltune
cache ...`` lists, shows, clears, exports and imports stored records, and
``kerneltune report`` compares every candidate of each stored key. Records
are read through the cache plugins that can enumerate their files (the
optional ``entries`` method of the cache contract), so a third-party file
cache works here too.

Exit status: 0 on success, 1 on failure (one line on stderr), 2 on bad usage.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import click
import pluggy
from kerneltune import __version__, views
from kerneltune.archive import read_archive, write_archive
from kerneltune.core import CacheReadError, KernelTuneError, Settings, TuningRecord, format_ms, load_settings
from kerneltune.core.plugin_system.contracts import ListingCache, provides
from kerneltune.core.plugin_system.registry import (
    Registries,
    Registry,
    collect_registries,
    collect_settings,
    make_plugin_manager,
)
from kerneltune.core.plugin_system.session import hardware_facts, make_cache, resolve_devices
from kerneltune.core.plugin_system.settings import DeclaredSettings, resolve_declared, setting_sources
from kerneltune.core.private_files import remove_private
from kerneltune.core.values.records import iso_date


class _Group(click.Group):
    """Turns kerneltune's and the system's errors into click's one-line failure (exit 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():
            warnings.showwarning = _note
            try:
                return super().invoke(ctx)
            except BrokenPipeError:
                # A reader that stopped early (`| head`): click's own handling leaves quietly.
                raise
            except (KernelTuneError, OSError) as exc:
                raise click.ClickException(" ".join(str(exc).split()) or type(exc).__name__) from exc


def _note(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    """Show a warning as one line on stderr, as the command's own notes are, without Python's source line."""
    text = " ".join(str(message).split())
    click.echo(text if text.startswith("kerneltune:") else f"{category.__name__}: {text}", err=True)


@attrs.frozen
class _Plugins:
    """The plugins and registries for the settings here, without a Session (which needs a working cache)."""

    settings: Settings
    manager: pluggy.PluginManager
    registries: Registries
    declared: DeclaredSettings

    @classmethod
    def load(cls) -> _Plugins:
        settings = load_settings()
        manager = make_plugin_manager(settings)
        declared = collect_settings(manager)
        return cls(
            settings=resolve_declared(settings, declared),
            manager=manager,
            registries=collect_registries(manager),
            declared=declared,
        )

    def listed(self) -> tuple[Registry[Any], ...]:
        """The registries ``kerneltune plugins`` lists, in its order."""
        r = self.registries
        return (r.timers, r.caches, r.reducers, r.devices, r.remote_stores, r.search_strategies)

    def hardware(self) -> dict[str, Any]:
        """The hardware facts a tuning here would key its picks by."""
        return hardware_facts(self.manager, resolve_devices(self.registries, self.settings)[0])

    def file_caches(self, root: Path) -> list[Any]:
        """One instance per cache that can enumerate its records."""
        classes = self.registries.caches.classes
        return [classes[name](root=root) for name in sorted(classes) if provides(classes[name], ListingCache)]


@attrs.frozen
class _Stored:
    """A record file and what reading it gave: a record, or the reason it could not."""

    namespace: str
    digest: str
    path: Path
    data: Any = attrs.field(repr=False)
    record: TuningRecord | None
    problem: str | None
    #: the cache plugin instance that holds the file.
    cache: Any = attrs.field(default=None, repr=False)


def _stored(caches: Sequence[Any], function: str | None) -> Iterator[_Stored]:
    for cache in caches:
        for namespace, digest, path in cache.entries(function):
            try:
                data = cache.load(namespace, digest)
                record = TuningRecord.from_data(data)
            except CacheReadError as exc:
                yield _Stored(namespace, digest, path, None, None, str(exc), cache)
                continue
            if function is None or record.function == function:
                yield _Stored(namespace, digest, path, data, record, None, cache)


def _readable(caches: Sequence[Any], function: str | None) -> list[_Stored]:
    """The records that read back, with a note on stderr for each file that did not."""
    kept = []
    for stored in _stored(caches, function):
        if stored.record is None:
            click.echo(f"kerneltune: skipping {stored.path}: {stored.problem}", err=True)
        else:
            kept.append(stored)
    return kept


def _dir_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--dir",
        "directory",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="The cache directory (default: the configured cache_dir).",
    )(command)


def _cache_dir(directory: Path | None, plugins: _Plugins) -> Path:
    return plugins.settings.cache_root if directory is None else directory.expanduser()


def _existing_cache_dir(directory: Path | None, plugins: _Plugins) -> Path:
    """The cache directory to read; one given with ``--dir`` that does not exist is an error, not empty."""
    root = _cache_dir(directory, plugins)
    if directory is not None and not root.is_dir():
        raise click.ClickException(f"--dir {directory}: no such directory")
    return root


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kerneltune")
def main() -> None:
    """Autotuning for accelerator kernels: inspect the plugins in force and the picks stored on disk."""


# -- plugins -------------------------------------------------------------------------------


def _plugin_origin(plugins: _Plugins, name: str, plugin: object) -> str:
    distributions = {id(p): dist for p, dist in plugins.manager.list_plugin_distinfo()}
    dist = distributions.get(id(plugin))
    if dist is not None:
        return f"entry point, {dist.project_name} {dist.version}"
    return f"built-in, kerneltune {__version__}" if name.startswith("kerneltune.plugins.") else "added"


@main.command()
def plugins() -> None:
    """List the plugins loaded; the timers, caches, reducers, devices and search strategies; the settings."""
    loaded = _Plugins.load()
    click.echo("plugins loaded:")
    named = [(name, plugin) for name, plugin in loaded.manager.list_name_plugin() if name != "hookspecs"]
    for line in views.table(["  name", "from"], [[f"  {n}", _plugin_origin(loaded, n, p)] for n, p in named]):
        click.echo(line)
    if loaded.settings.block:
        click.echo(f"  blocked: {', '.join(loaded.settings.block)}")
    for registry in loaded.listed():
        automatic = None
        if registry is loaded.registries.remote_stores:
            click.echo('\nremote stores (cache = "<name>" layers one under the json cache; never auto):')
        else:
            with contextlib.suppress(KernelTuneError):
                automatic = registry.select("auto").name
            click.echo(f"\n{_plural(registry.family)} (auto takes: {automatic or 'none available'}):")
        rows = []
        for name in registry.names():
            available = "available" if registry.classes[name].is_available() else "not available here"
            rows.append(
                [f"  {name}", available + (", auto" if name == automatic else ""), registry.owners[name]]
            )
        for line in views.table([f"  {registry.family}", "here", "plugin"], rows):
            click.echo(line)
    hardware = loaded.hardware()
    click.echo("\nhardware: " + ", ".join(f"{k} {v}" for k, v in sorted(hardware.items())))
    click.echo("\nsettings:")
    rows = [
        [f"  {name}", json.dumps(_plain(getattr(loaded.settings, name))), where]
        for name, where in setting_sources(loaded.settings).items()
    ]
    for line in views.table(["  setting", "value", "from"], rows):
        click.echo(line)
    _plugin_settings(loaded)


def _plugin_settings(loaded: _Plugins) -> None:
    """The settings the plugins declare: value, where it comes from, the plugin and what it does."""
    if not loaded.declared.specs:
        return
    click.echo("\nsettings of plugins:")
    rows = []
    for name, spec in sorted(loaded.declared.specs.items()):
        value = loaded.settings.get(name)
        shown = spec.display(value) if spec.display is not None else _plain(value)
        variables = f" ({', '.join(spec.env)})" if spec.env else ""
        rows.append(
            [
                f"  {name}",
                json.dumps(shown),
                loaded.settings.source(name) or "default",
                loaded.declared.owners[name],
                spec.help + variables,
            ]
        )
    for line in views.table(["  setting", "value", "from", "plugin", "about"], rows):
        click.echo(line)


def _plural(family: str) -> str:
    return f"{family[:-1]}ies" if family.endswith("y") else f"{family}s"


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


# -- cache -----------------------------------------------------------------------------------


@main.group()
def cache() -> None:
    """List, show, clear, export and import stored picks."""


@cache.command("list")
@click.argument("function", required=False)
@_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def list_records(function: str | None, directory: Path | None, as_json: bool) -> None:
    """One row per stored record, optionally only FUNCTION's."""
    loaded = _Plugins.load()
    root = _existing_cache_dir(directory, loaded)
    found = _readable(loaded.file_caches(root), function)
    if as_json:
        click.echo(json.dumps([_summary(stored) for stored in found], indent=2))
        return
    if not found:
        click.echo(f"no records in {root}" + (f" for {function}" if function else ""))
        return
    rows = []
    for stored in found:
        record = stored.record
        assert record is not None
        rows.append(
            [
                record.function,
                views.key_text(record.key),
                views.clip(record.labels[record.best_index], 40),
                format_ms(record.times[record.best_index]),
                record.confidence or "-",
                f"{views.measured(record)}/{len(record.times)}",
                iso_date(record.created),
                _relative(stored.path, root),
            ]
        )
    click.echo(f"records in {root}:")
    headers = ["function", "key", "pick", "time", "confidence", "measured", "date", "file"]
    for line in views.table(headers, rows):
        click.echo(line)


def _relative(path: Path, root: Path) -> str:
    """``path`` below ``root``, as the list prints it (the whole key fits beside a short file name)."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _summary(stored: _Stored) -> dict[str, Any]:
    record = stored.record
    assert record is not None
    best = record.times[record.best_index]
    return {
        "function": record.function,
        "key": record.key,
        "key_text": views.key_text(record.key),
        "digest": stored.digest,
        "pick": {"index": record.best_index, "label": record.labels[record.best_index]},
        "time_ms": best if math.isfinite(best) else None,
        "measured": views.measured(record),
        "candidates": len(record.times),
        "created_at": iso_date(record.created),
        "measured_with": record.method.to_data(),
        "warm_start": record.warm_start,
        "carried": list(record.carried),
        "confidence": record.confidence,
        "rivals": list(record.rivals),
        "rechecks": record.rechecks,
        "recheck": record.recheck,
        "file": str(stored.path),
    }


def _find(loaded: _Plugins, reference: str, directory: Path | None) -> list[_Stored]:
    """The records a path, a digest prefix or a function name names; at least one, or a failure.

    A path or a digest prefix names one record; a function name every record of that function.
    """
    given = Path(reference).expanduser()
    if given.is_file():
        path = given.resolve()
        caches = loaded.file_caches(path.parent.parent)
        matches = [s for s in _stored(caches, None) if s.path.resolve() == path]
        if not matches:
            raise click.ClickException(
                f"{reference}: not a record file of any cache ({_cache_names(loaded)})"
            )
    else:
        root = _existing_cache_dir(directory, loaded)
        matches = [s for s in _stored(loaded.file_caches(root), None) if s.digest.startswith(reference)]
        if not matches:
            named = _readable(loaded.file_caches(root), reference)
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
    if matches[0].record is None:
        raise click.ClickException(f"{matches[0].path}: {matches[0].problem}")
    return matches[:1]


def _cache_names(loaded: _Plugins) -> str:
    classes = loaded.registries.caches.classes
    return ", ".join(name for name in sorted(classes) if provides(classes[name], ListingCache))


@cache.command()
@click.argument("record_ref", metavar="RECORD")
@_dir_option
def show(record_ref: str, directory: Path | None) -> None:
    """Every candidate of a record, fastest first, with errors, and Python that hard-codes the pick.

    RECORD is a record file's path, the start of its digest (the file name
    without its suffix), or a function's name for every record of it, looked
    up in the cache directory.
    """
    for number, stored in enumerate(_find(_Plugins.load(), record_ref, directory)):
        if number:
            click.echo("")
        _show_record(stored)


def _show_record(stored: _Stored) -> None:
    record = stored.record
    assert record is not None
    header = [
        ("file", str(stored.path)),
        ("function", record.function),
        ("key", views.key_text(record.key)),
        ("digest", stored.digest),
        ("date", iso_date(record.created)),
        ("measured with", views.method_text(record)),
        ("pick", f"[{record.best_index}] {record.labels[record.best_index]}"),
        ("confidence", views.confidence_text(record)),
        ("versions", ", ".join(f"{k} {v}" for k, v in sorted(record.versions.items()))),
        ("hardware", ", ".join(f"{k} {v}" for k, v in sorted(record.hardware.items()))),
    ]
    for name, value in header:
        click.echo(f"{name + ':':<15}{value}")
    for line in views.history_lines(record):
        click.echo(f"{'history:':<15}{line}")
    for line in views.rank_lines(record):
        click.echo(f"{'ranks:':<15}{line}")
    click.echo("")
    for line in views.candidate_lines(record):
        click.echo(line)
    click.echo("\nto hard-code the pick:")
    for line in views.snippet_lines(record):
        click.echo(f"  {line}")


def _interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


@cache.command()
@click.argument("function", required=False)
@_dir_option
@click.option("--yes", "-y", is_flag=True, help="Remove without asking.")
def clear(function: str | None, directory: Path | None, yes: bool) -> None:
    """Remove stored records: all of them, or FUNCTION's.

    Only files that read back as records are removed, each through
    :func:`~kerneltune.core.private_files.remove_private`: nothing reached
    through a link, nothing that is not a regular file of this user's.
    """
    loaded = _Plugins.load()
    root = _existing_cache_dir(directory, loaded)
    doomed = []
    for stored in _stored(loaded.file_caches(root), function):
        if stored.record is None:
            click.echo(f"kerneltune: not removing {stored.path}: {stored.problem}", err=True)
        else:
            doomed.append(stored)
    what = f"{len(doomed)} record(s)" + (f" of {function}" if function else "") + f" in {root}"
    if not doomed:
        if function is not None:
            raise click.ClickException(f"no records of {function} in {root}; nothing removed")
        click.echo(f"nothing to remove: no records in {root}")
        return
    if not yes:
        if not _interactive():
            raise click.ClickException(f"not removing {what} without --yes: there is no terminal to ask")
        click.confirm(f"Remove {what}?", abort=True)
    removed = 0
    folders = set()
    for stored in doomed:
        # The file caches keep a lock file beside each record.
        for path in (stored.path, stored.path.with_name(stored.path.name + ".lock")):
            try:
                remove_private(root, path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                click.echo(f"kerneltune: not removing {path}: {exc.strerror or exc}", err=True)
            else:
                removed += path == stored.path
                folders.add(path.parent)
    for folder in folders:
        try:
            # rmdir never follows a link, and refuses a folder that still holds anything.
            folder.rmdir()
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                click.echo(f"kerneltune: not removing {folder}: {exc.strerror or exc}", err=True)
    if removed < len(doomed):
        raise click.ClickException(f"removed {removed} of {what}; the others are named above")
    click.echo(f"removed {what}")


@cache.command()
@click.argument("function", required=False)
@_dir_option
def verify(function: str | None, directory: Path | None) -> None:
    """Ask for the stored picks (all, or FUNCTION's) to be re-checked by the next process that loads them.

    The command runs nothing itself (it has no arguments to run a tuned
    function with): it marks each record, and the next process that loads
    one times its pick head to head with its closest rivals and stores the
    verdict, confident or uncertain, in place of the mark.
    """
    loaded = _Plugins.load()
    root = _existing_cache_dir(directory, loaded)
    found = _readable(loaded.file_caches(root), function)
    if not found:
        of = f" of {function}" if function else ""
        raise click.ClickException(f"no records in {root}{of} to verify")
    marked = 0
    for stored in found:
        stored.cache.store(stored.namespace, stored.digest, {**stored.data, "recheck": True})
        marked += 1
    click.echo(
        f"marked {marked} record(s) in {root} for a re-check by the next process that loads each "
        "(KERNELTUNE_RECHECK=0 or KERNELTUNE_TUNE=never there serve them unchecked)"
    )


@cache.command("export")
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("function", required=False)
@_dir_option
@click.option("--force", "-f", is_flag=True, help="Replace ARCHIVE if it exists.")
def export_records(archive: Path, function: str | None, directory: Path | None, force: bool) -> None:
    """Write the stored records (all, or FUNCTION's) to ARCHIVE, one JSON file, for `cache import`."""
    loaded = _Plugins.load()
    root = _existing_cache_dir(directory, loaded)
    if archive.exists() and not force:
        raise click.ClickException(f"{archive} exists; pass --force to replace it")
    found = _readable(loaded.file_caches(root), function)
    if not found:
        of = f" of {function}" if function else ""
        raise click.ClickException(f"no records in {root}{of} to export")
    count = write_archive(archive, [(stored.digest, stored.data) for stored in found])
    click.echo(f"exported {count} record(s) from {root} to {archive}")


@cache.command("import")
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@_dir_option
def import_records(archive: Path, directory: Path | None) -> None:
    """Store the records of ARCHIVE that were made on hardware like this machine's.

    ARCHIVE is a file, a pipe (``<(ssh host cat picks.json)``), or ``-`` for
    standard input.

    Every record is checked before any is written; an archive with one
    damaged or invalid record is refused whole. Records of other hardware are
    skipped with a message. A record that a lookup would reject (its pick is
    not what SELECT makes of its own times) is skipped too, named on stderr,
    and the command then exits 1: it never replaces a stored record. The
    others are written with the configured cache.
    """
    loaded = _Plugins.load()
    root = _cache_dir(directory, loaded)
    entries = read_archive(archive)
    caches = loaded.registries.caches
    if loaded.settings.cache in loaded.registries.remote_stores.classes:
        raise click.ClickException(
            f"cache {loaded.settings.cache!r} keeps no files; set cache to one of: {_cache_names(loaded)}"
        )
    target = make_cache(caches.select(loaded.settings.cache), root, loaded.settings, caches)
    if not provides(target, ListingCache):
        raise click.ClickException(
            f"cache {target.name!r} keeps no files; set cache to one of: {_cache_names(loaded)}"
        )
    for entry in entries:
        folder = target.directory(entry.record.function)
        if folder is None:
            raise click.ClickException(
                f"cache {target.name!r} does not use its folder for {entry.record.function!r} under {root} "
                "(a link, or a folder or root that another user could change; see above); nothing imported"
            )
        if folder.resolve().parent != root.resolve():
            raise click.ClickException(
                f"{archive}: function name {entry.record.function!r} would be stored outside {root}; "
                "nothing imported"
            )
    here = _plain_data(loaded.hardware())
    imported = rejected = 0
    for entry in entries:
        record = entry.record
        try:
            # What every lookup checks (stored.read_record): a record failing it would only be retuned.
            record.check_pick()
        except CacheReadError as exc:
            click.echo(
                f"kerneltune: not importing {record.function} {views.key_text(record.key)}: "
                f"a lookup would reject it: {exc}",
                err=True,
            )
            rejected += 1
            continue
        if _plain_data(record.hardware) != here:
            differences = ", ".join(
                f"{k} {record.hardware.get(k)!r} (here {here.get(k)!r})"
                for k in sorted(set(record.hardware) | set(here))
                if record.hardware.get(k) != here.get(k)
            )
            click.echo(
                f"skipped {record.function} {views.key_text(record.key)}: other hardware: {differences}"
            )
            continue
        target.store(record.function, entry.digest, entry.data)
        imported += 1
    click.echo(f"imported {imported} of {len(entries)} record(s) into {root}")
    if rejected:
        raise click.ClickException(
            f"{archive}: {rejected} record(s) not imported: a lookup would reject them"
        )


def _plain_data(value: Any) -> Any:
    # Live facts may hold tuples where a file read back holds lists.
    return json.loads(json.dumps(value))


# -- report ----------------------------------------------------------------------------------


@main.command()
@click.argument("function", required=False)
@_dir_option
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also draw one bar chart per key into this PNG file (needs matplotlib).",
)
def report(function: str | None, directory: Path | None, plot: Path | None) -> None:
    """Per stored key, every candidate sorted by time with the spread of its samples.

    Where a record kept each rank's times, also the pick's time on every rank
    and each candidate's slowest rank.
    """
    loaded = _Plugins.load()
    root = _existing_cache_dir(directory, loaded)
    found = _readable(loaded.file_caches(root), function)
    if not found:
        raise click.ClickException(f"no records in {root}" + (f" for {function}" if function else ""))
    records = [stored.record for stored in found if stored.record is not None]
    for number, record in enumerate(records):
        if number:
            click.echo("")
        click.echo(f"{record.function} {views.key_text(record.key)}")
        click.echo(f"  made {iso_date(record.created)}, measured with: {views.method_text(record)}")
        pick = f"[{record.best_index}] {record.labels[record.best_index]}"
        click.echo(f"  pick: {pick}, {views.confidence_text(record)}")
        for line in [*views.history_lines(record), *views.rank_lines(record)]:
            click.echo(f"  {line}")
        for line in views.candidate_lines(record):
            click.echo(line)
    if plot is not None:
        views.plot(records, plot)
        click.echo(f"\nwrote {plot}")
