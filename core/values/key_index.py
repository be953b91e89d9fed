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
KEY_INDEX_SCHEMA = 3


def is_key_index(data: Any) -> bool:
    """Whether stored plain data is a key index (else it should be a tuning record)."""
    return isinstance(data, dict) and data.get("kind") == KEY_INDEX_KIND


def empty_index(function: str) -> dict[str, Any]:
    """The plain data of an index of ``function`` without rows.

    The rows are kept by their facts: ``groups`` holds, for each distinct
    facts, the facts and two lists of one length, ``keys`` (the encoded keys)
    and ``rankings`` (by number, each row's configs in the order they serve:
    the pick first, then by stored time). Columns read several times faster
    than a list per row, and a reader skips whole groups of other facts. A
    ranking is a list of config numbers; ``configs`` holds the fingerprints.
    Keys mostly share a few rankings.
    """
    return {
        "kind": KEY_INDEX_KIND,
        "schema": KEY_INDEX_SCHEMA,
        "function": function,
        "configs": [],
        "rankings": [],
        "groups": [],
    }


def with_rows(data: dict[str, Any], rows: list[tuple[dict[str, Any], Any, list[str]]]) -> dict[str, Any]:
    """``data`` (an index that reads) with each ``(facts, key, ranked)`` row put in, replacing the key's.

    :param ranked: the fingerprints of the configs the key's record timed, its pick first.
    """
    index = dict(data)
    configs, rankings = list(index["configs"]), list(index["rankings"])
    groups = [
        {**group, "keys": list(group["keys"]), "rankings": list(group["rankings"])}
        for group in index["groups"]
    ]
    numbers = {fingerprint: i for i, fingerprint in enumerate(configs)}
    ranking_numbers = {tuple(ranking): i for i, ranking in enumerate(rankings)}
    for given, key, ranked in rows:
        group = next((group for group in groups if group["facts"] == given), None)
        if group is None:
            group = {"facts": given, "keys": [], "rankings": []}
            groups.append(group)
        for fingerprint in ranked:
            if fingerprint not in numbers:
                numbers[fingerprint] = len(configs)
                configs.append(fingerprint)
        ranking = tuple(numbers[f] for f in ranked)
        if ranking not in ranking_numbers:
            ranking_numbers[ranking] = len(rankings)
            rankings.append(list(ranking))
        # Encoded keys are plain data: equal keys compare equal, a scan costs less than encoding each.
        keys = group["keys"]
        at = next((i for i, old in enumerate(keys) if old == key), None)
        if at is None:
            keys.append(key)
            group["rankings"].append(ranking_numbers[ranking])
        else:
            group["rankings"][at] = ranking_numbers[ranking]
    index.update(configs=configs, rankings=rankings, groups=groups)
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
            rows_for(data, function, lambda facts: True)
        else:
            _checked_header(data, function)
    except CacheReadError:
        return False
    return True


def rows_for(data: Any, function: str, wanted: Any) -> list[tuple[Any, list[str]]]:
    """The rows of ``data`` whose facts ``wanted(facts)`` accepts: each key and its ranked fingerprints.

    Only the groups ``wanted`` accepts are checked beyond their facts.

    :raises CacheReadError: for data that is no index of ``function`` of
        this schema, or rows that do not read.
    """
    index = _checked_header(data, function)
    configs = checked.rows(index.get("configs"), "stored keys.configs")
    if not all(isinstance(fingerprint, str) for fingerprint in configs):
        raise CacheReadError("stored keys.configs holds a fingerprint that is no string")
    rankings = []
    for n, ranking in enumerate(checked.rows(index.get("rankings"), "stored keys.rankings")):
        if not (isinstance(ranking, list) and all(type(i) is int and 0 <= i < len(configs) for i in ranking)):
            raise CacheReadError(f"stored keys.rankings[{n}] names a config the index lacks")
        rankings.append([configs[i] for i in ranking])
    found: list[tuple[Any, list[str]]] = []
    for n, group in enumerate(checked.rows(index.get("groups"), "stored keys.groups")):
        where = f"stored keys.groups[{n}]"
        group = checked.mapping(group, where)
        if not wanted(group.get("facts")):
            continue
        keys, ranks = (checked.rows(group.get(name), f"{where}.{name}") for name in ("keys", "rankings"))
        if len(keys) != len(ranks):
            raise CacheReadError(f"{where}: its keys and rankings differ in length")
        # Checked over the distinct values: a test per row cost more than the rest of the read.
        try:
            distinct = set(ranks)
        except TypeError:
            raise CacheReadError(f"{where}.rankings holds a list or mapping where a number belongs") from None
        if not all(type(rank) is int and 0 <= rank < len(rankings) for rank in distinct):
            raise CacheReadError(f"{where}.rankings names a ranking the index lacks")
        try:  # a float equal to a checked int (1.0 beside 1) is found only here
            found.extend(zip(keys, map(rankings.__getitem__, ranks), strict=True))
        except TypeError:
            raise CacheReadError(f"{where}.rankings holds a number that is no int") from None
    return found
