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
KEY_INDEX_SCHEMA = 1

#: One row as stored: the index of its facts, the encoded key, and the indices of its configs
#: (fingerprints) in the order they serve: the pick first, then by stored time.
Row = list[Any]


def is_key_index(data: Any) -> bool:
    """Whether stored plain data is a key index (else it should be a tuning record)."""
    return isinstance(data, dict) and data.get("kind") == KEY_INDEX_KIND


def empty_index(function: str) -> dict[str, Any]:
    """The plain data of an index of ``function`` without rows."""
    return {
        "kind": KEY_INDEX_KIND,
        "schema": KEY_INDEX_SCHEMA,
        "function": function,
        "facts": [],
        "configs": [],
        "rows": [],
    }


def with_rows(data: dict[str, Any], rows: list[tuple[dict[str, Any], Any, list[str]]]) -> dict[str, Any]:
    """``data`` (an index that reads) with each ``(facts, key, ranked)`` row put in, replacing the key's.

    :param ranked: the fingerprints of the configs the key's record timed, its pick first.
    """
    index = dict(data)
    facts = list(index["facts"])
    configs = list(index["configs"])
    numbers = {fingerprint: i for i, fingerprint in enumerate(configs)}
    kept = list(index["rows"])
    for given, key, ranked in rows:
        if given not in facts:
            facts.append(given)
        group = facts.index(given)
        for fingerprint in ranked:
            if fingerprint not in numbers:
                numbers[fingerprint] = len(configs)
                configs.append(fingerprint)
        row = [group, key, [numbers[f] for f in ranked]]
        # Encoded keys are plain data: equal keys compare equal, a scan costs less than encoding each.
        at = next((i for i, old in enumerate(kept) if old[1] == key and old[0] == group), len(kept))
        kept[at : at + 1] = [row]
    index.update(facts=facts, configs=configs, rows=kept)
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
        this schema, or a row that does not read.
    """
    index = _checked_header(data, function)
    facts = checked.rows(index.get("facts"), "stored keys.facts")
    configs = checked.rows(index.get("configs"), "stored keys.configs")
    if not all(isinstance(fingerprint, str) for fingerprint in configs):
        raise CacheReadError("stored keys.configs holds a fingerprint that is no string")
    accepted = {i for i, given in enumerate(facts) if wanted(given)}
    rankings: dict[tuple[Any, ...], list[str]] = {}  # keys mostly share a few rankings
    found = []
    for n, row in enumerate(checked.rows(index.get("rows"), "stored keys.rows")):
        if not (isinstance(row, list) and len(row) == 3 and type(row[0]) is int and isinstance(row[2], list)):
            raise CacheReadError(f"stored keys.rows[{n}] is not [facts, key, configs]")
        if row[0] not in accepted:
            continue
        ranked = tuple(row[2])
        if ranked not in rankings:
            try:
                if ranked and min(ranked) < 0:
                    raise IndexError
                rankings[ranked] = [configs[i] for i in ranked]
            except (IndexError, TypeError):
                raise CacheReadError(f"stored keys.rows[{n}] names a config the index lacks") from None
        found.append((row[1], rankings[ranked]))
    return found
