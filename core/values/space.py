"""A candidate list and the fingerprint of what it tunes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
from kerneltune.core.values.keys import describe, digest
from kerneltune.core.values.records import Candidate


@attrs.frozen
class Space:
    """A named candidate list and the fingerprint of what it tunes.

    ``fingerprint`` covers the tuned code and every candidate; ``source``
    the code alone, which is what a stored record's entry is named by, so
    that a record outlives changes to the candidate list
    (:mod:`kerneltune.core.machine.reuse`).
    """

    name: str
    candidates: tuple[Candidate, ...]
    fingerprint: str
    source: str = ""

    @classmethod
    def build(
        cls, name: str, configs: Sequence[Any], source: str, label: Callable[[Any], str] = repr
    ) -> Space:
        """Fingerprint ``configs`` and the tuned code's ``source``.

        :param name: the namespace of cache files and logs (the function's name).
        :param label: a readable one-line form of a config, for logs and records.
        """
        candidates = tuple(
            Candidate(index=i, config=c, fingerprint=digest(describe(c)), label=label(c))
            for i, c in enumerate(configs)
        )
        fingerprint = digest({"source": source, "candidates": [c.fingerprint for c in candidates]})
        return cls(
            name=name, candidates=candidates, fingerprint=fingerprint, source=digest({"source": source})
        )
