"""How stored records read in the ``kerneltune`` command: keys, times, tables and plots."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from kerneltune.core import NOT_MEASURED, PRUNED, format_ms
from kerneltune.core.driving import HOST_CLOCK, IDLE_DEVICE, TuningRecord

#: What a record's times are, in words, by ``Method.timed``.
_TIMED_TEXT = {
    "device": "device time",
    IDLE_DEVICE: "device time of an idle device (every candidate read what an empty run reads: the work "
    "runs on the host, and these times cannot rank it)",
    HOST_CLOCK: "host time (by the host's clock)",
    "wall": "wall time (host-inclusive, per call)",
}


def key_text(value: Any) -> str:
    """A stored (encoded) key as the Python value it was made from."""
    if isinstance(value, list):
        items = [key_text(item) for item in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, dict) and len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == "float" and isinstance(inner, str):
            try:
                return repr(float.fromhex(inner))
            except ValueError:
                return inner
        if tag == "torch.dtype":
            return str(inner)
        if tag == "torch.Size":
            return f"torch.Size({inner})"
        return f"{tag}({key_text(inner)})"
    return repr(value)


def spread(samples: Sequence[float]) -> str:
    """The samples' range and median: a standard deviation of skewed timings can exceed the mean."""
    if len(samples) < 2:
        return ""
    return (
        f"min {min(samples):.4f}, median {statistics.median(samples):.4f}, max {max(samples):.4f} "
        f"({len(samples)} samples)"
    )


def outcome(error: str) -> str:
    """What a candidate without a time is: pruned and not measured are not failures."""
    return error if error in (PRUNED, NOT_MEASURED) else "failed"


def measured(record: TuningRecord) -> int:
    return sum(1 for t in record.times if math.isfinite(t))


def timed_text(record: TuningRecord) -> str:
    """What the times are: device time only where a device timer timed device work."""
    return _TIMED_TEXT.get(record.method.timed, f"{record.method.objective} objective")


def method_text(record: TuningRecord) -> str:
    method = record.method
    if not method.timer and not method.repeat:
        return "not recorded"
    return (
        f"{timed_text(record)}, {method.statistic} of {method.repeat} runs after {method.warmup} "
        f"warm-up, timer {method.timer}"
    )


def confidence_text(record: TuningRecord) -> str:
    """How sure the record's pick is: confident, or uncertain and against which rivals; ``-`` if not kept."""
    if record.confidence is None:
        return "-"
    if record.confidence != "uncertain":
        text = record.confidence
    else:
        rivals = ", ".join(f"[{i}]" for i in record.rivals)
        text = f"uncertain (not told apart from {rivals})" if rivals else "uncertain"
        if record.rechecks:
            text += f", re-checked {record.rechecks} time(s)"
    return text + ("; re-check asked (kerneltune cache verify)" if record.recheck else "")


def history_lines(record: TuningRecord) -> list[str]:
    """What a record's tuning started from: a warm start, or times an earlier tuning of the key measured."""
    lines = []
    start = record.warm_start
    if start is not None:
        measured_now = sum(
            1 for m in record.measurements if m.samples or m.error not in (None, NOT_MEASURED, PRUNED)
        )
        where = (
            f"from the stored portfolio's {start['portfolio']} config(s)"
            if "portfolio" in start
            else f"warm-started from key {key_text(start['from'])} (distance {start['distance']:.3g})"
        )
        lines.append(f"{where}: {measured_now} of {len(record.times)} measured")
    if record.carried:
        lines.append(
            f"{len(record.carried)} time(s) carried over from an earlier tuning of this key "
            f"(another candidate list), marked ~"
        )
    return lines


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    return [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]


def relative(path: Path, root: Path) -> str:
    """``path`` below ``root``, as the commands print it (the whole key fits beside a short file name)."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def clip(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _rank_ms(value: float) -> str:
    return f"{value:.4f}" if math.isfinite(value) else "inf"


def slowest_rank(times: Sequence[float]) -> int:
    """The rank with the highest time (the candidate's time as the ranks agree on it), lowest of ties."""
    return max(range(len(times)), key=lambda r: (times[r], -r))


def rank_lines(record: TuningRecord) -> list[str]:
    """The pick's time on each rank and which rank was slowest; nothing where the record kept none.

    Sharded, the rank that measured the pick, whose time it is.
    """
    best = record.best_index
    if record.measured_on and record.measured_on[best] is not None:
        return [
            f"pick [{best}] measured on rank {record.measured_on[best]} of {record.method.shards}: "
            f"{format_ms(record.times[best])} (sharded: each candidate was timed on one rank only)"
        ]
    times = record.ranks_of(record.best_index)
    if not times:
        return []
    slowest = slowest_rank(times)
    each = ", ".join(f"rank {r} {_rank_ms(t)}" for r, t in enumerate(times))
    return [
        f"pick [{record.best_index}] on its slowest rank: {format_ms(times[slowest])} (rank {slowest} of "
        f"{len(times)}); per rank (ms): {each}"
    ]


def candidate_lines(record: TuningRecord) -> list[str]:
    """Every candidate, fastest first, failures last with their error.

    Where the record kept each rank's times, two columns more: the slowest
    rank (whose time is the candidate's) and every rank's time, in rank order.
    Where the ranks split the candidates (sharded), one: the rank that
    measured each.
    """
    order = sorted(range(len(record.times)), key=lambda i: (record.times[i], i))
    ranked = bool(record.rank_times)
    owners = record.measured_on
    rows = []
    for i in order:
        error = record.measurements[i].error
        mark = "*" if i == record.best_index else "~" if i in record.carried else " "
        if error is None:
            row = [f"{mark}[{i}]", record.labels[i], format_ms(record.times[i])]
            detail = spread(record.measurements[i].samples)
            if i in record.rivals:
                detail = f"{detail}; not told apart from the pick".lstrip("; ")
        elif outcome(error) == "failed":
            row, detail = [f"{mark}[{i}]", record.labels[i], "failed"], error
        else:
            row, detail = [f"{mark}[{i}]", record.labels[i], error], ""
        if ranked:
            times = record.ranks_of(i)
            known = bool(times) and error not in (PRUNED, NOT_MEASURED)
            row += [str(slowest_rank(times)), " ".join(map(_rank_ms, times))] if known else ["", ""]
        if owners:
            row.append("" if owners[i] is None else str(owners[i]))
        rows.append([*row, detail])
    headers = ["", "candidate", "time"]
    if ranked:
        headers += ["slowest rank", "per rank (ms)"]
    if owners:
        headers.append("measured on rank")
    return ["  " + line for line in table([*headers, "spread or error"], rows)]


def _triton_config(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("triton.Config"), dict):
        return value["triton.Config"]
    return None


#: The order ``triton.Config`` takes its compile options in; others follow by name.
_OPTION_ORDER = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _option_order(name: str) -> tuple[int, str]:
    return (_OPTION_ORDER.index(name) if name in _OPTION_ORDER else len(_OPTION_ORDER), name)


def python_text(value: Any) -> str:
    """A pick's stored plain values as the Python expression that makes them."""
    fields = _triton_config(value)
    if fields is not None:
        names = sorted((name for name in fields if name != "kwargs"), key=_option_order)
        options = "".join(f", {name}={python_text(fields[name])}" for name in names)
        return f"triton.Config({python_text(fields.get('kwargs', {}))}{options})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {python_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(python_text(v) for v in value) + "]"
    return repr(value)


def snippet_lines(record: TuningRecord) -> list[str]:
    """Python that hard-codes the pick: a one-config list that needs no tuning."""
    values = record.pick_values
    if values is None:
        return [
            f"# this record keeps no plain values of its pick (written before they were kept, or a "
            f"config that plain data cannot say whole, such as one with a pre_hook or an object no "
            f"plugin describes): [{record.best_index}] {record.labels[record.best_index]}"
        ]
    argument, decorator = _list_argument([values])
    if _triton_config(values) is not None:
        return [
            f"# {record.function}: the one config to keep, so nothing is tuned: {decorator}",
            "# (a search_params kernel drops its hints too)",
            f"{argument}=[{python_text(values)}]",
        ]
    return [
        f"# {record.function}: one candidate left, so nothing is tuned: {decorator}",
        f"{argument}=[{python_text(values)}]",
    ]


def _list_argument(values: Sequence[Any]) -> tuple[str, str]:
    """The argument a list of configs' plain values goes to, and the decorator that takes it."""
    if values and all(_triton_config(v) is not None for v in values):
        return "configs", "@triton.autotune(configs=[...], ...)"
    return "config_space", "@autotune(config_space=[...], ...)"


def configs_snippet_lines(function: str, configs: Sequence[tuple[Any, str]]) -> list[str]:
    """Python that lists a portfolio's configs, to ship as a fixed candidate list.

    :param configs: each config's plain values (``None`` where no stored record kept them) and label.
    """
    known = [values for values, _ in configs if values is not None]
    argument, decorator = _list_argument(known)
    lines = [
        f"# {function}: its portfolio's {len(configs)} config(s), tuned among at each new key: {decorator}"
    ]
    lines += [
        f"# {label}: no stored key picked it, so no record kept its values: add it by hand"
        for values, label in configs
        if values is None
    ]
    return [*lines, f"{argument}=[", *(f"    {python_text(values)}," for values in known), "]"]


def plot(records: Sequence[TuningRecord], path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        raise click.ClickException(
            "--plot needs matplotlib, which is not installed: pip install matplotlib"
        ) from None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(
        len(records), 1, figsize=(9, 0.5 + 0.35 * sum(len(r.times) + 2 for r in records)), squeeze=False
    )
    for record, ax in zip(records, axes[:, 0], strict=True):
        order = sorted(range(len(record.times)), key=lambda i: (record.times[i], i))
        timed = [i for i in order if math.isfinite(record.times[i])]
        untimed = [i for i in order if not math.isfinite(record.times[i])]
        labels = [clip(f"[{i}] {record.labels[i]}", 60) for i in timed + untimed]
        means = [record.times[i] for i in timed] + [0.0] * len(untimed)
        # Whiskers from the fastest to the slowest sample, never below 0 ms.
        samples = [record.measurements[i].samples or (record.times[i],) for i in timed]
        below = [max(0.0, record.times[i] - min(s)) for i, s in zip(timed, samples, strict=True)]
        above = [max(0.0, max(s) - record.times[i]) for i, s in zip(timed, samples, strict=True)]
        zeros = [0.0] * len(untimed)
        colours = ["tab:green" if i == record.best_index else "tab:blue" for i in timed]
        colours += ["tab:grey"] * len(untimed)
        ax.barh(labels, means, xerr=[below + zeros, above + zeros], color=colours)
        for position, i in enumerate(untimed, start=len(timed)):
            what = outcome(record.measurements[i].error or "failed")
            ax.text(0, position, f" {what}", va="center", color="tab:red" if what == "failed" else "tab:grey")
        ax.invert_yaxis()
        ax.set_xlabel("time (ms)")
        ax.set_title(clip(f"{record.function} {key_text(record.key)}", 90), fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
