"""The observer hooks as methods of one typed object: ``session.observers.candidate_measured(event)``."""

from __future__ import annotations

import logging
from typing import Any

import pluggy
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

logger = logging.getLogger("kerneltune")


class Observers:
    """Calls every plugin's implementation of one observer hook; one method per hook.

    An observer that raises is logged, never raised: one failing on one
    rank (say, an unwritable log directory) must not pull that rank out of
    a tuning while the others wait at its next barrier, nor fail the user's
    kernel launch. What each hook is told is in
    :mod:`kerneltune.core.plugin_system.hookspecs`.
    """

    def __init__(self, hook: pluggy.HookRelay, settings: Settings) -> None:
        """:param hook: the plugin manager's ``hook`` attribute; :param settings: the session's, handed on."""
        self._hook = hook
        self._settings = settings

    def tuning_started(self, event: TuningStarted) -> None:
        """``kerneltune_tuning_started``: a miss is about to measure candidates."""
        self._call(self._hook.kerneltune_tuning_started, event)

    def candidate_measured(self, event: CandidateMeasured) -> None:
        """``kerneltune_candidate_measured``: one candidate measured, or failed."""
        self._call(self._hook.kerneltune_candidate_measured, event)

    def tuning_finished(self, event: TuningFinished) -> None:
        """``kerneltune_tuning_finished``: a tuning ended, with a pick or with none."""
        self._call(self._hook.kerneltune_tuning_finished, event)

    def compile_started(self, event: CompileStarted) -> None:
        """``kerneltune_compile_started``, on a pool thread: a candidate began compiling."""
        self._call(self._hook.kerneltune_compile_started, event)

    def compile_finished(self, event: CompileFinished) -> None:
        """``kerneltune_compile_finished``, on a pool thread: a candidate compiled, or failed."""
        self._call(self._hook.kerneltune_compile_finished, event)

    def pick_loaded(self, event: PickLoaded) -> None:
        """``kerneltune_pick_loaded``: a stored record served a key without measuring."""
        self._call(self._hook.kerneltune_pick_loaded, event)

    def launch_measured(self, event: LaunchMeasured) -> None:
        """``kerneltune_launch_measured``: the contextual tuner ran one launch of a candidate."""
        self._call(self._hook.kerneltune_launch_measured, event)

    def kernel_tuned(self, event: KernelTuned) -> None:
        """``kerneltune_kernel_tuned``: the contextual tuner finished a (kernel, key)."""
        self._call(self._hook.kerneltune_kernel_tuned, event)

    def _call(self, hook: pluggy.HookCaller, event: Any) -> None:
        try:
            hook(event=event, settings=self._settings)
        except Exception:
            about = getattr(event, "function", None) or getattr(event, "kernel", "")
            logger.exception("kerneltune: %s: an observer of %s failed", about, hook.name)
