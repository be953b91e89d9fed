"""The key's pick, kept: what LOOKUP found or ``tune`` fell back to, and what SELECT picked."""

from __future__ import annotations

from kerneltune.core.errors import NoStoredPickError
from kerneltune.core.machine.options import CONTEXTUAL_CACHE, CONTEXTUAL_DISK, TUNE, TUNE_FAIL
from kerneltune.core.machine.schedule import Setup
from kerneltune.core.machine.serving import mark_pending, served, serves
from kerneltune.core.machine.stored_keys import index_record
from kerneltune.core.values.events import Header, PickLoaded
from kerneltune.core.values.records import Candidate, TuningRecord


class PickKeeper:
    """One tuning's pick, in the tuner's ``picks`` and ``records`` and, on the ranks that write, the cache.

    It also tells the observers where a pick found without measuring came from.

    :ivar writers: the ranks that store the key's record (one per host and cache place).
    """

    def __init__(self, setup: Setup, header: Header) -> None:
        self._setup = setup
        self._header = header
        self.writers = frozenset({setup.reducer.rank})

    def adopt(self, best: int, record: TuningRecord, *, store: bool) -> Candidate:
        """Make candidate ``best`` the pick and ``record`` the key's record here; store it if asked."""
        setup = self._setup
        pick = setup.picks[setup.key] = setup.space.candidates[best]
        # A failure met while computing the key never reaches a record: no entry, nothing to store.
        if setup.entry is None:
            return pick
        data = record.to_data()
        setup.records[setup.entry] = data
        if store and setup.reducer.rank in self.writers:
            setup.session.cache_store(setup.space.name, setup.entry, data)
            index_record(setup.session, setup.space, setup.stored, record, setup.records, setup.parsed)
        return pick

    def untuned(self, kept: tuple[int, ...], damaged: str | None = None) -> Candidate:
        """The pick of a key no rank holds one for, under ``tune = "never"``: the first kept one.

        It runs unmeasured and is kept in-process, not stored. With several
        ranks this follows the agreement's verdict, so all ranks do alike.
        Alone, under ``tune = "nearest"`` or ``"pending"``, it is the nearest
        stored key's pick (:func:`~.serving.served`), and the key is marked pending.

        :param damaged: why this rank's stored record of the key could not be used, if it was damaged.
        :raises NoStoredPickError: under ``tune = "fail"``, naming where that setting came from
            and the damaged record.
        """
        setup = self._setup
        settings = setup.session.settings
        if settings[TUNE] == TUNE_FAIL:
            where = settings.source("tune") or "default"
            missing = f"no stored pick for key {setup.key!r}"
            if damaged is not None:
                missing = f"the stored record for key {setup.key!r} is damaged ({damaged})"
            # contextual_autotune keeps its picks in the process unless contextual_cache = "disk".
            if setup.driver == "contextual" and settings[CONTEXTUAL_CACHE] != CONTEXTUAL_DISK:
                keep = (
                    "contextual picks live only in this process (contextual_cache = 'process'): tune this "
                    "key earlier in this process (tune = 'auto', the default), or set contextual_cache = "
                    "'disk' and keep its cache"
                )
            else:
                keep = "tune this key where tuning is allowed (tune = 'auto', the default) and keep its cache"
            raise NoStoredPickError(
                f"{setup.space.name}: {missing}, and tune = 'fail' ({where}) "
                f"forbids tuning it; {keep}, or set tune = 'never' to run the first config untuned"
            )
        if not serves(settings, setup.reducer.world_size):
            pick = setup.picks[setup.key] = setup.space.candidates[kept[0]]
            self.loaded(pick, "default")
            return pick
        index, neighbour = served(setup, kept)
        pick = setup.picks[setup.key] = setup.space.candidates[index]
        mark_pending(setup, pick, neighbour)
        self.loaded(pick, "default" if neighbour is None else "neighbour", served_by=neighbour)
        return pick

    def loaded(
        self, best: Candidate, source: str, confidence: str | None = None, *, served_by: object = None
    ) -> None:
        """Tell the observers that ``best`` was found without measuring, and where (``source``).

        :param served_by: for a ``"neighbour"`` source, the encoded key whose pick it is.
        """
        session = self._setup.session
        event = self._header.make(
            PickLoaded,
            best=best,
            source=source,
            cache=session.cache.name,
            confidence=confidence,
            served_by=served_by,
            tune=session.settings[TUNE],
        )
        session.observers.pick_loaded(event)
