"""Payloads of the observer hooks: plain frozen records, safe to keep."""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable
from pathlib import Path
from typing import Any, TypeVar

import attrs
from kerneltune.core.values.records import Candidate, Measurement

E = TypeVar("E", bound=attrs.AttrsInstance)


@attrs.frozen
class Header:
    """What every event of one tuning says about the tuning it belongs to; built once per tuning."""

    function: str
    key: Hashable
    rank: int
    verbose: bool = False
    log_dir: Path | None = None
    driver: str = "function"

    def make(self, event: type[E], **fields: Any) -> E:
        """An ``event`` with ``fields``, and those of its fields that name the tuning filled in from here.

        A contextual tuning's events name the tuned kernel ``kernel``: the
        header's ``function`` fills it.
        """
        names = _field_names(event)
        about = {name: getattr(self, name) for name in _HEADER_FIELDS if name in names}
        if "kernel" in names:
            about["kernel"] = self.function
        return event(**about, **fields)


#: The fields of :class:`Header`, in order.
_HEADER_FIELDS = tuple(field.name for field in attrs.fields(Header))


@functools.cache
def _field_names(event: type[attrs.AttrsInstance]) -> frozenset[str]:
    # Asked once per event class: the contextual tuner makes an event per launch.
    return frozenset(field.name for field in attrs.fields(event))


@attrs.frozen
class TuningStarted:
    """A miss: candidates are about to be measured.

    In every event, ``rank`` is this process's rank in the whole job (what
    per-rank log files are named after) and ``world_size`` the number of
    ranks tuning together (the size of ``autotune_pg``). ``driver`` says
    which tuner drives the tuning: ``"function"``
    (``triton_dist.tune.autotune``), ``"contextual"`` (``function`` is then
    the kernel's name), ``"search_params"`` or a plugin's own.
    """

    function: str
    key: object
    candidates: tuple[Candidate, ...]
    rank: int
    world_size: int
    verbose: bool
    log_dir: Path | None
    driver: str = "function"


@attrs.frozen
class CandidateMeasured:
    """One candidate's outcome on this rank.

    ``traceback`` is set on the event that reports a candidate's first
    failure in a tuning (an exception raised compiling, screening or running
    it): the exception with its traceback, as Python prints it. It is
    ``None`` on every other event: a measurement, a later failure of the
    same candidate, and a candidate dropped on purpose (pruned, or one the
    device cannot run), which is no failure to report.
    """

    function: str
    key: object
    candidate: Candidate
    measurement: Measurement
    rank: int
    verbose: bool
    log_dir: Path | None
    traceback: str | None = None
    #: what this measurement was for when it was not the first pass: ``"near-tie
    #: re-timing, round 2 of 4"``, ``"head to head, round 1 of 2"``, ``"stage 3, round 1 of 4"``.
    stage: str | None = None


@attrs.frozen
class TuningFinished:
    """The end of a tuning; ``best`` is ``None`` when every candidate failed.

    ``times`` are as the ranks agreed on them (the slowest rank's, or
    sharded, the measuring rank's);
    ``rank_times[i][r]`` is rank ``r``'s own time of candidate ``i``, where
    REDUCE gathered them (empty otherwise). ``measured_elsewhere`` holds
    ``(candidate index, rank)`` for each candidate that another rank of the
    group measured instead of this one (sharded ranks), whose time in
    ``times`` this rank learnt only at REDUCE; no
    ``kerneltune_candidate_measured`` came for those. ``driver`` is as in
    :class:`TuningStarted`. ``confidence`` is SELECT's verdict on the pick
    (:mod:`kerneltune.core.machine.confidence`): ``"confident"`` or
    ``"uncertain"`` (``None`` when every candidate failed); ``rivals`` the
    candidates an uncertain pick could not be told apart from; ``margin``
    the lowest bound on a rival's lead, a fraction of the pick's time
    (negative: it may be faster); ``noise`` the tuning's noise (the median
    spread of its first pass); ``descheduled`` the pick and rivals most of
    whose samples were taken while the measuring thread was not running
    (why the pick is uncertain, where any are); ``recheck`` whether this tuning re-checked a
    stored pick. ``errors[i]`` is what this rank knows of candidate ``i``
    without a time: ``"pruned"``, ``"not measured"`` or its error text
    (``None`` where it was timed); empty from a driver that does not say.
    ``dropped`` holds the candidates left out as expected, with no warning:
    pruned, out of the device's resources, past the ``compile_deadline``
    (``kerneltune_failure_kind`` answering ``"out of resources"``, ``CandidateDropped``).
    ``world_size`` is the number of ranks that tuned together;
    ``measured_on``, where they split the candidates (``shard = true``),
    the rank (in the group) that measured each one, whose time is then its
    time (``None``: no rank did); empty where every rank measured alike.
    """

    function: str
    key: object
    candidates: tuple[Candidate, ...]
    times: tuple[float, ...]
    best: Candidate | None
    seconds: float
    rank: int
    verbose: bool
    log_dir: Path | None
    driver: str = "function"
    rank_times: tuple[tuple[float, ...], ...] = ()
    errors: tuple[str | None, ...] = ()
    dropped: tuple[int, ...] = ()
    measured_elsewhere: tuple[tuple[int, int], ...] = ()
    world_size: int = 1
    measured_on: tuple[int | None, ...] = ()
    confidence: str | None = None
    rivals: tuple[int, ...] = ()
    margin: float = math.inf
    noise: float = 0.0
    descheduled: tuple[int, ...] = ()
    recheck: bool = False


@attrs.frozen
class CompileStarted:
    """COMPILE began compiling one candidate, on a pool thread (observers must be thread-safe).

    ``ahead``: a compile no round waits for yet (``CompileStage.ahead``).
    """

    function: str
    key: object
    candidate: Candidate
    rank: int
    verbose: bool
    ahead: bool = False


@attrs.frozen
class CompileFinished:
    """One candidate's compile ended, on a pool thread; ``error`` names its failure, if any.

    ``done`` and ``total`` count this rank's compiles in the tuning so far
    that a round waits for (not those ahead). ``ahead``: this one is a
    compile no round waits for yet (``CompileStage.ahead``).
    """

    function: str
    key: object
    candidate: Candidate
    seconds: float
    error: str | None
    done: int
    total: int
    rank: int
    verbose: bool
    log_dir: Path | None
    ahead: bool = False


@attrs.frozen
class PickLoaded:
    """A miss of the in-process picks served without measuring.

    ``source`` is ``"cache"`` (this rank's cache plugin held the record),
    ``"rank"`` (another rank held it and shared it), ``"neighbour"`` (no
    record, and ``tune = "nearest"`` or ``"pending"`` runs the pick of the
    nearest stored key, ``served_by``, unmeasured) or ``"default"`` (no
    rank held one, and ``tune`` runs the first candidate kept,
    unmeasured; ``tune`` says which setting did). Sent once per key per process: afterwards the key is one of
    the process's picks, and that dispatch path sends nothing. ``cache`` is
    the cache plugin's name: a layered cache (``redis``: local files, then
    the server) may have found the record in either layer. ``confidence``
    is the stored record's verdict (``None`` for a record written before
    verdicts were kept, and for ``"default"``).
    """

    function: str
    key: object
    best: Candidate
    source: str
    rank: int
    verbose: bool
    log_dir: Path | None
    cache: str = ""
    confidence: str | None = None
    #: the encoded key whose stored pick served this one (``source = "neighbour"``), else ``None``.
    served_by: object = None
    #: the ``tune`` setting in force.
    tune: str = "auto"


@attrs.frozen
class LaunchMeasured:
    """One launch of a candidate while a contextual tuner measures a kernel.

    ``phase`` is ``"warmup"`` (untimed) or ``"timed"``; ``round`` counts from
    1 within the phase, up to ``rounds``. ``time_ms`` is set for timed rounds
    that succeeded; ``error`` names the exception of a failed launch, and
    ``traceback`` holds it with its traceback, as Python prints it.
    """

    kernel: str
    key: object
    candidate: Candidate
    phase: str
    round: int
    rounds: int
    time_ms: float | None
    error: str | None
    verbose: bool
    traceback: str | None = None


@attrs.frozen
class KernelTuned:
    """A contextual tuner finished one (kernel, key).

    ``means`` are this rank's mean times in milliseconds (``inf`` for a
    candidate that failed or was pruned); ``errors`` says why each failed
    (``None`` for one that did not, or was pruned); ``best`` is the pick
    after the ranks' reduction, or ``None`` when no candidate was valid.
    """

    kernel: str
    key: object
    candidates: tuple[Candidate, ...]
    means: tuple[float, ...]
    best: Candidate | None
    world_size: int
    verbose: bool
    errors: tuple[str | None, ...] = ()
