"""The door for drivers: what the facade, the command and search_params use of the engine.

A plugin needs :mod:`kerneltune.core` alone; a driver also starts tunings,
reads what they stored and chooses what runs. Drivers import the engine
through these two doors only (tests/test_import_graph.py holds them to it).
These names may change in any release (docs/plugins.md, "What the API promises").
"""

from kerneltune.core.drivers.checked_outputs import CheckOptions, OutputCheck
from kerneltune.core.drivers.contextual import ContextualAutoTuner, contextual_autotune
from kerneltune.core.drivers.function_tuner import AutoTuner, autotune
from kerneltune.core.errors import (
    CandidateDropped,
    UncheckedOutputsError,
    WrongOutput,
    WrongOutputWarning,
    describe_error,
)
from kerneltune.core.isolation.parent import SUBPROCESS, Screening, screener
from kerneltune.core.machine.faces import SearchTuning, SteppedTuning
from kerneltune.core.machine.failed_configs import argument_dtypes
from kerneltune.core.machine.portfolio import (
    PortfolioChoice,
    TimeTable,
    choose_portfolio,
    leave_one_out,
    tuned_fully,
)
from kerneltune.core.machine.serving import flush_marks
from kerneltune.core.machine.tuner import Tuner, Tuning
from kerneltune.core.plugin_system.cache_choice import make_cache
from kerneltune.core.plugin_system.contracts import ListingCache
from kerneltune.core.plugin_system.features import enable_feature
from kerneltune.core.plugin_system.loading import load_plugins
from kerneltune.core.plugin_system.registry import Registries, Registry
from kerneltune.core.plugin_system.session import current_session, hardware_facts, resolve_devices
from kerneltune.core.plugin_system.settings import SEARCH_EFFORTS, DeclaredSettings, setting_sources
from kerneltune.core.private_files import remove_private
from kerneltune.core.search.families import choose_family, family_probes, family_profiles
from kerneltune.core.search.strategies import choose_strategy
from kerneltune.core.values.failed import FailedConfigs, is_failed_configs
from kerneltune.core.values.key_index import KEY_INDEX_ENTRY
from kerneltune.core.values.keys import encode_key
from kerneltune.core.values.pending import PendingMark, is_pending
from kerneltune.core.values.portfolio import PORTFOLIO_ENTRY, Portfolio, PortfolioConfig
from kerneltune.core.values.records import HOST_CLOCK, IDLE_DEVICE, Candidate, Origin, TuningRecord, iso_date
from kerneltune.core.values.space import Space, source_digest

__all__ = [
    # the documented decorators and the tuners behind them
    "AutoTuner",
    "ContextualAutoTuner",
    "autotune",
    "contextual_autotune",
    "Candidate",
    "Space",
    "SearchTuning",
    "SteppedTuning",
    "Tuner",
    "Tuning",
    "argument_dtypes",
    # the session, its plugins and their settings
    "DeclaredSettings",
    "Registries",
    "Registry",
    "current_session",
    "enable_feature",
    "hardware_facts",
    "load_plugins",
    "resolve_devices",
    "setting_sources",
    # generated spaces: how hard to search, with what
    "SEARCH_EFFORTS",
    "choose_family",
    "choose_strategy",
    "family_probes",
    "family_profiles",
    # screening candidates in a worker process
    "SUBPROCESS",
    "Screening",
    "screener",
    "CandidateDropped",
    "describe_error",
    # checked outputs: the options, one tuning's check, what a wrong candidate fails with, the warning
    "CheckOptions",
    "OutputCheck",
    "UncheckedOutputsError",
    "WrongOutput",
    "WrongOutputWarning",
    # stored records, as the command reads, lists and removes them
    "FailedConfigs",
    "HOST_CLOCK",
    "IDLE_DEVICE",
    "ListingCache",
    "Origin",
    "PendingMark",
    "TuningRecord",
    "is_pending",
    "encode_key",
    "is_failed_configs",
    "iso_date",
    "make_cache",
    "remove_private",
    "source_digest",
    # serving new keys: the stored key index beside the records, the pending marks' writer
    "KEY_INDEX_ENTRY",
    "flush_marks",
    # portfolios: choosing a few configs from the stored times, and keeping them for new keys
    "PORTFOLIO_ENTRY",
    "Portfolio",
    "PortfolioChoice",
    "PortfolioConfig",
    "TimeTable",
    "choose_portfolio",
    "leave_one_out",
    "tuned_fully",
]
