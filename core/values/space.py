"""A candidate list and the fingerprint of what it tunes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
from kerneltune.core.values.keys import describe, digest
from kerneltune.core.values.records import Candidate, Origin


def source_digest(source: str) -> str:
    """The digest a stored record of code whose source is ``source`` is named by (:attr:`Space.source`)."""
    return digest({"source": source})


@attrs.frozen
class Space:
    """A named candidate list and the fingerprint of what it tunes.

    ``fingerprint`` covers the tuned code and every candidate; ``source``
    the code alone, which is what a stored record's entry is named by, so
    that a record outlives changes to the candidate list
    (:mod:`kerneltune.core.machine.reuse`). ``origin`` is where the tuned
    function can be imported from, where a tuner knows it; its records keep it.
    """

    name: str
    candidates: tuple[Candidate, ...]
    fingerprint: str
    source: str = ""
    origin: Origin | None = None

    @classmethod
    def build(
        cls,
        name: str,
        configs: Sequence[Any],
        source: str,
        label: Callable[[Any], str] = repr,
        origin: Origin | None = None,
    ) -> Space:
        """Fingerprint ``configs`` and the tuned code's ``source``.

        :param name: the namespace of cache files and logs (the function's name).
        :param label: a readable one-line form of a config, for logs and records.
        :param origin: the tuned function's module and qualified name, for its records.
        """
        candidates = tuple(
            Candidate(index=i, config=c, fingerprint=digest(describe(c)), label=label(c))
            for i, c in enumerate(configs)
        )
        fingerprint = digest({"source": source, "candidates": [c.fingerprint for c in candidates]})
        return cls(
            name=name,
            candidates=candidates,
            fingerprint=fingerprint,
            source=source_digest(source),
            origin=origin,
        )
