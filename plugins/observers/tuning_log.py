"""Tuning logs: verbose INFO lines when asked, DEBUG lines otherwise, and a detailed file per rank.

Every real tuning appends to ``<cache dir>/<function folder>/tune-rank<rank>.log``
(docs/storage.md says what it holds); verbose (``autotune_verbose=True``, a
tuner's own ``verbose``/``debug``, or the ``verbose`` setting) shows the
start, each candidate's time or error and the pick as INFO lines
(:mod:`kerneltune.core.verbose`), else DEBUG records on the ``kerneltune``
logger. A log that cannot be written is one warning per process, and tuning
goes on.
"""

from __future__ import annotations

import logging
import math
import threading
import time

import attrs
from kerneltune.core import (
    NOT_MEASURED,
    PRUNED,
    CandidateMeasured,
    CompileFinished,
    CompileStarted,
    PickLoaded,
    PrivateAppender,
    TuningFinished,
    TuningStarted,
    format_ms,
    hookimpl,
    verbose_line,
    warn_once,
)

logger = logging.getLogger("kerneltune")


def _say(line: str, verbose: bool) -> None:
    # Verbose, an INFO line the user sees (kerneltune.core.verbose); otherwise DEBUG, for those who ask.
    if verbose:
        verbose_line(line)
    else:
        logger.debug(line)


#: The events whose lines go to the log file (a pick loaded only where served unmeasured, marked pending).
_Logged = TuningStarted | CompileFinished | CandidateMeasured | TuningFinished | PickLoaded

#: The logs written to, each kept open between lines (a line per candidate; opening took 35 us).
_logs = PrivateAppender()


def _emit(event: _Logged, line: str, detail: str = "", *, later: bool = False) -> None:
    """Say ``line``, and append it with ``detail`` to the event's log file (``later``: on the background
    thread, for a call that measures nothing and should not wait for a file)."""
    _say(line, event.verbose)
    if event.log_dir is None:
        return
    path = event.log_dir / f"tune-rank{event.rank}.log"
    text = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n{detail}"

    def failed(exc: OSError) -> None:
        warn_once(
            ("tuning log", str(path)),
            f"kerneltune: cannot write the tuning log {path} ({exc}); tuning goes on without it",
        )

    # Made and checked where opened: another user may have created the folder since the cache
    # looked at it.
    if later:
        _logs.write_later(path, text, failed)
        return
    try:
        _logs.write(path, text)
    except OSError as exc:
        failed(exc)


@hookimpl
def kerneltune_tuning_started(event: TuningStarted) -> None:
    _emit(
        event,
        f"{event.function}: tuning key {event.key!r}: {len(event.candidates)} candidates "
        f"(rank {event.rank} of {event.world_size})",
    )


@attrs.define
class _Compiling:
    """One tuning's compiles under way: since when, the slowest so far, how many failed."""

    began: float
    slowest: tuple[float, int] = (0.0, -1)
    failed: int = 0


#: By tuning (function, key, rank); compile events come from COMPILE's pool threads.
_compiling: dict[tuple[str, str, int], _Compiling] = {}
_compiling_lock = threading.Lock()


@hookimpl
def kerneltune_compile_started(event: CompileStarted) -> None:
    if event.ahead:  # no round waits for it: the phase is the rounds' compiles
        return
    tuning = (event.function, repr(event.key), event.rank)
    with _compiling_lock:
        _compiling.setdefault(tuning, _Compiling(time.monotonic()))


@hookimpl
def kerneltune_compile_finished(event: CompileFinished) -> None:
    if event.ahead:
        return
    tuning = (event.function, repr(event.key), event.rank)
    with _compiling_lock:
        phase = _compiling.get(tuning)
        if phase is None:
            return
        phase.slowest = max(phase.slowest, (event.seconds, event.candidate.index))
        phase.failed += event.error is not None
        if event.done < event.total:
            return
        del _compiling[tuning]
    seconds, slowest = phase.slowest
    failed = f", {phase.failed} failed" if phase.failed else ""
    _emit(
        event,
        f"{event.function}: key {event.key!r}: compiled {event.total} candidate(s) in "
        f"{time.monotonic() - phase.began:.2f} s (the slowest [{slowest}] {seconds:.2f} s{failed})",
    )


@hookimpl
def kerneltune_pick_loaded(event: PickLoaded) -> None:
    if event.source in ("default", "neighbour") and event.tune in ("nearest", "pending"):
        # Served unmeasured and marked pending: worth a line in the file, as a tuning is.
        by = (
            f"the pick of the nearest stored key {event.served_by!r}"
            if event.source == "neighbour"
            else "the first config (no stored key near it)"
        )
        _emit(
            event,
            f"{event.function}: key {event.key!r}: no stored pick, and tune = {event.tune!r}: served "
            f"without measuring by {by}, [{event.best.index}] {event.best.label}; marked pending",
            later=True,
        )
        return
    if event.source == "default":
        line = (
            f"{event.function}: key {event.key!r}: no stored pick, and tune = {event.tune!r}: running "
            f"[{event.best.index}] {event.best.label} unmeasured"
        )
    else:
        where = (
            f"the {event.cache or 'configured'} cache"
            if event.source == "cache"
            else "another rank's record, shared when the ranks agreed"
        )
        stored = "" if event.confidence is None else f" ({event.confidence})"
        line = (
            f"{event.function}: key {event.key!r}: using the stored pick [{event.best.index}] "
            f"{event.best.label}{stored} from {where}: no measuring"
        )
    # Not in the file: the log file records tunings, and a hit changes nothing on disk.
    _say(line, event.verbose)


@hookimpl
def kerneltune_candidate_measured(event: CandidateMeasured) -> None:
    measurement = event.measurement
    # Measurement.mean is the trimmed mean (records.trimmed), the statistic SELECT compares.
    # A later round's mean covers every sample so far, not the round's: say which round it is, and so.
    stage = f" ({event.stage})" if event.stage else ""
    so_far = f" of its {len(measurement.samples)} samples so far" if event.stage else ""
    mean = f"trimmed mean{so_far} {format_ms(measurement.mean)}"
    outcome = measurement.error if measurement.error else mean
    samples = "".join(f"    sample {i}: {s:.6f} ms\n" for i, s in enumerate(measurement.samples))
    # A candidate's first failure brings its traceback: the warning names the error, the log keeps where.
    trace = "".join(f"    {line}\n" for line in (event.traceback or "").splitlines())
    _emit(
        event,
        f"{event.function}: [{event.candidate.index}] {event.candidate.label}{stage}: {outcome}",
        samples + trace,
    )


def _verdict(event: TuningFinished) -> str:
    """The pick's confidence, and for an uncertain one the rivals it could not be told from."""
    done = "re-checked: " if event.recheck else ""
    if event.confidence != "uncertain":
        return f"{done}{event.confidence}"
    rivals = ", ".join(f"[{i}]" for i in event.rivals)
    off_cpu = "".join(f"; [{i}] timed off the CPU" for i in event.descheduled)
    return f"{done}uncertain (not told apart from {rivals}; noise {event.noise:.0%}{off_cpu})"


def _time_or_why(event: TuningFinished, index: int) -> str:
    """A candidate's time; without one, pruned or not measured as ``kerneltune report`` says, else failed."""
    measured = event.times[index]
    if math.isfinite(measured):
        return format_ms(measured)
    error = event.errors[index] if event.errors else None
    # Measured on another rank (sharded), its local "not measured" is not why it has no time.
    elsewhere = any(i == index for i, _ in event.measured_elsewhere)
    return error if error in (PRUNED, NOT_MEASURED) and not elsewhere else "failed"


def _rank_ms(value: float) -> str:
    return f"{value:.4f}" if math.isfinite(value) else "failed"


def _slowest(times: tuple[float, ...]) -> int:
    """The rank whose time is the candidate's under MAX (the lowest of ties)."""
    return max(range(len(times)), key=lambda r: (times[r], -r))


def _agreed_lines(event: TuningFinished) -> list[str]:
    """Each candidate's time as SELECT compares it, where the ranks measured alike: its slowest rank's.

    This rank's own lines came as it measured; these come from REDUCE, with
    every rank's time where the reducer gathered them. Candidates this rank
    did not measure (pruned, or timed by an earlier tuning) have none.
    """
    if event.world_size <= 1 or event.measured_on:
        return []
    lines = []
    for candidate in event.candidates:
        index = candidate.index
        if event.errors and event.errors[index] in (PRUNED, NOT_MEASURED):
            continue
        agreed = event.times[index]
        each = event.rank_times[index] if event.rank_times else ()
        if not math.isfinite(agreed):
            failed = [str(r) for r, t in enumerate(each) if not math.isfinite(t)]
            on = f"rank{'s' if len(failed) > 1 else ''} {', '.join(failed)}" if failed else "some rank"
            where, outcome = f"of {event.world_size} ranks", f"failed on {on}"
        else:
            slowest = f": rank {_slowest(each)}" if each else ""
            where = f"slowest of {event.world_size} ranks{slowest}"
            outcome = f"trimmed mean {format_ms(agreed)}"
        ranks = ", ".join(f"rank {r} {_rank_ms(t)}" for r, t in enumerate(each))
        lines.append(
            f"{event.function}: [{index}] {candidate.label} ({where}): {outcome}"
            + (f"; each rank (ms): {ranks}" if ranks else "")
        )
    return lines


def _pick_time(event: TuningFinished, index: int) -> str:
    """The pick's time; with several ranks, also whose it is: its slowest rank's, or its measuring rank's."""
    text = format_ms(event.times[index])
    if event.world_size <= 1:
        return text
    if event.measured_on:
        return f"{text}, measured on rank {event.measured_on[index]} of {event.world_size}"
    each = event.rank_times[index] if event.rank_times else ()
    slowest = f", rank {_slowest(each)} of {event.world_size}" if each else f" of {event.world_size}"
    return f"{text} on its slowest rank{slowest}"


@hookimpl
def kerneltune_tuning_finished(event: TuningFinished) -> None:
    # Sharded, the other ranks' candidates were never measured here: their times come now, from REDUCE.
    for index, rank in event.measured_elsewhere:
        candidate, measured = event.candidates[index], event.times[index]
        outcome = f"trimmed mean {format_ms(measured)}" if math.isfinite(measured) else "failed"
        _emit(event, f"{event.function}: [{index}] {candidate.label} (measured on rank {rank}): {outcome}")
    # With ranks measuring alike, the times SELECT compares are the slowest rank's, not this rank's.
    for agreed in _agreed_lines(event):
        _emit(event, agreed)
    if event.best is None:
        line = f"{event.function}: key {event.key!r}: every candidate failed"
    else:
        line = (
            f"{event.function}: key {event.key!r}: picked [{event.best.index}] {event.best.label} "
            f"at {_pick_time(event, event.best.index)} (tuned in {event.seconds:.2f} s); "
            f"{_verdict(event)}"
        )
    table = "".join(f"    [{c.index}] {_time_or_why(event, c.index)}  {c.label}\n" for c in event.candidates)
    _emit(event, line, table)
