"""Registry hooks: the classes a plugin hands the engine, one family per hook.

Each family's contract (what an instance provides) is its protocol in
:mod:`kerneltune.core.plugin_system.contracts`; these docstrings say how a
class is registered, constructed and chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kerneltune.core.plugin_system.hookspecs.markers import hookspec

if TYPE_CHECKING:
    from kerneltune.core.plugin_system.contracts import (
        Cache,
        Device,
        Feature,
        Interceptor,
        ProfileFamily,
        Reducer,
        RemoteStore,
        SearchStrategy,
        Timer,
    )


@hookspec
def kerneltune_register_timers(register: Callable[[type[Timer]], None]) -> None:
    """Register timer classes: how long a candidate takes.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Timer` (with the
    optional :class:`~kerneltune.core.plugin_system.contracts.FlushingTimer` and
    :class:`~kerneltune.core.plugin_system.contracts.HoldingTimer` parts): a class
    attribute ``name`` (the name users select it by), a classmethod
    ``is_available() -> bool``, an optional integer ``auto_priority``
    (``auto`` takes the available class with the highest, ties to the one
    registered first: :meth:`kerneltune.core.plugin_system.registry.Registry.ranked`;
    default 0; built-ins use 0 for wallclock, 10 for cuda-event, 20 for
    npu-event, so a plugin that should never win ``auto`` uses a negative
    value); it is constructed with no arguments. An instance provides
    ``sample(fn, *, before=None)`` and ``collect()``, and optionally
    ``flush()`` and ``hold(microseconds)``. A timer of one device's work
    (:class:`~kerneltune.core.plugin_system.contracts.DeviceTimer`) names that registered
    device in a class attribute ``device`` and is constructed with
    ``device=`` its instance instead; selecting the timer makes that device
    the session's.

    With the ``device`` objective, the engine's MEASURE step
    (:mod:`kerneltune.core.machine.measure`) passes ``before`` as the flush then a
    hold sized to cover the host's work in ``fn``, so the device reaches the
    start mark no sooner than the work. Timers of host clocks, or of devices
    with no way to do either, leave them out. A timer instance measures one
    candidate (its warm-up and timed runs, one ``collect``).

    :param register: call once per class; a name another plugin registered
        too is an error that names both plugins.

    All implementations are called.
    """


@hookspec
def kerneltune_register_caches(register: Callable[[type[Cache]], None]) -> None:
    """Register cache classes: where picks live.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Cache` (with the
    optional :class:`~kerneltune.core.plugin_system.contracts.ListingCache` part): ``name``,
    ``is_available()``, an optional ``auto_priority`` (json 10, msgpack 5,
    memory 0), constructed with ``root`` (a :class:`pathlib.Path`,
    the directory all functions share; it may not exist yet). A cache that
    provides :class:`~kerneltune.core.plugin_system.contracts.ConfiguredCache`
    (names the settings it reads in ``reads_settings``) is constructed with
    the :class:`kerneltune.core.Settings` in force too (for the options it
    declares through :func:`kerneltune_add_settings`, read with
    :meth:`~kerneltune.core.Settings.get`; raise
    :class:`kerneltune.core.ConfigError` for a missing or bad one, and
    connect to nothing yet), and one that provides
    :class:`~kerneltune.core.plugin_system.contracts.LayeringCache` (names
    a registered cache in ``layers_over``) with ``inner``, an instance of
    that cache at the same root, so that it can keep its records there too
    without importing that plugin;
    :func:`kerneltune.core.plugin_system.session.make_cache` builds them. An instance
    provides ``load(namespace, digest)`` (the plain-data record or ``None``;
    an unreadable one raises :class:`kerneltune.core.CacheReadError`, which
    the engine turns into a logged miss), ``store(namespace, digest,
    data)`` (atomically), ``directory(namespace)`` (a folder for log files,
    or ``None``) and optionally ``entries(namespace=None)``: ``(namespace,
    digest, path)`` per record, ``path`` the one file that holds it, which
    the ``kerneltune`` command needs to list, show, export, import and
    clear (it removes a record by deleting ``path``).

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_register_remote_stores(register: Callable[[type[RemoteStore]], None]) -> None:
    """Register remote store classes: servers that a fleet of nodes shares picks through.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.RemoteStore`:
    ``name`` (users select it as ``cache = "<name>"``; it must differ from
    every cache's name), a classmethod ``is_available() -> bool`` (its
    client library imports), constructed with ``settings`` (the session's
    :class:`kerneltune.core.Settings`, from which it reads the settings it
    declared through :func:`kerneltune_add_settings`; raise
    :class:`kerneltune.core.ConfigError` for a missing or bad one, and
    connect to nothing yet). An instance provides ``location`` (for
    messages, secrets hidden), ``ttl`` (seconds a value lives, or
    ``None``), ``get(key) -> bytes | None`` and ``put(key, value, ttl)``.

    Core layers it under the local cache registered as ``json``
    (:class:`kerneltune.core.plugin_system.layered_cache.LayeredCache`):
    local first, the store on a local miss, a store's hit checked and
    copied to the local files, writes to both. Whatever ``get`` or ``put``
    raises, but :class:`kerneltune.core.CacheReadError` from ``get`` (a
    value that is no record: a logged miss), is an outage: one warning per
    process, and the store is left alone for 30 seconds. So a store only
    moves bytes, and gives up on a command within a fraction of a second.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_register_reducers(register: Callable[[type[Reducer]], None]) -> None:
    """Register reducer classes: how ranks exchange votes and timings.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Reducer` (with the
    optional :class:`~kerneltune.core.plugin_system.contracts.GlobalRankReducer` part). A
    reducer is a thin transport; agreement, selection and persistence
    decisions are the engine's. A reducer class has ``name``, an optional
    ``auto_priority`` and a classmethod ``is_available(group=None) -> bool``
    (whether ``auto`` may pick it for ``group``); it is constructed with
    ``group`` (the ``autotune_pg`` a caller passed, or ``None`` for the
    default group) and must raise :class:`kerneltune.core.PluginError` when
    it cannot run its collectives over exactly that group, never fall back
    to another. An instance provides ``rank`` and ``world_size``, optionally
    ``global_rank``, and the collectives ``gather(obj)``, ``max(values)``
    and ``barrier()``.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_register_devices(register: Callable[[type[Device]], None]) -> None:
    """Register device classes: what the engine may know of an accelerator.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Device`: ``name``
    (the name a timer's ``device`` attribute names it by, and the prefix of
    the isolation worker's ``"name:index"``), a classmethod ``is_available()
    -> bool`` (the device can be used from this process; no side effects,
    and it must not start the device), an optional integer ``auto_priority``
    (built-ins: npu 20, cuda 10, cpu 0; a device that should never be chosen
    over them uses a negative value) and a class attribute ``shares_memory``
    (whether torch's inter-process sharing sends its tensors without a
    copy). It is constructed with no arguments. An instance provides
    ``owns(tensor)`` and ``index_of(tensor)`` (which device and unit hold a
    tensor), ``in_use()``, ``current()`` and ``set_current(index)`` (the unit
    this thread's work goes to), ``synchronize()``, ``check_health()`` (raise
    when the device no longer works after a candidate), ``release()`` (hand
    cached memory back) and ``facts()`` (plain data for the cache key).

    The session's device (:attr:`kerneltune.core.Session.device`) is the one
    the selected timer names in its ``device`` attribute, otherwise the
    available class with the highest ``auto_priority``
    (:meth:`kerneltune.core.plugin_system.registry.Registry.ranked`); its ``facts()`` are
    part of the hardware facts. With ``isolate = "subprocess"`` the worker
    process runs on the device that owns the candidate's tensor arguments
    (the session's device asked first, then the others by priority; with no
    tensor, the first one :meth:`in_use <kerneltune.core.plugin_system.contracts.Device.in_use>`),
    and uses that device's class there: it sets the unit, synchronises after
    each candidate, checks its health and releases its cache.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_register_interceptors(register: Callable[[type[Interceptor]], None]) -> None:
    """Register interceptor classes: how kernel launches reach the contextual tuner.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Interceptor`:
    ``name``, a classmethod ``is_available() -> bool`` (its kernel library can
    be imported; no side effects), constructed with no arguments. An instance
    provides ``install(route)``, which routes every tunable launch made on the
    calling thread to ``route`` as a
    :class:`kerneltune.core.plugin_system.contracts.KernelLaunch` until ``uninstall()``,
    which restores the library exactly as it was. Installing must cost
    nothing once uninstalled, so patch on install, never at import.
    Optionally (:class:`~kerneltune.core.plugin_system.contracts.RecordingInterceptor`) it
    provides ``recording()``, with which the function-level tuner's COMPILE
    stage turns a host launcher's launches into compiles.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called; the contextual tuner installs every
    available interceptor for the duration of one call.
    """


@hookspec
def kerneltune_register_profile_families(register: Callable[[type[ProfileFamily]], None]) -> None:
    """Register compile-option profile families for staged searches (``search_params``).

    Each class follows :class:`kerneltune.core.plugin_system.contracts.ProfileFamily` (with
    the optional :class:`~kerneltune.core.plugin_system.contracts.ProbingProfileFamily`
    part): ``name``; ``operator``, the operator class it serves
    (``"matrix"``: kernels that call ``tl.dot``, ``"vector"``: the others);
    ``backends``, a tuple of Triton backend names it serves (``"cuda"``,
    ``"hip"``, ``"npu"``, ``"interpreter"``); optionally ``priority`` (an int,
    default 0; where several families serve one backend and operator the
    highest wins, by :meth:`kerneltune.core.plugin_system.registry.Registry.ranked`, and a
    tie for first place is an error); and a classmethod ``is_available() ->
    bool``. It is constructed with no arguments. An instance provides
    ``profiles(target)``: given a
    :class:`kerneltune.core.values.profiles.CompileTarget`, the profiles to search,
    each a dict of compile options passed at launch, using only names in
    ``target.options``; the first is the base profile
    (:func:`kerneltune.core.values.profiles.option_grid` builds products). It may
    also provide ``probe_profiles(target)``: a few of its profiles that the
    shape search times every shape with, scoring a shape by the best of
    them; the base is always a probe.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_register_features(register: Callable[[type[Feature]], None]) -> None:
    """Register optional features a user switches on by name, e.g. ``search_params``.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Feature`: ``name``,
    a classmethod ``is_available() -> bool`` (whatever it needs can be
    imported; no side effects), constructed with no arguments. An instance
    provides ``enable() -> None``, which switches the feature on for the
    whole process; calling it again, or after other code ran, changes
    nothing. The facade's activation modules (such as
    ``triton_dist.autotune_hooks``) call
    :func:`kerneltune.core.plugin_system.features.enable_feature`, which calls it.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_register_search_strategies(register: Callable[[type[SearchStrategy]], None]) -> None:
    """Register search strategies: which points of a generated space get measured.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.SearchStrategy`:
    ``name`` (what the ``strategy`` hint and the ``search_strategy`` setting
    select it by), a classmethod ``is_available() -> bool``, an optional
    ``auto_priority`` (``auto``, the setting's default, takes the available
    class with the highest by :meth:`kerneltune.core.plugin_system.registry.Registry.ranked`;
    built-ins: pattern 10, staged 0, exhaustive -10, so a plugin that should
    only run when named uses a negative value). It is constructed with no
    arguments, once per search, and provides ``search(geometry, measure,
    budget, say)``:

    * ``geometry``, a :class:`kerneltune.core.values.geometry.SearchGeometry`: the
      sorted values of each searched parameter and the compile-option
      profiles (the base first, the family's probes, the seeds);
    * ``measure(points)``: measures a batch of ``(shape, profile)`` points
      through the engine (compiled in parallel, timed, reduced over ranks)
      and returns each one's agreed time in ms, ``inf`` for one that failed,
      was dropped, ran out of resources or timed out. A strategy must take
      its decisions from these times alone, so that every rank takes the
      same ones;
    * ``budget``, a :class:`kerneltune.core.values.geometry.SearchBudget`: the effort
      asked for, a cap on distinct points and on seconds, which the strategy
      honours (:class:`kerneltune.core.search.ledger.SearchLedger` does the
      bookkeeping), and how many finalists to return;
    * ``say(line)``: prints a line of progress when the kernel's hint has
      ``debug``.

    It returns up to ``budget.finalists`` measured points, fastest first;
    the caller re-times them head to head in interleaved rounds and applies
    ``reference_fn``. An empty list means no point ran.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """
