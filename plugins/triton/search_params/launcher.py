"""How a run launches its kernel's candidates: screened before compiling, compiled, run; why each failed.

:meth:`Launcher.screen` drops unlaunched what ``early_config_prune`` removes
and shapes no smaller than one that ran out of the device's resources;
:meth:`Launcher.build` compiles on the engine's COMPILE pool and
:meth:`Launcher.runner` launches through the adapter, :meth:`Launcher.checked`
with each candidate's first run checked. A kernel too large for the device
is a drop, anything else a failure.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable
from typing import Any

from kerneltune.core import PRUNED, CompileMiss, Point, Shape
from kerneltune.core.driving import Candidate, CandidateDropped, OutputCheck, describe_error
from kerneltune.plugins.triton import adapter, compile_device, compiler, programs
from kerneltune.plugins.triton.search_params.decorated import DecoratedKernel
from kerneltune.plugins.triton.search_params.space import SearchSpace

#: What a timed run calls around exactly the launch, and what a run calls instead of ``wrap(run)``.
Wrap = Callable[[adapter.Thunk], object]
Around = Callable[[Wrap, adapter.Thunk], object]


class Launcher:
    """One launch's arguments, and what launching the kernel's candidates with them met.

    :param say: prints a line under ``debug``.
    """

    def __init__(
        self,
        kernel: DecoratedKernel,
        space: SearchSpace,
        args: tuple[Any, ...],
        launch: dict[str, Any],
        grid: Any,
        say: Callable[[str], None],
    ) -> None:
        self.kernel = kernel
        self.space = space
        self.args = args
        self.launch = launch
        self.grid = grid
        self.say = say
        #: why a candidate failed or was dropped, by index.
        self.failures: dict[int, str] = {}
        self.dropped: set[int] = set()
        #: by profile, the shapes that ran out of resources and why.
        self.exhausted: dict[int, list[tuple[Shape, str]]] = {}
        #: guards what compiles note from COMPILE's pool threads.
        self.noting = threading.Lock()
        # Compile processes first: asking for them starts the compiler's warm-up beside the driver's build.
        self.compile_process = compiler.forked_compiles()
        self.compile_config = compiler.config_compiler(kernel, args, {**launch, "grid": grid})
        self.program_of = programs.program_of(kernel, args, {**launch, "grid": grid})

    def program(self, candidate: Candidate) -> Hashable | None:
        """Which program ``candidate`` launches (:func:`~kerneltune.plugins.triton.programs.program_of`)."""
        return self.program_of(candidate.config)

    def options(self, candidate: Candidate) -> dict[str, object]:
        """``candidate``'s meta-parameters and options by name."""
        return dict(candidate.config.all_kwargs())

    def kwargs(self) -> dict[str, Any]:
        """The launch's keyword arguments as a candidate's run takes them."""
        return {**self.launch, "grid": self.grid, "warmup": False}

    def note(self, candidate: Candidate, why: str) -> None:
        """Keep why ``candidate`` failed (screened out, rejected by ``reference_fn``)."""
        with self.noting:
            self.failures[candidate.index] = why

    def screen(self, points: list[Point], candidates: list[Candidate]) -> dict[int, BaseException]:
        """Find, before compiling, the candidates that must not run: pruned, or too big for the device."""
        problems: dict[int, BaseException] = {}
        pruned = self.pruned([c.config for c in candidates])
        for point, candidate in zip(points, candidates, strict=True):
            if candidate.config in pruned:
                # Named pruned first: the line of drops counts it as pruning, not a limit of the device.
                problems[candidate.index] = CandidateDropped(f"{PRUNED}: removed by early_config_prune")
                continue
            larger = self.dominated(point)
            if larger is not None:
                problems[candidate.index] = CandidateDropped(larger)
        for candidate in candidates:
            problem = problems.get(candidate.index)
            if problem is not None:
                self.drop(candidate, problem)
        return problems

    def worth_compiling(self, points: list[Point], candidates: list[Candidate]) -> list[Candidate]:
        """Those of ``candidates`` that :meth:`screen` would let compile, with nothing noted or dropped."""
        pruned = self.pruned([c.config for c in candidates])
        return [
            candidate
            for point, candidate in zip(points, candidates, strict=True)
            if candidate.config not in pruned and self.dominated(point) is None
        ]

    def drop(self, candidate: Candidate, problem: BaseException) -> None:
        with self.noting:
            self.dropped.add(candidate.index)
            self.failures[candidate.index] = describe_error(problem)
        self.say(f"dropped {candidate.label}: {describe_error(problem)}")

    def pruned(self, configs: list[Any]) -> list[Any]:
        prune = self.kernel.early_prune
        if prune is None:
            return []
        named = dict(zip(self.kernel.arg_names, self.args, strict=False))
        kept = prune(configs, named, **self.kwargs())
        return [c for c in configs if c not in kept]

    def dominated(self, point: Point) -> str | None:
        """Why a shape need not be compiled: it is no smaller than one that ran out of resources."""
        if self.space.given:
            return None
        shape, profile = point
        for smaller, reason in self.exhausted.get(profile, ()):
            if all(a >= b for a, b in zip(shape, smaller, strict=True)):
                label = self.space.candidate((smaller, profile)).label
                return f"dropped before compiling: no block smaller than in {label} ({reason})"
        return None

    def note_exhausted(self, point: Point, reason: str) -> None:
        self.exhausted.setdefault(point[1], []).append((point[0], reason))

    def build(self, candidate: Candidate) -> None:
        """Compile one candidate (on a COMPILE pool thread); a failure drops it, and
        a kernel out of resources rules out the shapes no smaller than it.

        A probe's miss (:class:`~kerneltune.core.CompileMiss`) is no failure:
        it passes through, and COMPILE forks a compile process instead.
        """
        assert self.compile_config is not None
        try:
            self.compile_config(candidate.config)
        except CompileMiss:
            raise
        except Exception as exc:
            if compile_device.in_compile_process():
                raise  # a forked compile process: the parent compiles again and notes the failure
            self.drop(candidate, exc)
            if isinstance(exc, compiler.CannotRun) or compiler.out_of_resources(exc):
                with self.noting:
                    self.note_exhausted(self.space.point(candidate.index), str(exc))
                # Too large for the device: part of searching, not a failure to warn about.
                raise CandidateDropped(describe_error(exc)) from exc
            raise

    def runner(self, candidate: Candidate) -> Callable[[], None]:
        """One timed run of ``candidate``: a launch with its config."""
        return functools.partial(self.run_noted, candidate)

    def run_noted(
        self, candidate: Candidate, around: Callable[[adapter.Thunk], object] | None = None
    ) -> None:
        """:meth:`run_once`, keeping why ``candidate`` failed; out of the device's resources it is dropped."""
        try:
            self.run_once(candidate, around)
        except Exception as exc:
            self.failures[candidate.index] = describe_error(exc)
            if compiler.out_of_resources(exc):
                self.note_exhausted(self.space.point(candidate.index), str(exc))
                raise CandidateDropped(describe_error(exc)) from exc
            raise

    def checked(self, check: OutputCheck) -> Callable[[Candidate], Around | None]:
        """Each candidate's runs (a round's ``around``), the first of this tuning checked by ``check``.

        That run's launch alone goes through the check, between the kernel's
        hooks: ``reset_to_zero`` zeroes before it, and the arguments are
        compared before ``restore_value`` puts anything back. The arguments the
        reference changes are put back after it, so that the timed runs start
        from the caller's contents, as the first did.
        """

        def runs(candidate: Candidate) -> Around | None:
            first = check.around(candidate, None)
            if first is None:  # checked earlier in this tuning
                return None
            pending = [first]

            def around(wrap: Wrap, run: adapter.Thunk) -> None:
                if not pending:
                    wrap(run)
                    return
                checked = pending.pop()
                self.run_noted(candidate, lambda launch: checked(wrap, launch))
                check.put_back()

            return around

        return runs

    def run_once(self, candidate: Candidate, around: Callable[[adapter.Thunk], object] | None = None) -> Any:
        """Launch the kernel once with ``candidate``'s config (``around`` wraps the launch alone)."""
        return adapter.launch_config(self.kernel, self.args, self.kwargs(), candidate.config, around=around)
