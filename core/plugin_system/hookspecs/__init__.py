"""The hook contract between the kerneltune engine and its plugins, one module per purpose.

Every hook is prefixed ``kerneltune_``; a plugin implementing a hook not
specified here is refused, with its name, when the plugin manager is made.
Each hook's docstring is the authority; docs/plugins.md ("Hook reference") maps them.
"""

from kerneltune.core.plugin_system.hookspecs.configuration import kerneltune_add_settings
from kerneltune.core.plugin_system.hookspecs.facts import (
    kerneltune_hardware_info,
    kerneltune_software_versions,
)
from kerneltune.core.plugin_system.hookspecs.first_answers import (
    kerneltune_describe_value,
    kerneltune_failure_kind,
    kerneltune_key_distance,
    kerneltune_plain_value,
)
from kerneltune.core.plugin_system.hookspecs.markers import PROJECT, hookimpl, hookspec
from kerneltune.core.plugin_system.hookspecs.observers import (
    kerneltune_candidate_measured,
    kerneltune_compile_finished,
    kerneltune_compile_started,
    kerneltune_kernel_tuned,
    kerneltune_launch_measured,
    kerneltune_pick_loaded,
    kerneltune_tuning_finished,
    kerneltune_tuning_started,
)
from kerneltune.core.plugin_system.hookspecs.registries import (
    kerneltune_register_caches,
    kerneltune_register_devices,
    kerneltune_register_features,
    kerneltune_register_interceptors,
    kerneltune_register_profile_families,
    kerneltune_register_reducers,
    kerneltune_register_remote_stores,
    kerneltune_register_search_strategies,
    kerneltune_register_timers,
)

__all__ = [
    "PROJECT",
    "hookimpl",
    "hookspec",
    "kerneltune_add_settings",
    "kerneltune_candidate_measured",
    "kerneltune_compile_finished",
    "kerneltune_compile_started",
    "kerneltune_describe_value",
    "kerneltune_failure_kind",
    "kerneltune_hardware_info",
    "kerneltune_kernel_tuned",
    "kerneltune_key_distance",
    "kerneltune_launch_measured",
    "kerneltune_pick_loaded",
    "kerneltune_plain_value",
    "kerneltune_register_caches",
    "kerneltune_register_devices",
    "kerneltune_register_features",
    "kerneltune_register_interceptors",
    "kerneltune_register_profile_families",
    "kerneltune_register_reducers",
    "kerneltune_register_remote_stores",
    "kerneltune_register_search_strategies",
    "kerneltune_register_timers",
    "kerneltune_software_versions",
    "kerneltune_tuning_finished",
    "kerneltune_tuning_started",
]
