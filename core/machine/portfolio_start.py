"""A new key of a function with a stored portfolio measures only the portfolio's configs.

``kerneltune portfolio FUNCTION --store`` keeps the portfolio beside the
function's records (:mod:`kerneltune.core.values.portfolio`); LOOKUP asks
:func:`portfolio_plan` at every key without a record. docs/guide.md
("Portfolio") says when to use it.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

from kerneltune.core.errors import CacheReadError
from kerneltune.core.machine.reuse import Plan
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.portfolio import PORTFOLIO_ENTRY, Portfolio
from kerneltune.core.values.space import Space

logger = logging.getLogger("kerneltune")


def stored_portfolio(session: Session, name: str) -> Portfolio | None:
    """The portfolio stored for the function ``name``, or ``None``; a damaged one is warned about once."""
    try:
        data = session.cache_load(name, PORTFOLIO_ENTRY)
        return None if data is None else Portfolio.from_data(data)
    except CacheReadError as exc:
        warn_once(
            ("damaged portfolio", name),
            f"kerneltune: {name}: the stored portfolio is damaged ({exc}); new keys are tuned without it "
            f"(kerneltune portfolio {name} --store replaces it)",
        )
        return None


def portfolio_indices(
    session: Session, space: Space, kept: tuple[int, ...], portfolio: Portfolio | None = None
) -> tuple[int, ...] | None:
    """The kept candidates the stored portfolio names, in its order; ``None`` where none is stored.

    :param portfolio: the stored portfolio, read before; default: read now.
    """
    portfolio = portfolio or stored_portfolio(session, space.name)
    if portfolio is None:
        return None
    allowed = set(kept)
    live = {c.fingerprint: c.index for c in space.candidates if c.index in allowed}
    return tuple(dict.fromkeys(live[c.fingerprint] for c in portfolio.configs if c.fingerprint in live))


def portfolio_plan(session: Session, space: Space, kept: tuple[int, ...], key: Hashable) -> Plan | None:
    """For a key without a record: measure the stored portfolio's configs that PRUNE kept.

    ``None`` (measure as without one) where no portfolio is stored, or none
    of its configs is among the kept candidates, or it holds all of them.
    Should every one of them fail, the rest of the kept list is measured
    (:meth:`~kerneltune.core.machine.following.Following.fall_back`).
    """
    measure = portfolio_indices(session, space, kept)
    if measure is None:
        return None
    if not measure:
        logger.info(
            "kerneltune: %s: key %r: none of the stored portfolio's configs is a kept candidate; "
            "tuning in full",
            space.name,
            key,
        )
        return None
    if len(measure) >= len(kept):
        return None
    logger.info(
        "kerneltune: %s: key %r: measuring the stored portfolio's %d of %d kept candidates",
        space.name,
        key,
        len(measure),
        len(kept),
    )
    return Plan(measure=measure, warm_start={"portfolio": len(measure)})
