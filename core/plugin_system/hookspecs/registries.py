"""Registry hooks: the classes a plugin hands the engine, one family per hook.

Each family's contract (what a class and its instances provide, and the
optional parts) is its protocol in :mod:`kerneltune.core.plugin_system.contracts`,
and is stated there only; these docstrings say how a class is registered,
constructed and chosen, and what the engine does with it. Every implementation is
called with ``register``, to call once per class; a name another plugin registered too is an
error that names both plugins.
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

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Timer`, with its optional
    parts (flushing, holding, a device's timer, precise rounds only). ``auto`` takes the
    available class with the highest ``auto_priority``, ties to the one registered first
    (:meth:`kerneltune.core.plugin_system.registry.Registry.ranked`). With the ``device``
    objective, MEASURE passes ``before`` as a hold sized to cover the host's work in ``fn``,
    then the flush, so the device reaches the start mark right after the flush.
    """


@hookspec
def kerneltune_register_caches(register: Callable[[type[Cache]], None]) -> None:
    """Register cache classes: where picks live.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Cache`, with its optional
    parts (listing, settings of its own, layering over another cache), constructed with ``root``
    and what those parts ask for (:func:`kerneltune.core.plugin_system.cache_choice.make_cache`).
    """


@hookspec
def kerneltune_register_remote_stores(register: Callable[[type[RemoteStore]], None]) -> None:
    """Register remote store classes: servers that a fleet of nodes shares picks through.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.RemoteStore`; its name
    must differ from every cache's. Core layers it under the local cache registered as ``json``
    (:class:`kerneltune.core.plugin_system.layered_cache.LayeredCache`): local first, the store
    on a local miss, writes to both; an outage is one warning per process, and the store is left
    alone for 30 seconds.
    """


@hookspec
def kerneltune_register_reducers(register: Callable[[type[Reducer]], None]) -> None:
    """Register reducer classes: how ranks exchange votes and timings.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Reducer` (with the
    optional :class:`~kerneltune.core.plugin_system.contracts.GlobalRankReducer` part).
    """


@hookspec
def kerneltune_register_devices(register: Callable[[type[Device]], None]) -> None:
    """Register device classes: what the engine may know of an accelerator.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Device`; its ``name`` is
    what a timer's ``device`` attribute names and the prefix of the isolation worker's
    ``"name:index"``, and its ``is_available()`` must not start the device. The session's
    device (:attr:`kerneltune.core.Session.device`) is the one the selected timer names,
    otherwise the available class with the highest ``auto_priority``; its ``facts()`` are part of
    the hardware facts. With ``isolate = "subprocess"`` the worker process runs on the device that
    owns the candidate's tensor arguments (the session's device asked first, then the others by
    priority; with no tensor, the first one
    :meth:`in_use <kerneltune.core.plugin_system.contracts.Device.in_use>`).
    """


@hookspec
def kerneltune_register_interceptors(register: Callable[[type[Interceptor]], None]) -> None:
    """Register interceptor classes: how kernel launches reach the contextual tuner.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Interceptor`. One that can
    record (:class:`~kerneltune.core.plugin_system.contracts.RecordingInterceptor`) lets the
    function-level tuner's COMPILE stage turn a host launcher's launches into compiles.

    The contextual tuner installs every available interceptor for the duration of one call.
    """


@hookspec
def kerneltune_register_profile_families(register: Callable[[type[ProfileFamily]], None]) -> None:
    """Register compile-option profile families for staged searches (``search_params``).

    Each class follows :class:`kerneltune.core.plugin_system.contracts.ProfileFamily` (with the
    optional :class:`~kerneltune.core.plugin_system.contracts.ProbingProfileFamily` part).
    """


@hookspec
def kerneltune_register_features(register: Callable[[type[Feature]], None]) -> None:
    """Register optional features a user switches on by name, e.g. ``search_params``.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.Feature`. The facade's
    activation modules (such as ``triton_dist.autotune_hooks``) call
    :func:`kerneltune.core.plugin_system.features.enable_feature`, which calls it.
    """


@hookspec
def kerneltune_register_search_strategies(register: Callable[[type[SearchStrategy]], None]) -> None:
    """Register search strategies: which points of a generated space get measured.

    Each class follows :class:`kerneltune.core.plugin_system.contracts.SearchStrategy`; the
    ``strategy`` hint and the ``search_strategy`` setting select it by name, ``auto`` (the
    setting's default) by ``auto_priority``. The caller re-times the finalists it returns head to
    head in interleaved rounds and applies ``reference_fn``.
    """
