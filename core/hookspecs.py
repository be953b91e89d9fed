"""The hook contract between the kerneltune engine and its plugins.

Every hook is prefixed ``kerneltune_``. Three families:

* registries (``kerneltune_register_*``): each implementation receives a
  ``register`` callable and hands it the classes it provides. All
  implementations are called; registering a name twice is an error.
* facts (``kerneltune_hardware_info``, ``kerneltune_software_versions``):
  each implementation returns a dict; the engine merges them.
* observers (``kerneltune_tuning_started``, ``kerneltune_candidate_measured``,
  ``kerneltune_tuning_finished``): notifications. Their return value is
  ignored. The engine never prints: logging, progress bars and metrics attach
  here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from kerneltune.core.events import (
        CandidateMeasured,
        CompileFinished,
        CompileStarted,
        KernelTuned,
        LaunchMeasured,
        PickLoaded,
        TuningFinished,
        TuningStarted,
    )

PROJECT = "kerneltune"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def kerneltune_register_timers(register: Callable[[type], None]) -> None:
    """Register timer classes.

    A timer class has a class attribute ``name`` (the name users select it
    by), a classmethod ``is_available() -> bool`` (whether it can run in this
    process, checked without side effects), an optional integer
    ``auto_priority`` (``auto`` takes the available class with the highest;
    default 0; built-ins use 0 for wallclock, 10 for cuda-event, 20 for
    npu-event, so a plugin that should never win ``auto`` uses a negative
    value) and is constructed with no arguments. An instance provides:

    * ``sample(fn, *, before=None)``: run ``fn`` once inside the timed
      region. ``before``, when given, is set-up that must happen just ahead
      of that region but outside it (the flush and hold below); a device
      timer enqueues it after its own bookkeeping and right before its start
      mark, so the device is busy with it while the host prepares the launch
      of ``fn``.
    * ``collect() -> list[float]``: wait for outstanding work once and
      return every sample since the last ``collect``, in milliseconds: one
      finite, non-negative number per ``sample``. Anything else fails the
      candidate being measured, with a message naming the timer.
    * optionally ``flush()``: enqueue device work that evicts the device's
      caches (an L2 write), without waiting.
    * optionally ``hold(microseconds)``: enqueue device work that keeps the
      device busy for about that long, without waiting.

    With the ``device`` objective, the engine's MEASURE step
    (:mod:`kerneltune.core.measure`) passes ``before`` as the flush then a
    hold sized to cover the host's work in ``fn``, so the device reaches the
    start mark no sooner than the work. Timers of host clocks, or of devices
    with no way to do either, leave them out. A timer instance measures one
    candidate (its warm-up and timed runs, one ``collect``).

    :param register: call once per class; a name another plugin registered
        too is an error that names both plugins.

    All implementations are called.
    """


@hookspec
def kerneltune_register_caches(register: Callable[[type], None]) -> None:
    """Register cache classes.

    A cache class has ``name``, ``is_available()``, an optional
    ``auto_priority`` (json 10, msgpack 5, memory 0, redis -10) and is
    constructed with ``root`` (a :class:`pathlib.Path`, the directory all
    functions share; it may not exist yet). A constructor that also names a
    ``settings`` parameter receives the :class:`kerneltune.core.Settings` in
    force (for options such as ``redis_url``; raise
    :class:`kerneltune.core.ConfigError` for a missing or bad one, and
    connect to nothing yet), and one that names ``caches`` receives the cache
    :class:`~kerneltune.core.registry.Registry`, so that it can layer over
    another cache by its registered name (``caches.get("json")``) without
    importing that plugin; :func:`kerneltune.core.session.make_cache` builds
    them. Caches that take only ``root`` are unaffected. An instance
    provides:

    * ``load(namespace, digest) -> dict | None``: the plain-data record
      stored for ``digest`` in ``namespace`` (one namespace per tuned
      function), or ``None`` when there is none. A file that cannot be read
      or decoded raises :class:`kerneltune.core.CacheReadError`; the engine
      turns that into a logged miss.
    * ``store(namespace, digest, data) -> None``: persist ``data`` (plain
      data: dicts, lists, str, int, float, bool, None) so that a reader never
      sees a partial record.
    * ``directory(namespace) -> pathlib.Path | None``: where the namespace's
      files live, for log files; ``None`` for caches that keep nothing on
      disk.
    * optionally ``entries(namespace=None)``: an iterable of ``(namespace,
      digest, path)``, one per record stored (in ``namespace`` only, when
      given), where ``load(namespace, digest)`` reads the record and
      ``path`` is the one file that holds it. The ``kerneltune`` command
      lists, shows, exports, imports and clears only caches that have it;
      it removes a record by deleting its ``path``.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_register_reducers(register: Callable[[type], None]) -> None:
    """Register reducer classes: how ranks exchange votes and timings.

    A reducer is a thin transport; agreement, selection and persistence
    decisions are the engine's. A reducer class has ``name`` and a
    classmethod ``is_available(group=None) -> bool`` (whether ``auto`` may
    pick it for ``group``); it is constructed with ``group`` (the
    ``autotune_pg`` a caller passed, or ``None`` for the default group) and
    must raise :class:`kerneltune.core.PluginError` when it cannot run its
    collectives over exactly that group, never fall back to another. An
    instance provides ``rank`` (this process's rank in the group, ``-1``
    outside it) and ``world_size``; optionally ``global_rank``, this
    process's rank in the whole job, which names per-rank log files (default:
    ``rank``); and three collectives over exactly the group's ranks:

    * ``gather(obj) -> list``: every rank's small plain-data ``obj``, in rank
      order, on every rank;
    * ``max(values) -> list[float]``: the element-wise maximum over ranks of
      a float vector, in one collective (``inf`` must survive);
    * ``barrier() -> None``.

    On a miss the engine calls ``gather`` once to agree; if the ranks then
    tune, ``barrier`` before each candidate, ``max`` once (an adaptive
    tuning, such as a search_params search, once more per round), and
    ``gather`` once more only when ``verify_pick`` is set. With
    ``world_size`` 1 it calls none of them.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_hardware_info() -> dict[str, Any] | None:
    """Describe the hardware picks depend on.

    The merged dict becomes part of the disk-cache key, so a pick made on one
    device is not reused on another. Return plain data (str, int, float,
    bool, None, lists, dicts) or ``None`` to add nothing; keys of later
    plugins override earlier ones.

    All implementations are called.
    """


@hookspec
def kerneltune_software_versions() -> dict[str, str] | None:
    """Report versions of software that picks depend on.

    Stored in each record; with ``TRITON_DIST_AUTOTUNE_VERSION_CHECK=1`` a
    mismatch forces a retune, otherwise it is a warning.

    All implementations are called.
    """


@hookspec
def kerneltune_tuning_started(event: TuningStarted) -> None:
    """A real tuning (a miss) is about to measure candidates.

    :param event: names the function, key, candidates, rank and options.
    """


@hookspec
def kerneltune_candidate_measured(event: CandidateMeasured) -> None:
    """One candidate's measurement is complete (or it failed).

    :param event: the candidate and its :class:`Measurement` on this rank.
    """


@hookspec
def kerneltune_tuning_finished(event: TuningFinished) -> None:
    """A tuning ended: with a pick, or with every candidate failing.

    :param event: the reduced times, the pick (``None`` on failure) and the
        wall time the tuning took.
    """


@hookspec
def kerneltune_compile_started(event: CompileStarted) -> None:
    """COMPILE began compiling a candidate.

    Called on one of the stage's pool threads, while other candidates
    compile and the tuning's own thread measures: implementations must be
    thread-safe and quick.

    :param event: the function, key and candidate.
    """


@hookspec
def kerneltune_compile_finished(event: CompileFinished) -> None:
    """COMPILE finished a candidate, compiled or failed.

    Called on a pool thread, as :func:`kerneltune_compile_started` is.

    :param event: the candidate, the seconds its compile took, its error
        (``None`` when it compiled) and how many of this rank's compiles are
        done out of how many.
    """


@hookspec
def kerneltune_pick_loaded(event: PickLoaded) -> None:
    """A key missing from the process's picks was served from a stored record, without measuring.

    :param event: the function, key, pick and where the record came from
        (this rank's cache, or another rank).
    """


@hookspec
def kerneltune_register_interceptors(register: Callable[[type], None]) -> None:
    """Register interceptor classes: how kernel launches reach the contextual tuner.

    An interceptor class has ``name``, a classmethod ``is_available() ->
    bool`` (its kernel library can be imported; no side effects) and is
    constructed with no arguments. An instance provides:

    * ``install(route) -> None``: from now until ``uninstall``, every launch
      of a tunable kernel made on the calling thread is handed to
      ``route(launch)`` instead of running, and the launch returns what
      ``route`` returns. ``launch`` is a
      :class:`kerneltune.core.contextual.KernelLaunch` carrying that launch's
      own arguments. Launches on other threads, launches of kernels with a
      single candidate and launches made while ``route`` runs go through
      unchanged. Installing must cost nothing once uninstalled, so patch on
      install, never at import.
    * ``uninstall() -> None``: restore the library exactly as it was and
      release what ``install`` or the launches allocated.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called; the contextual tuner installs every
    available interceptor for the duration of one call.
    """


@hookspec
def kerneltune_launch_measured(event: LaunchMeasured) -> None:
    """A contextual tuner ran one warm-up or timed launch of a candidate, or it failed.

    :param event: kernel name, key, candidate, phase, round and time or error.
    """


@hookspec
def kerneltune_kernel_tuned(event: KernelTuned) -> None:
    """A contextual tuner finished a (kernel, key): with a pick, or with none valid.

    :param event: every candidate's mean time on this rank and the pick.
    """


@hookspec
def kerneltune_register_profile_families(register: Callable[[type], None]) -> None:
    """Register compile-option profile families for staged searches (``search_params``).

    A family class has ``name``; ``operator``, the operator class it serves
    (``"matrix"``: kernels that call ``tl.dot``, ``"vector"``: the others);
    ``backends``, a tuple of Triton backend names it serves (``"cuda"``,
    ``"hip"``, ``"npu"``, ``"interpreter"``); optionally ``priority`` (an int,
    default 0; the highest wins where several families serve one backend and
    operator); and a classmethod ``is_available() -> bool``. It is
    constructed with no arguments. An instance provides
    ``profiles(target) -> list[dict]``: given a
    :class:`kerneltune.core.profiles.CompileTarget`, the profiles to search,
    each a dict of compile options passed at launch, using only names in
    ``target.options``; the first is the base profile. Options that depend
    on another (say, multibuffer levels on a backend where multibuffer is
    off) appear only in the profiles where they apply;
    :func:`kerneltune.core.profiles.option_grid` builds products. An instance
    may also provide ``probe_profiles(target) -> list[dict]``: a few of its
    profiles (two or three) that the shape search times every shape with,
    scoring a shape by the best of them, for families where one option
    decides which shapes can run well at all (warps per tile for tiled
    matrix kernels: too few and the largest tiles spill). The base is always
    a probe, put first if left out; without the method it is the only one.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_register_features(register: Callable[[type], None]) -> None:
    """Register optional features a user switches on by name, e.g. ``search_params``.

    A feature class has ``name``, a classmethod ``is_available() -> bool``
    (whatever it needs can be imported; no side effects) and is constructed
    with no arguments. An instance provides ``enable() -> None``, which
    switches the feature on for the whole process; calling it again, or after
    other code ran, changes nothing. The facade's activation modules (such as
    ``triton_dist.autotune_hooks``) call
    :func:`kerneltune.core.features.enable_feature`, which calls it.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """
