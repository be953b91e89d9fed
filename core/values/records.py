"""Value records: candidates, measurements, and the stored tuning record."""

from __future__ import annotations

import datetime
import math
import reprlib
import statistics
from typing import Any

import attrs
from kerneltune.core.errors import CacheReadError
from kerneltune.core.values import checked

SCHEMA = 1

#: The error of a candidate the prune step removed: it never ran for this key.
PRUNED = "pruned"
#: The error of a candidate a tuning chose not to measure (a staged search, a warm start).
NOT_MEASURED = "not measured"
#: What a record's ``confidence`` may say (:mod:`kerneltune.core.machine.confidence`).
CONFIDENCE_LEVELS = ("confident", "uncertain")
#: ``Method.timed`` where the host's clock timed the device objective: no timer of a device was in use.
HOST_CLOCK = "host"
#: ``Method.timed`` where a device timer read what empty runs read: the work ran on the host.
IDLE_DEVICE = "idle device"


@attrs.frozen
class Candidate:
    """One entry of the candidate list: its position, live config and fingerprint."""

    index: int
    config: Any = attrs.field(eq=False, repr=False)
    fingerprint: str
    label: str


@attrs.frozen
class Measurement:
    """A candidate's samples in milliseconds, or the error that stopped it.

    ``rounds`` is how many of the samples each interleaved round added, in
    order, where they came in two or more (near-tie re-timing, a head to
    head); empty for one pass. ``untrusted`` is how many of the samples were
    taken while the measuring thread was not running, kept once their
    re-takes ran out (:func:`~kerneltune.core.machine.timing.ran_throughout`).
    """

    index: int
    samples: tuple[float, ...] = ()
    error: str | None = None
    rounds: tuple[int, ...] = ()
    untrusted: int = 0

    @property
    def mean(self) -> float:
        """The trimmed mean of the samples (:func:`trimmed`).

        Infinity for a failed or unmeasured candidate.
        """
        if self.error is not None or not self.samples:
            return math.inf
        kept = trimmed(self.samples)
        return sum(kept) / len(kept)


#: The fraction of samples left out at each end before averaging.
TRIM = 0.2
#: What :attr:`Measurement.mean` is, as records name it.
STATISTIC = "20% trimmed mean"


def trimmed(samples: tuple[float, ...] | list[float]) -> list[float]:
    """The samples, sorted, without the :data:`TRIM` lowest and highest (none of fewer than five).

    A run that a host pause (garbage collection, another process) delays
    longer than the device is held reads several times the others, and one
    such sample, or a few reading a little high, can move a mean by more
    than the gap between near ties, enough to change the pick. Trimmed, the
    mean still averages the runs, as the seeds' API says, without them.
    """
    cut = int(len(samples) * TRIM)
    ordered = sorted(samples)
    return ordered[cut : len(ordered) - cut]


@attrs.frozen
class Method:
    """How a tuning measured its candidates, kept in its record.

    ``objective`` is what was compared (``"device"``: the device time of the
    work, flushed and held; ``"wall"``: host-inclusive time per call),
    ``statistic`` how each candidate's samples became one number, ``timer``
    the timer plugin's name, ``warmup`` and ``repeat`` the untimed and timed
    runs per candidate of the first pass, ``shards`` how many ranks split the
    candidates between them (1: every rank measured every one). ``timed`` is
    what the times are of: ``"device"`` the device's work, ``"idle device"``
    a device timer's empty readings (the work ran on the host), ``"host"``
    the host's clock under the ``device`` objective, ``"wall"`` the ``wall``
    objective's; ``""`` in records made before it was kept.
    """

    objective: str = "device"
    statistic: str = STATISTIC
    timer: str = ""
    warmup: int = 0
    repeat: int = 0
    shards: int = 1
    timed: str = ""

    def to_data(self) -> dict[str, Any]:
        """Plain data for a record."""
        return attrs.asdict(self)

    @classmethod
    def from_data(cls, data: Any) -> Method:
        """Read :meth:`to_data`'s output; a record written before methods were kept gives the defaults.

        :raises CacheReadError: when a field is missing or of the wrong type.
        """
        if data is None:
            # Written before records kept this, when the statistic was the plain mean.
            return cls(statistic="mean")
        if not isinstance(data, dict):
            raise CacheReadError(f"measured_with is a {type(data).__name__}, not a mapping")
        return cls(
            objective=checked.text(data["objective"], "measured_with.objective"),
            statistic=checked.text(data["statistic"], "measured_with.statistic"),
            timer=checked.text(data["timer"], "measured_with.timer"),
            warmup=checked.count(data["warmup"], "measured_with.warmup"),
            repeat=checked.count(data["repeat"], "measured_with.repeat"),
            # Records made before sharding existed were never sharded.
            shards=checked.count(data.get("shards", 1), "measured_with.shards"),
            timed=checked.text(data.get("timed", ""), "measured_with.timed"),
        )


@attrs.frozen
class Origin:
    """Where a tuned function is defined: its module and qualified name, as it is imported again.

    Kept in a record so that ``kerneltune cache list`` can import the function
    and tell whether the record was made from its current source. A function
    defined inside another (``<locals>`` in ``qualname``) has an origin that
    nothing else can import; one in a script run as ``__main__`` keeps the
    script's path, whose source is read (never run) instead.
    """

    module: str
    qualname: str
    #: the script's absolute path, for a function of a script run as ``__main__``; else ``None``.
    path: str | None = None

    def to_data(self) -> dict[str, str]:
        """Plain data for a record."""
        data = {"module": self.module, "qualname": self.qualname}
        if self.path is not None:
            data["path"] = self.path
        return data

    @classmethod
    def from_data(cls, data: Any) -> Origin | None:
        """Read :meth:`to_data`'s output; ``None`` (a record that names no origin) stays ``None``.

        :raises CacheReadError: for a field that is missing or not a string, or a
            module that is not a dotted name.
        """
        if data is None:
            return None
        given = checked.mapping(data, "origin")
        module = checked.text(given["module"], "origin.module")
        if not all(part.isidentifier() for part in module.split(".")):
            raise CacheReadError(f"origin.module is {checked.show(module)}, not a dotted module name")
        path = given.get("path")
        return cls(
            module=module,
            qualname=checked.text(given["qualname"], "origin.qualname"),
            path=None if path is None else checked.text(path, "origin.path"),
        )

    def __str__(self) -> str:
        return f"{self.module}.{self.qualname}"


def spread(samples: tuple[float, ...] | list[float]) -> float:
    """The relative spread of samples: the range of the trimmed samples over their median.

    0 with fewer than two trimmed samples (nothing shows any noise). Kernels
    held and flushed spread by a few percent, host work on a busy host far more.
    """
    kept = trimmed(samples)
    if len(kept) < 2:
        return 0.0
    middle = statistics.median(kept)
    return (kept[-1] - kept[0]) / middle if middle > 0 else 0.0


def iso_date(seconds: float) -> str:
    """``seconds`` since the epoch as an ISO-8601 UTC date, to the second."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


def _finalists(value: Any, size: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    indices = tuple(
        checked.index(v, size, f"finalists[{i}]") for i, v in enumerate(checked.rows(value, "finalists"))
    )
    if not indices or list(indices) != sorted(set(indices)):
        raise CacheReadError("finalists are not a non-empty, ascending list of distinct indices")
    return indices


def _carried(value: Any, size: int) -> tuple[int, ...]:
    indices = tuple(
        checked.index(v, size, f"carried[{i}]") for i, v in enumerate(checked.rows(value, "carried"))
    )
    if list(indices) != sorted(set(indices)):
        raise CacheReadError("carried is not an ascending list of distinct indices")
    return indices


def _warm_start(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    given = checked.mapping(value, "warm_start")
    if "portfolio" in given:  # the stored portfolio's configs measured (core/machine/portfolio_start.py)
        return {"portfolio": checked.count(given["portfolio"], "warm_start.portfolio")}
    return {
        "from": checked.plain(given["from"], "warm_start.from"),
        "distance": checked.finite(given["distance"], "warm_start.distance"),
    }


def _rounds(value: Any, count: int, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    sizes = tuple(checked.count(v, f"{where}[{i}]") for i, v in enumerate(checked.rows(value, where)))
    if len(sizes) < 2 or sum(sizes) != count or 0 in sizes:
        raise CacheReadError(f"{where} are not two or more positive counts adding up to the {count} samples")
    return sizes


def _confidence(data: dict[str, Any], size: int) -> tuple[str | None, tuple[int, ...], int, bool]:
    level = data.get("confidence")
    if level is not None and level not in CONFIDENCE_LEVELS:
        raise CacheReadError(
            f"confidence is {checked.show(level)}, not one of {', '.join(CONFIDENCE_LEVELS)}"
        )
    listed = checked.rows(data.get("rivals", []), "rivals")
    rivals = tuple(checked.index(v, size, f"rivals[{i}]") for i, v in enumerate(listed))
    recheck = data.get("recheck", False)
    if not isinstance(recheck, bool):
        raise CacheReadError(f"recheck is {checked.show(recheck)}, not true or false")
    return level, rivals, checked.count(data.get("rechecks", 0), "rechecks"), recheck


def _rank_times(rows: list[dict[str, Any]]) -> tuple[tuple[float, ...], ...]:
    kept = tuple(
        tuple(
            checked.time_or_inf(t, f"candidates[{i}].rank_times_ms[{r}]")
            for r, t in enumerate(
                checked.rows(row.get("rank_times_ms", []), f"candidates[{i}].rank_times_ms")
            )
        )
        for i, row in enumerate(rows)
    )
    if len({len(times) for times in kept if times}) > 1:
        raise CacheReadError("candidates' rank_times_ms are not all of one length")
    return kept if any(kept) else ()


def _measured_on(rows: list[dict[str, Any]]) -> tuple[int | None, ...]:
    if not any("measured_on" in row for row in rows):
        return ()
    return tuple(
        None
        if row.get("measured_on") is None
        else checked.count(row["measured_on"], f"candidates[{i}].measured_on")
        for i, row in enumerate(rows)
    )


@attrs.frozen
class TuningRecord:
    """What the cache stores for one (function, key, hardware) entry.

    Configs are stored by index and fingerprint with a readable label; the
    live config is always taken from the current candidate list, never
    rebuilt from the file. ``finalists`` are the indices SELECT chose among
    (a staged search's re-timed finalists); ``None`` means every candidate.
    ``source`` is the digest of the tuned code (``None`` in records written
    before it was kept); ``carried`` the indices whose measurements an
    earlier tuning of this key made, for another candidate list
    (:mod:`kerneltune.core.machine.reuse`); ``warm_start`` where a warm start
    began (:mod:`kerneltune.core.machine.warm_start`): ``{"from": <stored key>,
    "distance": <its distance>}``, ``None`` for a tuning that did not;
    ``rank_times`` each candidate's time on each rank (``rank_times[i][r]``,
    ``inf`` where it failed or was not measured there; an empty tuple for a
    candidate whose ranks' times are not known), or empty when the tuning
    kept none (one rank, sharded ranks, a reducer without ``gather_vector``,
    or a record written before they were kept); ``measured_on`` where the
    ranks split the candidates (``shard = true``), the rank that measured
    each one (``None`` for a candidate no rank measured), whose measurement
    every rank's record keeps; empty otherwise; ``pick_values`` the pick's
    config as plain data (:func:`kerneltune.core.values.keys.plain_config`),
    for the snippet ``kerneltune cache show`` prints and nothing else: it is
    never turned back into a config. ``None`` where the config is not plain
    data or the record was written before they were kept. ``origin`` is
    where the tuned function is defined (:class:`Origin`), for the
    function-level tuner; ``None`` for other tuners' records and those
    written before it was kept.
    """

    function: str
    key: Any
    fingerprints: tuple[str, ...]
    labels: tuple[str, ...]
    best_index: int
    times: tuple[float, ...]
    measurements: tuple[Measurement, ...]
    versions: dict[str, str]
    hardware: dict[str, Any]
    created: float
    method: Method = Method()
    finalists: tuple[int, ...] | None = None
    source: str | None = None
    carried: tuple[int, ...] = ()
    warm_start: dict[str, Any] | None = None
    rank_times: tuple[tuple[float, ...], ...] = ()
    measured_on: tuple[int | None, ...] = ()
    pick_values: Any = None
    confidence: str | None = None
    rivals: tuple[int, ...] = ()
    rechecks: int = 0
    recheck: bool = False
    origin: Origin | None = None
    schema: int = SCHEMA

    def to_data(self) -> dict[str, Any]:
        """Plain data for a cache plugin: no floats that JSON cannot hold."""
        return {
            "schema": self.schema,
            "function": self.function,
            "key": self.key,
            "best": {"index": self.best_index, "label": self.labels[self.best_index]}
            | ({} if self.pick_values is None else {"values": self.pick_values}),
            "finalists": None if self.finalists is None else list(self.finalists),
            "candidates": [self._row(m) for m in self.measurements],
            "versions": dict(self.versions),
            "hardware": dict(self.hardware),
            "created": self.created,
            "created_at": iso_date(self.created),
            "measured_with": self.method.to_data(),
            "source": self.source,
            "origin": None if self.origin is None else self.origin.to_data(),
            "carried": list(self.carried),
            "warm_start": None if self.warm_start is None else dict(self.warm_start),
            "confidence": self.confidence,
            "rivals": list(self.rivals),
            "rechecks": self.rechecks,
            "recheck": self.recheck,
        }

    def _row(self, measurement: Measurement) -> dict[str, Any]:
        index = measurement.index
        row = {
            "index": index,
            "fingerprint": self.fingerprints[index],
            "label": self.labels[index],
            "time_ms": None if math.isinf(self.times[index]) else self.times[index],
            "samples_ms": list(measurement.samples),
            "error": measurement.error,
        }
        if measurement.samples:
            # For readers of the file: derived from the samples, never read back.
            row["spread"] = round(spread(measurement.samples), 6)
        if measurement.rounds:
            row["rounds"] = list(measurement.rounds)
        if self.rank_times:
            # Written only where kept, so a one-rank record reads as before.
            row["rank_times_ms"] = [None if math.isinf(t) else t for t in self.ranks_of(index)]
        if self.measured_on:
            row["measured_on"] = self.measured_on[index]
        return row

    def ranks_of(self, index: int) -> tuple[float, ...]:
        """Each rank's time of candidate ``index``; empty when they are not known."""
        return self.rank_times[index] if self.rank_times else ()

    @classmethod
    def from_data(cls, data: Any) -> TuningRecord:
        """Rebuild a record from plain data, checking every field's type and range.

        Records written before ``finalists``, ``source``, ``origin``,
        ``carried``, ``warm_start``, ``rank_times_ms``, ``measured_on``, ``best.values``,
        ``rounds`` or the confidence fields were kept load with their defaults.

        :raises CacheReadError: when the data is not a record of this schema:
            a field missing or of the wrong type, a number that is not finite
            (or, for times and samples, negative), an index that is not an
            integer in range, or data nested too deep. Nothing else.
        """
        data = checked.mapping(data, "record")
        schema = data.get("schema")
        if type(schema) is not int or schema != SCHEMA:
            raise CacheReadError(f"record schema {reprlib.repr(schema)}, expected {SCHEMA}")
        try:
            rows = [
                checked.mapping(row, f"candidates[{i}]")
                for i, row in enumerate(checked.rows(data["candidates"], "candidates"))
            ]
            measurements = []
            for i, row in enumerate(rows):
                checked.index(row["index"], len(rows), f"candidates[{i}].index")
                if row["index"] != i:
                    raise CacheReadError("candidate rows are not in index order")
                error = row["error"]
                if error is not None:
                    checked.text(error, f"candidates[{i}].error")
                samples = checked.rows(row["samples_ms"], f"candidates[{i}].samples_ms")
                measurements.append(
                    Measurement(
                        index=i,
                        samples=tuple(
                            checked.finite(s, f"candidates[{i}].samples_ms[{j}]")
                            for j, s in enumerate(samples)
                        ),
                        error=error,
                        rounds=_rounds(row.get("rounds"), len(samples), f"candidates[{i}].rounds"),
                    )
                )
            best = checked.mapping(data["best"], "best")
            best_index = checked.index(best["index"], len(rows), "best.index")
            labels = tuple(checked.text(row["label"], f"candidates[{i}].label") for i, row in enumerate(rows))
            versions = checked.mapping(data["versions"], "versions")
            created = checked.finite(data["created"], "created", high=checked.LATEST)
            confidence, rivals, rechecks, recheck = _confidence(data, len(rows))
            return cls(
                function=checked.text(data["function"], "function"),
                key=checked.plain(data["key"], "key"),
                fingerprints=tuple(
                    checked.text(row["fingerprint"], f"candidates[{i}].fingerprint")
                    for i, row in enumerate(rows)
                ),
                labels=labels,
                best_index=best_index,
                times=tuple(
                    checked.time_or_inf(row["time_ms"], f"candidates[{i}].time_ms")
                    for i, row in enumerate(rows)
                ),
                measurements=tuple(measurements),
                versions={
                    checked.text(k, "a versions key"): checked.text(v, f"versions.{k}")
                    for k, v in versions.items()
                },
                hardware=checked.plain(checked.mapping(data["hardware"], "hardware"), "hardware"),
                created=created,
                method=Method.from_data(data.get("measured_with")),
                finalists=_finalists(data.get("finalists"), len(rows)),
                source=None if data.get("source") is None else checked.text(data["source"], "source"),
                carried=_carried(data.get("carried", []), len(rows)),
                warm_start=_warm_start(data.get("warm_start")),
                rank_times=_rank_times(rows),
                measured_on=_measured_on(rows),
                pick_values=checked.plain(best.get("values"), "best.values"),
                confidence=confidence,
                rivals=rivals,
                rechecks=rechecks,
                recheck=recheck,
                origin=Origin.from_data(data.get("origin")),
            )
        except KeyError as exc:
            raise CacheReadError(f"record has no field {exc}") from None

    def check_pick(self) -> None:
        """Check that the stored pick is what SELECT makes of the stored times.

        The pick must be the fastest finite time among ``finalists`` (all
        candidates when ``None``), ties going to the lower index, and must
        not have failed on this rank.

        :raises CacheReadError: naming the pick and what it should be.
        """
        among = range(len(self.times)) if self.finalists is None else self.finalists
        finite = [i for i in among if math.isfinite(self.times[i])]
        if not finite:
            raise CacheReadError("no candidate the pick was chosen among has a finite time")
        expected = min(finite, key=lambda i: (self.times[i], i))
        if self.best_index != expected:
            raise CacheReadError(
                f"the stored pick [{self.best_index}] is not the fastest of the stored times ([{expected}])"
            )
        if self.measurements[expected].error is not None:
            raise CacheReadError(f"the stored pick [{expected}] failed: {self.measurements[expected].error}")
