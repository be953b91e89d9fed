"""One cache over two layers: the local cache first, a shared remote store second.

``cache = "<a remote store's name>"`` (``redis``) builds it over the cache
registered as ``json``. A remote hit is checked as a record (or a memory of failed configs) and copied to
the local layer; a failing store is one warning per process and
:data:`RETRY_SECONDS` of the local layer alone, never a failed tuning
(docs/fleet.md).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kerneltune.core.errors import CacheReadError
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.contracts import Cache, RemoteStore
from kerneltune.core.private_files import MAX_READ
from kerneltune.core.values.failed import FailedConfigs, is_failed_configs
from kerneltune.core.values.key_index import is_key_index
from kerneltune.core.values.records import SCHEMA, TuningRecord

#: After a failure, how long this process uses the local cache alone before asking the store again.
RETRY_SECONDS = 30.0


class LayeredCache:
    """The local cache, then a remote store; writes go to both.

    Named as the store is (``name``), for messages and ``PickLoaded.cache``.
    """

    def __init__(self, local: Cache, remote: RemoteStore, owner: str) -> None:
        """:param owner: the plugin that registered the remote store, for messages."""
        self.local = local
        self.remote = remote
        self.owner = owner
        self.name = type(remote).name
        self._quiet_until = 0.0

    @staticmethod
    def key(namespace: str, digest: str) -> str:
        """The store's key for a record: schema version, namespace, then the local file's digest."""
        return f"kerneltune:v{SCHEMA}:{namespace}:{digest}"

    def directory(self, namespace: str) -> Path | None:
        """The local layer's folder, where the tuning logs go."""
        return self.local.directory(namespace)

    def load(self, namespace: str, digest: str) -> dict[str, Any] | None:
        """The local record, else the store's (then also written locally), else ``None``.

        :raises CacheReadError: for a stored value that is not a valid
            record, or a local record that cannot be read when the store has
            none either.
        """
        try:
            data = self.local.load(namespace, digest)
        except CacheReadError as exc:
            # The store may hold a good copy; if it does, that copy replaces the bad one.
            unreadable: CacheReadError | None = exc
            data = None
        else:
            unreadable = None
        if data is not None:
            return data
        data = self._fetch(namespace, digest)
        if data is None:
            if unreadable is not None:
                raise unreadable
            return None
        try:
            self.local.store(namespace, digest, data)
        except Exception as exc:
            warn_once(
                ("remote cache local copy", self.remote.location),
                f"kerneltune: cannot keep a local copy of a pick from {self.remote.location} "
                f"({type(exc).__name__}: {exc}); the {self.name} cache's copy is used",
            )
        return data

    def store(self, namespace: str, digest: str, data: dict[str, Any]) -> None:
        """Write the local layer, then the store; a failing store is a warning.

        :raises OSError: as the local layer raises it, after the store was
            written; the session turns it into a warning.
        """
        try:
            self.local.store(namespace, digest, data)
        finally:
            self._send(namespace, digest, data)

    def _fetch(self, namespace: str, digest: str) -> dict[str, Any] | None:
        if time.monotonic() < self._quiet_until:
            return None
        key = self.key(namespace, digest)
        where = f"{self.name} key {key} at {self.remote.location}"
        try:
            payload = self.remote.get(key)
        except CacheReadError as exc:
            raise CacheReadError(f"{where}: {exc}") from exc
        except Exception as exc:
            self._failed("cannot read", exc)
            return None
        if not payload:
            return None
        if len(payload) > MAX_READ:
            raise CacheReadError(f"{where}: larger than {MAX_READ} bytes")
        try:
            data = json.loads(payload)
            if is_failed_configs(data):
                FailedConfigs.from_data(data)
            elif is_key_index(data):
                pass  # read where it is used (core/machine/stored_keys.py), which lists the records on damage
            else:
                TuningRecord.from_data(data).check_pick()
        except CacheReadError as exc:
            raise CacheReadError(f"{where}: {exc}") from exc
        except Exception as exc:
            raise CacheReadError(f"{where}: cannot decode: {type(exc).__name__}: {exc}") from exc
        return data

    def _send(self, namespace: str, digest: str, data: dict[str, Any]) -> None:
        if time.monotonic() < self._quiet_until:
            return
        payload = json.dumps(data, sort_keys=True, allow_nan=False, separators=(",", ":")).encode()
        try:
            self.remote.put(self.key(namespace, digest), payload, self.remote.ttl)
        except Exception as exc:
            self._failed("cannot write to", exc)

    def _failed(self, what: str, exc: Exception) -> None:
        # Whatever went wrong (refused, timed out, an error reply), the local cache must carry on.
        self._quiet_until = time.monotonic() + RETRY_SECONDS
        warn_once(
            ("remote cache", self.name, self.remote.location),
            f"kerneltune: {what} the {self.name} cache at {self.remote.location} "
            f"({type(exc).__name__}: {exc}); using the local {type(self.local).name} cache alone, "
            f"and asking the server again after {RETRY_SECONDS:.0f} s (no further warnings in this process)",
        )
