"""Which search strategy runs.

The kernel's hint (``strategy``) wins, then the ``search_strategy`` setting
(config files, ``KERNELTUNE_SEARCH_STRATEGY``), whose default ``auto`` takes
the available strategy with the highest ``auto_priority``. What a strategy
is given is in :mod:`kerneltune.core.values.geometry`.
"""

from __future__ import annotations

from kerneltune.core.plugin_system.contracts import SearchStrategy
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.search.options import SEARCH_STRATEGY


def choose_strategy(session: Session, hinted: str | None = None, where: str | None = None) -> SearchStrategy:
    """A new instance of the strategy in force.

    :param hinted: the name a kernel's hint gives, which wins over the
        ``search_strategy`` setting; ``None`` to use the setting.
    :param where: what gave ``hinted``, for the error message.
    :raises PluginError: for a name no plugin registered (listing those that
        exist and naming what asked for it), or a strategy that cannot run here.
    """
    registry = session.registries.search_strategies
    if hinted is not None:
        return registry.build(registry.select(hinted, where))
    settings = session.settings
    return registry.build(registry.select(settings[SEARCH_STRATEGY], settings.source("search_strategy")))
