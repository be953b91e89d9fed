"""What the tuners' decorated functions share: they stand in for the function they wrap."""

from __future__ import annotations

import functools
from typing import Any


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
