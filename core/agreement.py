"""The AGREE stage: one gather of small votes decides how every rank proceeds.

Each rank votes with what it knows locally (did its key or prune step fail,
which candidates it kept, whether it holds a valid record). Every rank then
applies the same pure function to the same list of votes, so all ranks reach
the same verdict, or all raise the same error, without further messages.
"""

from __future__ import annotations

from typing import Any

import attrs
from kerneltune.core.errors import RankMismatchError
from kerneltune.core.keys import digest


@attrs.frozen
class Vote:
    """One rank's local view before tuning."""

    rank: int
    host: str
    cache_root: str
    error: str | None
    kept: tuple[int, ...]
    record: dict[str, Any] | None

    def to_data(self) -> dict[str, Any]:
        """Plain data, for the reducer's gather."""
        return {
            "rank": self.rank,
            "host": self.host,
            "cache_root": self.cache_root,
            "error": self.error,
            "kept": list(self.kept),
            "kept_digest": digest(list(self.kept)),
            "record": self.record,
        }


@attrs.frozen
class Verdict:
    """What every rank does next."""

    shared_record: dict[str, Any] | None
    source_rank: int | None
    writers: frozenset[int]


def resolve(votes: list[dict[str, Any]]) -> Verdict:
    """Decide from all ranks' votes, identically on every rank.

    :raises RankMismatchError: when any rank failed before tuning or the ranks
        kept different candidates; the message names each rank at fault.
    """
    failures = [f"rank {v['rank']}: {v['error']}" for v in votes if v["error"]]
    if failures:
        raise RankMismatchError("tuning stopped on every rank; " + "; ".join(failures))
    if len({v["kept_digest"] for v in votes}) > 1:
        lists = "; ".join(f"rank {v['rank']} keeps {v['kept']}" for v in votes)
        raise RankMismatchError(
            "ranks hold different candidate lists after prune_fn (prune_fn must give the same "
            f"answer on every rank): {lists}"
        )
    holder = next((v for v in votes if v["record"] is not None), None)
    first_per_place: dict[tuple[str, str], int] = {}
    for vote in sorted(votes, key=lambda v: v["rank"]):
        first_per_place.setdefault((vote["host"], vote["cache_root"]), vote["rank"])
    return Verdict(
        shared_record=None if holder is None else holder["record"],
        source_rank=None if holder is None else holder["rank"],
        writers=frozenset(first_per_place.values()),
    )
