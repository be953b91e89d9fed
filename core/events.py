"""Payloads of the observer hooks: plain frozen records, safe to keep."""

from __future__ import annotations

from pathlib import Path

import attrs
from kerneltune.core.records import Candidate, Measurement


@attrs.frozen
class TuningStarted:
    """A miss: candidates are about to be measured."""

    function: str
    key: object
    candidates: tuple[Candidate, ...]
    rank: int
    world_size: int
    verbose: bool
    log_dir: Path | None


@attrs.frozen
class CandidateMeasured:
    """One candidate's outcome on this rank."""

    function: str
    key: object
    candidate: Candidate
    measurement: Measurement
    rank: int
    verbose: bool
    log_dir: Path | None


@attrs.frozen
class TuningFinished:
    """The end of a tuning; ``best`` is ``None`` when every candidate failed."""

    function: str
    key: object
    candidates: tuple[Candidate, ...]
    times: tuple[float, ...]
    best: Candidate | None
    seconds: float
    rank: int
    verbose: bool
    log_dir: Path | None
