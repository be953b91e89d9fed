"""What the tuners' decorated functions share: they stand in for the function they wrap."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any


def source_of(fn: Callable[..., Any]) -> str:
    """What a stored pick of ``fn`` is keyed by: its source, else its bytecode, else its name."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        return repr(code.co_code) if code is not None else fn.__qualname__


class FunctionWrapper:
    """Base of :class:`~kerneltune.core.drivers.function_tuner.AutoTuner` and
    :class:`~kerneltune.core.drivers.contextual.ContextualAutoTuner`.

    ``functools.update_wrapper`` gives an instance the wrapped function's
    name, docstring and signature; this class makes it bind as a method
    does when it decorates one.
    """

    __name__: str  # set by functools.update_wrapper

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return functools.partial(self, instance)
