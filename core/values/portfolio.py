"""A stored portfolio: the few configs ``kerneltune portfolio --store`` chose for a function's new keys.

It lives in the function's namespace of the cache, beside its records,
under the entry :data:`PORTFOLIO_ENTRY` (record entries are hex digests, so
the two never meet). Configs are named by fingerprint and matched to the
live candidate list, as a record's rows are; the labels and plain values are
for people, never turned back into configs.
"""

from __future__ import annotations

from typing import Any

import attrs
from kerneltune.core.errors import CacheReadError
from kerneltune.core.values import checked

#: The cache entry a function's portfolio is stored under.
PORTFOLIO_ENTRY = "portfolio"
#: What a stored portfolio's ``kind`` field holds, so that no reader takes it for a record.
PORTFOLIO_KIND = "kerneltune portfolio"
PORTFOLIO_SCHEMA = 1


@attrs.frozen
class PortfolioConfig:
    """One config of a portfolio: its index in the list it was chosen from, fingerprint, label, values."""

    index: int
    fingerprint: str
    label: str
    #: the config as plain data where a stored record kept it (the pick of some key), else ``None``.
    values: Any = None

    def to_data(self) -> dict[str, Any]:
        """Plain data."""
        return attrs.asdict(self)


@attrs.frozen
class Portfolio:
    """The configs a new key of ``function`` measures, and the loss they were chosen with.

    Losses are in percent over each stored key's own best time; ``None``
    where the configs all fail on some key.
    """

    function: str
    configs: tuple[PortfolioConfig, ...]
    tolerance: float
    worst: float | None
    leave_one_out: float | None
    keys: int
    created: float

    def to_data(self) -> dict[str, Any]:
        """Plain data for a cache plugin."""
        return {
            "kind": PORTFOLIO_KIND,
            "schema": PORTFOLIO_SCHEMA,
            "function": self.function,
            "configs": [config.to_data() for config in self.configs],
            "tolerance": self.tolerance,
            "worst": self.worst,
            "leave_one_out": self.leave_one_out,
            "keys": self.keys,
            "created": self.created,
        }

    @classmethod
    def from_data(cls, data: Any) -> Portfolio:
        """Read :meth:`to_data`'s output back, checking each field.

        :raises CacheReadError: for data that is not a portfolio of this schema.
        """
        data = checked.mapping(data, "portfolio")
        if data.get("kind") != PORTFOLIO_KIND or data.get("schema") != PORTFOLIO_SCHEMA:
            raise CacheReadError(f"not a portfolio of schema {PORTFOLIO_SCHEMA}")
        try:
            rows = checked.rows(data["configs"], "configs")
            configs = tuple(
                PortfolioConfig(
                    index=checked.count(row["index"], f"configs[{i}].index"),
                    fingerprint=checked.text(row["fingerprint"], f"configs[{i}].fingerprint"),
                    label=checked.text(row["label"], f"configs[{i}].label"),
                    values=checked.plain(row.get("values"), f"configs[{i}].values"),
                )
                for i, row in enumerate(checked.mapping(r, f"configs[{i}]") for i, r in enumerate(rows))
            )
            if not configs:
                raise CacheReadError("configs is empty")
            return cls(
                function=checked.text(data["function"], "function"),
                configs=configs,
                tolerance=checked.finite(data["tolerance"], "tolerance"),
                worst=_loss(data["worst"], "worst"),
                leave_one_out=_loss(data["leave_one_out"], "leave_one_out"),
                keys=checked.count(data["keys"], "keys"),
                created=checked.finite(data["created"], "created", high=checked.LATEST),
            )
        except KeyError as exc:
            raise CacheReadError(f"portfolio has no field {exc}") from None


def _loss(value: Any, where: str) -> float | None:
    return None if value is None else checked.finite(value, where)
