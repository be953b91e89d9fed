"""Configuration hooks: the settings a plugin declares."""

from __future__ import annotations

from collections.abc import Callable

from kerneltune.core.plugin_system.hookspecs.markers import hookspec


@hookspec
def kerneltune_add_settings(add: Callable[..., None]) -> None:
    """Declare the settings this plugin reads, as pytest's ``pytest_addoption`` declares options.

    Call ``add(name, *, default, parse, help, env=(), display=None, negated_env=())`` once
    per setting (the fields of :class:`kerneltune.core.plugin_system.settings.SettingSpec`):

    * ``name``: the key users write in ``[tool.kerneltune]`` of
      pyproject.toml, in kerneltune.toml or in the file named by
      ``$KERNELTUNE_CONFIG`` (``-`` in a key reads as ``_``);
    * ``default``: the value where no source sets it;
    * ``parse(value, where)``: turns a TOML value, or a variable's text,
      into the value, and raises :class:`kerneltune.core.ConfigError` with
      ``where`` (the file and key, or the variable) in its message for one
      it refuses; ``integer``, ``boolean``, ``one_of``, ``seconds`` and ``text`` of
      :mod:`kerneltune.core.plugin_system.parsers` are ready-made;
    * ``help``: one line for ``kerneltune plugins``;
    * ``env``: variables that set it, each beginning ``KERNELTUNE_``; the
      first one set wins over every file;
    * ``display``: what listings show for a value (say, a URL with its
      password hidden); default ``str``-like JSON;
    * ``negated_env``: variables that set a boolean setting to the opposite
      of their value.

    Sources, later wins: ``default``, the files, the variables. A plugin reads the value
    with :meth:`kerneltune.core.Settings.get` on the settings it is handed or on
    :attr:`kerneltune.core.Session.settings` (docs/plugins.md, "Settings").

    :param add: a name that core or another plugin declares too, or a variable another setting
        reads, is a :class:`~kerneltune.core.PluginError` naming both.

    All implementations are called, when a session is made.
    """
