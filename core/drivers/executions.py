"""The executions of the outer function in one contextual call: what each did, and when to give up.

:class:`Executions` holds what the current execution did (launched a kernel
still waiting, measured, ran a rehearsal whose in-place changes were undone)
and counts the executions in a row that waited but measured nothing.
"""

from __future__ import annotations

from kerneltune.core.drivers.kernel_keys import KernelKey
from kerneltune.core.errors import StalledTuningError

#: Executions in a row that may launch kernels waiting for a pick without
#: measuring anything before a call gives up. An outer function that launches
#: the same kernels with the same keys every time measures in every
#: execution; the slack is for one that launches a kernel only every few
#: executions.
STALL_LIMIT = 10


class Executions:
    """What the outer function's executions in one call did; see the module docstring.

    :param name: the outer function's name, for messages.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        #: this execution launched a (kernel, key) that has no pick yet.
        self.pending = False
        #: this execution measured a launch or settled a (kernel, key).
        self.measured = False
        #: executions in a row that were pending but measured nothing, and
        #: the (kernel, key) pairs they met first (for the error).
        self.stalls = 0
        self.fresh: list[KernelKey] = []
        #: executions started so far; the first is 1.
        self.count = 0
        #: this execution began with a (kernel, key) waiting for its pick, so it will be repeated.
        self.rehearsal = False
        #: a launch with a pick ran as a rehearsal (its in-place changes undone) in this execution.
        self.undone = False
        #: run the next execution as the one whose result is returned, whatever is waiting.
        self._final_next = False

    def start(self, waiting: bool) -> None:
        """Reset the per-execution flags before the outer function runs again.

        :param waiting: some (kernel, key) met so far has no pick yet.
        """
        self.count += 1
        self.rehearsal = not self._final_next and waiting
        self._final_next = False
        self.undone = False
        self.pending = False
        self.measured = False

    def needs_final(self) -> bool:
        """Whether an execution that left nothing waiting must still be run again for its result.

        One that began with a kernel waiting ran the kernels with a pick as
        rehearsals, their in-place changes undone; when the waiting kernel
        was not launched after all, its result is not the call's.
        """
        if self.undone:
            self._final_next = True
            return True
        return False

    def check_progress(self, focus: KernelKey | None) -> None:
        """Count an execution that left kernels waiting; give up after :data:`STALL_LIMIT` idle ones.

        :param focus: the (kernel, key) being measured.
        :raises StalledTuningError: naming the (kernel, key) being measured
            and the keys first seen while it was not launched.
        """
        if self.measured:
            self.stalls = 0
            self.fresh.clear()
            return
        self.stalls += 1
        if self.stalls >= STALL_LIMIT:
            # A launch that waits implies a focus: a launch met with no focus becomes it and is measured.
            assert focus is not None
            raise StalledTuningError(self._stall_report(focus))

    def _stall_report(self, focus: KernelKey) -> str:
        text = (
            f"contextual_autotune: {self.name} cannot finish tuning: the last {self.stalls} "
            f"executions did not launch kernel {focus.name} with key {focus.key!r}, the one being measured"
        )
        if self.fresh:
            seen = [f"{s.name} {s.key!r}" for s in self.fresh]
            if len(seen) > 4:
                seen[3:-1] = ["..."]
            text += (
                f", but launched (kernel, key) pairs not seen before ({', '.join(seen)}); a key that "
                "holds a value changing from one execution to the next (a counter, a pointer), or a "
                "kernel object made anew in each execution, can never be tuned"
            )
        else:
            text += ", while they launched kernels that wait for their turn"
        return (
            text + ". Every execution of the outer function must launch the same kernels with the same keys."
        )
