"""The round API: what an adaptive driver asks of its tuning between rounds.

An adaptive driver (the search_params run, a search strategy's rounds)
decides what to measure next from agreed times. It reads the candidates and
the settings here, measures a batch with ``Tuning.round`` (request, compile,
measure, agree, in one call), and takes any other decision every rank must
share through :meth:`Rounds.agree` (the maximum over ranks) or
:meth:`Rounds.gather`; the search strategy in force, and the plugin to name
when it misbehaves, are asked of the tuning too. On one rank the collectives
are the identity, and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kerneltune.core.machine.measuring import Measuring
from kerneltune.core.plugin_system.contracts import SearchStrategy
from kerneltune.core.plugin_system.seam import fault, origin
from kerneltune.core.plugin_system.settings import Settings
from kerneltune.core.search.strategies import choose_strategy
from kerneltune.core.values.records import Candidate


class Rounds(Measuring):
    """A tuning as an adaptive driver sees it between rounds; see the module docstring."""

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every candidate of the tuned space, in order (a candidate's ``index`` is its place here)."""
        return self._space.candidates

    @property
    def settings(self) -> Settings:
        """The settings the tuning runs under (``repeat``, ``search_effort``, ...)."""
        return self.session.settings

    @property
    def world_size(self) -> int:
        """How many ranks tune this key together (1: this process alone)."""
        return self.reducer.world_size

    def agree(self, values: Sequence[float]) -> list[float]:
        """The element-wise maximum of ``values`` over the ranks, in one collective; on one rank, ``values``.

        Every rank must call it, with a vector of the same length, at the same
        point of the tuning: a decision taken from what it returns is the same on every rank.
        """
        listed = [float(v) for v in values]
        return list(self.reducer.max(listed)) if self.world_size > 1 else listed

    def gather(self, value: Any) -> list[Any]:
        """Every rank's small plain-data ``value``, in rank order (on one rank, ``[value]``)."""
        return self.reducer.gather(value) if self.world_size > 1 else [value]

    def times(self, candidates: Sequence[Candidate]) -> list[float]:
        """REDUCE now: each candidate's mean time as every rank agrees on it.

        The maximum over ranks (:meth:`agree`), ``inf`` for a candidate that
        failed on any rank or was not measured. An adaptive driver decides its
        next round from these, so every rank decides alike.
        """
        return self.agree([self._measurement(c.index).mean for c in candidates])

    def strategy(self, hinted: str | None = None, where: str | None = None) -> SearchStrategy:
        """A new instance of the search strategy in force: ``hinted``, else the ``search_strategy`` setting.

        :param hinted: a strategy's registered name (a kernel's hint), which wins over the setting.
        :param where: what gave ``hinted``, for the error message.
        :raises PluginError: for a name no plugin registered, or a strategy that cannot run here.
        """
        return choose_strategy(self.session, hinted, where)

    def origin(self, strategy: SearchStrategy) -> str:
        """``plugin NAME (DISTRIBUTION VERSION)`` of the plugin that registered ``strategy``, for messages."""
        return origin(self.session.manager, self._owner(strategy))

    def fault(self, strategy: SearchStrategy, what: str, consequence: str) -> None:
        """Warn once, naming its plugin, that ``strategy`` misbehaved, and what is done instead.

        :param what: what was wrong ("search strategy 'walk' raised ValueError: ...").
        :param consequence: what the driver does instead ("k goes on with the best points measured").
        """
        fault(self.session.manager, self._owner(strategy), what, consequence)

    def _owner(self, strategy: SearchStrategy) -> str:
        return self.session.registries.search_strategies.owners.get(strategy.name, strategy.name)
