"""How pending marks read in ``cache list``, ``cache show`` and ``report``: keys served, not yet tuned.

docs/guide.md ("Serving unseen shapes") says how a key comes to be pending, and how
``tune = "pending"`` tunes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from kerneltune.cli import views
from kerneltune.cli.loading import Stored, stored_records
from kerneltune.core.driving import ListingCache, PendingMark, iso_date


def pending_marks(caches: Sequence[ListingCache], function: str | None) -> list[Stored]:
    """The pending marks stored (only ``function``'s, when given), by function and key."""
    found = [stored for stored in stored_records(caches, function) if stored.pending is not None]
    return sorted(found, key=lambda s: (_mark(s).function, views.key_text(_mark(s).key), s.digest))


def _mark(stored: Stored) -> PendingMark:
    assert stored.pending is not None
    return stored.pending


def served_text(mark: PendingMark) -> str:
    """What served the key: the nearest stored key's pick, or the first config."""
    if mark.served_by is None:
        return f"the first config, {mark.config} (no stored key near it)"
    return f"the pick of the nearest stored key {views.key_text(mark.served_by)}, {mark.config}"


def summary(stored: Stored) -> dict[str, Any]:
    """A mark as ``cache list --json`` gives it: ``"status": "pending"``, and what served it."""
    mark = _mark(stored)
    return {
        "function": mark.function,
        "key": mark.key,
        "key_text": views.key_text(mark.key),
        "digest": stored.digest,
        "status": "pending",
        "pending": {
            "served_by": mark.served_by,
            "config": mark.config,
            "times_served": mark.count,
            "first_served_at": iso_date(mark.first),
            "last_served_at": iso_date(mark.last),
        },
        "source": mark.source,
        "file": str(stored.path),
    }


def list_lines(found: Sequence[Stored], root: Path) -> list[str]:
    """``cache list``'s table of pending keys, under its table of records."""
    rows = []
    for stored in found:
        mark = _mark(stored)
        served_by = "-" if mark.served_by is None else views.key_text(mark.served_by)
        rows.append(
            [
                mark.function,
                views.key_text(mark.key),
                served_by,
                views.clip(mark.config, 40),
                str(mark.count),
                iso_date(mark.last),
                views.relative(stored.path, root),
            ]
        )
    headers = ["function", "key", "served by", "config", "served", "last", "file"]
    lead = f"pending keys in {root} (served without measuring; KERNELTUNE_TUNE=pending tunes them):"
    return [lead, *views.table(headers, rows)]


def show(stored: Stored) -> None:
    """``cache show`` of a pending mark: what served the key, when and how often."""
    mark = _mark(stored)
    lines = [
        ("file", str(stored.path)),
        ("function", mark.function),
        ("key", views.key_text(mark.key)),
        ("digest", stored.digest),
        ("pending", "served without measuring, not tuned yet (KERNELTUNE_TUNE=pending tunes it)"),
        ("pick", served_text(mark) if mark.served_by is None else f"from a neighbour: {served_text(mark)}"),
        ("served", f"{mark.count} time(s), first {iso_date(mark.first)}, last {iso_date(mark.last)}"),
    ]
    for name, value in lines:
        click.echo(f"{name + ':':<15}{value}")


def report_lines(stored: Stored) -> list[str]:
    """``report``'s lines for a pending key: no candidates were timed for it."""
    mark = _mark(stored)
    return [
        f"{mark.function} {views.key_text(mark.key)}",
        f"  pending: served without measuring by {served_text(mark)}, {mark.count} time(s), "
        f"last {iso_date(mark.last)}",
    ]
