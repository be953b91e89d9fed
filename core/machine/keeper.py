"""The key's pick, kept: what LOOKUP found or ``tune`` fell back to, and what SELECT picked."""

from __future__ import annotations

from kerneltune.core.machine.decision import untuned_pick
from kerneltune.core.machine.schedule import Setup
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
        return pick

    def untuned(self, kept: tuple[int, ...]) -> Candidate:
        """The pick of a key no rank holds one for, under ``tune = "never"`` or ``"fail"``.

        ``never``: the first candidate kept runs, unmeasured and not stored
        (kept in-process, so later calls dispatch straight to it); ``fail``:
        :class:`NoStoredPickError`. With several ranks this follows the
        agreement, whose verdict every rank shares, so all ranks do alike.
        """
        setup = self._setup
        first = untuned_pick(setup.session.settings, setup.space.name, setup.key, kept, setup.driver)
        pick = setup.picks[setup.key] = setup.space.candidates[first]
        self.loaded(pick, "default")
        return pick

    def loaded(self, best: Candidate, source: str, confidence: str | None = None) -> None:
        """Tell the observers that ``best`` was found without measuring, and where (``source``)."""
        session = self._setup.session
        event = self._header.make(
            PickLoaded, best=best, source=source, cache=session.cache.name, confidence=confidence
        )
        session.observers.pick_loaded(event)
