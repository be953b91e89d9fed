"""The isolation settings, declared next to the worker that reads them."""

from __future__ import annotations

import threading

from kerneltune.core.plugin_system.parsers import integer, one_of
from kerneltune.core.plugin_system.settings import SettingSpec

#: The longest timeout, in whole seconds, that this platform's waits take (about 24.8 days).
#: The isolation worker is waited for through poll(), whose timeout is a C int of
#: milliseconds, and lock waits stop at threading.TIMEOUT_MAX: a longer timeout would make
#: every wait raise OverflowError, failing every candidate.
MAX_TIMEOUT_S = int(min(threading.TIMEOUT_MAX, (2**31 - 1) / 1000))

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
