"""DirectLaunches: the launches an interceptor may make itself, without the contextual tuner's route."""

from __future__ import annotations

from collections.abc import Hashable

import attrs


@attrs.define(eq=False)
class DirectLaunches:
    """What a contextual tuner lets its interceptors launch on their own.

    Once a (kernel, key) has its pick and was launched as a plain cache hit,
    the contextual tuner files it here (:attr:`picks`), and from the next
    call on, while :attr:`serving` is set, the interceptor launches it with
    the kernel's own pick instead of handing it to the route: a tuned call
    costs what the kernel's launch costs. The tuner sets :attr:`serving` at
    the start of each call and clears it at the first launch the route must
    see (a key without a pick): from there on the call's executions need the
    route's bookkeeping.
    """

    #: whether the interceptor may launch the :attr:`picks` itself now.
    serving: bool = False
    #: by kernel, then key: what the launch's ``direct()`` returned (the interceptor's own form).
    picks: dict[object, dict[Hashable, object]] = attrs.field(factory=dict)

    def add(self, kernel: object, key: Hashable, entry: object) -> None:
        """Let later launches of ``kernel`` with ``key`` be made directly, from ``entry``."""
        self.picks.setdefault(kernel, {})[key] = entry
