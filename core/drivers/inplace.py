"""``reset_to_zero`` and ``restore_value``: keep a candidate's runs from seeing each other's writes.

A function-level tuning calls the function many times on the caller's own
arguments, so one that works in place would see what earlier runs left and
hand back arguments changed by every run. As with ``triton.autotune``, each
argument in ``reset_to_zero`` is zeroed before every run and once more
before the call with the pick; each one in ``restore_value`` is copied once
per tuning (Triton copies before every run) and put back after every run,
also after one that raised. Neither is timed; an argument that is ``None``
is left alone, as in Triton.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import attrs
from kerneltune.core.machine import outputs
from kerneltune.core.machine.timing import Thunk, Wrap

_NAMED = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)


def _names(function: str, option: str, names: Iterable[str] | None) -> tuple[str, ...]:
    if names is None:
        return ()
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise TypeError(f"{function}: {option} must be a list of argument names, got {names!r}")
    listed = tuple(names)
    for name in listed:
        if not isinstance(name, str):
            raise TypeError(f"{function}: {option} must be a list of argument names, got {name!r} in it")
    return listed


def _zero(value: Any) -> None:
    if hasattr(value, "zero_"):
        value.zero_()
    else:
        value.fill(0)


def _copy(value: Any) -> Any:
    return value.clone() if hasattr(value, "clone") else value.copy()


def in_place_problem(value: Any) -> str | None:
    """Why ``value`` cannot be zeroed and put back between runs (``None`` when it can), for a message.

    It must be a torch tensor (``zero_``, ``clone``, ``copy_``) that autograd
    lets change in place, or a writable NumPy-like array (``fill``, ``copy``).
    """
    if all(hasattr(value, a) for a in ("zero_", "clone", "copy_")):
        if getattr(value, "requires_grad", False) and getattr(value, "is_leaf", False):
            return "a tensor that requires grad, which autograd lets nothing change in place"
        return None
    if all(hasattr(value, a) for a in ("fill", "copy", "__setitem__")):
        flags = getattr(value, "flags", None)
        if flags is not None and not getattr(flags, "writeable", True):
            return "a read-only array"
        return None
    return f"whose value is a {type(value).__name__}; it must be a torch tensor or a NumPy array"


@attrs.frozen
class InPlaceArguments:
    """The arguments a tuned function changes in place, by name; checked when it is decorated."""

    function: str
    reset_to_zero: tuple[str, ...]
    restore_value: tuple[str, ...]
    #: where each named argument sits among the positional ones (``None``: keyword-only).
    positions: Mapping[str, int | None]
    #: each named argument's default, for a call that leaves it out.
    defaults: Mapping[str, Any]

    @classmethod
    def of(
        cls,
        fn: Callable[..., Any],
        reset_to_zero: Iterable[str] | None,
        restore_value: Iterable[str] | None,
        fields: Collection[str],
    ) -> InPlaceArguments | None:
        """Check the names against ``fn``'s parameters; ``None`` when none are given.

        :param fields: the config fields, which the tuner chooses and so are no caller's arguments.
        :raises TypeError: for an option that is not a list of names.
        :raises ValueError: for a name that is not a named parameter of ``fn``, or is a config field.
        """
        function = getattr(fn, "__name__", repr(fn))
        zeroed = _names(function, "reset_to_zero", reset_to_zero)
        restored = _names(function, "restore_value", restore_value)
        if not zeroed and not restored:
            return None
        signature = inspect.signature(fn)
        parameters = {p.name: p for p in signature.parameters.values() if p.kind in _NAMED}
        positional = [p.name for p in parameters.values() if p.kind is not p.KEYWORD_ONLY]
        for option, names in (("reset_to_zero", zeroed), ("restore_value", restored)):
            for name in names:
                if name not in parameters:
                    raise ValueError(
                        f"{function}: {option} names {name!r}, which is not a parameter of "
                        f"{function}{signature}"
                    )
                if name in fields:
                    raise ValueError(
                        f"{function}: {option} names {name!r}, a config field: the tuner chooses "
                        "config fields, so there is nothing of the caller's to reset or restore"
                    )
        named = dict.fromkeys((*zeroed, *restored))
        return cls(
            function=function,
            reset_to_zero=zeroed,
            restore_value=restored,
            positions={n: positional.index(n) if n in positional else None for n in named},
            defaults={n: parameters[n].default for n in named},
        )

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> InPlaceRuns:
        """This call's named arguments, ready to be reset and restored around each run.

        :raises TypeError: for a named argument that is neither a tensor nor an array.
        """
        values: dict[str, Any] = {}
        for name, position in self.positions.items():
            if name in kwargs:
                value = kwargs[name]
            elif position is not None and position < len(args):
                value = args[position]
            else:
                value = self.defaults[name]
            if value is None or value is inspect.Parameter.empty:
                continue
            option = "reset_to_zero" if name in self.reset_to_zero else "restore_value"
            problem = in_place_problem(value)
            if problem is not None:
                raise TypeError(f"{self.function}: {option} names {name!r}, {problem}")
            values[name] = value
        return InPlaceRuns(
            zeroed=[values[n] for n in self.reset_to_zero if n in values],
            restored=[values[n] for n in self.restore_value if n in values],
        )


class InPlaceRuns:
    """One tuning's resets and restores of one call's arguments."""

    def __init__(self, zeroed: list[Any], restored: list[Any]) -> None:
        self._zeroed = zeroed
        self._restored = restored
        #: the contents to put back, copied at the first run; ``None`` before it.
        self._saved: list[Any] | None = None

    def around(self, wrap: Wrap, thunk: Thunk) -> None:
        """One run: reset, ``wrap(thunk)``, restore; ``wrap`` is what a timed run times."""
        if self._saved is None:
            self._saved = [_copy(value) for value in self._restored]
        for value in self._zeroed:
            _zero(value)
        try:
            wrap(thunk)
        finally:
            for value, saved in zip(self._restored, self._saved, strict=True):
                outputs.put_back(value, saved)

    def run(self, thunk: Thunk) -> None:
        """One untimed run (recording launches for COMPILE), reset and restored alike."""
        self.around(_call, thunk)

    def finish(self) -> None:
        """Before the call with the pick: zero the reset arguments again, if any run touched them."""
        if self._saved is not None:
            for value in self._zeroed:
                _zero(value)
            self._saved = None


def _call(thunk: Thunk) -> None:
    thunk()
