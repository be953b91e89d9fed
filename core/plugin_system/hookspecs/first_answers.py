"""First-answer hooks: the first implementation that answers (not ``None``) decides."""

from __future__ import annotations

from typing import Any

from kerneltune.core.plugin_system.hookspecs.markers import hookspec


@hookspec(firstresult=True)
def kerneltune_describe_value(value: Any) -> str | None:
    """A short readable form of one value of a function-level config, for labels.

    Labels name candidates in logs, records and the ``kerneltune`` command.
    A plugin that knows a value's type (Triton's names a ``triton.Config``
    by the options it sets) returns its text; ``None`` leaves the value to
    ``str``.

    :param value: one value of a config dict.
    """


@hookspec(firstresult=True)
def kerneltune_plain_value(value: Any) -> dict[str, Any] | None:
    """A config value of a type a plugin knows, as plain data tagged with the type's name.

    Records keep the pick's values as plain data (never read back into
    objects: the live config always comes from the candidate list) so that
    ``kerneltune cache show`` can print a line that hard-codes the pick.
    Triton's returns ``{"triton.Config": {"kwargs": {...}, "num_warps": 4,
    ...}}`` for a ``triton.Config``. ``None`` leaves the value to others; a
    value no plugin knows leaves the pick without stored values.

    :param value: a candidate config, or one value of a config dict.
    """


@hookspec(firstresult=True)
def kerneltune_key_distance(function: str, key: Any, other: Any) -> float | None:
    """How far apart two tuning keys of one function are, for warm starts.

    A warm start (:mod:`kerneltune.core.machine.warm_start`) asks it how far a key with no
    stored record is from each stored key of the same function, code and hardware, and starts
    from the nearest. Without an answer the default distance applies
    (:func:`kerneltune.core.machine.warm_start.default_distance`: numeric key parts on a log
    scale, the rest must match).

    Implement it where that is wrong for a key: a key whose best config
    changes abruptly at known values (say, M below or above 64 for a
    matmul) can put keys across such a line infinitely far apart, and a key
    holding a value that never predicts the best config can leave it out of
    the comparison.

    :param function: the tuned function's name (the cache namespace).
    :param key: the new key, encoded as records store keys
        (:func:`kerneltune.core.driving.encode_key`: tuples are lists, floats
        ``{"float": hex}``, dtypes ``{"torch.dtype": name}``).
    :param other: a stored key, encoded the same way.
    :returns: a distance of at least 0 (0: as good as the same key);
        ``math.inf`` to never start ``key`` from ``other``; ``None`` to
        leave these keys to the next implementation, and at last to the
        default.
    """


@hookspec(firstresult=True)
def kerneltune_failure_kind(error: BaseException) -> str | None:
    """Why a candidate's failure would happen for every key, or ``None`` where a key may change it.

    A config whose failure no key changes (the device has too few
    resources for it, its program does not compile) is remembered per
    function, argument dtypes, hardware and software, and later keys fail it
    at once instead of compiling or launching it again
    (:mod:`kerneltune.core.machine.failed_configs`). Triton's answers
    ``"out of resources"`` for its ``OutOfResources`` and ``"compile
    error"`` for a ``CompilationError``; an exception from the user's own
    code must get ``None``, since the next key may run fine.

    :param error: what a candidate raised (or one of the exceptions it was
        raised ``from``), compiling or running.
    :returns: a short name of the reason (it is stored and shown), or ``None``.
        ``"out of resources"`` (a config the device cannot run, as stock
        ``triton.autotune`` treats it) also makes the drop an expected one: no
        ``CandidateFailedWarning`` and no traceback, only the tuning's one line
        of drops counts it (docs/guide.md, "Dropped configs").
    """
