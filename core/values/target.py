"""What the parent sends an isolation worker: :class:`Target`.

Its own module because three sides name it: the parent that builds it
(:mod:`kerneltune.core.isolation.parent`), the worker that loads it
(:mod:`kerneltune.core.isolation.worker`), and the interceptor contract
whose launches describe themselves with one
(:class:`kerneltune.core.plugin_system.contracts.IsolatedLaunch`).
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class Target:
    """What the worker imports by name, and the arguments to run its candidates with."""

    module: str
    qualname: str
    #: how many ``.fn`` steps lead from what the name holds to what is tuned
    #: (1: the name holds a tuner whose ``.fn`` is the tuned function).
    unwrap: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    #: ``"module:function"`` of a factory the worker calls with what is tuned,
    #: returning the :data:`~kerneltune.core.isolation.worker.Runner` for its
    #: candidates; ``None``: what is tuned is a function, called as
    #: ``fn(*args, **payload, **kwargs)``.
    runner: str | None = None
    #: ``"module:function"`` names the worker calls, in order and without
    #: arguments, before it imports ``module``: a plugin's set-up that the
    #: parent had done (a feature it enabled) and the module relies on.
    prepare: tuple[str, ...] = ()
