"""What a plugin's classes provide: one :class:`typing.Protocol` per family.

A plugin registers classes, not instances, through the ``kerneltune_register_*``
hooks (:mod:`kerneltune.core.plugin_system.hookspecs`). The engine reads a class's ``name``,
asks ``is_available()`` before it constructs one, and lets ``auto`` choose by
the optional class attribute ``auto_priority`` (an int, 0 where absent; see
:meth:`kerneltune.core.plugin_system.registry.Registry.ranked` for the rule). Each protocol
below is what an instance must provide. Optional parts are protocols of their
own (:class:`FlushingTimer`, :class:`HoldingTimer`, :class:`ListingCache`,
:class:`GlobalRankReducer`, :class:`GatheringReducer`, :class:`RecordingInterceptor`,
:class:`ForkingRecorder`, :class:`ForkingLaunch`, :class:`IsolatingLaunch`, :class:`InPlaceLaunch`,
:class:`UnsupportedLaunch`,
:class:`ProbingProfileFamily`, :class:`DeviceTimer`), runtime-checkable:
the engine asks :func:`provides` whether an instance has one and does
without it where it is missing.

Plugins need not import this module or subclass anything: a class matches by
its shape. The engine's signatures use these protocols, so a type checker
reading a plugin's class against them finds a missing or misnamed method.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from kerneltune.core.plugin_system.settings import Settings
    from kerneltune.core.values.geometry import Measure, Point, SearchBudget, SearchGeometry
    from kerneltune.core.values.profiles import CompileTarget
    from kerneltune.core.values.target import Target

Thunk = Callable[[], object]

P = TypeVar("P")


def provides(obj: object, part: Callable[..., P]) -> TypeGuard[P]:
    """Whether ``obj`` has the optional part ``part``, one of this module's runtime-checkable protocols.

    The one way the engine asks: ``if provides(timer, FlushingTimer): timer.flush()``.
    It checks the members ``part`` adds to its family's protocol (what makes
    it optional), each present and not ``None``; the family's own members
    are the registry's to check. So a registered class can be asked too,
    before it is constructed (``provides(timer_class, DeviceTimer)``).
    ``isinstance(obj, part)`` checks the whole shape instead.

    :param part: typed as a callable because a type checker takes a
        protocol for no concrete ``type[P]``.
    """
    return all(getattr(obj, name, None) is not None for name in _added_members(part))


@functools.cache
def _added_members(part: Callable[..., object]) -> tuple[str, ...]:
    """The public names a protocol declares itself, annotations included, not those of its bases."""
    own = vars(part)
    return tuple(sorted(n for n in {*own.get("__annotations__", {}), *own} if not n.startswith("_")))


class Registrable(Protocol):
    """What every registered class has, whatever its family."""

    #: The name users select it by, unique within its family.
    name: ClassVar[str]

    @classmethod
    def is_available(cls) -> bool:
        """Whether it can run in this process, checked without side effects."""
        ...


class Timer(Registrable, Protocol):
    """How long a candidate takes; registered by ``kerneltune_register_timers``.

    Constructed with no arguments. An instance measures one candidate: its
    warm-up and timed runs, then one :meth:`collect`. Built-in priorities:
    wallclock 0, cuda-event 10, npu-event 20; a timer that should never win
    ``auto`` uses a negative ``auto_priority``.
    """

    def __init__(self) -> None: ...

    def sample(self, fn: Thunk, *, before: Thunk | None = None) -> None:
        """Run ``fn`` once inside the timed region.

        :param fn: the work to time.
        :param before: set-up that must happen just ahead of the timed
            region but outside it (the engine's flush and hold, see
            :mod:`kerneltune.core.machine.measure`). A device timer enqueues it after
            its own bookkeeping and right before its start mark, so the
            device is busy with it while the host prepares the launch of
            ``fn``. ``None``: no set-up.
        """
        ...

    def collect(self) -> list[float]:
        """Wait for outstanding work once and return every sample since the last call.

        :returns: milliseconds, one finite, non-negative number per
            :meth:`sample`, in order. Anything else fails the candidate being
            measured, with a message naming the timer.
        """
        ...


@runtime_checkable
class FlushingTimer(Timer, Protocol):
    """A timer that can evict the device's caches (optional part of :class:`Timer`)."""

    def flush(self) -> None:
        """Enqueue device work that evicts the device's caches (an L2 write), without waiting."""
        ...


@runtime_checkable
class HoldingTimer(Timer, Protocol):
    """A timer that can keep the device busy (optional part of :class:`Timer`)."""

    def hold(self, microseconds: float) -> bool | None:
        """Enqueue device work that keeps the device busy for about ``microseconds``, without waiting.

        :returns: ``False`` where it could not (no spin kernel on this
            device); then a timed run's marks also span the host's launch,
            and the engine does not ask whether the device sat idle.
            ``True`` or ``None``: it held.
        """
        ...


@runtime_checkable
class DeviceTimer(Timer, Protocol):
    """A timer of one device's work (optional part of :class:`Timer`).

    The session's device (:attr:`kerneltune.core.Session.device`) follows
    the timer: selecting this timer selects the registered :class:`Device`
    it names, and its constructor receives that device's instance.
    """

    #: the registered name of the :class:`Device` whose work it times.
    device: ClassVar[str]

    def __init__(self, device: Device) -> None:
        """:param device: the instance of the device named by :attr:`device`."""
        ...


@runtime_checkable
class Device(Registrable, Protocol):
    """An accelerator, as the engine may know it; registered by ``kerneltune_register_devices``.

    The engine holds no device API of its own (neither torch's CUDA module
    nor its NPU one): the hardware facts of a cache key, the worker process of
    ``isolate = "subprocess"`` and the device timers ask a device plugin.
    Constructed with no arguments, only where ``is_available()``; an instance
    is cheap and starts nothing until a method that needs the device runs.
    Built-in: ``npu`` (``auto_priority`` 20), ``cuda`` (10) and ``cpu`` (0),
    the host, which every process has.

    A device has units, numbered from 0 (the GPUs of a host); the one this
    thread's work goes to is :meth:`current`. Tensors are whatever the
    device's tensor library hands out (``torch.Tensor`` for the built-ins);
    the engine only passes them back to the device that :meth:`owns` them.
    """

    #: whether torch's inter-process sharing sends this device's tensors to
    #: another process without a copy (CUDA and NPU IPC). Where false the
    #: isolation worker is sent a copy, made in this process, which torch
    #: must be able to pickle (host memory can).
    shares_memory: ClassVar[bool]

    def __init__(self) -> None: ...

    def owns(self, tensor: Any) -> bool:
        """Whether ``tensor`` lives in this device's memory; never raises for another device's tensor."""
        ...

    def index_of(self, tensor: Any) -> int:
        """The unit that holds ``tensor``, one :meth:`owns` accepts."""
        ...

    def in_use(self) -> bool:
        """Whether this process has started using the device (its context exists), asked without starting it.

        Isolation screens a candidate whose arguments hold no tensor of any
        device on the first device in use, at its current unit.
        """
        ...

    def current(self) -> int:
        """The unit this thread's work goes to."""
        ...

    def set_current(self, index: int) -> None:
        """Send this thread's work to unit ``index`` from now on (the isolation worker's first call)."""
        ...

    def synchronize(self) -> None:
        """Wait until the work queued on the current unit has finished; raise what it raised.

        A kernel's fault surfaces here: the isolation worker synchronises
        after each candidate, while that candidate is the one to blame.
        """
        ...

    def check_health(self) -> None:
        """Raise when the device no longer works; return when it does, or was never used here.

        Called in the isolation worker after every candidate, failed or
        not: a fault such as an illegal address reaches Python as an
        ordinary exception but can leave the device unusable, and every later
        call fails. A device that raises here ends the worker, and the
        candidate is screened out with the message. It may synchronise and
        run a tiny piece of work.
        """
        ...

    def release(self) -> None:
        """Hand the memory the device's allocator keeps cached back to the device.

        Called in the isolation worker after each healthy candidate, so that
        what a candidate allocated there is the user's process's to use.
        """
        ...

    def facts(self) -> dict[str, Any]:
        """Plain data describing the device picks depend on (``device``, ``name``, ``count``, ...).

        Merged under the ``kerneltune_hardware_info`` facts into every cache
        key, so a pick made on one device is not reused on another. Read
        once per session; it may start the device.
        """
        ...


class Cache(Registrable, Protocol):
    """Where picks live; registered by ``kerneltune_register_caches``.

    Built-in priorities: json 10, msgpack 5, memory 0. Records are plain
    data: dicts, lists, str, int, float, bool, None.
    """

    def __init__(self, root: Path) -> None:
        """:param root: the folder all tuned functions share; it may not exist yet."""
        ...

    def load(self, namespace: str, digest: str) -> dict[str, Any] | None:
        """The record stored for ``digest`` in ``namespace`` (one namespace per tuned function).

        :returns: the plain-data record, or ``None`` when there is none.
        :raises kerneltune.core.CacheReadError: when a stored record cannot be
            read or decoded; the engine turns that into a logged miss.
        """
        ...

    def store(self, namespace: str, digest: str, data: dict[str, Any]) -> None:
        """Persist ``data`` so that a reader never sees a partial record."""
        ...

    def directory(self, namespace: str) -> Path | None:
        """Where the namespace's files live, for log files; ``None`` for a cache that keeps no files."""
        ...


@runtime_checkable
class RemoteStore(Registrable, Protocol):
    """A server that several nodes share picks through; registered by ``kerneltune_register_remote_stores``.

    A thin client: bytes in and out by key. The layering is core's
    (:class:`kerneltune.core.plugin_system.layered_cache.LayeredCache`): it
    names the keys, encodes and checks the records, keeps a local copy,
    and turns a store's failure into a warning and a pause. Selected as
    ``cache = "<name>"``; ``is_available()`` says whether its client
    library can be imported. Construction connects to nothing.
    """

    #: Where the store is, for messages: a URL with any password hidden.
    location: str
    #: Seconds a stored value lives; ``None``: until deleted.
    ttl: int | None

    def __init__(self, settings: Settings) -> None:
        """:param settings: the session's settings, with the store's own (:meth:`Settings.get`).

        :raises kerneltune.core.ConfigError: for a missing or bad setting of its own.
        """
        ...

    def get(self, key: str) -> bytes | None:
        """The value stored under ``key``, ``None`` when there is none.

        At most :data:`kerneltune.core.private_files.MAX_READ` + 1 bytes need
        be read: a longer value is refused anyway.

        :raises kerneltune.core.CacheReadError: for a value that is not bytes
            (another type under the key): a logged miss.
        :raises Exception: anything else for an outage (unreachable, too
            slow, refused): a warning, and the store is left alone a while.
            Give up within a fraction of a second rather than retry.
        """
        ...

    def put(self, key: str, value: bytes, ttl: int | None) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (``None``: until deleted).

        :raises Exception: for an outage, as :meth:`get`.
        """
        ...


@runtime_checkable
class ListingCache(Cache, Protocol):
    """A cache whose records can be listed (optional part of :class:`Cache`).

    The ``kerneltune`` command lists, shows, exports, imports and clears only
    caches that have it.
    """

    def entries(self, namespace: str | None = None) -> Iterable[tuple[str, str, Path]]:
        """One ``(namespace, digest, path)`` per stored record (in ``namespace`` only, when given).

        ``load(namespace, digest)`` reads the record and ``path`` is the one
        file that holds it; the command removes a record by deleting ``path``.
        """
        ...


class Reducer(Registrable, Protocol):
    """How ranks exchange votes and timings; registered by ``kerneltune_register_reducers``.

    A thin transport: agreement, selection and persistence are the engine's.
    On a miss the engine calls :meth:`gather` once to agree; if the ranks then
    tune, :meth:`barrier` before each candidate, at REDUCE
    :meth:`GatheringReducer.gather_vector` once where the reducer has it and
    :meth:`max` once where it does not (an adaptive tuning :meth:`max` once
    more per round), and :meth:`gather` once more with ``verify_pick`` and
    once more with ``isolate = "subprocess"``. With ``world_size`` 1 it calls
    none of them.
    """

    #: This process's rank in the group; -1 outside it.
    rank: int
    #: The number of ranks in the group.
    world_size: int

    @classmethod
    def is_available(cls, group: Any = None) -> bool:
        """Whether ``auto`` may pick this reducer for ``group`` (``None``: the default group)."""
        ...

    def __init__(self, group: Any = None) -> None:
        """:param group: the ``autotune_pg`` a caller passed, or ``None`` for the default group.

        :raises kerneltune.core.PluginError: when it cannot run its
            collectives over exactly that group; it never falls back to another.
        """
        ...

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's small plain-data ``obj``, in rank order, on every rank."""
        ...

    def max(self, values: Sequence[float]) -> list[float]:
        """The element-wise maximum over ranks of a float vector, in one collective; ``inf`` survives."""
        ...

    def barrier(self) -> None:
        """Return once every rank of the group has called it."""
        ...


@runtime_checkable
class GatheringReducer(Reducer, Protocol):
    """A reducer that hands every rank's timing vector back (optional part of :class:`Reducer`).

    At REDUCE the engine then takes the maximum over ranks itself and keeps
    each rank's time of each candidate in the record. Without it the engine
    calls :meth:`Reducer.max` instead, and records keep no per-rank times.
    """

    def gather_vector(self, values: Sequence[float]) -> list[list[float]]:
        """Every rank's float vector, in rank order, on every rank, in one collective; ``inf`` survives.

        Every rank passes a vector of the same length.
        """
        ...


@runtime_checkable
class GlobalRankReducer(Reducer, Protocol):
    """A reducer that knows this process's rank in the whole job (optional part of :class:`Reducer`)."""

    #: The rank in the whole job, which names per-rank log files; without
    #: it the engine uses :attr:`Reducer.rank`.
    global_rank: int


class CompileProcess(Protocol):
    """A backend's part in compiling in processes forked for COMPILE (:mod:`kerneltune.core.machine.compile`).

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
        ahead (an interpreter).
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
    imported. The contextual tuner installs every available interceptor for
    the duration of one call. The launch it hands over is a
    :class:`KernelLaunch`.
    """

    def __init__(self) -> None: ...

    def install(self, route: Callable[[KernelLaunch], Any]) -> None:
        """Route this thread's tunable launches to ``route`` until :meth:`uninstall`.

        Every launch of a tunable kernel made on the calling thread is handed
        to ``route(launch)`` instead of running, and the launch returns what
        ``route`` returns. Launches on other threads, of kernels with a single
        candidate, and made while ``route`` runs go through unchanged.
        Installing must cost nothing once uninstalled: patch here, never at
        import.
        """
        ...

    def uninstall(self) -> None:
        """Restore the library exactly as it was; release what :meth:`install` or the launches allocated."""
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
class ForkingRecorder(RecordingInterceptor, Protocol):
    """A recorder whose thunks can run in forked processes (optional, of :class:`RecordingInterceptor`)."""

    def compile_process(self) -> CompileProcess | None:
        """How recorded thunks run in a process forked for COMPILE; ``None``: on threads only.

        Made on the recording thread.
        """
        ...


class ProfileFamily(Registrable, Protocol):
    """Compile-option profiles for staged searches; registered by ``kerneltune_register_profile_families``.

    Constructed with no arguments. Among the available families serving one
    backend and operator, the highest class attribute ``priority`` (an int,
    0 where absent) wins; a tie for first place is an error naming both.
    """

    #: ``"matrix"`` (kernels that call ``tl.dot``) or ``"vector"`` (the others).
    operator: ClassVar[str]
    #: Triton backend names served: ``"cuda"``, ``"hip"``, ``"npu"``, ``"interpreter"``.
    backends: ClassVar[tuple[str, ...]]

    def __init__(self) -> None: ...

    def profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """The profiles to search for ``target``; the first is the base profile.

        Each is a dict of compile options passed at launch, using only names
        in ``target.options``. Options that depend on another appear only in
        the profiles where they apply; :func:`kerneltune.core.values.profiles.option_grid`
        builds products.
        """
        ...


@runtime_checkable
class ProbingProfileFamily(ProfileFamily, Protocol):
    """A family that names its probe profiles (optional part of :class:`ProfileFamily`)."""

    def probe_profiles(self, target: CompileTarget) -> list[dict[str, Any]]:
        """A few of its profiles (two or three) that the shape search times every shape with.

        For families where one option decides which shapes can run well at
        all (warps per tile for tiled matrix kernels). The base is always a
        probe, put first if left out; without this method it is the only one.
        """
        ...


class Feature(Registrable, Protocol):
    """An optional feature a user switches on by name; registered by ``kerneltune_register_features``."""

    def __init__(self) -> None: ...

    def enable(self) -> None:
        """Switch the feature on for the whole process; calling it again changes nothing."""
        ...


class SearchStrategy(Registrable, Protocol):
    """Which points of a generated space get measured.

    Registered by ``kerneltune_register_search_strategies``.

    Constructed with no arguments, once per search. Built-in priorities for
    ``auto``: pattern 10, staged 0, exhaustive -10. A strategy is pure
    decisions over plain data (:mod:`kerneltune.core.values.geometry`): it never sees
    a kernel, a device or another rank, only the times its measure function
    returns, which every rank agreed on.
    """

    def __init__(self) -> None: ...

    def search(
        self,
        geometry: SearchGeometry,
        measure: Measure,
        budget: SearchBudget,
        say: Callable[[str], None],
    ) -> list[Point]:
        """Measure what the strategy chooses and return its finalists.

        :param geometry: the space: the searched parameters' sorted values,
            the profiles (the base first), probes and seeds.
        :param measure: measures a batch of points (compiled in parallel,
            then timed) and returns each point's agreed time in ms; ``inf``
            marks a point that failed, was dropped, ran out of resources or
            timed out, which is information about the space, not noise.
            Larger batches compile more in parallel; each call is one round.
        :param budget: the effort asked for and the caps (distinct points,
            seconds from ``budget.started``) the strategy stays within.
        :param say: prints one line of progress under the hint's ``debug``.
        :returns: at most ``budget.finalists`` measured points, fastest
            first, for the caller to re-time head to head; empty when no
            point ran.
        """
        ...
