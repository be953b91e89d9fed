"""Configs that failed for a reason no key changes, remembered across keys of one function.

A config out of the device's resources, whose program does not compile, or
whose compile the ``compile_deadline`` stopped, fails alike for every key
with the same argument dtypes on the same device and software. The first
such failure is remembered (in the process, and in the cache beside the
picks as a :class:`~kerneltune.core.values.failed.FailedConfigs` record); a
later key's tuning fails that config at once with its remembered reason,
without compiling or launching it (docs/guide.md, "Configs that cannot run").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from kerneltune.core.compiling.forks import CompileDeadline
from kerneltune.core.errors import OUT_OF_RESOURCES, CacheReadError, CandidateDropped, describe_error
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.failed import FailedConfig, FailedConfigs, failed_entry
from kerneltune.core.values.records import Candidate
from kerneltune.core.values.space import Space

logger = logging.getLogger("kerneltune")

#: The kind of a failure the ``compile_deadline`` stopped: a compile that many times slower than its
#: siblings' is as slow for the next key (``compile_timeout``'s absolute limit is not remembered:
#: a loaded host can pass it).
DEADLINE = "compile deadline"

#: A failure is remembered by the config's fingerprint and the argument dtypes it failed for.
_Held = dict[tuple[str, tuple[str, ...]], FailedConfig]


class RememberedFailure(CandidateDropped):
    """A candidate failed at once, unrun: an earlier key found it fails for every key."""


def argument_dtypes(values: Iterable[Any]) -> tuple[str, ...]:
    """The dtype of each argument that has one (tensors), in order, as the memory is keyed by."""
    return tuple(str(dtype) for value in values if (dtype := getattr(value, "dtype", None)) is not None)


def expected_failure(session: Session, error: BaseException) -> bool:
    """Whether a candidate's ``error`` drops it as expected: a :class:`CandidateDropped`, or
    ``kerneltune_failure_kind`` calls it ``"out of resources"`` (Triton's ``OutOfResources``)."""
    return isinstance(error, CandidateDropped) or session.failure_kind(error) == OUT_OF_RESOURCES


def failure_kind(session: Session, error: BaseException) -> str | None:
    """Why ``error`` (or one it was raised ``from``) would fail every key; ``None`` where it may not."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, RememberedFailure):
            return None
        if isinstance(seen, CompileDeadline):
            return DEADLINE
        kind = session.failure_kind(seen)
        if kind is not None:
            return kind
        seen = seen.__cause__
    return None


class FailedConfigMemory:
    """The remembered failures of one candidate space's code, read from the cache once per hardware."""

    def __init__(self, space: Space) -> None:
        self._space = space
        #: by cache entry and software versions: what this process knows.
        self._held: dict[tuple[str, tuple[tuple[str, str], ...]], _Held] = {}
        self._lock = threading.Lock()

    def remembered(self, session: Session, dtypes: tuple[str, ...]) -> dict[int, RememberedFailure]:
        """Each candidate that failed before with ``dtypes``, by index, with its remembered reason."""
        with self._lock:
            held = self._of(session)
        found = {}
        for candidate in self._space.candidates:
            failure = held.get((candidate.fingerprint, dtypes))
            if failure is not None:
                found[candidate.index] = RememberedFailure(
                    f"failed for an earlier key ({failure.kind}), not run again: {failure.reason}"
                )
        return found

    def note(
        self, session: Session, dtypes: tuple[str, ...], candidate: Candidate, error: BaseException
    ) -> None:
        """Remember ``candidate``'s failure where no key changes it, and store the memory."""
        kind = failure_kind(session, error)
        if kind is None:
            return
        failure = FailedConfig(candidate.fingerprint, candidate.label, dtypes, kind, describe_error(error))
        name = self._space.name
        with self._lock:
            held = self._of(session)
            if (failure.fingerprint, dtypes) in held:
                return
            # What another process stored since this one read it is kept too.
            held.update({**self._read(session), **held, (failure.fingerprint, dtypes): failure})
            record = FailedConfigs(
                name, self._space.source, session.versions, session.hardware, tuple(held.values())
            )
            session.cache_store(name, failed_entry(self._space.source, session.hardware), record.to_data())
        logger.info(
            "kerneltune: %s: [%d] %s fails for every key (%s); remembered",
            name,
            candidate.index,
            candidate.label,
            kind,
        )

    def _of(self, session: Session) -> _Held:
        place = (failed_entry(self._space.source, session.hardware), tuple(sorted(session.versions.items())))
        held = self._held.get(place)
        if held is None:
            held = self._held[place] = self._read(session)
        return held

    def _read(self, session: Session) -> _Held:
        """The stored memory for this session's hardware and software; empty (a logged miss) where none is."""
        name = self._space.name
        entry = failed_entry(self._space.source, session.hardware)
        try:
            data = session.cache_load(name, entry)
            if data is None:
                return {}
            record = FailedConfigs.from_data(data)
        except CacheReadError as exc:
            logger.info(
                "kerneltune: %s: the stored failed configs %s are damaged (%s); ignored", name, entry, exc
            )
            return {}
        if record.versions != session.versions or record.source != self._space.source:
            logger.info("kerneltune: %s: the stored failed configs are of other software; forgotten", name)
            return {}
        return {(f.fingerprint, f.dtypes): f for f in record.failed}
