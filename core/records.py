"""Value records: candidates, measurements, and the stored tuning record."""

from __future__ import annotations

import datetime
import math
from typing import Any

import attrs
from kerneltune.core.errors import CacheReadError

SCHEMA = 1


@attrs.frozen
class Candidate:
    """One entry of the candidate list: its position, live config and fingerprint."""

    index: int
    config: Any = attrs.field(eq=False, repr=False)
    fingerprint: str
    label: str


@attrs.frozen
class Measurement:
    """A candidate's samples in milliseconds, or the error that stopped it."""

    index: int
    samples: tuple[float, ...] = ()
    error: str | None = None

    @property
    def mean(self) -> float:
        """Mean of the samples; infinity for a failed or unmeasured candidate."""
        if self.error is not None or not self.samples:
            return math.inf
        return sum(self.samples) / len(self.samples)


@attrs.frozen
class Method:
    """How a tuning measured its candidates, kept in its record.

    ``objective`` is what was compared (``"device"``: the device time of the
    work, flushed and held; ``"wall"``: host-inclusive time per call),
    ``statistic`` how each candidate's samples became one number, ``timer``
    the timer plugin's name, ``warmup`` and ``repeat`` the untimed and timed
    runs per candidate of the first pass.
    """

    objective: str = "device"
    statistic: str = "mean"
    timer: str = ""
    warmup: int = 0
    repeat: int = 0

    def to_data(self) -> dict[str, Any]:
        """Plain data for a record."""
        return attrs.asdict(self)

    @classmethod
    def from_data(cls, data: Any) -> Method:
        """Read :meth:`to_data`'s output; a record written before methods were kept gives the defaults."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise CacheReadError(f"measured_with is a {type(data).__name__}, not a mapping")
        return cls(
            objective=str(data["objective"]),
            statistic=str(data["statistic"]),
            timer=str(data["timer"]),
            warmup=int(data["warmup"]),
            repeat=int(data["repeat"]),
        )


def iso_date(seconds: float) -> str:
    """``seconds`` since the epoch as an ISO-8601 UTC date, to the second."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


def _float_or_inf(value: Any) -> float:
    return math.inf if value is None else float(value)


@attrs.frozen
class TuningRecord:
    """What the cache stores for one (function, key, hardware) entry.

    Configs are stored by index and fingerprint with a readable label; the
    live config is always taken from the current candidate list, never
    rebuilt from the file.
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
    schema: int = SCHEMA

    def to_data(self) -> dict[str, Any]:
        """Plain data for a cache plugin: no floats that JSON cannot hold."""
        return {
            "schema": self.schema,
            "function": self.function,
            "key": self.key,
            "best": {"index": self.best_index, "label": self.labels[self.best_index]},
            "candidates": [
                {
                    "index": m.index,
                    "fingerprint": self.fingerprints[m.index],
                    "label": self.labels[m.index],
                    "time_ms": None if math.isinf(self.times[m.index]) else self.times[m.index],
                    "samples_ms": list(m.samples),
                    "error": m.error,
                }
                for m in self.measurements
            ],
            "versions": dict(self.versions),
            "hardware": dict(self.hardware),
            "created": self.created,
            "created_at": iso_date(self.created),
            "measured_with": self.method.to_data(),
        }

    @classmethod
    def from_data(cls, data: Any) -> TuningRecord:
        """Rebuild a record from plain data.

        :raises CacheReadError: when the data is not a record of this schema.
        """
        if not isinstance(data, dict):
            raise CacheReadError(f"record is a {type(data).__name__}, not a mapping")
        if data.get("schema") != SCHEMA:
            raise CacheReadError(f"record schema {data.get('schema')!r}, expected {SCHEMA}")
        try:
            rows = data["candidates"]
            measurements = tuple(
                Measurement(
                    index=int(row["index"]),
                    samples=tuple(float(s) for s in row["samples_ms"]),
                    error=row["error"],
                )
                for row in rows
            )
            if [m.index for m in measurements] != list(range(len(rows))):
                raise CacheReadError("candidate rows are not in index order")
            best_index = int(data["best"]["index"])
            if not 0 <= best_index < len(rows):
                raise CacheReadError(f"best index {best_index} out of range")
            return cls(
                function=str(data["function"]),
                key=data["key"],
                fingerprints=tuple(str(row["fingerprint"]) for row in rows),
                labels=tuple(str(row["label"]) for row in rows),
                best_index=best_index,
                times=tuple(_float_or_inf(row["time_ms"]) for row in rows),
                measurements=measurements,
                versions={str(k): str(v) for k, v in data["versions"].items()},
                hardware=dict(data["hardware"]),
                created=float(data["created"]),
                method=Method.from_data(data.get("measured_with")),
            )
        except CacheReadError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CacheReadError(f"malformed record: {exc!r}") from exc
