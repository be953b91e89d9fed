"""The stored keys of one function, in one cache entry beside its records: what ``tune = "nearest"`` reads.

Serving a key nobody tuned needs the stored keys and, for each, its pick and
the configs it timed in order; reading every record for that costs a
process hundreds of milliseconds at 1,000 keys. The index holds exactly
that, one row per stored key, under the entry :data:`KEY_INDEX_ENTRY`
(record entries are hex digests, so it meets none). Rows are grouped by
the facts a record must share with the tuner to serve it (code, hardware,
objective, software versions). Each record a tuning stores adds its row;
a cache without an index (filled before it existed) is listed into one by
the first process that stores or serves a key
(:mod:`kerneltune.core.machine.stored_keys`), so an index is as complete
as the listing it started from.
"""

from __future__ import annotations

from typing import Any

from kerneltune.core.errors import CacheReadError
from kerneltune.core.values import checked

KEY_INDEX_ENTRY = "stored-keys"
KEY_INDEX_KIND = "kerneltune stored keys"
KEY_INDEX_SCHEMA = 2
#: The lists of an index's rows, in the order a row's parts come (:func:`empty_index`).
_COLUMNS = ("facts", "keys", "rankings")


def is_key_index(data: Any) -> bool:
    """Whether stored plain data is a key index (else it should be a tuning record)."""
    return isinstance(data, dict) and data.get("kind") == KEY_INDEX_KIND


def empty_index(function: str) -> dict[str, Any]:
    """The plain data of an index of ``function`` without rows.

    The rows are three lists of one length, which read several times faster
    than a list per row: ``rows.facts`` (each row's facts, by number),
    ``rows.keys`` (the encoded keys) and ``rows.rankings`` (by number, each
    row's configs in the order they serve: the pick first, then by stored
    time). A ranking is a list of config numbers; ``configs`` holds the
    fingerprints. Keys mostly share a few rankings.
    """
    return {
        "kind": KEY_INDEX_KIND,
        "schema": KEY_INDEX_SCHEMA,
        "function": function,
        "facts": [],
        "configs": [],
        "rankings": [],
        "rows": {"facts": [], "keys": [], "rankings": []},
    }


def with_rows(data: dict[str, Any], rows: list[tuple[dict[str, Any], Any, list[str]]]) -> dict[str, Any]:
    """``data`` (an index that reads) with each ``(facts, key, ranked)`` row put in, replacing the key's.

    :param ranked: the fingerprints of the configs the key's record timed, its pick first.
    """
    index = dict(data)
    facts, configs, rankings = list(index["facts"]), list(index["configs"]), list(index["rankings"])
    columns = index["rows"]
    groups, keys, ranks = list(columns["facts"]), list(columns["keys"]), list(columns["rankings"])
    numbers = {fingerprint: i for i, fingerprint in enumerate(configs)}
    ranking_numbers = {tuple(ranking): i for i, ranking in enumerate(rankings)}
    for given, key, ranked in rows:
        if given not in facts:
            facts.append(given)
        group = facts.index(given)
        for fingerprint in ranked:
            if fingerprint not in numbers:
                numbers[fingerprint] = len(configs)
                configs.append(fingerprint)
        ranking = tuple(numbers[f] for f in ranked)
        if ranking not in ranking_numbers:
            ranking_numbers[ranking] = len(rankings)
            rankings.append(list(ranking))
        # Encoded keys are plain data: equal keys compare equal, a scan costs less than encoding each.
        pairs = enumerate(zip(keys, groups, strict=True))
        at = next((i for i, (old, g) in pairs if old == key and g == group), None)
        if at is None:
            groups.append(group)
            keys.append(key)
            ranks.append(ranking_numbers[ranking])
        else:
            ranks[at] = ranking_numbers[ranking]
    columns = {"facts": groups, "keys": keys, "rankings": ranks}
    index.update(facts=facts, configs=configs, rankings=rankings, rows=columns)
    return index


def _checked_header(data: Any, function: str) -> dict[str, Any]:
    """``data`` as a key index of ``function`` of this schema, its rows not read yet.

    :raises CacheReadError: for anything else.
    """
    index = checked.mapping(data, "stored keys")
    if not is_key_index(index) or index.get("schema") != KEY_INDEX_SCHEMA:
        raise CacheReadError(f"not a key index of schema {KEY_INDEX_SCHEMA}")
    if index.get("function") != function:
        raise CacheReadError(f"the key index of {index.get('function')!r}, not {function!r}")
    return index


def reads(data: Any, function: str, *, rows: bool = True) -> bool:
    """Whether ``data`` is a key index of ``function`` that reads; with ``rows=False``, whether a new
    row may go in (its header reads: a damaged row is found when the index is read, and a listing
    replaces it)."""
    try:
        if rows:
            rows_for(data, function, lambda facts: False)
        else:
            _checked_header(data, function)
    except CacheReadError:
        return False
    return True


def rows_for(data: Any, function: str, wanted: Any) -> list[tuple[Any, list[str]]]:
    """The rows of ``data`` whose facts ``wanted(facts)`` accepts: each key and its ranked fingerprints.

    :raises CacheReadError: for data that is no index of ``function`` of
        this schema, or rows that do not read.
    """
    index = _checked_header(data, function)
    facts = checked.rows(index.get("facts"), "stored keys.facts")
    configs = checked.rows(index.get("configs"), "stored keys.configs")
    if not all(isinstance(fingerprint, str) for fingerprint in configs):
        raise CacheReadError("stored keys.configs holds a fingerprint that is no string")
    rankings = []
    for n, ranking in enumerate(checked.rows(index.get("rankings"), "stored keys.rankings")):
        if not (isinstance(ranking, list) and all(type(i) is int and 0 <= i < len(configs) for i in ranking)):
            raise CacheReadError(f"stored keys.rankings[{n}] names a config the index lacks")
        rankings.append([configs[i] for i in ranking])
    columns = checked.mapping(index.get("rows"), "stored keys.rows")
    groups, keys, ranks = (checked.rows(columns.get(name), f"stored keys.rows.{name}") for name in _COLUMNS)
    if not len(groups) == len(keys) == len(ranks):
        raise CacheReadError("stored keys.rows: its facts, keys and rankings differ in length")
    # Checked over each column's distinct values: a test per row cost more than the rest of the read.
    try:
        distinct_groups, distinct_ranks = set(groups), set(ranks)
    except TypeError:
        raise CacheReadError("stored keys.rows holds a list or mapping where a number belongs") from None
    if not all(type(group) is int for group in distinct_groups):
        raise CacheReadError("stored keys.rows.facts holds a number that is no int")
    if not all(type(rank) is int and 0 <= rank < len(rankings) for rank in distinct_ranks):
        raise CacheReadError("stored keys.rows.rankings names a ranking the index lacks")
    accepted = {i for i, given in enumerate(facts) if wanted(given)}
    try:  # a float equal to a checked int (1.0 beside 1) is found only here
        if accepted.issuperset(distinct_groups):
            return list(zip(keys, map(rankings.__getitem__, ranks), strict=True))
        rows = zip(groups, keys, ranks, strict=True)
        return [(key, rankings[rank]) for group, key, rank in rows if group in accepted]
    except TypeError:
        raise CacheReadError("stored keys.rows.rankings holds a number that is no int") from None
