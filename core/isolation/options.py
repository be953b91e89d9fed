"""The isolation settings, declared next to the worker that reads them."""

from __future__ import annotations

from kerneltune.core.plugin_system.parsers import MAX_TIMEOUT_S, integer, one_of
from kerneltune.core.plugin_system.settings import SettingSpec

ISOLATE = SettingSpec(
    "isolate",
    default="none",
    parse=one_of("none", "subprocess"),
    help="subprocess: run each candidate once in a worker process first; those that crash or hang fail",
    env=("KERNELTUNE_ISOLATE",),
)
ISOLATE_TIMEOUT = SettingSpec(
    "isolate_timeout",
    default=60,
    parse=integer(1, MAX_TIMEOUT_S, "seconds, the longest wait this platform takes"),
    help="seconds one candidate may run in the isolation worker before it counts as hung",
    env=("KERNELTUNE_ISOLATE_TIMEOUT",),
)
