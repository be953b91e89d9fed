"""``kerneltune portfolio``: a few configs that serve every stored key of a function, with their loss.

docs/guide.md ("Portfolio") says how they are chosen and how to read the
two losses; docs/cli.md lists the options.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import click
from kerneltune.cli import live, views
from kerneltune.cli.loading import _Plugins, dir_option, existing_cache_dir, readable
from kerneltune.core.driving import (
    PORTFOLIO_ENTRY,
    Portfolio,
    PortfolioChoice,
    PortfolioConfig,
    TimeTable,
    TuningRecord,
    choose_portfolio,
    leave_one_out,
    tuned_fully,
)


@attrs.frozen
class _Keys:
    """The stored keys a portfolio is chosen from, their candidate list, and what was left out and why."""

    table: TimeTable
    #: the candidate list's records, newest first: labels and plain values come from them.
    records: tuple[TuningRecord, ...]
    left_out: tuple[str, ...]


@click.command()
@click.argument("function")
@click.option(
    "--configs",
    "-k",
    "most",
    type=int,
    default=4,
    show_default=True,
    help="At most this many configs.",
)
@click.option(
    "--tolerance",
    type=float,
    default=3.0,
    show_default=True,
    help="How much slower than its own best (in percent) a stored key may be served.",
)
@dir_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object instead of a report.")
@click.option(
    "--store",
    is_flag=True,
    help="Keep the portfolio beside the records: a new key of FUNCTION then measures only its configs.",
)
@click.option("--snippet", is_flag=True, help="Print only Python that lists the portfolio's configs.")
def portfolio(
    function: str,
    most: int,
    tolerance: float,
    directory: Path | None,
    as_json: bool,
    store: bool,
    snippet: bool,
) -> None:
    """Choose at most K configs that keep every stored key of FUNCTION within the tolerance of its best.

    Only keys tuned in full count: every config of the candidate list has a
    time or a failure. The K configs with the lowest worst loss are chosen
    (then the lowest mean loss; fewer where more lower neither), and the
    report says how many would keep every key within the tolerance, or how
    close K come. Two losses are reported: the worst over the stored keys, and the
    worst when each key is left out of the choice and then served by it (an
    estimate of the loss on keys never measured).
    """
    if most < 1:
        raise click.BadParameter(f"{most} is not a number of configs; give 1 or more", param_hint="--configs")
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise click.BadParameter(
            f"{tolerance} is not a tolerance; give a percentage >= 0", param_hint="--tolerance"
        )
    if as_json and snippet:
        raise click.UsageError("--snippet prints Python, --json a JSON object: give one of them")
    loaded = _Plugins.load()
    root = existing_cache_dir(directory, loaded)
    keys = _stored_keys(loaded, root, function)
    fraction = tolerance / 100
    choice = choose_portfolio(keys.table, most, fraction)
    estimates = leave_one_out(keys.table, choice, most, fraction)
    chosen = _configs(keys.records, choice.configs)
    stored = _store(loaded, root, function, chosen, tolerance, choice, estimates) if store else None
    if snippet:
        for line in views.configs_snippet_lines(function, [(c.values, c.label) for c in chosen]):
            click.echo(line)
        if stored is not None:
            click.echo(f"stored as the portfolio of {function} in {stored}", err=True)
        return
    report = _report(function, keys, choice, estimates, chosen, tolerance, most)
    if as_json:
        click.echo(json.dumps({**report, "stored": None if stored is None else str(stored)}, indent=2))
        return
    for line in _text(report, keys):
        click.echo(line)
    if stored is not None:
        click.echo(f"stored as the portfolio of {function} in {stored}: a new key measures only its configs")


def _stored_keys(loaded: _Plugins, root: Path, function: str) -> _Keys:
    """The keys of ``function`` tuned in full over its newest record's candidate list, on its hardware.

    Of the records a tuning of the current source reads (``cache list``'s
    live ones), one per key, the newest; damaged files are skipped with a
    note, as ``cache list`` does.
    """
    found = live.mark(readable(loaded.file_caches(root), function))
    if not found:
        raise click.ClickException(
            f"no readable records of {function} in {root}: tune it first, or see `kerneltune cache list` "
            "for the functions stored there"
        )
    # In cache list's order: by key, oldest first.
    current = [m.stored.record for m in found if m.live and m.stored.record is not None]
    left_out = (
        [f"{len(found) - len(current)} record(s) of an earlier source"] if len(current) < len(found) else []
    )
    if not current:
        raise click.ClickException(f"no record of {function} in {root} is of its current source")
    newest = max(current, key=lambda r: r.created)
    hardware = _plain(newest.hardware)
    latest = {json.dumps(r.key, sort_keys=True): r for r in current if _plain(r.hardware) == hardware}
    others = len({json.dumps(r.key, sort_keys=True) for r in current}) - len(latest)
    if others:
        left_out.append(f"{others} key(s) of other hardware than the newest record's")
    full = [(r.key, times) for r in latest.values() if (times := tuned_fully(r, newest.fingerprints))]
    if len(full) < len(latest):
        left_out.append(
            f"{len(latest) - len(full)} key(s) not tuned in full over the newest candidate list (a warm "
            "start, a staged search or a portfolio measured only some configs, or the list changed since)"
        )
    if not full:
        raise click.ClickException(
            f"{function}: no stored key has a time or a failure for every one of its "
            f"{len(newest.fingerprints)} configs, so there are no stored times to choose from "
            f"({'; '.join(left_out)})"
        )
    table = TimeTable(keys=tuple(k for k, _ in full), times=tuple(t for _, t in full))
    same_list = sorted(
        (r for r in current if r.fingerprints == newest.fingerprints), key=lambda r: r.created, reverse=True
    )
    return _Keys(table, tuple(same_list), tuple(left_out))


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True))


def _configs(records: Sequence[TuningRecord], indices: Sequence[int]) -> list[PortfolioConfig]:
    """The chosen configs, with the plain values of the newest record that picked each, where one did."""
    newest = records[0]
    values: dict[int, Any] = {}
    for record in records:
        if record.pick_values is not None:
            values.setdefault(record.best_index, record.pick_values)
    return [PortfolioConfig(i, newest.fingerprints[i], newest.labels[i], values.get(i)) for i in indices]


def _percent(loss: float) -> float | None:
    return round(loss * 100, 4) if math.isfinite(loss) else None


def _report(
    function: str,
    keys: _Keys,
    choice: PortfolioChoice,
    estimates: tuple[float, ...] | None,
    chosen: Sequence[PortfolioConfig],
    tolerance: float,
    most: int,
) -> dict[str, Any]:
    """What the command says, as plain data (``--json`` prints it as it is); losses in percent."""
    table = keys.table
    within = choice.worst <= tolerance / 100 + 1e-12
    rows = []
    for k, key in enumerate(table.keys):
        rows.append(
            {
                "key": key,
                "key_text": views.key_text(key),
                "best_ms": min(table.times[k]),
                "loss": _percent(choice.losses[k]),
                "served_by": choice.served_by[k],
                "left_out_loss": None if estimates is None else _percent(estimates[k]),
            }
        )
    return {
        "function": function,
        "configs": [{**c.to_data(), "serves": choice.served_by.count(c.index)} for c in chosen],
        "most": most,
        "tolerance": tolerance,
        "within_tolerance": within,
        "needed": choice.needed,
        "worst": _percent(choice.worst),
        "mean": _percent(choice.mean),
        "leave_one_out": None
        if estimates is None
        else {
            "worst": _percent(max(estimates)),
            "within_tolerance": sum(e <= tolerance / 100 + 1e-12 for e in estimates),
            "keys": len(estimates),
        },
        "method": choice.method,
        "candidates": table.size,
        "keys": rows,
        "left_out": list(keys.left_out),
    }


def _loss_text(loss: float | None) -> str:
    return "fails (every chosen config fails)" if loss is None else f"{loss:.2f} %"


def _text(report: dict[str, Any], keys: _Keys) -> list[str]:
    rows = report["keys"]
    lines = [
        f"portfolio of {report['function']}: {len(report['configs'])} of {report['candidates']} configs, "
        f"from {len(rows)} stored key(s) tuned in full",
    ]
    lines += [f"  [{c['index']}] {c['label']}  (serves {c['serves']} key(s))" for c in report["configs"]]
    worst = max(rows, key=lambda r: math.inf if r["loss"] is None else r["loss"])
    if report["within_tolerance"]:
        verdict = f"within the tolerance of {report['tolerance']:g} %"
        extra = len(report["configs"]) - report["needed"]
        if extra:
            verdict += (
                f" with {report['needed']} config(s); the other {extra} lower the mean loss to "
                f"{_loss_text(report['mean'])}"
            )
    else:
        verdict = (
            f"no {report['most']} configs keep every key within {report['tolerance']:g} %: "
            f"this is the closest {report['most']} can get"
        )
    lines.append(
        f"worst loss over the stored keys: {_loss_text(report['worst'])} (key {worst['key_text']}), {verdict}"
    )
    out = report["leave_one_out"]
    if out is None:
        lines.append("worst loss with each key left out of the choice: needs two keys or more")
    else:
        lines.append(
            f"worst loss with each key left out of the choice: {_loss_text(out['worst'])}; "
            f"{out['within_tolerance']} of {out['keys']} key(s) within {report['tolerance']:g} % "
            "(an estimate for keys never measured)"
        )
    lines.append(f"method: {report['method']}")
    for reason in keys.left_out:
        lines.append(f"left out: {reason}")
    table = [
        [
            r["key_text"],
            f"{r['best_ms']:.4f}",
            f"[{r['served_by']}]",
            _loss_text(r["loss"]),
            "-" if r["left_out_loss"] is None else _loss_text(r["left_out_loss"]),
        ]
        for r in rows
    ]
    lines.append("")
    headers = ["key", "best (ms)", "served by", "loss", "loss left out"]
    lines += ["  " + line for line in views.table(headers, table)]
    return lines


def _store(
    loaded: _Plugins,
    root: Path,
    function: str,
    chosen: Sequence[PortfolioConfig],
    tolerance: float,
    choice: PortfolioChoice,
    estimates: tuple[float, ...] | None,
) -> Path:
    """Write the portfolio with the configured cache, beside the records (atomically); its file."""
    target = loaded.writing_cache(root)
    folder = target.directory(function)
    if folder is None:
        raise click.ClickException(
            f"cache {target.name!r} does not use its folder for {function!r} under {root} "
            "(a link, or a folder another user could change; see above); nothing stored"
        )
    kept = Portfolio(
        function=function,
        configs=tuple(chosen),
        tolerance=tolerance,
        worst=_percent(choice.worst),
        leave_one_out=None if estimates is None else _percent(max(estimates)),
        keys=len(choice.losses),
        created=time.time(),
    )
    target.store(function, PORTFOLIO_ENTRY, kept.to_data())
    path = next((p for _, digest, p in target.entries(function) if digest == PORTFOLIO_ENTRY), None)
    return folder if path is None else path
