"""Serving a key nobody tuned, measuring nothing: the nearest stored key's pick, and the key marked pending.

``tune = "nearest"`` serves a key without a stored pick at once, by the pick
of the nearest stored key (:func:`~.warm_start.nearest`, the warm start's
distance), or by the first kept config where nothing is stored; the key's
cache entry then holds a :class:`~kerneltune.core.values.pending.PendingMark`.
``tune = "pending"`` tunes the keys so marked and serves every other key
the same way. docs/guide.md ("Serving unseen shapes") explains the modes.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kerneltune.core.background import in_background, wait_for_background
from kerneltune.core.errors import CacheReadError
from kerneltune.core.machine.options import TUNE, TUNE_AUTO, TUNE_NEAREST, TUNE_PENDING
from kerneltune.core.machine.portfolio_start import portfolio_indices
from kerneltune.core.machine.schedule import Setup
from kerneltune.core.machine.warm_start import key_distance
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.plugin_system.settings import Settings
from kerneltune.core.values.pending import PendingMark, is_pending
from kerneltune.core.values.records import Candidate

logger = logging.getLogger("kerneltune")

#: The ``tune`` values that serve a key without a stored pick from what is stored.
SERVING = (TUNE_NEAREST, TUNE_PENDING)


def serves(settings: Settings, reducer_size: int) -> bool:
    """Whether a key without a stored pick is served from the stored ones (alone: ranks would disagree)."""
    return settings[TUNE] in SERVING and reducer_size == 1


def untuned(settings: Settings, mark: PendingMark | None) -> bool:
    """Whether a key without a pick runs unmeasured: ``tune`` is not ``"auto"``, and under
    ``tune = "pending"`` the key is not pending (``mark``)."""
    return settings[TUNE] != TUNE_AUTO and not (settings[TUNE] == TUNE_PENDING and mark is not None)


def served(setup: Setup, kept: tuple[int, ...]) -> tuple[int, Any]:
    """The kept candidate that serves ``setup``'s key unmeasured, and the encoded key whose pick it is.

    The nearest stored key that timed a kept candidate gives its pick (or
    its fastest kept one); with none, the first kept candidate (and ``None``).
    Where a portfolio is stored (``kerneltune portfolio --store``), only its
    configs serve: the nearest key's fastest of them, else its first.
    """
    session, space, stored = setup.session, setup.space, setup.stored
    keys = stored.keys(session, space, setup.records, setup.parsed)
    allowed = dict.fromkeys(
        (stored.portfolio and portfolio_indices(session, space, kept, stored.portfolio)) or kept
    )
    live = {c.fingerprint: c.index for c in space.candidates if c.index in allowed}
    distance = None
    if session.plugs_key_distance:

        def distance(key: Any, other: Any) -> float:
            return key_distance(session, space.name, key, other)

    for _, key, ranking in keys.nearest(setup.encoded, distance):
        for fingerprint in ranking:
            if fingerprint in live:
                return live[fingerprint], key
    return next(iter(allowed)), None


def flush_marks() -> None:
    """Wait until every pending mark (and served key's log line) this process made is written."""
    wait_for_background()


def mark_pending(setup: Setup, pick: Candidate, served_by: Any) -> None:
    """Record in the cache that ``setup``'s key was served by ``pick`` unmeasured: a new mark, or one more.

    Written in the background (:mod:`kerneltune.core.background`); under the cache's
    lock where it has one (:class:`AmendingCache`), so processes marking one
    key at once each count; a record stored meanwhile stays. A cache that
    fails is a warning: the key is served all the same.
    """
    session, space, entry = setup.session, setup.space, setup.entry
    assert entry is not None
    now = time.time()
    mark = PendingMark(space.name, setup.encoded, space.source, served_by, pick.label, now, now)
    in_background(lambda: _write_mark(session, space.name, entry, mark))


def _write_mark(session: Session, name: str, entry: str, mark: PendingMark) -> None:

    def change(current: Any) -> dict[str, Any] | None:
        if current is not None and not is_pending(current):
            return None  # a tuning stored its record since LOOKUP
        if current is None:
            return mark.to_data()
        try:
            return PendingMark.from_data(current).again(mark).to_data()
        except CacheReadError as exc:
            logger.info("kerneltune: %s: replacing a damaged pending mark %s (%s)", name, entry, exc)
            return mark.to_data()

    try:
        session.cache_amend(name, entry, change)
    except Exception as exc:
        warn_once(
            ("pending mark", name),
            f"kerneltune: {name}: {session.cache_plugin} failed to mark a key pending "
            f"({type(exc).__name__}: {exc}); serving it unmarked",
        )
