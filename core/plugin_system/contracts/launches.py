"""Launch contracts: compile processes, kernel launches and the interceptors that hand them over."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from kerneltune.core.values.direct import DirectLaunches
    from kerneltune.core.values.target import Target
    from kerneltune.core.values.timings import CandidateTiming
from kerneltune.core.plugin_system.contracts.base import Registrable, Thunk


class CompileProcess(Protocol):
    """A backend's part in compiling in processes forked for COMPILE (:mod:`kerneltune.core.compiling`).

    The child inherits the kernel and its arguments, compiles, and leaves
    its work where this process finds it (Triton: its on-disk cache); this
    process then compiles the same candidate again, which loads that work.
    """

    def ready(self) -> None:
        """Block until a child may be forked: the compiler's one-time set-up done here, no child repeats it.

        Called on COMPILE's pool threads, before each fork.
        """
        ...

    def prepare(self) -> None:
        """Run in the forked child before it compiles: make it compile without the device."""
        ...


@runtime_checkable
class ProbingCompileProcess(CompileProcess, Protocol):
    """A compile process that can tell a cached program from one to compile (optional part).

    A process restarted over a filled on-disk cache (Triton's) has every
    program compiled already: forking a child to find that out costs more
    than loading it. COMPILE first compiles each candidate here under
    :meth:`probing`: a hit loads it, and no child is forked.
    """

    def probing(self) -> contextlib.AbstractContextManager[None]:
        """Within the block, a compile on this thread that the on-disk cache cannot serve raises
        :class:`kerneltune.core.CompileMiss` before compiling anything; a hit loads as usual.

        COMPILE probes before :meth:`ready`: a probe's compile waits for
        what a lookup needs (Triton: its hash of itself), not for the whole
        set-up a fork needs, which a tuning whose programs are all cached
        never starts.
        """
        ...


@runtime_checkable
class WeighingCompileProcess(CompileProcess, Protocol):
    """A compile process that can guess which compiles take longest (optional part).

    A stage ends with its slowest compile: begun first, it ends sooner. Once
    a probe has missed, COMPILE queues the compiles the pool has begun for
    their processes with the highest :meth:`effort` first, and a tree forks
    them in that order; loads from the on-disk cache keep the order of
    measuring.
    """

    def effort(self, config: Any) -> float:
        """A guess at how long ``config`` (a candidate's live config) takes to compile, only to order
        the forks: higher first, ties in the order handed over; 0 where there is no guess.

        Called on the tuning's thread as candidates are handed over; it must not compile anything.
        An exception or a value that is not a finite number counts as 0.
        """
        ...


class KernelLaunch(Protocol):
    """One intercepted launch, as an interceptor plugin describes it to the driver."""

    #: the tuned kernel object (its identity groups launches).
    kernel: object
    #: the key the kernel files its pick under for this launch; it must be a
    #: valid tuning key (ints, strs, floats, bools, None, tuples).
    key: Hashable

    @property
    def name(self) -> str:
        """The kernel's name, for logs and the candidate space."""
        ...

    @property
    def source(self) -> str:
        """The kernel's source, fingerprinted with its candidates."""

    def configs(self) -> Sequence[Any]:
        """Every candidate the kernel declares, in its order."""

    def candidates(self) -> Sequence[Any]:
        """The candidates left for this launch by the kernel's own pruning."""

    def cached(self) -> Any | None:
        """The kernel's own in-process pick for this key, or ``None``."""

    def label(self, config: Any) -> str:
        """A one-line readable form of ``config``."""

    def run(self, config: Any, around: Callable[[Thunk], object] | None = None) -> Any:
        """Launch with ``config`` and this launch's arguments.

        :param around: wraps exactly the launch (a timer's ``sample``); the
            kernel's own hooks run outside it.
        """

    def run_default(self) -> Any:
        """Launch as if no tuner were active (the kernel's own path)."""

    def commit(self, config: Any) -> None:
        """Make ``config`` the kernel's own pick for this key."""

    def compiler(self) -> Callable[[Any], None] | None:
        """A function that compiles one config for this launch's arguments without launching.

        Made on the launching thread, called on COMPILE's pool threads; it
        raises what the launch would. ``None`` where nothing is compiled
        ahead: an interpreter, or every config's program already loaded
        in this process.
        """


@runtime_checkable
class UnsupportedLaunch(KernelLaunch, Protocol):
    """A launch the interceptor can hand over but not tune (optional part of :class:`KernelLaunch`).

    Where ranks must agree (``is_dist=True``) the contextual tuner refuses
    it with that reason on every rank, never leaving it to tune itself on
    each; alone it runs as the kernel's own path, with one warning.
    """

    def unsupported(self) -> str | None:
        """Why this launch's kernel cannot be tuned here, or ``None`` when it can."""
        ...


@runtime_checkable
class InPlaceLaunch(KernelLaunch, Protocol):
    """A launch whose kernel declares arguments it changes in place (optional part of :class:`KernelLaunch`).

    The contextual tuner runs the outer function more than once; with this
    part it keeps those arguments as one untuned call would leave them
    (docs/contextual.md, "Kernels that work in place"). A launch without it
    is dispatched as the kernel's own cache hit.
    """

    def reset(self, config: Any) -> None:
        """Zero what the kernel zeroes before a run, as its own tuner does once after the pick.

        Triton: ``pre_hook(args, reset_only=True)``, which zeroes the
        ``reset_to_zero`` arguments (or runs the user's ``pre_hook``).
        """
        ...

    def changes_in_place(self) -> bool:
        """Whether a run changes arguments its tuner puts back after each run (Triton: ``restore_value``)."""
        ...

    def in_place_problem(self) -> str | None:
        """Why the arguments the kernel zeroes or puts back cannot be, for this launch (``None``: they can).

        Asked before any candidate runs: otherwise every candidate would fail
        alike, without naming the kernel's option.
        """
        ...


@runtime_checkable
class CheckedLaunch(KernelLaunch, Protocol):
    """A launch whose arguments can be read (optional part of :class:`KernelLaunch`).

    With it the contextual tuner checks each candidate's writes into the
    launch's tensor arguments against a reference config's
    (:mod:`kerneltune.core.drivers.checked_launches`); a launch without it
    is tuned unchecked, with one notice.
    """

    def arguments(self) -> Mapping[str, Any]:
        """The launch's kernel arguments by parameter name, as passed (launch options, a grid, left out).

        The tensors among them are copied and put back between runs, so they must be the launch's own.
        """
        ...

    def scratch(self) -> Collection[str]:
        """The arguments the kernel's tuner resets or restores around every run (Triton: ``reset_to_zero``,
        ``restore_value``): a candidate may write them where the reference does not, as a workspace.
        """
        ...


@runtime_checkable
class DirectLaunch(KernelLaunch, Protocol):
    """A launch its interceptor can repeat on its own once tuned (optional part of :class:`KernelLaunch`)."""

    def direct(self) -> object | None:
        """What the interceptor needs to make later launches of this kernel and key itself.

        Asked after the launch ran as a plain cache hit of its kernel; the
        answer is filed in :class:`~kerneltune.core.DirectLaunches` for the
        interceptor's :meth:`DirectInterceptor.serve`. ``None`` where such a
        launch must still reach the route (hooks that run around it, arguments
        it changes in place).
        """
        ...


@runtime_checkable
class ReportingLaunch(KernelLaunch, Protocol):
    """A launch whose kernel keeps what its tuning measured (optional part of :class:`KernelLaunch`).

    Stock tuners leave their timings on the kernel (Triton: ``configs_timings``
    and ``bench_time``) and tell their listeners (Triton: ``knobs.autotuning.listener``);
    a launch with this part is told them right after :meth:`commit`, for
    each key the contextual tuner picks for that the kernel's own cache did
    not hold: after a tuning that measured, and for a pick found without
    measuring (a stored pick, the one candidate pruning left).
    """

    def report(self, config: Any, timings: Sequence[CandidateTiming], seconds: float | None) -> None:
        """Keep what the tuning that picked ``config`` measured.

        :param timings: one entry per candidate the tuning kept (after the
            kernel's own pruning), in the kernel's order; empty where nothing was measured.
        :param seconds: how long the tuning took, from its start to its pick;
            ``None`` for a pick found without measuring (a cache hit: keep
            what the kernel holds, tell its listeners of the hit).
        """
        ...


class IsolatedLaunch(Protocol):
    """One launch as the isolation worker repeats it, once per candidate (see :class:`IsolatingLaunch`)."""

    #: what the worker imports, with copies of the launch's arguments and the runner it launches through.
    target: Target

    def payload(self, config: Any) -> Any | None:
        """What the target's runner takes to launch with ``config``, as plain picklable data.

        Everything the launch computes on the host from the config (a grid
        function, derived meta-parameters) is computed here, so the worker
        only launches. ``None`` when the launch with ``config`` raises here
        before anything reaches the device: measuring it fails it as safely.

        :raises Exception: when the config cannot be sent (the candidate
            then fails as unscreenable).
        """
        ...


@runtime_checkable
class IsolatingLaunch(KernelLaunch, Protocol):
    """A launch the isolation worker can repeat (optional part of :class:`KernelLaunch`).

    With ``isolate = "subprocess"`` the contextual tuner screens the
    candidates of a launch that has it before they run here; a launch
    without it runs them unscreened, with one warning.
    """

    def isolation(self) -> IsolatedLaunch:
        """How the worker repeats this launch.

        :raises kerneltune.core.IsolationError: when the worker could not
            import the kernel by name or receive an argument; the message says
            what to change.
        """
        ...


class Interceptor(Registrable, Protocol):
    """How another library's kernel launches reach the contextual tuner.

    Registered by ``kerneltune_register_interceptors`` and constructed with
    no arguments; ``is_available()`` says whether its kernel library can be
    imported. Each contextual tuner makes its interceptors once and installs
    them around every call of its outer function, so installing and
    uninstalling must be cheap. The launch it hands over is a
    :class:`KernelLaunch`.
    """

    def __init__(self) -> None: ...

    def install(self, route: Callable[[KernelLaunch], Any]) -> None:
        """Route this thread's tunable launches to ``route`` until :meth:`uninstall`.

        Every launch of a tunable kernel made on the calling thread is handed
        to ``route(launch)`` instead of running, and the launch returns what
        ``route`` returns. Launches on other threads, of kernels with a single
        candidate, and made while ``route`` runs go through unchanged.
        Patch here, never at import; what stays patched after
        :meth:`uninstall` must pass every launch through unchanged.
        """
        ...

    def uninstall(self) -> None:
        """Stop routing: launches behave as if never intercepted; release what the launches allocated."""
        ...


@runtime_checkable
class DirectInterceptor(Interceptor, Protocol):
    """An interceptor that makes tuned launches itself (optional part of :class:`Interceptor`)."""

    def serve(self, direct: DirectLaunches) -> None:
        """Launch what ``direct`` holds without the route, for as long as this interceptor lives.

        Called once, before the first :meth:`~Interceptor.install`. While
        installed and ``direct.serving`` is set, a launch on the installing
        thread whose kernel and key are in ``direct.picks``, and whose kernel's
        own cache still holds the pick, is made from its entry instead of
        being handed to the route; everything else goes to the route as
        before. A miss here must cost no more than the route would.
        """
        ...


@runtime_checkable
class RecordingInterceptor(Interceptor, Protocol):
    """An interceptor that can record launches for COMPILE (optional part of :class:`Interceptor`)."""

    def recording(self) -> contextlib.AbstractContextManager[list[Thunk]] | None:
        """A context in which this thread's launches are recorded as compiles instead of made.

        The function-level tuner runs a host launcher once per candidate
        inside it; the yielded list fills with one thunk per launch, which
        compiles that launch on any thread and raises what it would. ``None``
        where nothing is compiled ahead (an interpreter).
        """
        ...


@runtime_checkable
class ForkingLaunch(KernelLaunch, Protocol):
    """A launch whose configs can compile in forked processes (optional part of :class:`KernelLaunch`)."""

    def compile_process(self) -> CompileProcess | None:
        """How :meth:`compiler`'s function runs in a process forked for COMPILE; ``None``: on threads only.

        Made on the launching thread. ``None`` where a forked child cannot
        compile without the device, or would leave its work where this
        process does not find it when it compiles the same config. A launch
        without this method compiles on threads.
        """
        ...


@runtime_checkable
class ProgramLaunch(KernelLaunch, Protocol):
    """A launch that can tell which configs launch the same program (optional part of :class:`KernelLaunch`).

    Twins (configs the backend compiles to one program, such as ``num_warps``
    variants under an interpreter) are measured once
    (:mod:`kerneltune.core.machine.twins`).
    """

    def program(self, config: Any) -> Hashable | None:
        """An identity of the program ``config`` launches with this launch's arguments: equal for two
        configs exactly when their launches run the same code with the same launch settings; ``None``
        where the backend cannot tell.

        Called on the launching thread once COMPILE has compiled ``config``.
        """
        ...

    def options(self, config: Any) -> Mapping[str, object]:
        """``config``'s options by name, to say which ones twins differ in."""
        ...


@runtime_checkable
class ForkingRecorder(RecordingInterceptor, Protocol):
    """A recorder whose thunks can run in forked processes (optional, of :class:`RecordingInterceptor`)."""

    def compile_process(self) -> CompileProcess | None:
        """How recorded thunks run in a process forked for COMPILE; ``None``: on threads only.

        Made on the recording thread.
        """
        ...
