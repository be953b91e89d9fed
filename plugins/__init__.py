"""kerneltune's built-in plugins, written exactly as third-party ones are.

Each module registers through the hooks of :mod:`kerneltune.core.plugin_system.hookspecs`;
the engine lists them in ``kerneltune.core.plugin_system.manager.BUILTIN_PLUGINS``.
"""
