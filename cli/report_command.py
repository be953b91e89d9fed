"""``kerneltune report``: every candidate of each stored key, sorted by time, with its spread."""

from __future__ import annotations

from pathlib import Path

import click
from kerneltune.cli import live, pending, views
from kerneltune.cli.loading import _Plugins, dir_option, existing_cache_dir, readable
from kerneltune.core.driving import iso_date


@click.command()
@click.argument("function", required=False)
@dir_option
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also draw one bar chart per key into this PNG file (needs matplotlib).",
)
def report(function: str | None, directory: Path | None, plot: Path | None) -> None:
    """Per stored key, every candidate sorted by time with the spread of its samples.

    Records come by function, key and date, each saying whether it is of its
    function's current source. Where a record kept each rank's times, also
    the pick's time on every rank and each candidate's slowest rank. Keys
    served without measuring and not tuned yet come last, as pending.
    """
    loaded = _Plugins.load()
    root = existing_cache_dir(directory, loaded)
    found = live.mark(readable(loaded.file_caches(root), function))
    marks = pending.pending_marks(loaded.file_caches(root), function)
    if not found and not marks:
        raise click.ClickException(f"no records in {root}" + (f" for {function}" if function else ""))
    records = []
    for number, marked in enumerate(found):
        record = marked.stored.record
        assert record is not None
        records.append(record)
        if number:
            click.echo("")
        click.echo(f"{record.function} {views.key_text(record.key)}")
        click.echo(f"  made {iso_date(record.created)}, measured with: {views.method_text(record)}")
        click.echo(f"  source: {live.describe(marked)}")
        pick = f"[{record.best_index}] {record.labels[record.best_index]}"
        click.echo(f"  pick: {pick}, {views.confidence_text(record)}")
        for line in [*views.history_lines(record), *views.rank_lines(record)]:
            click.echo(f"  {line}")
        for line in views.candidate_lines(record):
            click.echo(line)
    for number, mark in enumerate(marks, start=len(found)):
        if number:
            click.echo("")
        for line in pending.report_lines(mark):
            click.echo(line)
    if plot is not None and records:
        views.plot(records, plot)
        click.echo(f"\nwrote {plot}")
