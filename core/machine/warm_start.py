"""Warm start: a new key measures the configs that won for the stored keys nearest to it.

Opt-in. ``"nearest"``: :func:`propose` plans the configs :func:`warm_candidates`
picks within ``warm_start_budget``. ``"screen"``: every kept config is timed
briefly, then the screen's fastest and the nearest key's pick are re-timed
head to head (:func:`screen_finalists`). docs/guide.md ("Warm start for a new
key") explains how each chooses and when not to use it.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from kerneltune.core.errors import CacheReadError
from kerneltune.core.machine.options import OBJECTIVE, VERSION_CHECK
from kerneltune.core.machine.reuse import Plan, rows_by_fingerprint
from kerneltune.core.machine.ties import Finalists
from kerneltune.core.plugin_system.contracts import ListingCache, provides
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.key_index import KEY_INDEX_ENTRY
from kerneltune.core.values.keys import describe, digest
from kerneltune.core.values.pending import is_pending
from kerneltune.core.values.portfolio import PORTFOLIO_ENTRY
from kerneltune.core.values.records import TuningRecord
from kerneltune.core.values.space import Space

logger = logging.getLogger("kerneltune")

OFF = "off"
NEAREST = "nearest"
SCREEN = "screen"
MODES = (OFF, NEAREST, SCREEN)
#: At least this many of the screen's fastest are finalists, whatever its noise says.
SCREEN_TOP = 2
#: How many of the nearest stored keys give their evidence.
NEAREST_KEYS = 2
#: Stored keys farther than this (in :func:`default_distance`'s steps: about 4x
#: in one size) are not used; with none nearer, a key is tuned in full.
MAX_DISTANCE = 2.0
#: A stored time counts this much worse per step of distance to its key.
DISTANCE_PENALTY = 0.1
#: How many of the budget's configs are ones no near key timed.
EXPLORE = 2
#: How far apart two config values are that are not both numbers, and differ.
MISMATCH = 1.0


@attrs.frozen
class WarmStart:
    """Whether a key without a record warm starts (``mode``), and how many configs it measures at most."""

    mode: str = OFF
    budget: int = 5


def checked_warm_start(name: str, mode: Any, budget: Any, *, unset: bool = False) -> Any:
    """``mode`` lower-cased, once it and ``budget`` are checked; with ``unset``, ``None`` passes for either.

    :raises ValueError: naming ``name`` and what each may be.
    """
    if isinstance(mode, str):
        mode = mode.strip().lower()
    either = " or None" if unset else ""
    if mode not in MODES and not (unset and mode is None):
        raise ValueError(f"{name}: warm_start must be one of {', '.join(MODES)}{either}, got {mode!r}")
    if (type(budget) is not int or budget < 1) and not (unset and budget is None):
        raise ValueError(f"{name}: warm_start_budget must be an integer >= 1{either}, got {budget!r}")
    return mode


@attrs.frozen
class Neighbour:
    """A stored key near the new one: its distance and its record."""

    distance: float
    record: TuningRecord


def log_scale(number: float) -> float:
    # Symmetric log: 0 stays 0, and 1 -> 2 is one step as 1024 -> 2048 is. log2 takes an int
    # of any size, where copysign would turn it into a float first and overflow.
    return (-1.0 if number < 0 else 1.0) * math.log2(1 + abs(number))


def key_number(value: Any) -> float | None:
    """The number an encoded key part holds, or ``None`` for one that is not a finite float.

    An int too large for a float (a key may hold any int) is no number here:
    such a key part has no distance but to itself.
    """
    try:
        if type(value) is int:
            return float(value)
        if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("float"), str):
            number = float.fromhex(value["float"])
            return number if math.isfinite(number) else None
    except (ValueError, OverflowError):
        return None
    return None


def default_distance(key: Any, other: Any) -> float:
    """The distance between two encoded keys: numeric parts on a log scale, the rest must match.

    Keys of different shapes (tuple lengths, tags) or with a non-numeric
    part that differs (a dtype, a layout name, a flag) are infinitely far
    apart. Numeric parts (ints and floats, ``torch.Size`` entries included)
    add ``|s(a) - s(b)|`` with ``s(x) = sign(x) log2(1 + |x|)``: doubling a
    size is about one step whatever the size.
    """
    a, b = key_number(key), key_number(other)
    if a is not None and b is not None:
        return abs(log_scale(a) - log_scale(b))
    if isinstance(key, list) and isinstance(other, list):
        if len(key) != len(other):
            return math.inf
        return sum((default_distance(x, y) for x, y in zip(key, other, strict=True)), 0.0)
    if isinstance(key, dict) and isinstance(other, dict) and len(key) == 1 and key.keys() == other.keys():
        (tag,) = key
        return default_distance(key[tag], other[tag])
    return 0.0 if key == other and type(key) is type(other) else math.inf


def key_distance(session: Session, function: str, key: Any, other: Any) -> float:
    """``kerneltune_key_distance``'s answer, or :func:`default_distance` where no plugin gives a good one.

    A plugin's answer is checked at the seam (:meth:`Session.key_distance`):
    one that raises or answers badly is warned about once and skipped.
    """
    answer = session.key_distance(function, key, other)
    return default_distance(key, other) if answer is None else answer


def _leaves(value: Any, path: str = "", *, numbers: bool = False) -> Iterable[tuple[str, Any]]:
    # Every leaf of plain data by its path; with ``numbers``, a tagged float ({"float": hex}) is one leaf.
    if isinstance(value, dict) and not (numbers and _numeric(value) is not None):
        for name, item in value.items():
            yield from _leaves(item, f"{path}.{name}", numbers=numbers)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]", numbers=numbers)
    else:
        yield path, value


def config_distance(config: Any, other: Any) -> float:
    """How far apart two configs' values are: numbers on a log scale, other differences one step each.

    Configs are compared through :func:`kerneltune.core.values.keys.describe`, so a
    ``triton.Config``'s block sizes, warps and stages count alike, and a
    dict of keyword values by each value.
    """
    mine, theirs = dict(_leaves(describe(config))), dict(_leaves(describe(other)))
    total = 0.0
    for path in mine.keys() | theirs.keys():
        a, b = mine.get(path), theirs.get(path)
        if type(a) is int and type(b) is int:
            total += abs(log_scale(a) - log_scale(b))
        elif path not in mine or path not in theirs or a != b:
            total += MISMATCH
    return total


def _numeric(part: Any) -> float | None:
    """A finite number in an encoded key or a described config (not a bool), else ``None``."""
    if isinstance(part, float):
        return part if math.isfinite(part) else None
    return key_number(part)


def growth(before: Any, after: Any) -> float:
    """How much larger ``after``'s numbers are than ``before``'s, summed on :func:`default_distance`'s scale.

    Over the numeric parts both hold at the same place: two encoded keys,
    or two configs as :func:`~kerneltune.core.values.keys.describe` gives
    them. Positive when ``after`` is larger overall, negative when smaller,
    0 when neither or when they share no numbers.
    """
    mine, theirs = dict(_leaves(before, numbers=True)), dict(_leaves(after, numbers=True))
    total = 0.0
    for path in mine.keys() & theirs.keys():
        a, b = _numeric(mine[path]), _numeric(theirs[path])
        if a is not None and b is not None:
            total += log_scale(b) - log_scale(a)
    return total


def plain(value: Any) -> Any:
    """``value`` as it reads back from a record: live facts may hold tuples where a record holds lists."""
    return json.loads(json.dumps(value))


#: The entries beside a function's records that hold no record.
_NOT_RECORDS = (KEY_INDEX_ENTRY, PORTFOLIO_ENTRY)

#: Records parsed from their plain data, by entry: the data, and its record (``None``: unreadable).
Parsed = dict[str, tuple[dict[str, Any], TuningRecord | None]]


def stored_records(
    session: Session,
    space: Space,
    known: dict[str, dict[str, Any]],
    parsed: Parsed | None = None,
) -> list[TuningRecord]:
    """The records of ``space``'s function that this process knows or the cache lists.

    :param known: the records this process made or read, by entry; the
        listed ones read here are added to it, so each is read once.
    :param parsed: what earlier calls parsed, by entry; an entry is parsed again only once its
        data is other data (a new record stored under it).
    """
    cache = session.cache
    if provides(cache, ListingCache):
        try:
            listed = [entry for _, entry, _ in cache.entries(space.name)]
        except Exception as exc:
            logger.info(
                "kerneltune: %s: cannot list the stored records for a warm start (%s)", space.name, exc
            )
            listed = []
        for entry in listed:
            if entry in known or entry in _NOT_RECORDS:
                continue
            try:
                data = session.cache_load(space.name, entry)
            except CacheReadError as exc:
                logger.debug("kerneltune: %s: warm start skips entry %s (%s)", space.name, entry, exc)
                continue
            if data is not None and not is_pending(data):
                known[entry] = data
    parsed = {} if parsed is None else parsed
    records = []
    for entry, data in list(known.items()):
        held = parsed.get(entry)
        if held is None or held[0] is not data:
            held = parsed[entry] = (data, _parse(data))
        if held[1] is not None:
            records.append(held[1])
    return records


def _parse(data: dict[str, Any]) -> TuningRecord | None:
    """The record ``data`` holds, checked; ``None`` for one that does not read."""
    try:
        record = TuningRecord.from_data(data)
        record.check_pick()
    except CacheReadError:
        return None
    return record


def nearest(
    session: Session, space: Space, key: Any, records: Iterable[TuningRecord], objective: str
) -> list[Neighbour]:
    """The records of other keys of ``space``'s code and this hardware, nearest key first.

    One record per key, at a finite distance. Only records measured with
    ``objective``, and with ``version_check`` only those made with this
    software, count.
    """
    hardware = plain(session.hardware)
    found = []
    for record in records:
        if (
            record.function != space.name
            or record.source != space.source
            or record.key == key
            or record.method.objective != objective
            # A record read back holds lists already; one made here may hold tuples.
            or (record.hardware != hardware and plain(record.hardware) != hardware)
            or (session.settings[VERSION_CHECK] and record.versions != session.versions)
        ):
            continue
        distance = key_distance(session, space.name, key, record.key)
        if math.isfinite(distance):
            found.append((distance, record))
    found.sort(key=lambda entry: entry[0])
    # Records of one key lie at one distance: only those sharing it need their keys' digests,
    # to order them and keep one per key (a digest per stored key cost most of a served key).
    neighbours: list[Neighbour] = []
    for distance, group in itertools.groupby(found, key=lambda entry: entry[0]):
        same = [record for _, record in group]
        if len(same) > 1:
            by_key: dict[str, TuningRecord] = {}
            for record in same:
                by_key.setdefault(digest(record.key), record)
            same = [by_key[name] for name in sorted(by_key)]
        neighbours.extend(Neighbour(distance, record) for record in same)
    return neighbours


def ranked(record: TuningRecord, space: Space, kept: Mapping[int, Any]) -> list[int]:
    """The kept live candidates the record timed: its pick first, then by stored time."""
    live = {c.fingerprint: c.index for c in space.candidates if c.index in kept}
    rows = rows_by_fingerprint(record)
    timed = [
        (row, live[fingerprint])
        for fingerprint, row in rows.items()
        if fingerprint in live and math.isfinite(record.times[row])
    ]
    order = sorted(timed, key=lambda pair: (pair[0] != record.best_index, record.times[pair[0]], pair[1]))
    return [index for _, index in order]


def evidence(space: Space, kept: Mapping[int, Any], neighbours: list[Neighbour]) -> dict[int, float]:
    """Each kept candidate some neighbour timed: its best relative time over the neighbours.

    A relative time is the candidate's stored time over the fastest time
    its key stored, times ``1 + DISTANCE_PENALTY * distance``; 1.0 is a
    pick of a key at distance 0.
    """
    live = {c.fingerprint: c.index for c in space.candidates if c.index in kept}
    scores: dict[int, float] = {}
    for neighbour in neighbours:
        record = neighbour.record
        finite = [t for t in record.times if math.isfinite(t)]
        if not finite or min(finite) <= 0:
            continue
        fastest, penalty = min(finite), 1 + DISTANCE_PENALTY * neighbour.distance
        for fingerprint, row in rows_by_fingerprint(record).items():
            index = live.get(fingerprint)
            if index is not None and math.isfinite(record.times[row]):
                score = record.times[row] / fastest * penalty
                scores[index] = min(scores.get(index, math.inf), score)
    return scores


def warm_candidates(
    space: Space, kept: tuple[int, ...], neighbours: list[Neighbour], budget: int, key: Any = None
) -> tuple[int, ...]:
    """The candidates a warm start measures, at most ``budget``.

    In order: the nearest key's pick; the configs the neighbours timed, best
    evidence first (:func:`evidence`); then :data:`EXPLORE` configs the
    nearest key never timed (where the best tile grows with the key, only
    those reach it), those the way the key moved first (:func:`growth`),
    then the closest in value to the pick (:func:`config_distance`).

    :param key: the new key, encoded; ``None`` explores by closeness alone.
    """
    allowed = dict.fromkeys(kept)
    leading = next((r for r in (ranked(n.record, space, allowed) for n in neighbours) if r), None)
    if leading is None:
        return ()
    lead = space.candidates[leading[0]]
    scores = evidence(space, allowed, neighbours)
    toward = 0.0 if key is None else growth(neighbours[0].record.key, key)
    pick = describe(lead.config)

    def exploring(i: int) -> tuple[bool, float, int, int]:
        config = space.candidates[i].config
        # With the key's growth, a config that grows the other way (or not at all) comes later.
        against = toward != 0 and growth(pick, describe(config)) * toward <= 0
        return against, config_distance(lead.config, config), abs(i - lead.index), i

    unknown = sorted((i for i in kept if i not in leading), key=exploring)
    explored = unknown[: min(EXPLORE, budget - 1)]
    known = sorted((i for i in scores if i != lead.index and i not in explored), key=lambda i: (scores[i], i))
    rest = [i for i in unknown if i not in explored]
    return tuple([lead.index, *known[: budget - 1 - len(explored)], *explored, *rest][:budget])


def propose(
    session: Session,
    space: Space,
    key: Any,
    kept: tuple[int, ...],
    known: dict[str, dict[str, Any]],
    budget: int,
    screen: bool = False,
    parsed: Parsed | None = None,
) -> Plan | None:
    """The warm start for ``key``, or ``None`` to tune every kept candidate.

    :param screen: screen every kept candidate (``warm_start = "screen"``) instead of measuring
        the budget's few.
    :param key: the new key, encoded.
    :param known: the records this process made or read, by entry (see :func:`stored_records`).
    :param parsed: the records parsed before, by entry (see :func:`stored_records`).
    :raises PluginError: for a ``kerneltune_key_distance`` answer that is not a distance.
    """
    if len(kept) <= budget:
        return None
    records = stored_records(session, space, known, parsed)
    allowed = dict.fromkeys(kept)
    # The nearest keys that timed any of the kept candidates.
    found = nearest(session, space, key, records, session.settings[OBJECTIVE])
    # Nearest first: only as many are ranked as are needed.
    near = (n for n in found if n.distance <= MAX_DISTANCE and ranked(n.record, space, allowed))
    neighbours = list(itertools.islice(near, NEAREST_KEYS))
    if not neighbours:
        logger.info(
            "kerneltune: %s: no stored key within distance %s of %r timed these candidates, tuning in full",
            space.name,
            MAX_DISTANCE,
            key,
        )
        return None
    start = neighbours[0]
    if screen:
        lead = next(r for r in (ranked(n.record, space, allowed) for n in neighbours) if r)[0]
        where = {"from": start.record.key, "distance": start.distance, "screen": True, "lead": lead}
        return Plan(measure=(), warm_start=where)
    chosen = warm_candidates(space, kept, neighbours, budget, key)
    return Plan(measure=chosen, warm_start={"from": start.record.key, "distance": start.distance})


def screen_finalists(screened: Finalists, lead: int | None, budget: int) -> Finalists:
    """The candidates a screened warm start re-times head to head, at most ``budget`` (and 2).

    The screen's near ties and rivals within its noise (``screened``, as
    every rank agrees on them), its :data:`SCREEN_TOP` fastest whatever the
    noise says (two samples can mislead), and the nearest key's pick
    (``lead``) where the screen timed it; the screen's fastest first.
    """
    times = screened.times
    timed = sorted((i for i, t in enumerate(times) if math.isfinite(t)), key=lambda i: (times[i], i))
    wanted = [*screened.indices, *timed[:SCREEN_TOP]]
    if lead is not None and 0 <= lead < len(times) and math.isfinite(times[lead]):
        wanted.append(lead)
    chosen = sorted(dict.fromkeys(wanted), key=lambda i: (times[i], i))
    keep = max(2, budget)
    if lead in chosen[keep:]:
        chosen = [*chosen[: keep - 1], lead]  # the neighbours' word gets its re-timing
    return Finalists(tuple(chosen[:keep]), (), screened.noise, times)
