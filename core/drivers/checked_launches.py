"""Each candidate of an intercepted kernel launch checked against a reference config's writes.

The contextual tuner cannot see what the outer function makes of a
kernel's work, so the check is the kernel's own: its tensor arguments are
what it writes. On a candidate's first run of a tuning the arguments are
copied, the reference config runs on them and what it leaves is copied,
the arguments are put back, and the candidate runs: it must leave what the
reference leaves, within the
:class:`~kerneltune.core.machine.outputs.Tolerance`, and leave alone what
the reference leaves alone (but for the kernel's declared scratch, which
its hooks reset or restore). After a wrong candidate what the reference left
is put back (after a right one, what it does not write whole), so the rest
of the execution sees a correct result. All of it happens around
the launch, never inside a timed region.

The reference is the first candidate whose first run returns; it runs
again only when the arguments hold other contents than it last ran on,
outputs it writes whole aside (always with several ranks, whose launches
must stay alike). The outputs
it writes whole, whatever they held, are poisoned before each candidate's
run (:meth:`LaunchCheck._probe`), so that an element a candidate skips
shows even in a buffer that already held the result. A wrong
candidate is failed with :class:`~kerneltune.core.errors.WrongOutput`,
and one :class:`~kerneltune.core.errors.WrongOutputWarning` per tuning
names them all.

Once a candidate agreed with the reference, where the reference changes
only outputs it writes whole, all finite, a later candidate's first run waits for
nothing (:meth:`LaunchCheck._deferring`): its arguments are compared where
they are, in stream order before its timed runs, by flags that fail only
where the verdict does (:func:`~kerneltune.core.machine.passes.exact`), read
after the wait for its samples (:meth:`LaunchCheck.settle`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from kerneltune.core.drivers.argument_copies import complement, copies, holding, poisonable, put_back
from kerneltune.core.drivers.checked_outputs import CheckOptions
from kerneltune.core.drivers.inplace import in_place_problem
from kerneltune.core.drivers.options import CHECK_OFF, CHECK_OUTPUTS, CHECK_OUTPUTS_BUDGET, CHECK_STRICT
from kerneltune.core.errors import UncheckedOutputsError, WrongOutput, WrongOutputWarning
from kerneltune.core.machine import outputs, passes
from kerneltune.core.machine.faces import SteppedTuning
from kerneltune.core.machine.outputs import Mismatch, Tolerance
from kerneltune.core.machine.timing import Wrap
from kerneltune.core.notices import user_stacklevel, warn_once
from kerneltune.core.plugin_system.contracts import CheckedLaunch, KernelLaunch, provides
from kerneltune.core.plugin_system.settings import Settings
from kerneltune.core.values.records import Candidate


def launch_check(
    options: CheckOptions,
    settings: Settings,
    tuning: SteppedTuning,
    kernel: str,
    key: Hashable,
    *,
    rerun: bool,
) -> LaunchCheck | None:
    """One (kernel, key)'s check under ``options`` and the settings; ``None`` where ``check_outputs`` is off.

    :param rerun: run the reference before every candidate's check (ranks that must launch alike).
        Such kernels may write into other ranks' memory while this one copies and puts back its
        own, so they are checked only where the decorator's ``check_outputs`` asks, never by the setting.
    """
    mode = options.mode or (CHECK_OFF if rerun else settings[CHECK_OUTPUTS])
    if mode == CHECK_OFF:
        return None
    budget = settings[CHECK_OUTPUTS_BUDGET] * 2**20
    return LaunchCheck(
        kernel, key, tuning, options.tolerance, strict=mode == CHECK_STRICT, budget=budget, rerun=rerun
    )


class LaunchCheck:
    """One (kernel, key)'s check of its candidates' writes, for the length of its tuning (module docstring).

    :param kernel: the kernel's name, for messages.
    :param tuning: the (kernel, key)'s tuning: its candidates still queued give a second opinion,
        and a reference found the odd one out is failed in it.
    :param strict: a launch whose writes cannot be checked fails the call (:meth:`raise_if_unchecked`).
    :param budget: the most bytes the launch's tensor arguments may hold to be copied (0: no limit).
    """

    def __init__(
        self,
        kernel: str,
        key: Hashable,
        tuning: SteppedTuning,
        tolerance: Tolerance,
        *,
        strict: bool,
        budget: int,
        rerun: bool,
    ) -> None:
        self.kernel = kernel
        self.tuning = tuning
        self.key = key
        self.tolerance = tolerance
        self.strict = strict
        self.budget = budget
        self.rerun = rerun
        self.reference: Candidate | None = None
        #: the arguments as the reference last ran on them and as it left them, those it changed,
        #: and what its launch returned.
        self.before: dict[str, Any] = {}
        self.after: dict[str, Any] = {}
        self.changed: frozenset[str] = frozenset()
        #: the arguments the kernel's hooks reset or restore, which any candidate may write.
        self.scratch: frozenset[str] = frozenset()
        #: the outputs the reference writes whatever they held, which a candidate's run gets poisoned.
        self.blind: frozenset[str] = frozenset()
        #: by output, what the reference left there and its complement, which poisons it (:meth:`_poison`).
        self.poisons: dict[str, tuple[Any, Any]] = {}
        self.result: Any = None
        #: the candidates whose first run was checked, and those found wrong, with their first mismatch.
        self.checked: set[int] = set()
        self.wrong: dict[int, tuple[Candidate, Mismatch]] = {}
        #: the first runs whose verdict waits for :meth:`settle`, by candidate: the arguments
        #: compared and their flags, not yet read.
        self.pending: dict[int, tuple[list[str], list[Any]]] = {}
        #: whether what the reference left is what its probe saw, every value it writes whole finite.
        self.probed = False
        #: the last launch's arguments as given, and those checked (:meth:`_arguments`).
        self._given: tuple[Mapping[str, Any], dict[str, Any]] | None = None
        #: how many first runs returned, the reference's included.
        self.returned = 0
        #: why the writes cannot be checked, where they cannot.
        self.unchecked = ""
        #: whether no candidate agreed with the reference yet (never with several ranks, which must
        #: launch alike): one that differs from it then gets a second opinion (:meth:`_odd_reference`).
        self.doubting = not rerun
        #: the first reference, where a second opinion found it the odd one out, and why.
        self.odd_reference: Candidate | None = None
        self.odd = ""
        #: waits for the check's device kernels to be loaded (:meth:`warm`).
        self._warming: Callable[[], None] = lambda: None

    def warm(self, launch: KernelLaunch) -> None:
        """Start loading the device kernels the check uses for ``launch``'s tensors, on a thread of its
        own, while the candidates compile (:func:`~kerneltune.core.machine.passes.warm`); the first
        checked run waits for it."""
        if provides(launch, CheckedLaunch):
            self._warming = passes.warm(launch.arguments().values(), complement)

    def run(self, launch: KernelLaunch, candidate: Candidate, wrap: Wrap) -> Any:
        """The candidate's first run, checked; what its launch returned.

        :raises WrongOutput: when it differs from the reference, whose writes are left in the arguments.
        """
        self.checked.add(candidate.index)
        self._warming()
        arguments = self._arguments(launch)
        if not arguments:
            return launch.run(candidate.config, around=wrap)
        if self._deferring(arguments):
            return self._run_deferred(launch, candidate, wrap, arguments)
        # Where the reference would leave what it left before, its copies serve: no copy, no rerun.
        held = self._ran_on(arguments)
        before = held if held is not None else copies(arguments)
        if self.reference is not None and held is None:
            try:
                self.result = self._take(launch.run(self.reference.config), arguments, before)
            finally:
                put_back(arguments, before)
        for name in self.blind:
            self._poison(arguments, name)
        try:
            result = launch.run(candidate.config, around=wrap)
        except BaseException:
            put_back(arguments, before)  # a stand-in runs next, on what the outer function passed
            raise
        self.returned += 1
        if self.reference is None:
            self.reference = candidate
            self.result = self._take(result, arguments, before)
            # Ranks launch alike: how many probes a rank runs would depend on what its arguments hold.
            if not self.rerun:
                self.probed = True
                self.blind = self._probe(launch, arguments)
            return result
        found = self._verdict(arguments)
        if found is None:
            self.doubting = False
        elif self.doubting and self._odd_reference(launch, candidate, arguments, before, found):
            self.result = self._take(result, arguments, before)
            found = None
        # Wrong, all it left goes back; right, it left the others as they were, and what it wrote
        # whole is as good as the reference's: what the reference changes in place (and scratch) goes back.
        put_back(
            arguments, self.after, None if found is not None else self.changed - self.blind | self.scratch
        )
        if found is None:
            return result
        self.wrong[candidate.index] = (candidate, found)
        raise WrongOutput(f"differs from {self._reference()}: {found}")

    def _deferring(self, arguments: Mapping[str, Any]) -> bool:
        """Whether the verdict may wait until the candidate's runs are taken (:meth:`settle`).

        So it may once a candidate agreed with the reference, where the
        reference changes only outputs it writes whole (poisoned before each
        run, so what they held does not matter), as its probe saw them (each
        value finite, so the flags are the verdict), and the launch has the
        arguments, by name, shape and dtype, that it ran on; never with
        several ranks, which must launch alike.
        """
        return self.probed and not self.doubting and self.changed <= self.blind and self._shaped(arguments)

    def _shaped(self, arguments: Mapping[str, Any]) -> bool:
        """Whether ``arguments`` are those the reference ran on by name, shape, dtype and device."""
        return arguments.keys() == self.before.keys() and all(
            _alike(value, self.before[name]) for name, value in arguments.items()
        )

    def _run_deferred(
        self, launch: KernelLaunch, candidate: Candidate, wrap: Wrap, arguments: Mapping[str, Any]
    ) -> Any:
        """The candidate's first run, its whole outputs poisoned, then its flags queued for :meth:`settle`:
        what it wrote whole beside what the reference left, the others (but scratch) beside what they
        held when the reference ran."""
        for name in self.blind:
            self._poison(arguments, name)
        try:
            result = launch.run(candidate.config, around=wrap)
        except BaseException:
            put_back(arguments, self.after, self.blind)  # a stand-in runs next
            raise
        self.returned += 1
        names = [name for name in arguments if name not in self.scratch]
        self.pending[candidate.index] = names, [self._flag(arguments, name) for name in names]
        put_back(arguments, self.after, self.scratch)
        return result

    def _flag(self, arguments: Mapping[str, Any], name: str) -> Any:
        if name in self.blind:
            return passes.exact(arguments[name], self.after[name], self.tolerance)
        return passes.untouched(arguments[name], self.before[name])

    def settle(self, launch: KernelLaunch, candidate: Candidate) -> WrongOutput | None:
        """The verdict of ``candidate``'s deferred first run, its flags read; ``None`` if right.

        Where the other arguments held what the reference ran on, a failed
        flag is the verdict, a race included: the candidate runs again on
        that for the message, and a difference it does not repeat is named as
        one. Where one of them did not (the outer function gave other
        contents, or the candidate writes into an input), the verdict is
        that run again's, the arguments put back after it (and an input it
        writes into, to what the reference ran on). Where the launch's
        arguments have other shapes by now, nothing can run again: a failed
        flag is the verdict.
        """
        pending = self.pending.pop(candidate.index, None)
        if pending is None:
            return None
        names, flags = pending
        failed = [name for name, passed in zip(names, passes.read(flags), strict=True) if not passed]
        if not failed:
            return None
        found: Mismatch | None
        if not self._shaped(self._arguments(launch)):
            name = next((n for n in failed if n in self.blind), failed[0])  # a written one is sure
            what = (
                "differs from the reference's"
                if name in self.blind
                else "changed, which the reference leaves alone (or the outer function changed it)"
            )
            found = Mismatch(
                f"argument {name}",
                f"{what} after the candidate's first run; not run again for the figures, the launch's "
                "arguments having other shapes since",
            )
        elif (found := self._rerun(launch, candidate)) is None and set(failed) <= self.blind:
            found = Mismatch(
                f"argument {failed[0]}",
                "differs from the reference's after the candidate's first run, not after a second "
                "(a race between its programs?)",
            )
        if found is None:
            return None
        self.wrong[candidate.index] = (candidate, found)
        return WrongOutput(f"differs from {self._reference()}: {found}")

    def _rerun(self, launch: KernelLaunch, candidate: Candidate) -> Mismatch | None:
        """``candidate`` run again on what the reference ran on: where it first differs from it."""
        arguments = self._arguments(launch)  # by name, the reference's (settle)
        now = copies(arguments)
        strays: list[str] = []
        try:
            put_back(arguments, self.before)
            for name in self.blind:
                self._poison(arguments, name)
            launch.run(candidate.config)
            found = self._verdict(arguments)
            if found is not None:
                alone = [n for n in arguments if n not in self.blind and n not in self.scratch]
                same = passes.read([passes.untouched(arguments[n], self.before[n]) for n in alone])
                strays = [n for n, kept in zip(alone, same, strict=True) if not kept]
        finally:
            put_back(arguments, now)
        put_back(arguments, self.before, frozenset(strays))
        return found

    def drop(self, candidate: Candidate) -> None:
        """Forget ``candidate``'s deferred first run: a later run of it failed."""
        self.pending.pop(candidate.index, None)

    def _ran_on(self, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """What the reference ran on, where run on ``arguments`` it would leave what it left; else ``None``.

        So it does where they hold what it last ran on, or differ only in
        outputs it writes whole, whatever they held, and it changes no other
        (a re-execution's buffer holding the last result, or a fresh one):
        those then count as holding what it left there.
        """
        if self.reference is None or self.rerun or arguments.keys() != self.before.keys():
            return None
        whole = self.blind if self.changed <= self.blind else frozenset()
        kept = [name for name in arguments if name not in whole]
        if not holding({n: arguments[n] for n in kept}, {n: self.before[n] for n in kept}):
            return None
        return {**self.before, **{name: self.after[name] for name in whole}}

    def _odd_reference(
        self,
        launch: KernelLaunch,
        candidate: Candidate,
        arguments: Mapping[str, Any],
        before: Mapping[str, Any],
        found: Mismatch,
    ) -> bool:
        """Whether a second opinion finds the reference, not ``candidate``, wrong; then it is replaced.

        The second opinion is the next candidate queued (else the first found
        wrong), run on the same contents. Where it agrees with the reference,
        the reference stands; where it agrees with ``candidate``, the reference
        is failed and ``candidate``, whose writes ``arguments`` hold again,
        becomes the reference; where with neither, the reference stands in doubt.
        """
        queued = [c for c in self.tuning.queued() if c.index != candidate.index]
        others = queued or [c for c, _ in self.wrong.values()]
        reference = self.reference
        if not others or reference is None:
            return False
        written = copies(arguments)
        put_back(arguments, before)
        for name in self.blind:
            self._poison(arguments, name)
        try:
            launch.run(others[0].config)
        except Exception:
            return False
        if self._verdict(arguments) is None:
            self.doubting = False
            return False
        tolerance = self.tolerance
        if any(outputs.compare(v, written[n], tolerance) is not None for n, v in arguments.items()):
            return False
        put_back(arguments, written)
        self.doubting = False
        second = others[0]
        self.odd = (
            f"differs from [{candidate.index}] {candidate.label} and [{second.index}] {second.label}, "
            f"which agree: {found}"
        )
        self.odd_reference = reference
        self.wrong[reference.index] = (reference, found)
        self.tuning.fail(reference, WrongOutput(self.odd))
        self.reference = candidate
        return True

    def dropped(self, candidate: Candidate) -> WrongOutput | None:
        """Why ``candidate`` was found wrong in this tuning; ``None`` if it was not."""
        found = self.wrong.get(candidate.index)
        if found is None:
            return None
        return WrongOutput(self._why(*found))

    def _why(self, candidate: Candidate, found: Mismatch) -> str:
        if candidate is self.odd_reference:
            return self.odd
        return f"differs from {self._reference()}: {found}"

    def _arguments(self, launch: KernelLaunch) -> dict[str, Any]:
        """The launch's tensor arguments that can be copied and put back; empty where none is checked.

        A launch handing over the very tensors the last one did (its other values, sizes as new
        ints, aside) has the last one's.
        """
        if not provides(launch, CheckedLaunch):
            self._cannot("its interceptor's launches do not show their arguments (no arguments())")
            return {}
        given = launch.arguments()
        if self._given is not None:
            last, kept = self._given
            same = (v is last[n] or (n not in kept and not outputs.comparable(v)) for n, v in given.items())
            if given.keys() == last.keys() and all(same):
                return dict(kept)
        arguments = {
            name: value
            for name, value in given.items()
            if outputs.comparable(value) and in_place_problem(value) is None
        }
        self.scratch = frozenset(launch.scratch())
        size = outputs.nbytes(arguments)
        if not arguments:
            self._cannot("it has no tensor argument")
        elif self.budget and size > self.budget:
            self._cannot(
                f"its tensor arguments hold {size / 2**20:.0f} MiB, over check_outputs_budget "
                f"({self.budget / 2**20:.0f} MiB)"
            )
            return {}
        self._given = (given, dict(arguments))
        return arguments

    def _take(self, result: Any, arguments: Mapping[str, Any], before: dict[str, Any]) -> Any:
        """Keep what a reference run on ``before`` left in ``arguments``; ``result``, what it returned."""
        self.before = before
        self.after = copies(arguments)
        self.probed = False
        names = list(arguments)
        same = passes.read([passes.untouched(self.after[name], before[name]) for name in names])
        self.changed = frozenset(name for name, kept in zip(names, same, strict=True) if not kept)
        return result

    def _probe(self, launch: KernelLaunch, arguments: Mapping[str, Any]) -> frozenset[str]:
        """The outputs the reference writes whole, whatever they held: a candidate's run gets them poisoned.

        So an element a candidate skips shows even where the outer function's buffer already held
        the right result (reused from an earlier execution). The arguments the reference changed
        are tried together, in one launch of it; where it changed none (every output already held
        its result), those it writes at all (:meth:`_written`).
        """
        candidates = [n for n in arguments if n not in self.scratch and poisonable(arguments[n])]
        changed = frozenset(n for n in candidates if n in self.changed)
        group = changed or self._written(launch, arguments, candidates)
        blind = group if group and self._written_whole(launch, arguments, group) else frozenset()
        # The fills of the others, made to find what it writes, are not used again.
        self.poisons = {name: fill for name, fill in self.poisons.items() if name in blind}
        return blind

    def _written(
        self, launch: KernelLaunch, arguments: Mapping[str, Any], names: list[str]
    ) -> frozenset[str]:
        """Those of ``names`` that the reference writes at all: run with each of them poisoned, those
        that no longer hold their poison."""
        assert self.reference is not None
        for name in names:
            self._poison(arguments, name)
        try:
            launch.run(self.reference.config)
        except Exception:
            return frozenset()
        else:
            kept = passes.read([passes.untouched(arguments[n], self.poisons[n][1]) for n in names])
            return frozenset(name for name, poisoned in zip(names, kept, strict=True) if not poisoned)
        finally:
            put_back(arguments, self.after)

    def _written_whole(
        self, launch: KernelLaunch, arguments: Mapping[str, Any], group: frozenset[str]
    ) -> bool:
        """Whether the reference, run with ``group`` poisoned, leaves what it left before."""
        assert self.reference is not None
        put_back(arguments, self.before)
        for name in group:
            self._poison(arguments, name)
        try:
            launch.run(self.reference.config)
        except Exception:
            return False
        else:
            compared = self._compared(arguments, group)
            if passes.settled(passes.agreeing(*compared, self.tolerance)):
                return True
            # An infinity or NaN, which the quick flags cannot pass: the full verdict, and a later
            # candidate's flags are no verdict either (passes.exact), so it is judged at once.
            self.probed = False
            return passes.first_mismatch(*compared, self.tolerance) is None
        finally:
            put_back(arguments, self.after)

    def _poison(self, arguments: Mapping[str, Any], name: str) -> None:
        """Fill the argument ``name`` with the complement of what the reference left there (made once)."""
        expected = self.after[name]
        kept = self.poisons.get(name)
        if kept is None or kept[0] is not expected:
            kept = self.poisons[name] = (expected, complement(expected))
        arguments[name].copy_(kept[1])

    def _verdict(self, arguments: Mapping[str, Any]) -> Mismatch | None:
        return passes.first_mismatch(*self._compared(arguments), self.tolerance)

    def _compared(
        self, arguments: Mapping[str, Any], blind: frozenset[str] | None = None
    ) -> tuple[list[passes.Compared], list[passes.Compared]]:
        """What the reference writes (or ``blind`` poisoned) beside what it left there, and the
        others, but scratch, beside what they held."""
        blind = self.blind if blind is None else blind
        written: list[passes.Compared] = []
        alone: list[passes.Compared] = []
        for name, value in arguments.items():
            if name in self.changed or name in blind:
                written.append((f"argument {name}", value, self.after[name]))
            elif name not in self.scratch:
                alone.append((f"argument {name}", value, self.before[name]))
        return written, alone

    def _reference(self) -> str:
        assert self.reference is not None
        return f"the reference [{self.reference.index}] {self.reference.label}"

    def _cannot(self, why: str) -> None:
        """Note why the writes go unchecked: one notice, or under ``strict`` the error to come."""
        self.unchecked = why
        if not self.strict:
            warn_once(
                ("unchecked launch", self.kernel, why),
                f"kerneltune: kernel {self.kernel}: {why}; its candidates' outputs are not checked "
                '(check_outputs, docs/contextual.md "Checked launches")',
            )

    def raise_if_unchecked(self) -> None:
        """``strict``: raise where the launch's writes could not be checked."""
        if self.strict and self.unchecked:
            raise UncheckedOutputsError(
                f"kernel {self.kernel}: check_outputs is strict and {self.unchecked}, so its candidates' "
                "outputs cannot be checked; pass check_outputs=True to check what can be"
            )

    def summary(self) -> str:
        """The wrong candidates, one a line, and whether every other candidate that ran is among them."""
        text = (
            f"kernel {self.kernel}: {len(self.wrong)} candidate(s) for key {self.key!r} differ from "
            f"{self._reference()} and were dropped:"
        )
        for index, (candidate, mismatch) in sorted(self.wrong.items()):
            text += f"\n  [{index}] {candidate.label}: "
            text += self.odd if candidate is self.odd_reference else str(mismatch)
        if not self.odd and len(self.wrong) == self.returned - 1:
            text += "\nno candidate that ran agrees with the reference: the reference may be the wrong one"
        return text

    def warn(self) -> None:
        """One warning naming every wrong candidate of this tuning, if any."""
        if self.wrong:
            warnings.warn(f"kerneltune: {self.summary()}", WrongOutputWarning, stacklevel=user_stacklevel())


def _alike(value: Any, kept: Any) -> bool:
    """Whether the tensor or array ``value`` has the shape, dtype and device of the copy ``kept``."""
    alike = value.shape == kept.shape and value.dtype == kept.dtype
    return alike and getattr(value, "device", None) == getattr(kept, "device", None)
