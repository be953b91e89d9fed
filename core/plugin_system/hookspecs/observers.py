"""Observer hooks: what happened, handed to every implementation; none changes a tuning.

Each is handed the event and the session's ``settings`` (an implementation
names only the arguments it reads, as with every pluggy hook): an observer
reads a setting there, core's or its plugin's (:meth:`Settings.get`), and
never from the files itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kerneltune.core.plugin_system.hookspecs.markers import hookspec

if TYPE_CHECKING:
    from kerneltune.core.plugin_system.settings import Settings
    from kerneltune.core.values.events import (
        CandidateMeasured,
        CompileFinished,
        CompileStarted,
        KernelTuned,
        LaunchMeasured,
        PickLoaded,
        TuningFinished,
        TuningStarted,
    )


@hookspec
def kerneltune_tuning_started(event: TuningStarted, settings: Settings) -> None:
    """A real tuning (a miss) is about to measure candidates.

    :param event: names the function, key, candidates, rank and options.
    """


@hookspec
def kerneltune_candidate_measured(event: CandidateMeasured, settings: Settings) -> None:
    """One candidate's measurement is complete (or it failed).

    :param event: the candidate and its :class:`Measurement` on this rank;
        on the event of a candidate's first failure in a tuning, also the
        exception's traceback (the built-in ``failures`` observer warns on
        those events, once per candidate and tuning).
    """


@hookspec
def kerneltune_tuning_finished(event: TuningFinished, settings: Settings) -> None:
    """A tuning ended: with a pick, or with every candidate failing.

    :param event: the reduced times, the pick (``None`` on failure) and the
        wall time the tuning took.
    """


@hookspec
def kerneltune_compile_started(event: CompileStarted, settings: Settings) -> None:
    """COMPILE began compiling a candidate.

    Called on one of the stage's pool threads, while other candidates
    compile and the tuning's own thread measures: implementations must be
    thread-safe and quick.

    :param event: the function, key and candidate.
    """


@hookspec
def kerneltune_compile_finished(event: CompileFinished, settings: Settings) -> None:
    """COMPILE finished a candidate, compiled or failed.

    Called on a pool thread, as :func:`kerneltune_compile_started` is.

    :param event: the candidate, the seconds its compile took, its error
        (``None`` when it compiled) and how many of this rank's compiles are
        done out of how many.
    """


@hookspec
def kerneltune_pick_loaded(event: PickLoaded, settings: Settings) -> None:
    """A key missing from the process's picks was served from a stored record, without measuring.

    :param event: the function, key, pick and where the record came from
        (this rank's cache, or another rank).
    """


@hookspec
def kerneltune_launch_measured(event: LaunchMeasured, settings: Settings) -> None:
    """A contextual tuner ran one warm-up or timed launch of a candidate, or it failed.

    :param event: kernel name, key, candidate, phase, round and time or error.
    """


@hookspec
def kerneltune_kernel_tuned(event: KernelTuned, settings: Settings) -> None:
    """A contextual tuner finished a (kernel, key): with a pick, or with none valid.

    :param event: every candidate's mean time on this rank and the pick.
    """
