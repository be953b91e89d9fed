"""Optional features that plugins switch on when asked, such as ``search_params``.

The documented API stays a facade: ``import triton_dist.autotune_hooks`` only
calls :func:`enable_feature`, which finds the plugin that provides the
feature through ``kerneltune_register_features`` and tells it to enable it.
"""

from __future__ import annotations

from kerneltune.core.plugin_system.session import current_session


def enable_feature(name: str) -> None:
    """Enable the feature a plugin registered as ``name``; a second call changes nothing.

    :raises PluginError: when no plugin provides ``name`` (listing those
        that exist), or its provider cannot run here (e.g. Triton is not
        installed).
    """
    current_session().registries.features.select(name)().enable()
