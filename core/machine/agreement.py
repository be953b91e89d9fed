"""The AGREE stage: one gather of small votes decides how every rank proceeds.

Each rank votes with what it knows locally; every rank applies the same
pure :func:`resolve` to the same votes, so all reach the same verdict, or
all raise the same error, without further messages. The record shared and
the plan followed come from one rank, so every rank measures alike.
"""

from __future__ import annotations

import warnings
from typing import Any

import attrs
from kerneltune.core.errors import PluginError, RankMismatchError
from kerneltune.core.notices import user_stacklevel
from kerneltune.core.values.keys import digest


@attrs.frozen
class Vote:
    """One rank's local view before tuning, as :func:`resolve` reads it.

    :param global_rank: the rank in the whole job, for messages; ``rank`` the one in the tuning group.
    :param place: where this rank's cache keeps files (resolved), or ``None`` for a cache private
        to the process: ranks sharing a host and a place share one writer.
    :param error: why this rank cannot tune (stage and exception), or ``None``.
    :param kept: the ``(index, fingerprint)`` of each candidate left after pruning.
    :param key: the encoded key's digest, ``None`` after an error; ``key_label`` its short form.
    :param retune: this rank ignores stored records (``always_tune``).
    :param verify_pick, tune: this rank's settings of those names (``tune`` every rank must share).
    :param record: this rank's valid stored record, as plain data.
    :param plan: what this rank would measure instead of every kept candidate, as plain data.
    :param warm: this rank was asked to warm start a key without a record.
    """

    rank: int
    global_rank: int
    host: str
    place: str | None
    error: str | None
    kept: tuple[tuple[int, str], ...]
    key: str | None
    key_label: str
    retune: bool
    verify_pick: bool
    record: dict[str, Any] | None
    tune: str = "auto"
    plan: dict[str, Any] | None = None
    warm: bool = False

    def to_data(self) -> dict[str, Any]:
        """Plain data, for the reducer's gather."""
        data = attrs.asdict(self, recurse=False)
        data["kept"] = [index for index, _ in self.kept]
        data["kept_digest"] = digest([list(pair) for pair in self.kept])
        return data


@attrs.frozen
class Verdict:
    """What every rank does next.

    :param shared_record: the stored record of the key every rank goes by
        (adopting its pick, or reusing its times), or ``None``.
    :param writers: the ranks that persist the outcome (one per host and place).
    :param key_mismatch: a description of the ranks' differing keys, or ``None``.
    :param verify_pick: whether every rank checks the pick after tuning
        (settings that add a collective must hold on all ranks or on none).
    :param hosts: the ranks of each host, in rank order (ranks on one host
        split the compiling of the candidates).
    :param plan: the plan every rank follows, or ``None`` to measure every kept candidate.
    """

    shared_record: dict[str, Any] | None
    writers: frozenset[int]
    key_mismatch: str | None
    verify_pick: bool
    hosts: tuple[tuple[int, ...], ...] = ()
    plan: dict[str, Any] | None = None

    def neighbours(self, rank: int) -> tuple[int, ...]:
        """The ranks on ``rank``'s host, ``rank`` included, in rank order."""
        return next((group for group in self.hosts if rank in group), (rank,))


def _who(vote: dict[str, Any]) -> str:
    if vote["global_rank"] == vote["rank"]:
        return f"rank {vote['rank']}"
    return f"rank {vote['rank']} (global rank {vote['global_rank']})"


def resolve(votes: list[dict[str, Any]], world_size: int, function: str) -> Verdict:
    """Decide from all ranks' votes, identically on every rank.

    :param world_size: the size of the group the votes came from.
    :param function: the tuned function's name, for messages.
    :raises RankMismatchError: when any rank failed before tuning, the ranks
        kept different candidates, or their ``tune`` settings differ (some
        would measure while others wait); the message names each rank at fault.
    :raises PluginError: when the reducer gathered from other ranks than its group's.
    """
    if [v["rank"] for v in votes] != list(range(world_size)):
        raise PluginError(
            f"{function}: the reducer gathered votes from ranks {[v['rank'] for v in votes]} for a group of "
            f"{world_size}; a reducer must run over exactly the ranks that tune"
        )
    failures = [f"{_who(v)} failed while {v['error']}" for v in votes if v["error"]]
    if failures:
        raise RankMismatchError(
            f"{function}: tuning stopped on all {world_size} ranks because " + "; ".join(failures)
        )
    if len({v["kept_digest"] for v in votes}) > 1:
        lists = "; ".join(f"{_who(v)} keeps {v['kept']}" for v in votes)
        if len({tuple(v["kept"]) for v in votes}) > 1:
            reason = "ranks kept different candidates after prune_fn (it must answer alike on every rank)"
        else:
            reason = "ranks hold different candidate configs (config_space must be identical on every rank)"
        raise RankMismatchError(f"{function}: {reason}: {lists}")
    if len({v["tune"] for v in votes}) > 1:
        settings = ", ".join(f"{_who(v)}: tune = {v['tune']!r}" for v in votes)
        raise RankMismatchError(f"{function}: ranks hold different tune settings ({settings})")
    key_mismatch = None
    if len({v["key"] for v in votes}) > 1:
        key_mismatch = ", ".join(f"{_who(v)}: {v['key_label']}" for v in votes)
    holder = None
    # One rank told to retune makes all retune: adopting another rank's record would
    # ignore it. Under differing keys a record held for one rank's key is no answer
    # for another's, so then every rank tunes its own key, in step.
    plan = None
    if not any(v["retune"] for v in votes) and key_mismatch is None:
        # A record that gives the pick outright beats one that saves part of the measuring,
        # which beats one that saves none (measured another way); then the lowest rank's.
        holder = min(
            (v for v in votes if v["record"] is not None),
            key=lambda v: (v["plan"] is None, v["plan"] is not None and v["plan"]["pick"] is None, v["rank"]),
            default=None,
        )
        if holder is not None:
            plan = holder["plan"]
        elif all(v["warm"] for v in votes):
            # Ranks whose caches differ may find different near keys: the lowest rank's start is everyone's.
            plan = next((v["plan"] for v in votes if v["plan"] is not None), None)
    writers: dict[tuple[str, str] | int, int] = {}
    for vote in votes:
        # A cache with no files (place None) is private to its process: every rank writes its own.
        place = vote["rank"] if vote["place"] is None else (vote["host"], vote["place"])
        writers.setdefault(place, vote["rank"])
    return Verdict(
        shared_record=None if holder is None else holder["record"],
        writers=frozenset(writers.values()),
        key_mismatch=key_mismatch,
        verify_pick=any(v["verify_pick"] for v in votes),
        hosts=tuple(
            tuple(v["rank"] for v in votes if v["host"] == host)
            for host in dict.fromkeys(v["host"] for v in votes)
        ),
        plan=plan,
    )


def reach_verdict(reducer: Any, vote: Vote, function: str) -> Verdict:
    """AGREE: gather every rank's vote (one collective) and resolve them alike on every rank.

    Ranks tuning under different keys get a ``RuntimeWarning``: they stay in
    step only while all of them find or miss their key together.
    """
    verdict = resolve(reducer.gather(vote.to_data()), reducer.world_size, function)
    if verdict.key_mismatch is not None:
        warnings.warn(
            f"kerneltune: {function}: ranks tune together under different keys "
            f"({verdict.key_mismatch}); they stay in step only while all of them find or miss "
            "their key together, so keep ranks, pointers and other per-rank values out of key_fn",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    return verdict


def check_picks(reducer: Any, best: int, function: str) -> None:
    """``verify_pick``: one more gather, to check that every rank picked ``best``.

    :raises RankMismatchError: naming each rank's pick, on every rank.
    """
    picks = reducer.gather(best)
    if len(set(picks)) > 1:
        listed = ", ".join(f"rank {rank} picked [{pick}]" for rank, pick in enumerate(picks))
        raise RankMismatchError(
            f"{function}: ranks picked different candidates ({listed}): the reducer "
            "did not give every rank the same reduced timings"
        )


def short_repr(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
