"""Fact hooks: plain data every implementation adds to the hardware and software facts."""

from __future__ import annotations

from typing import Any

from kerneltune.core.plugin_system.hookspecs.markers import hookspec


@hookspec
def kerneltune_hardware_info() -> dict[str, Any] | None:
    """Describe the hardware picks depend on.

    The merged dict becomes part of the disk-cache key, so a pick made on one
    device is not reused on another. Return plain data (str, int, float,
    bool, None, lists, dicts) or ``None`` to add nothing; keys of later
    plugins override earlier ones, and all of them override the session's
    device's own ``facts()`` (see :func:`kerneltune_register_devices`),
    which come first.
    """


@hookspec
def kerneltune_software_versions() -> dict[str, str] | None:
    """Report versions of software that picks depend on.

    Stored in each record; with ``TRITON_DIST_AUTOTUNE_VERSION_CHECK=1`` a
    mismatch forces a retune, otherwise it is a warning.
    """
