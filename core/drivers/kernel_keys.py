"""Each (kernel, key) a contextual call meets: its candidates, its tuner, what screening ruled out.

:class:`~kerneltune.core.drivers.contextual_call.ContextualCall` keeps one
:class:`KernelKey` per (kernel, key) for the length of a call; the tuners,
and with them the in-process picks, live as long as the kernel object.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable

import attrs
from kerneltune.core.drivers.checked_launches import LaunchCheck
from kerneltune.core.isolation.parent import Screening, screen_all, screener
from kerneltune.core.machine.faces import SteppedTuning
from kerneltune.core.machine.timing import CandidateRuns
from kerneltune.core.machine.tuner import Tuner
from kerneltune.core.plugin_system.contracts import IsolatedLaunch
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.records import Candidate
from kerneltune.core.values.space import Space

#: Each kernel object's tuners (one per candidate list), and with them its
#: in-process picks: they live as long as the kernel, and another kernel
#: object, even one of the same source and configs, or one made later at the
#: same address, starts with none. Only the one active tuner touches it.
_TUNERS: weakref.WeakKeyDictionary[object, dict[str, Tuner]] = weakref.WeakKeyDictionary()


@attrs.define(eq=False)
class KernelKey:
    """The tuning state of one (kernel, key) during one call."""

    kernel: object
    name: str
    key: Hashable
    space: Space | None = None
    kept: tuple[int, ...] = ()
    done: bool = False
    tuning: SteppedTuning | None = None
    candidate: Candidate | None = None
    launches: int = 0
    runs: CandidateRuns | None = None
    error: BaseException | None = None
    means: dict[int, float] = attrs.field(factory=dict)
    good: list[int] = attrs.field(factory=list)
    bad: set[int] = attrs.field(factory=set)
    #: how the isolation worker repeats this kernel's launches, until it has screened them.
    isolated: IsolatedLaunch | None = None
    #: why each kept candidate that failed this rank's screening must not run here; ``None`` until screened.
    screened_out: dict[int, str] | None = None
    #: the execution whose first launch of this (kernel, key) reset what the kernel zeroes.
    reset_in: int = 0
    #: the check of its candidates' writes while it is tuned; ``None`` with ``check_outputs`` off.
    check: LaunchCheck | None = None

    def tuner(self) -> Tuner:
        """The kernel's tuner for this candidate list, made at the first need."""
        assert self.space is not None
        tuners = _TUNERS.setdefault(self.kernel, {})
        tuner = tuners.get(self.space.fingerprint)
        if tuner is None:
            # One kernel's candidate lists share their records: a list that grew measures only what is new.
            records = next(iter(tuners.values())).records if tuners else None
            tuner = tuners[self.space.fingerprint] = Tuner(self.space, records=records)
        return tuner

    def screened(self, session: Session) -> dict[int, str] | None:
        """The kept candidates that must not run here, screened in the worker at the first need.

        When it comes up to be measured, or earlier when a launch needs a stand-in: no
        candidate runs here unscreened. ``None`` without isolation.

        :param session: the call's session, whose ``isolate_timeout`` bounds each candidate's run there.
        """
        if self.screened_out is None and self.isolated is not None:
            assert self.space is not None
            kept = [self.space.candidates[i] for i in self.kept]
            with Screening(self.isolated.target, session) as screening:
                self.screened_out = screen_all(screener(screening, self.isolated.payload), kept)
            self.isolated = None  # and with it the launch's arguments
        return self.screened_out
