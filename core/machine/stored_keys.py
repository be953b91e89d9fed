"""A tuner's stored keys, read for ``tune = "nearest"`` from the function's key index.

The key index (:mod:`kerneltune.core.values.key_index`) is one cache entry
beside the records; :class:`StoredKeys` reads it once per process and facts
and searches it with :class:`~.nearest_keys.NearestKeys`. Each record a tuning
stores adds its row (:func:`index_record`); where the cache has no index
yet (one filled before the index existed), the records are listed into one
and it is stored.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from kerneltune.core.background import in_background
from kerneltune.core.errors import CacheReadError
from kerneltune.core.machine.nearest_keys import NearestKeys
from kerneltune.core.machine.options import OBJECTIVE, VERSION_CHECK
from kerneltune.core.machine.portfolio_start import stored_portfolio
from kerneltune.core.machine.reuse import rows_by_fingerprint
from kerneltune.core.machine.warm_start import Parsed, plain, stored_records
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.key_index import KEY_INDEX_ENTRY, empty_index, reads, rows_for, with_rows
from kerneltune.core.values.portfolio import Portfolio
from kerneltune.core.values.records import TuningRecord
from kerneltune.core.values.space import Space

#: The records a tuner holds, by cache entry (``Setup.records``).
Known = dict[str, dict[str, Any]]

logger = logging.getLogger("kerneltune")


class StoredKeys:
    """A tuner's stored keys and portfolio, as ``tune = "nearest"`` serves from them: read once per process.

    From the function's key index (:mod:`kerneltune.core.values.key_index`),
    one cache entry; where the cache has none yet, from a listing of its
    records, and the index is stored for the next process. A record this
    process stores adds its row, and the keys are read again at the next
    key served. :meth:`read_ahead` reads the index at a stored key's call.
    """

    def __init__(self) -> None:
        #: what the keys were read for (the facts a row must have), the keys and the stored portfolio.
        self._found: tuple[object, NearestKeys[list[str]], Portfolio | None] | None = None
        #: the cache found to keep no key index (the ``none`` cache, one that cannot write): its
        #: stores add no row, where each would list every record this process holds.
        self.unkept: object = None
        # A read holds no lock (a fork never copies a lock held over a read, and threads serving
        # keys of one tuner read side by side); this one guards what a read keeps, and a read begun
        # before a forget() keeps nothing.
        self._lock = threading.Lock()
        self._forgotten = 0
        self._read_ahead = False

    @property
    def portfolio(self) -> Portfolio | None:
        """The function's stored portfolio, as the keys were last read."""
        found = self._found
        return None if found is None else found[2]

    def keys(self, session: Session, space: Space, records: Known, parsed: Parsed) -> NearestKeys[list[str]]:
        """The keys of ``space``'s code, hardware, objective and (with ``version_check``) software.

        :param records, parsed: the tuner's records and their parsed forms, for a listing
            (:func:`~.warm_start.stored_records`).
        """
        keys = self._read(session, space, (records, parsed))
        assert keys is not None, "with a listing, keys are always found"
        return keys

    def read_ahead(self, session: Session, space: Space) -> None:
        """Read the keys now, at a call whose key's pick was stored (once per tuner).

        A process serving keys found its first key's pick stored: the first
        key nobody stored then finds the index read, and the background
        thread that writes its pending mark started, whenever it comes.
        (Read on that thread, the index waited for the interpreter while
        calls came back to back, and such a key read it again on its own
        path.) An index that does not read is left for such a key to list
        (the tuner's records are its thread's).
        """
        if not self._read_ahead:
            self._read_ahead = True
            self._read(session, space, None)
            in_background(lambda: None)  # the thread that writes served keys' marks, started now

    def _read(
        self, session: Session, space: Space, listing: tuple[Known, Parsed] | None
    ) -> NearestKeys[list[str]] | None:
        check = session.settings[VERSION_CHECK]
        wanted = {
            "source": space.source,
            "hardware": plain(session.hardware),
            "objective": session.settings[OBJECTIVE],
            "versions": session.versions if check else None,
        }
        found = self._found
        if found is not None and found[0] == wanted:
            return found[1]
        forgotten = self._forgotten

        def accepts(facts: Any) -> bool:
            return isinstance(facts, dict) and all(
                facts.get(name) == value for name, value in wanted.items() if name != "versions" or check
            )

        rows = _stored_rows(session, space, accepts, listing)
        if rows is None:
            return None
        found = (wanted, NearestKeys(rows), stored_portfolio(session, space.name))
        with self._lock:
            if self._forgotten == forgotten:
                self._found = found
        return found[1]

    def forget(self) -> None:
        """Read the keys again at the next key served: this process stored a record."""
        with self._lock:
            self._forgotten += 1
            self._found = None


def _stored_rows(
    session: Session, space: Space, accepts: Callable[[Any], bool], listing: tuple[Known, Parsed] | None
) -> list[tuple[Any, list[str]]] | None:
    """The rows of the key index that ``accepts`` takes; with none that reads, the records' (index
    stored), or ``None`` without ``listing`` (the tuner's records and their parsed forms)."""
    name = space.name
    try:
        data = session.cache_load(name, KEY_INDEX_ENTRY)
        if data is not None:
            return rows_for(data, name, accepts)
    except CacheReadError as exc:
        logger.info("kerneltune: %s: the stored key index does not read (%s); listing the records", name, exc)
    if listing is None:
        return None
    return rows_for(_list_into_index(session, space, *listing), name, accepts)


def _list_into_index(session: Session, space: Space, records: Known, parsed: Parsed) -> dict[str, Any]:
    """A key index of ``space``'s function from a listing of its records, stored unless another
    process stored one meanwhile."""
    name = space.name
    listed = [r for r in stored_records(session, space, records, parsed) if r.function == name]
    built = with_rows(empty_index(name), [(record_facts(r), r.key, record_ranking(r)) for r in listed])
    _change_index(session, name, lambda current: None if reads(current, name) else built)
    return built


def record_facts(record: TuningRecord) -> dict[str, Any]:
    """What a tuner must share with ``record`` to serve a key from it (:class:`StoredKeys`)."""
    return {
        "source": record.source,
        "hardware": plain(record.hardware),
        "objective": record.method.objective,
        "versions": record.versions,
    }


def record_ranking(record: TuningRecord) -> list[str]:
    """The fingerprints of the configs ``record`` timed: its pick first, then by stored time."""
    rows = rows_by_fingerprint(record)
    timed = [(row, fp) for fp, row in rows.items() if math.isfinite(record.times[row])]
    timed.sort(key=lambda pair: (pair[0] != record.best_index, record.times[pair[0]], pair[0]))
    return [fingerprint for _, fingerprint in timed]


def index_record(
    session: Session, space: Space, stored: StoredKeys, record: TuningRecord, records: Known, parsed: Parsed
) -> None:
    """Add ``record``, stored just now, to the key index of ``space``'s function.

    Where the cache holds no index that takes a row, the records are listed
    into one (the record included): a fresh cache's first record lists only
    itself, and a cache older than the index pays its listing in a tuning
    process, not in the first serving one.
    """
    stored.forget()
    name = space.name
    if record.function != name or stored.unkept is session.cache:
        return
    row = (record_facts(record), record.key, record_ranking(record))
    absent = False

    def change(current: Any) -> Any:
        nonlocal absent
        absent = not reads(current, name, rows=False)
        updated = None if absent else with_rows(current, [row])
        return None if updated == current else updated  # the row it holds already: no write

    _change_index(session, name, change)
    if absent:
        _list_into_index(session, space, records, parsed)
        # Another process's listing may have been stored first, without this record: add its row.
        _change_index(session, name, change)
        if absent:
            stored.unkept = session.cache


def _change_index(session: Session, name: str, change: Callable[[Any], Any]) -> None:
    """Change the stored key index, under the cache's lock where it has one; a failure is a log line."""
    try:
        session.cache_amend(name, KEY_INDEX_ENTRY, change)
    except Exception as exc:
        logger.info("kerneltune: %s: cannot store the key index (%s: %s)", name, type(exc).__name__, exc)
