"""A contextual tuner's tuned launches, made without the autotuner's ``run``.

Once a (kernel, key) has its pick, every later call of the outer function
launches it again, usually with arguments of the same Python types. Triton's
key of a launch (:func:`~kerneltune.plugins.triton.adapter.tuning_key`) costs
about a microsecond in Python; a :class:`DirectKernel` computes it once per
key and files the pick under a cheaper key, made by a function generated for
the launch's argument types (as Triton's own binder is): the key arguments'
values and the dtype objects, behind a check of every argument's type.
Launches of other types, or with kernel arguments by name, take Triton's key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from kerneltune.plugins.triton.adapter import NO_DTYPE, key_positions, tuning_key

#: What :meth:`DirectKernel.launch` returns for a launch it did not make.
NOT_DIRECT = object()

#: A key function that knows no launch yet.
_UNPLANNED: Callable[[Sequence[Any], Mapping[str, Any]], Hashable | None] = lambda args, kwargs: None  # noqa: E731


class DirectKernel:
    """One autotuner's direct launches: its picks by the launches' own cheap key.

    :param picks: the contextual tuner's picks of this kernel, by Triton's
        key (``direct_entry``); more may come in later.
    """

    def __init__(self, picks: Mapping[Hashable, Any]) -> None:
        self.picks = picks
        #: the cheap key of a launch, ``None`` where the launch does not have the planned shape.
        self.key = _UNPLANNED
        #: by cheap key: Triton's key, the pick and its keyword arguments.
        self.entries: dict[Hashable, tuple[Hashable, Any, dict[str, Any]]] = {}

    def launch(self, tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """The autotuner's own cache hit, from the picks.

        :returns: what the kernel's ``run`` returned, or :data:`NOT_DIRECT`
            where the picks lack this launch's key or the autotuner's cache no
            longer holds that pick.
        """
        entry = self.entries.get(self.key(args, kwargs))
        if entry is None:
            entry = self._learn(tuner, args, kwargs)
            if entry is None:
                return NOT_DIRECT
        elif tuner.cache.get(entry[0]) is not entry[1]:
            return NOT_DIRECT
        tuner.best_config = entry[1]
        return tuner.fn.run(*args, **kwargs, **entry[2])

    def _learn(
        self, tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[Hashable, Any, dict[str, Any]] | None:
        """This launch's pick by Triton's key, filed under its cheap key where it has one."""
        key = tuning_key(tuner, args, kwargs)
        pick = self.picks.get(key)
        if pick is None or tuner.cache.get(key) is not pick[0]:
            return None
        entry = (key, pick[0], pick[1])
        if self.key is _UNPLANNED:
            self.key = _key_function(tuner, args, kwargs) or self.key
        cheap = self.key(args, kwargs)
        if cheap is not None:
            self.entries[cheap] = entry
        return entry


def _key_function(
    tuner: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Callable[[Sequence[Any], Mapping[str, Any]], Hashable | None] | None:
    """A function giving launches shaped as this one a key that tells their picks apart.

    Shaped as this one: as many positional arguments, each of the same
    type, and the same keyword names, none a kernel argument. ``None``
    where this launch names a kernel argument, or an argument's ``dtype``
    is not its type's (then whether it has one could change between
    launches of the same types).
    """
    if not set(tuner.arg_names).isdisjoint(kwargs):
        return None
    names = [f"a{i}" for i in range(len(args))]
    dtypes: list[str] = []
    for i, value in enumerate(args):
        if type(value) in NO_DTYPE:
            continue
        if not hasattr(type(value), "dtype"):
            if hasattr(value, "dtype"):
                return None
            continue
        dtypes.append(f"a{i}.dtype")
    values = [f"a{i}" for i in key_positions(tuner) if i < len(args)]
    named = " and ".join([f"len(kwargs) == {len(kwargs)}"] + [f"{name!r} in kwargs" for name in kwargs])
    types = " and ".join(f"type(a{i}) is T{i}" for i in range(len(args))) or "True"
    source = (
        "def key(args, kwargs):\n"
        f"    if len(args) != {len(args)} or not ({named}):\n"
        "        return None\n"
        + (f"    {', '.join(names)}, = args\n" if names else "")
        + f"    if {types}:\n"
        f"        return ({''.join(part + ', ' for part in values + dtypes)})\n"
        "    return None\n"
    )
    scope: dict[str, Any] = {f"T{i}": type(value) for i, value in enumerate(args)}
    exec(compile(source, f"<kerneltune key of {getattr(tuner.fn, '__name__', 'kernel')}>", "exec"), scope)
    key: Callable[[Sequence[Any], Mapping[str, Any]], Hashable | None] = scope["key"]
    return key
