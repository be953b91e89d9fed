"""``kerneltune cache``: list, show, clear, prune, verify, export and import the stored records."""

from __future__ import annotations

import errno
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from kerneltune.cli import live, pending, views
from kerneltune.cli.archive import read_archive, write_archive
from kerneltune.cli.loading import (
    Stored,
    _Plugins,
    cache_dir,
    dir_option,
    existing_cache_dir,
    find_records,
    readable,
    side_files,
    stored_records,
)
from kerneltune.core import CacheReadError, format_ms
from kerneltune.core.driving import iso_date, remove_private


@click.group()
def cache() -> None:
    """List, show, clear, prune, verify, export and import stored picks."""


@cache.command("list")
@click.argument("function", required=False)
@dir_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def list_records(function: str | None, directory: Path | None, as_json: bool) -> None:
    """One row per stored record, optionally only FUNCTION's."""
    loaded = _Plugins.load()
    root = existing_cache_dir(directory, loaded)
    found = live.mark(readable(loaded.file_caches(root), function))
    marks = pending.pending_marks(loaded.file_caches(root), function)
    if as_json:
        entries = [*(_summary(marked) for marked in found), *(pending.summary(mark) for mark in marks)]
        click.echo(json.dumps(entries, indent=2))
        return
    if not found and not marks:
        click.echo(f"no records in {root}" + (f" for {function}" if function else ""))
        return
    if marks:
        for line in pending.list_lines(marks, root):
            click.echo(line)
    if not found:
        return
    rows = []
    for marked in found:
        record = marked.stored.record
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
                marked.status,
                views.relative(marked.stored.path, root),
            ]
        )
    click.echo(f"records in {root}:")
    headers = ["function", "key", "pick", "time", "confidence", "measured", "date", "source", "file"]
    for line in views.table(headers, rows):
        click.echo(line)


def _summary(marked: live.Marked) -> dict[str, Any]:
    stored = marked.stored
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
        "source": record.source,
        "origin": None if record.origin is None else record.origin.to_data(),
        "status": marked.status,
        "live": marked.live,
        "file": str(stored.path),
    }


@cache.command()
@click.argument("record_ref", metavar="RECORD")
@dir_option
def show(record_ref: str, directory: Path | None) -> None:
    """Every candidate of a record, fastest first, with errors, and Python that hard-codes the pick.

    RECORD is a record file's path, the start of its digest (the file name
    without its suffix), or a function's name for every record of it (by
    key and date), looked up in the cache directory. Each says where its
    function is defined and whether it is of the current source, as
    ``cache list`` does. For a function's name, the configs remembered to
    fail for every key follow (docs/guide.md, "Configs that cannot run").
    """
    loaded = _Plugins.load()
    failed = []
    if not Path(record_ref).expanduser().is_file():
        root = existing_cache_dir(directory, loaded)
        failed = [s for s in stored_records(loaded.file_caches(root), record_ref) if s.failed is not None]
    try:
        found = find_records(loaded, record_ref, directory)
    except click.ClickException:
        if not failed:
            raise
        found = []
    if found and found[0].pending is not None:
        pending.show(found[0])
        return
    # In cache list's order: by function, key and date.
    for number, marked in enumerate(live.mark(found)):
        if number:
            click.echo("")
        _show_record(marked.stored, _source(loaded, marked.stored))
    for stored in failed:
        _show_failed(stored)


def _show_failed(stored: Stored) -> None:
    memory = stored.failed
    assert memory is not None
    versions = ", ".join(f"{k} {v}" for k, v in sorted(memory.versions.items()))
    click.echo(f"\nremembered failures of {memory.function} ({stored.path}; {versions}):")
    for failure in memory.failed:
        dtypes = ", ".join(failure.dtypes) or "no tensors"
        click.echo(f"  {failure.label} [{dtypes}]: {failure.kind}: {failure.reason}")


def _source(loaded: _Plugins, stored: Stored) -> str:
    """Whether ``stored`` is of its function's current source, as ``cache list`` and ``report`` say."""
    record = stored.record
    assert record is not None
    # The cache folder holds a folder per function; the record's siblings decide "newest" by date.
    siblings = readable(loaded.file_caches(stored.path.parent.parent), record.function)
    for marked in live.mark(siblings):
        if marked.stored.path == stored.path:
            return live.describe(marked)
    return "unknown (the record is not among its function's records in that folder)"


def _show_record(stored: Stored, source: str) -> None:
    record = stored.record
    assert record is not None
    header = [
        ("file", str(stored.path)),
        ("function", record.function),
        ("defined as", "-" if record.origin is None else str(record.origin)),
        ("source", source),
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
@dir_option
@click.option("--yes", "-y", is_flag=True, help="Remove without asking.")
def clear(function: str | None, directory: Path | None, yes: bool) -> None:
    """Remove stored records: all of them, or FUNCTION's (its remembered failed configs too).

    The cache's record files are removed, damaged ones too (said on stderr),
    and the functions' stored portfolios with them, each through
    :func:`~kerneltune.core.driving.remove_private`: nothing reached through
    a link, nothing that is not a regular file of this user's.
    """
    loaded = _Plugins.load()
    root = existing_cache_dir(directory, loaded)
    caches = loaded.file_caches(root)
    doomed = []
    for stored in stored_records(caches, function):
        if stored.path.is_symlink():
            click.echo(f"kerneltune: not removing {stored.path}: {stored.problem}", err=True)
            continue
        if stored.problem is not None:
            click.echo(f"kerneltune: removing a damaged record, {stored.path}: {stored.problem}", err=True)
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
    removed = _remove(doomed, root, side_files(caches, function))
    if removed < len(doomed):
        raise click.ClickException(f"removed {removed} of {what}; the others are named above")
    click.echo(f"removed {what}")


def _remove(doomed: Sequence[Stored], root: Path, beside: Sequence[Path] = ()) -> int:
    """Remove each record and file ``beside`` them with its lock file, and each function folder left empty.

    :returns: how many records went.
    """
    removed = 0
    folders = set()
    files = [(stored.path, True) for stored in doomed] + [(path, False) for path in beside]
    for file, counted in files:
        # The file caches keep a lock file beside each record.
        for path in (file, file.with_name(file.name + ".lock")):
            try:
                remove_private(root, path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                click.echo(f"kerneltune: not removing {path}: {exc.strerror or exc}", err=True)
            else:
                removed += counted and path == file
                folders.add(path.parent)
    for folder in folders:
        try:
            # rmdir never follows a link, and refuses a folder that still holds anything.
            folder.rmdir()
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                click.echo(f"kerneltune: not removing {folder}: {exc.strerror or exc}", err=True)
    return removed


@cache.command()
@click.argument("function", required=False)
@dir_option
@click.option("--dry-run", "-n", is_flag=True, help="List what would be dropped; remove nothing.")
def prune(function: str | None, directory: Path | None, dry_run: bool) -> None:
    """Drop the records no current source can reach: all stale ones, or FUNCTION's.

    A record is stale when its function imports here (from the module it
    was tuned in, with the current directory on the path) and its source
    has changed since the record was made: no tuning looks it up again
    unless the edit is undone. Records whose function cannot be imported
    are kept, whatever their date.
    """
    loaded = _Plugins.load()
    root = existing_cache_dir(directory, loaded)
    found = live.mark(readable(loaded.file_caches(root), function))
    if not found:
        if function is not None:
            raise click.ClickException(f"no records of {function} in {root}; nothing removed")
        click.echo(f"nothing to drop: no records in {root}")
        return
    stale = [marked for marked in found if marked.status == live.STALE]
    current = sum(marked.status == live.CURRENT for marked in found)
    unknown = len(found) - len(stale) - current
    kept = f"{len(found) - len(stale)} record(s): {current} of a current source"
    if unknown:
        kept += f", {unknown} whose source cannot be checked here (kept whatever their date)"
    if not stale:
        of = f" of {function}" if function else ""
        click.echo(f"nothing to drop in {root}: no stale records{of}; kept {kept}")
        return
    click.echo(f"stale records in {root} (their function was edited after they were made):")
    rows = []
    for marked in stale:
        record = marked.stored.record
        assert record is not None
        when = iso_date(record.created)
        file = views.relative(marked.stored.path, root)
        rows.append([record.function, views.key_text(record.key), when, str(record.origin), file])
    for line in views.table(["function", "key", "date", "defined as", "file"], rows):
        click.echo(f"  {line}")
    what = f"{len(stale)} stale record(s) of {len({m.stored.namespace for m in stale})} function(s)"
    if dry_run:
        click.echo(f"would drop {what} (--dry-run: nothing removed); would keep {kept}")
        return
    removed = _remove([marked.stored for marked in stale], root)
    if removed < len(stale):
        raise click.ClickException(f"dropped {removed} of {what}; the others are named above; kept {kept}")
    click.echo(f"dropped {what}; kept {kept}")


@cache.command()
@click.argument("function", required=False)
@dir_option
def verify(function: str | None, directory: Path | None) -> None:
    """Ask for the stored picks (all, or FUNCTION's) to be re-checked by the next process that loads them.

    The command runs nothing itself (it has no arguments to run a tuned
    function with): it marks each record, and the next process that loads
    one times its pick head to head with its closest rivals and stores the
    verdict, confident or uncertain, in place of the mark. Each record is
    read again and marked under its file lock, so that one a tuning stored
    after the listing is marked as it is now, never replaced by the older copy.
    """
    loaded = _Plugins.load()
    root = existing_cache_dir(directory, loaded)
    found = readable(loaded.file_caches(root), function)
    if not found:
        of = f" of {function}" if function else ""
        raise click.ClickException(f"no records in {root}{of} to verify")
    marked = 0
    for stored in found:
        if stored.cache.update(stored.namespace, stored.digest, lambda data: {**data, "recheck": True}):
            marked += 1
        else:
            click.echo(f"kerneltune: not marking {stored.path}: gone or unreadable meanwhile", err=True)
    click.echo(
        f"marked {marked} record(s) in {root} for a re-check by the next process that loads each "
        "(KERNELTUNE_RECHECK=0 or KERNELTUNE_TUNE=never there serve them unchecked)"
    )


@cache.command("export")
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("function", required=False)
@dir_option
@click.option("--force", "-f", is_flag=True, help="Replace ARCHIVE if it exists.")
def export_records(archive: Path, function: str | None, directory: Path | None, force: bool) -> None:
    """Write the stored records (all, or FUNCTION's) to ARCHIVE, one JSON file, for `cache import`."""
    loaded = _Plugins.load()
    root = existing_cache_dir(directory, loaded)
    if archive.exists() and not force:
        raise click.ClickException(f"{archive} exists; pass --force to replace it")
    found = readable(loaded.file_caches(root), function)
    if not found:
        of = f" of {function}" if function else ""
        raise click.ClickException(f"no records in {root}{of} to export")
    count = write_archive(archive, [(stored.digest, stored.data) for stored in found])
    click.echo(f"exported {count} record(s) from {root} to {archive}")


@cache.command("import")
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@dir_option
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
    root = cache_dir(directory, loaded)
    entries = read_archive(archive)
    target = loaded.writing_cache(root)
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
