"""The stored memory of a function's failed configs: plain data beside the picks, checked when read.

One record per tuned code and hardware (:func:`failed_entry`) lists each
config that failed for a reason no key changes, with the argument dtypes it
failed for; :mod:`kerneltune.core.machine.failed_configs` keeps and consults it.
"""

from __future__ import annotations

import reprlib
import time
from typing import Any

import attrs
from kerneltune.core.errors import CacheReadError
from kerneltune.core.values import checked
from kerneltune.core.values.keys import digest
from kerneltune.core.values.records import iso_date

#: What a record's ``kind`` says: a memory of failed configs, not a tuning record.
FAILED_KIND = "failed configs"
FAILED_SCHEMA = 1


def failed_entry(source: str | None, hardware: dict[str, Any]) -> str:
    """The cache entry (digest) of the failed configs of the code ``source`` on ``hardware``."""
    return digest({"failed configs": source, "hardware": hardware})


def is_failed_configs(data: Any) -> bool:
    """Whether stored plain data is a memory of failed configs (else it should be a tuning record)."""
    return isinstance(data, dict) and data.get("kind") == FAILED_KIND


@attrs.frozen
class FailedConfig:
    """One config that failed for a reason no key changes, for one set of argument dtypes."""

    fingerprint: str
    label: str
    dtypes: tuple[str, ...]
    #: why the key does not matter: ``"out of resources"``, ``"compile error"``, ``"compile deadline"``.
    kind: str
    #: the failure, as the candidate's error reads (``describe_error``).
    reason: str

    def to_data(self) -> dict[str, Any]:
        """Plain data for the record."""
        return {**attrs.asdict(self), "dtypes": list(self.dtypes)}

    @classmethod
    def from_data(cls, data: Any, where: str) -> FailedConfig:
        """Read :meth:`to_data`'s output. :raises CacheReadError: for a field missing or of the wrong type."""
        given = checked.mapping(data, where)
        try:
            dtypes = checked.rows(given["dtypes"], f"{where}.dtypes")
            return cls(
                fingerprint=checked.text(given["fingerprint"], f"{where}.fingerprint"),
                label=checked.text(given["label"], f"{where}.label"),
                dtypes=tuple(checked.text(d, f"{where}.dtypes[{i}]") for i, d in enumerate(dtypes)),
                kind=checked.text(given["kind"], f"{where}.kind"),
                reason=checked.text(given["reason"], f"{where}.reason"),
            )
        except KeyError as exc:
            raise CacheReadError(f"{where} has no field {exc}") from None


@attrs.frozen
class FailedConfigs:
    """What the cache stores of one function's failed configs, for one code, hardware and software.

    A record made with other software ``versions`` (a new Triton, torch or
    driver) is forgotten: the failures it lists may not happen any more.
    """

    function: str
    source: str | None
    versions: dict[str, str]
    hardware: dict[str, Any]
    failed: tuple[FailedConfig, ...]
    created: float = attrs.field(factory=time.time)

    def to_data(self) -> dict[str, Any]:
        """Plain data for a cache plugin."""
        return {
            "schema": FAILED_SCHEMA,
            "kind": FAILED_KIND,
            "function": self.function,
            "source": self.source,
            "versions": dict(self.versions),
            "hardware": dict(self.hardware),
            "created": self.created,
            "created_at": iso_date(self.created),
            "failed": [f.to_data() for f in self.failed],
        }

    @classmethod
    def from_data(cls, data: Any) -> FailedConfigs:
        """Rebuild the record from plain data, checking every field.

        :raises CacheReadError: for data that is not such a record of this schema.
        """
        data = checked.mapping(data, "record")
        schema = data.get("schema")
        if not is_failed_configs(data) or type(schema) is not int or schema != FAILED_SCHEMA:
            raise CacheReadError(
                f"not a record of failed configs of schema {FAILED_SCHEMA} (kind "
                f"{reprlib.repr(data.get('kind'))}, schema {reprlib.repr(schema)})"
            )
        try:
            rows = checked.rows(data["failed"], "failed")
            versions = checked.mapping(data["versions"], "versions")
            return cls(
                function=checked.text(data["function"], "function"),
                source=None if data["source"] is None else checked.text(data["source"], "source"),
                versions={
                    checked.text(k, "a versions key"): checked.text(v, f"versions.{k}")
                    for k, v in versions.items()
                },
                hardware=checked.plain(checked.mapping(data["hardware"], "hardware"), "hardware"),
                failed=tuple(FailedConfig.from_data(row, f"failed[{i}]") for i, row in enumerate(rows)),
                created=checked.finite(data["created"], "created", high=checked.LATEST),
            )
        except KeyError as exc:
            raise CacheReadError(f"record of failed configs has no field {exc}") from None
