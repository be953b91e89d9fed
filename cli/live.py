"""Which stored records a tuning of the current source reads: for ``cache list``, ``report``, ``prune``.

A record whose function imports here is ``current`` when its source digest
is the function's now, else ``stale``; one whose function cannot be
imported is judged by date, ``newest`` or ``older`` per key, a guess that
``prune`` does not act on. docs/cli.md ("Which records are live") says how
a function is found, a script's included (read and compiled, never run).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import linecache
import os
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import click
from kerneltune.cli.loading import Stored
from kerneltune.core.driving import AutoTuner, Origin, source_digest

CURRENT = "current"
STALE = "stale"
NEWEST = "newest"
OLDER = "older"
#: The statuses of records a tuning here would still read (or, judged by date, may).
LIVE = frozenset({CURRENT, NEWEST})

# How many decorators over a tuned function are looked through (their ``__wrapped__``).
_WRAPPERS = 8


@attrs.frozen
class Marked:
    """A stored record and whether a tuning of the current source would read it."""

    stored: Stored
    #: :data:`CURRENT`, :data:`STALE`, :data:`NEWEST` or :data:`OLDER`.
    status: str

    @property
    def live(self) -> bool:
        """Whether this is the record a tuning here reads (for ``newest``: the best guess)."""
        return self.status in LIVE

    @property
    def origin(self) -> Origin | None:
        """Where the record's function is defined, where the record says."""
        assert self.stored.record is not None
        return self.stored.record.origin


@attrs.define
class Sources:
    """The current source digest of each tuned function the records name, each imported once.

    A function that cannot be imported, or is not a kerneltune-tuned one, has
    no digest here; its reason is noted on stderr once, where it is news to
    the user (a module that fails to import, a name it no longer holds), and
    not for functions nothing could import (defined inside another function,
    or in a script run as ``__main__``).
    """

    _digests: dict[Origin, str | None] = attrs.field(factory=dict)

    def digest(self, origin: Origin) -> str | None:
        """The digest of ``origin``'s current source, or ``None`` where it cannot be had here."""
        if origin not in self._digests:
            digest, problem = _current_digest(origin)
            if problem is not None:
                click.echo(f"kerneltune: {origin}: {problem}; its records are marked by date", err=True)
            self._digests[origin] = digest
        return self._digests[origin]


def _current_digest(origin: Origin) -> tuple[str | None, str | None]:
    """``origin``'s source digest now, or ``None`` and why not (``None`` where it goes without saying)."""
    parts = origin.qualname.split(".")
    top = origin.module.partition(".")[0]
    if not all(part.isidentifier() for part in parts):
        return None, None
    if origin.module == "__main__":
        return _script_digest(origin) if origin.path is not None else (None, None)
    if top in sys.stdlib_module_names:
        # Nothing is tuned there, and some of its modules act on import (antigravity opens a browser).
        return None, f"not importing {origin.module}, a module of the standard library"
    try:
        with _importable_here(), contextlib.redirect_stdout(sys.stderr):
            found: Any = importlib.import_module(origin.module)
            for part in parts:
                found = getattr(found, part)
    except (Exception, SystemExit) as exc:
        # A module runs its own code on import: anything it raises means "cannot be imported here".
        return None, f"cannot import it ({type(exc).__name__}: {' '.join(str(exc).split())})"
    for _ in range(_WRAPPERS):
        if isinstance(found, AutoTuner):
            return found.source_digest(), None
        found = getattr(found, "__wrapped__", None)
    return None, "it is no longer a function tuned by kerneltune"


def _script_digest(origin: Origin) -> tuple[str | None, str | None]:
    """The digest of a script's function as the script reads now, found in its compiled code, never run.

    The function's code object starts where its source does (its first
    decorator), so its source is what the tuner read when it was decorated.
    """
    assert origin.path is not None
    try:
        with open(origin.path, encoding="utf-8") as script:
            code = compile(script.read(), origin.path, "exec")
    except (OSError, SyntaxError, ValueError) as exc:
        return None, f"cannot read the script {origin.path} ({type(exc).__name__}: {exc})"
    found = _code_of(code, origin.qualname)
    if found is None:
        return None, f"the script {origin.path} no longer defines it"
    linecache.checkcache(origin.path)
    return source_digest(inspect.getsource(found)), None


def _code_of(code: types.CodeType, qualname: str) -> types.CodeType | None:
    """The code object of the function named ``qualname`` inside ``code`` (a module's), if any."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if getattr(const, "co_qualname", const.co_name) == qualname:
                return const
            inner = _code_of(const, qualname)
            if inner is not None:
                return inner
    return None


@contextlib.contextmanager
def _importable_here() -> Iterator[None]:
    """The current directory on the import path, as ``python -m`` has it, for the user's own modules."""
    here = os.getcwd()
    added = here not in sys.path
    if added:
        # Last, so that it shadows nothing installed.
        sys.path.append(here)
    try:
        yield
    finally:
        if added and here in sys.path:
            sys.path.remove(here)


def mark(found: Sequence[Stored]) -> list[Marked]:
    """Each record with its status, sorted by function, key and date (oldest first)."""
    sources = Sources()
    marked: list[Marked] = []
    by_date: dict[str, list[Stored]] = {}
    for stored in found:
        record = stored.record
        assert record is not None
        current = None
        if record.origin is not None and record.source is not None:
            current = sources.digest(record.origin)
        if current is None:
            # Records of one key on one machine's hardware replace one another as the source changes.
            group = [record.function, record.origin and record.origin.to_data(), record.key, record.hardware]
            by_date.setdefault(json.dumps(group, sort_keys=True), []).append(stored)
        else:
            marked.append(Marked(stored, CURRENT if record.source == current else STALE))
    for group in by_date.values():
        newest = max(group, key=lambda s: s.record.created if s.record is not None else 0.0)
        marked.extend(Marked(stored, NEWEST if stored is newest else OLDER) for stored in group)
    return sorted(marked, key=_order)


def _order(marked: Marked) -> tuple[Any, ...]:
    record = marked.stored.record
    assert record is not None
    return (record.function, _key_order(record.key), record.created, marked.stored.digest)


def _key_order(value: Any) -> tuple[Any, ...]:
    """A stored key as something to sort by: numbers by value (not as text), then strings, then tuples."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, int | float):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, list):
        return (4, tuple(_key_order(item) for item in value))
    if isinstance(value, dict) and set(value) == {"float"} and isinstance(value["float"], str):
        with contextlib.suppress(ValueError):
            return (2, float.fromhex(value["float"]))
    if isinstance(value, dict):
        return (
            5,
            tuple((str(k), _key_order(v)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))),
        )
    return (6, repr(value))


def describe(marked: Marked) -> str:
    """One line on which source a record is of, for ``report``."""
    origin = marked.origin
    if marked.status == CURRENT:
        return f"current ({origin} as it is now)"
    if marked.status == STALE:
        return f"stale ({origin} was edited since; kerneltune cache prune drops it)"
    why = "its function cannot be imported here" if origin is not None else "it names no importable function"
    if marked.status == NEWEST:
        return f"newest record of this key ({why}, so it is judged by date)"
    return f"older than another record of this key ({why}, so it is judged by date)"
