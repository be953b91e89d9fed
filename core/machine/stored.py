"""The stored record: read at LOOKUP (trusted only once checked), made at PERSIST."""

from __future__ import annotations

import json
import logging
import time
import warnings
from typing import Any

import attrs
from kerneltune.core.errors import CacheReadError
from kerneltune.core.machine.options import OBJECTIVE, VERSION_CHECK
from kerneltune.core.machine.schedule import Schedule
from kerneltune.core.machine.timing import WALL
from kerneltune.core.notices import user_stacklevel, warn_once
from kerneltune.core.plugin_system.contracts import DeviceTimer, ListingCache, provides
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.keys import plain_config
from kerneltune.core.values.pending import PendingMark, is_pending
from kerneltune.core.values.records import HOST_CLOCK, STATISTIC, Measurement, Method, TuningRecord
from kerneltune.core.values.space import Space

logger = logging.getLogger("kerneltune")


def read_record(
    session: Session, name: str, entry: str, key: Any, data: dict[str, Any] | None = None
) -> TuningRecord | PendingMark | None:
    """The record stored for ``entry``, or ``None`` (a logged miss) when there is none to trust.

    An entry holding a pending mark for the key (a key served unmeasured, not yet
    tuned) gives the mark.

    A record for another key is a miss; one made with other software
    versions is a warning, or a miss with ``version_check``. Its candidate
    list may differ from the live one (:mod:`kerneltune.core.machine.reuse`).

    :param data: the record's plain data where this process holds it already;
        ``None`` asks the cache plugin.
    :raises CacheReadError: for a damaged record (it cannot be read, or fails
        its checks), naming its file where the cache lists one;
        :func:`report_damage` says so, and the caller goes on as if nothing were stored.
    """
    try:
        if data is None:
            data = session.cache_load(name, entry)
        if data is None:
            return None
        if is_pending(data):
            mark = PendingMark.from_data(data)
            return mark if mark.key == key else None
        record = TuningRecord.from_data(data)
        record.check_pick()
    except CacheReadError as exc:
        raise CacheReadError(_located(session, name, entry, str(exc))) from exc
    if record.key != key:
        logger.info("kerneltune: %s: cache entry is for another key, retuning", name)
        return None
    if record.versions != session.versions:
        changed = sorted(
            k
            for k in set(record.versions) | set(session.versions)
            if record.versions.get(k) != session.versions.get(k)
        )
        detail = ", ".join(f"{k} {record.versions.get(k)} -> {session.versions.get(k)}" for k in changed)
        if session.settings[VERSION_CHECK]:
            logger.info("kerneltune: %s: software changed (%s), retuning", name, detail)
            return None
        warnings.warn(
            f"kerneltune: {name}: cached pick was tuned with other software ({detail}); using it "
            "anyway (set TRITON_DIST_AUTOTUNE_VERSION_CHECK=1 to retune)",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    return record


def report_damage(session: Session, name: str, entry: str, problem: CacheReadError) -> None:
    """Say once per record that it cannot be trusted: it is as good as absent, and is replaced."""
    message = (
        f"kerneltune: {name}: the stored record {entry} ({session.cache_plugin}) is damaged ({problem}); "
        "retuning, as if nothing were stored, replaces it (tune = 'never' or 'fail' go by no record)"
    )
    logger.info(message)
    warn_once(("damaged record", name, entry), message)


def _located(session: Session, name: str, entry: str, problem: str) -> str:
    """``problem`` led by the record's file, where the cache lists it and the problem does not name it."""
    cache = session.cache
    if provides(cache, ListingCache):
        try:
            path = next((p for _, listed, p in cache.entries(name) if listed == entry), None)
        except Exception:  # a damaged record is reported whatever the listing does
            path = None
        if path is not None and str(path) not in problem:
            return f"{path}: {problem}"
    return problem


def new_record(
    session: Session,
    space: Space,
    key: Any,
    best: int,
    times: tuple[float, ...],
    measurements: tuple[Measurement, ...],
    schedule: Schedule,
    finalists: tuple[int, ...] | None,
    *,
    shards: int = 1,
    carried: tuple[int, ...] = (),
    warm_start: dict[str, Any] | None = None,
    rank_times: tuple[tuple[float, ...], ...] = (),
    measured_on: tuple[int | None, ...] = (),
) -> TuningRecord:
    """The record of a finished tuning: the pick, every candidate's time and how they were measured.

    The arguments are the :class:`TuningRecord` fields of those names (``best``: its
    ``best_index``; ``key`` encoded); ``shards``: how many ranks split the candidates.
    """
    return TuningRecord(
        function=space.name,
        key=key,
        fingerprints=tuple(c.fingerprint for c in space.candidates),
        labels=tuple(c.label for c in space.candidates),
        best_index=best,
        times=times,
        measurements=measurements,
        versions=dict(session.versions),
        hardware=dict(session.hardware),
        created=time.time(),
        method=attrs.evolve(method_of(session, schedule), shards=shards),
        finalists=finalists,
        source=space.source,
        origin=space.origin,
        carried=carried,
        warm_start=warm_start,
        rank_times=rank_times,
        measured_on=measured_on,
        pick_values=_pick_values(session, space.candidates[best].config),
    )


def _pick_values(session: Session, config: Any) -> Any:
    values = plain_config(config, session.plain_value)
    try:
        # A plugin's tagged data must survive any cache: JSON is the narrowest.
        json.dumps(values, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return values


def method_of(session: Session, schedule: Schedule) -> Method:
    """How a tuning of ``session`` and ``schedule`` measures, as its record will say (no sharding)."""
    settings = session.settings
    objective = settings[OBJECTIVE]
    return Method(
        objective=objective,
        statistic=STATISTIC,
        timer=session.timer.name,
        warmup=schedule.warmup,
        repeat=schedule.repeat,
        timed=objective if objective == WALL or provides(session.timer, DeviceTimer) else HOST_CLOCK,
    )
