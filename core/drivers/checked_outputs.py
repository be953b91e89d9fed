"""Each candidate's outputs checked against the reference's, on its first run of a tuning.

The reference is what ``reference_fn`` returns and changes, else the first
candidate that runs. Its outputs are its return value and the tensor and
array arguments its run changed; a later candidate's first run (untimed
where there are warm-up runs) must give the same within the
:class:`~kerneltune.core.machine.outputs.Tolerance`, and leave alone the
arguments the reference leaves alone. One that does not is failed with
:class:`~kerneltune.core.errors.WrongOutput`, so SELECT never picks it.
Arguments the reference changes that ``reset_to_zero``/``restore_value``
do not name are put back before each candidate's first run and before the
call with the pick, with one notice naming them. Where a judge is given
(search_params' ``reference_fn``, a predicate), it decides each first run's
verdict instead of a reference's outputs.

A first candidate taken as the reference may itself be the wrong one.
Until a candidate agrees with it, those that differ from it are kept in
doubt and measured; :meth:`OutputCheck.settle` judges them before SELECT,
and drops the reference instead where at least two of them differ from it
and agree among themselves.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from kerneltune.core.drivers.inplace import in_place_problem
from kerneltune.core.drivers.options import (
    CHECK_OFF,
    CHECK_ON,
    CHECK_OUTPUTS,
    CHECK_OUTPUTS_BUDGET,
    CHECK_STRICT,
)
from kerneltune.core.errors import NoValidConfigError, UncheckedOutputsError, WrongOutput, WrongOutputWarning
from kerneltune.core.machine.faces import SteppedTuning
from kerneltune.core.machine.outputs import (
    Mismatch,
    Tolerance,
    comparable,
    nbytes,
    put_back,
    snapshot,
)
from kerneltune.core.machine.passes import first_mismatch, unchanged
from kerneltune.core.machine.timing import Around, Thunk, Wrap
from kerneltune.core.notices import user_stacklevel, warn_once
from kerneltune.core.plugin_system.settings import Settings
from kerneltune.core.values.records import Candidate

T = TypeVar("T")

#: Asked after a candidate's first run, instead of comparing with a reference: why its outputs are
#: wrong, or ``None``.
Judge = Callable[[], str | None]


class DeclaresInPlace(Protocol):
    """What names the arguments the tuner resets and restores itself: a decorated function, a kernel."""

    @property
    def reset_to_zero(self) -> Sequence[str]: ...

    @property
    def restore_value(self) -> Sequence[str]: ...


def named_arguments(
    positional: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The call's tensors and arrays that a run could change, by path: ``out``, ``outs[1]`` in a list or
    tuple, ``bufs['k']`` in a dict."""
    named = {positional[i] if i < len(positional) else f"args[{i}]": value for i, value in enumerate(args)}
    named.update(kwargs)
    found: dict[str, Any] = {}
    for name, value in named.items():
        _collect(name, value, found)
    return found


def _collect(path: str, value: Any, found: dict[str, Any]) -> None:
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _collect(f"{path}[{i}]", item, found)
    elif isinstance(value, dict):
        for name, item in value.items():
            _collect(f"{path}[{name!r}]", item, found)
    elif comparable(value) and in_place_problem(value) is None:
        found[path] = value


class CheckOptions:
    """A decorated function's ``check_outputs``, ``rtol`` and ``atol``, refused where it is decorated."""

    def __init__(self, mode: str | None, tolerance: Tolerance) -> None:
        #: ``check_outputs`` as the decorator gave it (``None``: the setting decides).
        self.mode = mode
        self.tolerance = tolerance

    @classmethod
    def of(
        cls,
        name: str,
        reference_fn: Any,
        check_outputs: bool | str | None,
        rtol: float | None,
        atol: float | None,
    ) -> CheckOptions:
        """The options, or the error that names the one refused."""
        if reference_fn is not None and not callable(reference_fn):
            raise TypeError(f"{name}: reference_fn must be callable or None, got {reference_fn!r}")
        modes = {None: None, True: CHECK_ON, False: CHECK_OFF, CHECK_STRICT: CHECK_STRICT}
        if not isinstance(check_outputs, bool | str | None) or check_outputs not in modes:
            raise ValueError(
                f"{name}: check_outputs takes True, False, 'strict' or None, got {check_outputs!r}"
            )
        for option, bound in (("rtol", rtol), ("atol", atol)):
            if bound is not None and (
                isinstance(bound, bool) or not isinstance(bound, int | float) or not bound >= 0
            ):
                raise ValueError(f"{name}: {option} must be a number >= 0 or None, got {bound!r}")
        return cls(modes[check_outputs], Tolerance(rtol, atol))

    def check(
        self,
        name: str,
        settings: Settings,
        positional: Sequence[str],
        inplace: DeclaresInPlace | None,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        judge: Judge | None = None,
        writes_arguments: bool = False,
        odd_reference: bool = False,
    ) -> OutputCheck | None:
        """One tuning's check of its candidates' outputs; ``None`` where ``check_outputs`` is off."""
        mode = self.mode or settings[CHECK_OUTPUTS]
        if mode == CHECK_OFF:
            return None
        declared = () if inplace is None else (*inplace.reset_to_zero, *inplace.restore_value)
        arguments = named_arguments(positional, args, kwargs)
        budget = settings[CHECK_OUTPUTS_BUDGET] * 2**20
        return OutputCheck(
            name,
            arguments,
            declared,
            self.tolerance,
            strict=mode == CHECK_STRICT,
            budget=budget,
            judge=judge,
            writes_arguments=writes_arguments,
            odd_reference=odd_reference,
        )


class OutputCheck:
    """One tuning's check of its candidates' outputs (see the module's docstring).

    :param arguments: the caller's arguments a run could change (:func:`named_arguments`).
    :param declared: those ``reset_to_zero`` or ``restore_value`` name, which the tuner already
        resets and restores, and which a candidate may write where the reference did not.
    :param judge: gives each first run's verdict, in place of a reference's outputs (``reference_fn``).
    :param writes_arguments: the work writes its outputs into its arguments (a kernel): those the
        reference changes are put back all the same, with no notice.
    :param odd_reference: a first candidate taken as the reference may be found the odd one out
        (:meth:`settle`, which the driver then calls before SELECT); otherwise it stands from the start.
    """

    def __init__(
        self,
        function: str,
        arguments: Mapping[str, Any],
        declared: Collection[str],
        tolerance: Tolerance,
        *,
        strict: bool = False,
        budget: int = 0,
        judge: Judge | None = None,
        writes_arguments: bool = False,
        odd_reference: bool = False,
    ) -> None:
        self.function = function
        self.writes_arguments = writes_arguments
        self.judge = judge
        #: the most bytes a snapshot may copy (``check_outputs_budget``; 0: no limit).
        self.budget = budget
        self.arguments = dict(arguments) if self._within(nbytes(arguments), "its arguments hold") else {}
        self.declared = frozenset(declared)
        self.tolerance = tolerance
        self.strict = strict
        #: the arguments as the caller passed them.
        self.initial = {name: snapshot(value) for name, value in self.arguments.items()}
        #: the reference's return value and the arguments it changed, once it ran; and who it is.
        self.result: Any = None
        self.changed: dict[str, Any] | None = None
        self.reference = "" if judge is None else "reference_fn"
        #: undeclared arguments that runs may have left changed, put back before the next first run...
        self.dirty: set[str] = set()
        #: ...and those the reference changes, put back before every first run and the call with the pick.
        self.restoring: set[str] = set()
        self.checked: set[int] = set()
        #: how many first runs returned, the reference's included.
        self.returned = 0
        #: each wrong candidate's first mismatch, by index (the reference's, where it was the odd one out).
        self.wrong: dict[int, tuple[Candidate, Mismatch]] = {}
        self.unchecked = ""
        #: the reference candidate, and whether it stands: ``reference_fn`` does, and one that a
        #: candidate agreed with, or one the candidates differing from it disagree among themselves about.
        self.reference_candidate: Candidate | None = None
        self.confirmed = judge is not None or not odd_reference
        #: the first candidate that differed from an unconfirmed reference: what it returned and changed...
        self.other: tuple[Any, dict[str, Any]] | None = None
        #: ...and those that differ from the reference and agree with it, judged by :meth:`settle`.
        self.doubted: dict[int, tuple[Candidate, Mismatch]] = {}
        #: the reference dropped as the odd one out.
        self.odd = False

    def _within(self, size: int, what: str) -> bool:
        """Whether ``size`` bytes of ``what`` may be copied; a notice where they may not."""
        if not self.budget or size <= self.budget:
            return True
        warn_once(
            ("over budget", self.function, what),
            f"kerneltune: {self.function}: {what} {size / 2**20:.0f} MiB, over check_outputs_budget "
            f"({self.budget / 2**20:.0f} MiB): they are not checked, nor put back between candidates "
            '(declare restore_value=[...] for those the work changes; docs/guide.md "Checked outputs")',
        )
        return False

    def run_reference(self, reference: Thunk, around: Around | None) -> None:
        """Take the reference from ``reference``: ``reference_fn`` on the caller's arguments."""
        self.reference = "reference_fn"
        self.confirmed = True
        self._first_run(None, around)(_call, reference)

    def around(self, candidate: Candidate, around: Around | None) -> Around | None:
        """What a candidate's runs go through: the check on its first run of this tuning, else ``around``."""
        if candidate.index in self.checked:
            return around
        self.checked.add(candidate.index)
        return self._first_run(candidate, around)

    def _first_run(self, candidate: Candidate | None, inner: Around | None) -> Around:
        """An :data:`Around` for every run of one candidate that checks the first."""
        taken: list[bool] = []

        def first(wrap: Wrap, thunk: Thunk) -> None:
            if taken:
                wrap(thunk) if inner is None else inner(wrap, thunk)
                return
            taken.append(True)
            self.put_back()

            def checked(run: Thunk) -> None:
                returned: list[Any] = []
                try:
                    wrap(lambda: returned.append(run()))
                except BaseException:
                    self.dirty.update(n for n in self.arguments if n not in self.declared)
                    raise
                self.returned += 1
                self._verdict(candidate, returned[0])

            if inner is None:
                checked(thunk)
            else:
                inner(checked, thunk)

        return first

    def _verdict(self, candidate: Candidate | None, result: Any) -> None:
        if self.judge is not None and candidate is not None:
            why = self.judge()
            found = None if why is None else Mismatch("arguments", why)
        elif self.changed is None or candidate is None:
            self._adopt(candidate, result)
            return
        else:
            found = self._differs(result, self.result, self.changed)
        # Where _differs passed it, no argument strayed; else the next candidates need the caller's
        # contents back, whatever else differs.
        strayed = found is not None or self.judge is not None
        if found is not None and not self.confirmed:
            found = self._doubt(candidate, result, found)
        elif found is None:
            self.confirmed = True
        for name in self._strays(self.changed) if strayed and self.changed is not None else ():
            put_back(self.arguments[name], self.initial[name])
        if found is not None:
            self.wrong[candidate.index] = (candidate, found)
            raise WrongOutput(f"differs from {self.reference}: {found}")

    def _differs(self, result: Any, reference: Any, changed: Mapping[str, Any]) -> Mismatch | None:
        """Where the outputs first differ from a run's that returned ``reference`` and changed ``changed``."""
        written = [("result", result, reference)]
        written += [(f"argument {name}", self.arguments[name], value) for name, value in changed.items()]
        alone = [
            (f"argument {name}", value, self.initial[name])
            for name, value in self.arguments.items()
            if name not in changed and name not in self.declared
        ]
        return first_mismatch(written, alone, self.tolerance)

    def _strays(self, changed: Mapping[str, Any]) -> list[str]:
        """The undeclared arguments now changed that the run which changed ``changed`` left alone."""
        return [
            name
            for name, value in self.arguments.items()
            if name not in changed and name not in self.declared and not unchanged(value, self.initial[name])
        ]

    def _doubt(self, candidate: Candidate, result: Any, found: Mismatch) -> Mismatch | None:
        """A candidate differing from a reference none has agreed with: ``None`` where it is kept in doubt."""
        if self.other is None:
            self.other = (self._keep(result), self._changed())
            self.restoring.update(set(self.other[1]) - self.declared)
        elif self._differs(result, *self.other) is not None:
            self.confirmed = True  # the others disagree among themselves: the reference stands
            return found
        self.doubted[candidate.index] = (candidate, found)
        return None

    def _keep(self, result: Any, skipped: list[str] | None = None) -> Any:
        """A snapshot of a run's return value; over budget, of a sample of each tensor and array."""
        size = nbytes(result)
        step = -(-size // self.budget) if self.budget and size > self.budget else 1
        if step > 1:
            warn_once(
                ("sampled", self.function),
                f"kerneltune: {self.function}: its return value holds {size / 2**20:.0f} MiB, over "
                f"check_outputs_budget ({self.budget / 2**20:.0f} MiB): it is checked on a sample, one "
                f"value in {step} of each tensor and array, the last included",
            )
        return snapshot(result, skipped=skipped, step=step)

    def _changed(self) -> dict[str, Any]:
        """A snapshot of each argument that the run just taken changed."""
        return {
            name: snapshot(value)
            for name, value in self.arguments.items()
            if not unchanged(value, self.initial[name])
        }

    def settle(self, tuning: SteppedTuning) -> None:
        """Before SELECT: fail the candidates kept in doubt, or the reference where it is the odd one out.

        It is where at least two candidates differ from it and agree among
        themselves, and none agrees with it; a ``reference_fn`` always stands.
        """
        reference = self.reference_candidate
        if self.confirmed or len(self.doubted) < 2 or reference is None:
            self._fail_doubted(tuning)
            return
        doubted, self.doubted = self.doubted, {}
        self.odd = True
        (_, found), *_ = doubted.values()
        self.wrong = {reference.index: (reference, found)}
        agreeing = f"the {len(doubted)} other candidates, which agree among themselves"
        tuning.fail(reference, WrongOutput(f"differs from {agreeing}: {found}"))
        # Candidates first run after this (search_params' later rounds) are checked against those.
        assert self.other is not None
        self.result, self.changed = self.other
        self.reference, self.confirmed = agreeing, True

    @property
    def unsure(self) -> bool:
        """Whether one candidate differs from a reference none agreed with, and no other has run to tell."""
        return not self.confirmed and len(self.doubted) == 1

    def resolve(self, tuning: SteppedTuning) -> list[int]:
        """During the tuning: once a candidate agreed with the reference, fail those kept in doubt.

        :returns: the indices failed, for a driver that reports times as it goes (search_params).
        """
        return self._fail_doubted(tuning) if self.confirmed else []

    def _fail_doubted(self, tuning: SteppedTuning) -> list[int]:
        doubted, self.doubted = self.doubted, {}
        for index, (candidate, found) in doubted.items():
            self.wrong[index] = (candidate, found)
            tuning.fail(candidate, WrongOutput(f"differs from {self.reference}: {found}"))
        return list(doubted)

    def _adopt(self, candidate: Candidate | None, result: Any) -> None:
        """The first run that returned is the reference: keep what it returned and changed."""
        if candidate is not None:
            self.reference_candidate = candidate
            self.reference = f"the reference [{candidate.index}] {candidate.label}"
        skipped: list[str] = []
        self.result = self._keep(result, skipped)
        self.changed = self._changed()
        undeclared = sorted(set(self.changed) - self.declared)
        self.restoring.update(undeclared)
        if undeclared and not self.writes_arguments:
            names = ", ".join(undeclared)
            warn_once(
                ("changed arguments", self.function, names),
                f"kerneltune: {self.function} changes its argument(s) {names} in place; the tuner puts "
                f"them back before each candidate and before the call with the pick. Declare them with "
                f"restore_value=[...] (or reset_to_zero=[...] for outputs it accumulates into) in "
                "@autotune to say so",
            )
        if skipped:
            self.unchecked = f"{', '.join(skipped)} cannot be compared"
        elif result is None and not self.changed:
            self.unchecked = "it returns None and changes no tensor or array argument"
        if self.unchecked and not self.strict:
            warn_once(
                ("unchecked outputs", self.function, self.unchecked),
                f"kerneltune: {self.function}: {self.unchecked}; those outputs are not checked "
                '(check_outputs, docs/guide.md "Checked outputs")',
            )

    def touched(self) -> None:
        """Runs outside the check (COMPILE's) may have changed any undeclared argument: put them all back."""
        self.dirty.update(name for name in self.arguments if name not in self.declared)

    def put_back(self) -> None:
        """Put back the arguments runs may have changed that no option restores."""
        for name in sorted(self.dirty | self.restoring):
            put_back(self.arguments[name], self.initial[name])
        self.dirty.clear()

    def raise_if_unchecked(self) -> None:
        """``strict``: raise where the reference's outputs could not be checked."""
        if self.strict and self.unchecked:
            raise UncheckedOutputsError(
                f"{self.function}: check_outputs is strict and {self.unchecked}; return tensors, arrays "
                "or numbers, or pass check_outputs=True to check what can be"
            )

    def summary(self, key: object) -> str:
        """Every wrong candidate of this tuning, one a line, and whether only the reference is left."""
        wrong = dict(self.wrong)
        text = ""
        if self.odd:
            assert self.reference_candidate is not None
            index = self.reference_candidate.index
            reference, found = wrong.pop(index)
            text = (
                f"the reference [{index}] {reference.label} looks wrong for key {key!r}: the "
                f"{self.returned - 1} other candidates that ran differ from it and agree among "
                f"themselves, so it was dropped and they were kept:\n  [{index}] {reference.label}: {found}"
            )
            if not wrong:
                return text
            text += "\n"
        rows = "\n".join(
            f"  [{index}] {c.label}: {mismatch}" for index, (c, mismatch) in sorted(wrong.items())
        )
        text += f"{len(wrong)} candidate(s) for key {key!r} differ from {self.reference}"
        text += f" and were dropped:\n{rows}"
        if self.reference_alone:
            text += f"\nevery candidate that ran but {self.reference} differs from it"
            text += ": the reference may be the wrong one"
        return text

    @property
    def reference_alone(self) -> bool:
        """Whether a reference config is the only candidate left: every other one that ran is wrong."""
        return bool(self.wrong) and self.reference != "reference_fn" and len(self.wrong) == self.returned - 1

    def finish(self, select: Callable[[], T], key: object) -> T:
        """``select()`` (the tuning's SELECT), then :meth:`warn` and :meth:`put_back` for the call with
        the pick; where none is left, its ``NoValidConfigError`` ends with the :meth:`summary`."""
        try:
            best = select()
        except NoValidConfigError as exc:
            if not self.wrong:
                raise
            raise NoValidConfigError(f"{exc}\n{self.summary(key)}") from exc.__cause__
        self.warn(key)
        self.put_back()
        return best

    def warn(self, key: object) -> None:
        """One warning naming every wrong candidate of this tuning, if any."""
        if self.wrong:
            warnings.warn(
                f"kerneltune: {self.function}: {self.summary(key)}",
                WrongOutputWarning,
                stacklevel=user_stacklevel(),
            )


def _call(thunk: Thunk) -> None:
    thunk()
