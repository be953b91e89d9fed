"""``reference_fn``, asked about the caller's arguments after a launch: ``False`` or raising rejects it.

With ``check_outputs`` on, the run's :class:`~kerneltune.core.driving.OutputCheck`
asks it (:meth:`ReferenceGate.verdict`) after each candidate's first run.
With it off, it is stage 3's gate (:meth:`ReferenceGate.gate`): each
finalist that ran is launched once more, between the hooks Triton runs
around a benchmark (so ``reset_to_zero`` applies first and ``restore_value``
after), and ``reference_fn(*args, **kwargs)`` is asked about those same
arguments before the post-hook restores anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kerneltune.core.driving import Candidate, describe_error
from kerneltune.plugins.triton.search_params.launcher import Launcher


class RejectedByReference(Exception):
    """A finalist's results did not pass ``reference_fn``."""


class ReferenceGate:
    """``reference_fn`` over the finalists of one run, launched through ``launcher``."""

    def __init__(self, reference: Callable[..., object], launcher: Launcher) -> None:
        self.reference = reference
        self.launcher = launcher

    def gate(
        self,
        candidates: list[Candidate],
        times: list[float],
        *,
        alone: bool,
        reject: Callable[[Candidate, BaseException], None],
    ) -> None:
        """Check the finalists that ran, fastest first; ``reject`` each that fails.

        :param alone: stop at the first that passes (one rank); with several
            ranks every finalist is checked, so a rejection on any rank
            rejects it everywhere.
        """
        say = self.launcher.say
        for i in sorted(range(len(candidates)), key=lambda i: (times[i], i)):
            candidate = candidates[i]
            if not math.isfinite(times[i]):
                continue
            problem = self.check(candidate)
            if problem is None:
                say(f"stage 3: {candidate.label} passed reference_fn")
                if alone:
                    return
            else:
                say(f"stage 3: {candidate.label} rejected: {describe_error(problem)}")
                reject(candidate, problem)

    def verdict(self) -> str | None:
        """Why ``reference_fn`` rejects the launch's arguments as they are now; ``None``: it does not."""
        launcher = self.launcher
        try:
            passed = self.reference(*launcher.args, **launcher.launch)
        except Exception as exc:
            return f"reference_fn raised {describe_error(exc)}"
        return "reference_fn returned False" if passed is False else None

    def check(self, candidate: Candidate) -> BaseException | None:
        """Run a finalist once on the caller's arguments and ask ``reference_fn``; the rejection, if any."""
        verdicts: list[BaseException] = []

        def launch_then_check(launch: Callable[[], object]) -> None:
            launch()
            why = self.verdict()
            if why is not None:
                verdicts.append(RejectedByReference(why))

        try:
            self.launcher.run_once(candidate, around=launch_then_check)
        except Exception as exc:
            return exc
        return verdicts[0] if verdicts else None
