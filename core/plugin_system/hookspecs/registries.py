"""Registry hooks: the classes a plugin hands the engine, one family per hook.

Each family's contract (what a class and its instances provide, and the
optional parts) is its protocol in :mod:`kerneltune.core.plugin_system.contracts`,
and is stated there only; these docstrings say how a class is registered,
constructed and chosen, and what the engine does with it.
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
    optional :class:`~kerneltune.core.plugin_system.contracts.FlushingTimer`,
    :class:`~kerneltune.core.plugin_system.contracts.HoldingTimer` and
    :class:`~kerneltune.core.plugin_system.contracts.FlushTimingTimer` parts): a class
    attribute ``name`` (the name users select it by), a classmethod
    ``is_available() -> bool``, an optional integer ``auto_priority``
    (``auto`` takes the available class with the highest, ties to the one
    registered first: :meth:`kerneltune.core.plugin_system.registry.Registry.ranked`;
    default 0; built-ins use 0 for wallclock, 10 for cuda-event, 20 for
    npu-event, and 30 for npu-profiler where ``TRITON_BENCH_METHOD=npu``, -1
    elsewhere; so a plugin that should never win ``auto`` uses a negative
    value); it is constructed with no arguments. A timer of one device's work
    (:class:`~kerneltune.core.plugin_system.contracts.DeviceTimer`) names that registered
    device in a class attribute ``device`` and is constructed with
    ``device=`` its instance instead; selecting the timer makes that device
    the session's.

    With the ``device`` objective, the engine's MEASURE step
    (:mod:`kerneltune.core.machine.timing`) passes ``before`` as a hold sized to
    cover the host's work in ``fn``, then the flush, so the device reaches the
    start mark no sooner than the work, right after the flush. Timers of host clocks, or of devices
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
    :func:`kerneltune.core.plugin_system.session.make_cache` builds them. The
    engine turns a :class:`kerneltune.core.CacheReadError` from ``load`` into a
    logged miss; the ``kerneltune`` command lists, shows, exports, imports
    and clears only the records of caches that can list them.

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
    connect to nothing yet).

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
    to another.

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
    copy). It is constructed with no arguments.

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
    be imported; no side effects), constructed with no arguments. It patches
    its library on ``install``, never at import. One that can record
    (:class:`~kerneltune.core.plugin_system.contracts.RecordingInterceptor`) lets the
    function-level tuner's COMPILE stage turn a host launcher's launches into
    compiles.

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
    bool``. It is constructed with no arguments.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """


@hookspec
def kerneltune_register_features(register: Callable[[type[Feature]], None]) -> None:
    """Register optional features a user switches on by name, e.g. ``search_params``.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Feature`: ``name``,
    a classmethod ``is_available() -> bool`` (whatever it needs can be
    imported; no side effects), constructed with no arguments. The facade's
    activation modules (such as
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
    arguments, once per search. Every rank runs the same strategy on the
    same agreed times, so every rank takes the same decisions.
    It returns up to ``budget.finalists`` measured points, fastest first;
    the caller re-times them head to head in interleaved rounds and applies
    ``reference_fn``. An empty list means no point ran.

    :param register: as for :func:`kerneltune_register_timers`.

    All implementations are called.
    """
