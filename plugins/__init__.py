"""kerneltune's built-in plugins, written exactly as third-party ones are.

Each module registers through the hooks of :mod:`kerneltune.core.hookspecs`;
the engine lists them in ``kerneltune.core.registry.BUILTIN_PLUGINS``.
"""
