"""The markers: ``hookspec`` for the engine's specifications, ``hookimpl`` for plugins."""

import pluggy

PROJECT = "kerneltune"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
