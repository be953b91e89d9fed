"""Settings: which plugins to use and how long to measure, from files and env.

Sources, later wins: built-in defaults; ``[tool.kerneltune]`` in
./pyproject.toml; ./kerneltune.toml (top-level keys, or a ``[kerneltune]``
table); the file named by ``$KERNELTUNE_CONFIG``; then the variables each
setting names. :func:`setting_sources` says which of them set each value.

Every setting is declared once, as a :class:`SettingSpec`: core's as
constants of the ``options`` module beside the code that reads them
(:data:`CORE_SETTING_MODULES`), the plugins' through the
``kerneltune_add_settings`` hook. A spec is also the typed key its reader
passes: ``settings[WARMUP]`` is an ``int`` to mypy. The files are read
before the plugins are known, so a key that is no core setting is kept as
given, with the ``KERNELTUNE_*`` variables no core setting reads, and
:func:`resolve_declared` checks them once the session knows what its
plugins declared.
"""

from __future__ import annotations

import difflib
import errno
import functools
import importlib
import os
import stat
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import attrs
from kerneltune.core.errors import ConfigError
from kerneltune.core.notices import warn_once
from kerneltune.core.values.geometry import EFFORTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: The largest config file read. A pyproject.toml is kilobytes; a file linked to a device
#: or grown without bound is not a config file, and is refused before it fills memory.
MAX_CONFIG_BYTES = 4 * 1024 * 1024

#: How hard a search strategy tries, cheapest first (the ``search_effort`` setting).
SEARCH_EFFORTS = EFFORTS

#: The modules that declare core's settings, each next to the code that reads them; loaded by
#: name, as pytest loads its default plugins, since they sit on the floors above this one.
CORE_SETTING_MODULES: tuple[str, ...] = (
    "kerneltune.core.plugin_system.options",
    "kerneltune.core.machine.options",
    "kerneltune.core.compiling.options",
    "kerneltune.core.isolation.options",
    "kerneltune.core.search.options",
    "kerneltune.core.drivers.options",
)

T = TypeVar("T")


def _names(variables: Iterable[str]) -> tuple[str, ...]:
    return tuple(variables)


@attrs.frozen
class SettingSpec(Generic[T]):
    """One setting: core's modules declare theirs as constants, plugins through ``kerneltune_add_settings``.

    The fields are that hook's ``add`` arguments, described there; core's own ``env`` keeps
    Triton-distributed's ``TRITON_DIST_AUTOTUNE_*`` names too.
    """

    name: str
    default: T
    parse: Callable[[Any, str], T]
    help: str
    env: tuple[str, ...] = attrs.field(default=(), converter=_names)
    display: Callable[[Any], str] | None = None
    negated_env: tuple[str, ...] = attrs.field(default=(), converter=_names)

    _variables: dict[str, bool] = attrs.field(init=False, eq=False, repr=False)

    @_variables.default
    def _every_variable(self) -> dict[str, bool]:
        return {**dict.fromkeys(self.env, False), **dict.fromkeys(self.negated_env, True)}

    def variables(self) -> dict[str, bool]:
        """Each variable that sets this setting, and whether it sets the opposite of its value (read only:
        made once, settings are resolved at every tuning)."""
        return self._variables


@functools.cache
def core_settings() -> Mapping[str, SettingSpec[Any]]:
    """Core's settings by name: the :class:`SettingSpec` constants of :data:`CORE_SETTING_MODULES`.

    :raises RuntimeError: for a setting two core modules declare: a defect of kerneltune.
    """
    found: dict[str, SettingSpec[Any]] = {}
    for module in CORE_SETTING_MODULES:
        for spec in vars(importlib.import_module(module)).values():
            if isinstance(spec, SettingSpec) and found.setdefault(spec.name, spec) is not spec:
                raise RuntimeError(f"core setting {spec.name!r} is declared twice")
    return MappingProxyType(found)


@attrs.frozen(init=False)
class Settings:
    """Every setting's value, resolved and validated, and where each came from.

    Read core's settings with their spec, typed: ``settings[WARMUP]``; a
    plugin's (or any, by name) with :meth:`get`. ``Settings(repeat=3)`` and
    ``attrs.evolve(settings, timer="wallclock")`` set core's settings by
    name, every other one keeping its default (or its value).
    """

    # Core's settings, as sorted (name, value) pairs.
    values: tuple[tuple[str, Any], ...]
    # Where each setting was set, as (name, "file (key 'x')" or "environment variable X") pairs;
    # not part of equality, so sources that agree share one session.
    sources: tuple[tuple[str, str], ...] = attrs.field(eq=False, repr=False)
    # Keys of the files that are no core setting, as (field, raw value, file, key as written), in
    # reading order; and the KERNELTUNE_* variables no core setting reads: what plugins may have declared.
    given: tuple[tuple[str, Any, str, str], ...] = attrs.field(repr=False)
    environment: tuple[tuple[str, str], ...] = attrs.field(repr=False)
    # The plugins' settings, resolved from ``given`` and ``environment`` (:func:`resolve_declared`).
    declared: tuple[tuple[str, Any], ...] = attrs.field(repr=False)
    _by_name: dict[str, Any] = attrs.field(init=False, eq=False, repr=False)

    def __init__(
        self,
        values: tuple[tuple[str, Any], ...] = (),
        sources: tuple[tuple[str, str], ...] = (),
        given: tuple[tuple[str, Any, str, str], ...] = (),
        environment: tuple[tuple[str, str], ...] = (),
        declared: tuple[tuple[str, Any], ...] = (),
        **core: Any,
    ) -> None:
        """:raises TypeError: for a keyword that is no core setting, as a class's constructor does."""
        specs = core_settings()
        for name in core:
            if name not in specs:
                raise TypeError(f"Settings() got an unexpected keyword argument {name!r}")
        by_name = {name: spec.default for name, spec in specs.items()} | dict(values) | core
        self.__attrs_init__(tuple(sorted(by_name.items())), sources, given, environment, declared)
        object.__setattr__(self, "_by_name", {**by_name, **dict(declared)})

    def __getitem__(self, setting: SettingSpec[T]) -> T:
        """The value of ``setting``, core's or a plugin's, typed as its spec is."""
        return self._by_name[setting.name]

    @property
    def cache_root(self) -> Path:
        """The cache directory with ``~`` expanded.

        :raises RuntimeError: when ``~`` cannot be expanded: no ``HOME`` and
            no passwd entry for this user.
        """
        return self._by_name["cache_dir"].expanduser()

    def source(self, field: str) -> str | None:
        """The file and key, or the variable, that set ``field``; ``None`` for a default."""
        return dict(self.sources).get(field)

    def get(self, name: str) -> Any:
        """The value of the setting ``name``: core's, or one a plugin declared (``kerneltune_add_settings``).

        The session's settings hold every declared setting, from the files
        and variables, else its default.

        :raises ConfigError: when neither core nor a plugin of the session declared ``name``.
        """
        if name in self._by_name:
            return self._by_name[name]
        declared = ", ".join(field for field, _ in self.declared) or "none"
        raise ConfigError(f"no plugin declared the setting {name!r} (declared: {declared})")

    def with_given(self, **values: Any) -> Settings:
        """These settings with plugin-declared ``values`` given as a file's keys are, for programs and tests.

        They are checked, like every key, when a session resolves them.
        """
        added = tuple((name, value, "Settings.with_given", name) for name, value in values.items())
        return attrs.evolve(self, given=(*self.given, *added))


@attrs.frozen
class DeclaredSettings:
    """Every plugin's :class:`SettingSpec`, by setting name, and the plugin that declared each."""

    specs: dict[str, SettingSpec[Any]] = attrs.field(factory=dict)
    owners: dict[str, str] = attrs.field(factory=dict)


#: The variable naming one more config file, read after ./kerneltune.toml.
CONFIG_VARIABLE = "KERNELTUNE_CONFIG"

#: What a plugin's variables begin with: :func:`load_settings` keeps those it does not know for the plugins.
PLUGIN_VARIABLE_PREFIX = "KERNELTUNE_"
#: Variables that no setting reading them is a mistake worth a warning: kerneltune's own, and the
#: Triton-distributed names the seed documents give some settings.
WATCHED_PREFIXES = (PLUGIN_VARIABLE_PREFIX, "TRITON_DIST_AUTOTUNE_")

# The settings read last and what they were read from: the folder, the watched variables and each
# file's (inode, mtime, size). Settings are read again at every tuning and every key served
# unmeasured; reading them from unchanged sources costs the variables' scan and three stats.
_last_read: tuple[Hashable, Settings] | None = None


def _stamp(path: str) -> tuple[int, int, int] | None:
    """What :func:`load_settings` compares to know a file unchanged: its inode, mtime and size."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns, status.st_size


def _read_toml(path: Path) -> dict[str, Any]:
    """The file's TOML.

    :raises ConfigError: naming the file, for one that cannot be read, is not
        a regular file, is larger than :data:`MAX_CONFIG_BYTES`, is not UTF-8,
        is not valid TOML, or nests deeper than the parser can follow.
    """
    # The messages say all there is; the parser's own traceback would only bury them.
    try:
        payload = _read_bytes(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (at byte offset {exc.start}: {exc.reason})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        # tomllib recurses once per nested array or inline table.
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None
    return data


def _read_bytes(path: Path) -> bytes:
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        payload = handle.read(MAX_CONFIG_BYTES + 1)
    if len(payload) > MAX_CONFIG_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_CONFIG_BYTES} bytes")
    return payload


def _table(path: Path, *names: str) -> tuple[dict[str, Any], str]:
    data: Any = _read_toml(path)
    prefix = ""
    for name in names:
        data = data.get(name, {}) if isinstance(data, dict) else {}
        prefix = f"{prefix}{name}."
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: [{prefix.rstrip('.')}] must be a table")
    return data, prefix


@attrs.define
class _Reading:
    """What the sources read so far set: core's values and where each came from, the other keys."""

    core: Mapping[str, SettingSpec[Any]]
    values: dict[str, Any] = attrs.field(factory=dict)
    sources: dict[str, str] = attrs.field(factory=dict)
    given: list[tuple[str, Any, str, str]] = attrs.field(factory=list)

    def apply(self, table: Mapping[str, Any], where: str, prefix: str) -> None:
        for key, raw in table.items():
            field = key.replace("-", "_")
            spec = self.core.get(field)
            if spec is None:
                # Perhaps a plugin's: resolve_declared decides once the plugins are known.
                self.given.append(
                    (field, _frozen(raw, f"{where}: key '{prefix}{key}'"), where, f"{prefix}{key}")
                )
                continue
            self.values[field] = spec.parse(raw, f"{where}: key '{prefix}{key}'")
            self.sources[field] = f"{where} (key '{prefix}{key}')"

    def apply_environment(self, environ: Mapping[str, str]) -> None:
        """Set each setting from the first of its variables set in ``environ`` (an empty one sets nothing)."""
        for field, spec in self.core.items():
            for variable, negated in spec.variables().items():
                raw = environ.get(variable)
                if raw:
                    value = spec.parse(raw, f"environment variable {variable}")
                    self.values[field] = not value if negated else value
                    self.sources[field] = f"environment variable {variable}"
                    break


def _frozen(value: Any, where: str) -> Any:
    """A file's value kept for a plugin's setting, as a value Settings can hold: arrays become tuples.

    :raises ConfigError: for a table, which no setting takes.
    """
    if isinstance(value, dict):
        raise ConfigError(
            f"{where}: holds a table; a setting is a value (a string, number, boolean or array)"
        )
    if isinstance(value, list):
        return tuple(_frozen(item, where) for item in value)
    return value


def load_settings(cwd: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Resolve core's settings from every source (the module's docstring lists them), later winning.

    Keys and ``KERNELTUNE_*`` variables that no core setting has are kept
    for the plugins' settings, and checked once the plugins are loaded
    (:func:`resolve_declared`).

    :param cwd: where to look for pyproject.toml and kerneltune.toml
        (default: the current directory).
    :param environ: the environment to read (default: ``os.environ``).
    :raises ConfigError: naming the file (or variable) and the key at fault.
    """
    global _last_read
    folder = os.getcwd() if cwd is None else os.fspath(cwd)
    environ = os.environ if environ is None else environ
    # One pass over the environment: a lookup per variable missed and raised inside os.environ.
    watched = {name: environ[name] for name in environ if name.startswith(WATCHED_PREFIXES)}
    explicit = watched.get(CONFIG_VARIABLE)
    # Plain strings until the files are read: pathlib's joins cost more than the stats.
    files = [os.path.join(folder, "pyproject.toml"), os.path.join(folder, "kerneltune.toml")]
    if explicit:
        files.append(explicit)
    sources = (folder, tuple(watched.items()), tuple(map(_stamp, files)))
    last = _last_read
    if last is not None and last[0] == sources:
        return last[1]
    cwd = Path(folder)
    pyproject, local = cwd / "pyproject.toml", cwd / "kerneltune.toml"
    core = core_settings()
    reading = _Reading(core)

    if pyproject.is_file():
        table, prefix = _table(pyproject, "tool", "kerneltune")
        reading.apply(table, str(pyproject), prefix)

    if local.is_file():
        _apply_file(reading, local)

    if explicit:
        path = Path(explicit)
        if not path.is_file():
            problem = "not a regular file" if path.exists() else "no such file"
            raise ConfigError(f"{CONFIG_VARIABLE}: {problem}: {path}")
        _apply_file(reading, path)

    reading.apply_environment(watched)
    known = core_variables()
    environment = sorted(
        (name, value) for name, value in watched.items() if name not in known and value != ""
    )
    settings = Settings(
        **reading.values,
        sources=tuple(sorted(reading.sources.items())),
        given=tuple(reading.given),
        environment=tuple(environment),
    )
    _last_read = (sources, settings)
    return settings


@functools.cache
def core_variables() -> Mapping[str, str]:
    """Every variable core reads, and what it sets: a setting's name, or the config file."""
    found = {CONFIG_VARIABLE: "the config file read last"}
    for name, spec in core_settings().items():
        found.update(dict.fromkeys(spec.variables(), name))
    return MappingProxyType(found)


def _apply_file(reading: _Reading, path: Path) -> None:
    """A kerneltune.toml or ``$KERNELTUNE_CONFIG``: keys at its top, ``[kerneltune]``, ``[tool.kerneltune]``.

    The two tables are what a file copied from a pyproject.toml or written
    for kerneltune alone holds; any other table is a :class:`ConfigError`
    naming it, never a setting.
    """
    data = _read_toml(path)
    top = {key: value for key, value in data.items() if not isinstance(value, dict)}
    reading.apply(top, str(path), "")
    for name, table in data.items():
        if not isinstance(table, dict):
            continue
        if name == "kerneltune":
            reading.apply(table, str(path), "kerneltune.")
        elif name == "tool" and set(table) == {"kerneltune"} and isinstance(table["kerneltune"], dict):
            reading.apply(table["kerneltune"], str(path), "tool.kerneltune.")
        else:
            other = next((f"tool.{key}" for key in table if key != "kerneltune"), "tool")
            raise ConfigError(
                f"{path}: table [{other if name == 'tool' else name}] is no kerneltune table; settings go "
                "at the top of the file, under [kerneltune] or under [tool.kerneltune]"
            )


def resolve_declared(settings: Settings, declared: DeclaredSettings) -> Settings:
    """``settings`` with every declared setting's value: its default, then the files', then its variable's.

    :raises ConfigError: for a key of the files that neither core nor any
        plugin declared (listing both), or a value a plugin's parser refuses,
        naming the file and key or the variable.
    """
    core = core_settings()
    values = {name: spec.default for name, spec in declared.specs.items()}
    reading = _Reading(declared.specs, values=values, sources=dict(settings.sources))
    for field, raw, where, key in settings.given:
        spec = declared.specs.get(field)
        if spec is None:
            known = ", ".join(sorted({*core, *declared.specs}))
            raise ConfigError(f"{where}: unknown key '{key}' (known: {known})")
        values[field] = spec.parse(raw, f"{where}: key '{key}'")
        reading.sources[field] = f"{where} (key '{key}')"
    environment = dict(settings.environment)
    reading.apply_environment(environment)
    _warn_unknown_variables(environment, declared)
    return attrs.evolve(
        settings, declared=tuple(sorted(values.items())), sources=tuple(sorted(reading.sources.items()))
    )


def _warn_unknown_variables(environment: Mapping[str, str], declared: DeclaredSettings) -> None:
    """One warning per process for each ``KERNELTUNE_*`` or ``TRITON_DIST_AUTOTUNE_*`` variable no setting
    reads: most are misspelt."""
    known = {*core_variables(), *(v for spec in declared.specs.values() for v in spec.variables())}
    for variable in sorted(set(environment) - known):
        close = difflib.get_close_matches(variable, sorted(known), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        warn_once(
            ("unknown variable", variable),
            f"kerneltune: environment variable {variable} sets nothing: no setting of kerneltune or of "
            f"its plugins reads it{hint}",
        )


def setting_sources(settings: Settings) -> dict[str, str]:
    """Where each core setting's value in force comes from, by field name.

    ``"default"``, or what :func:`load_settings` noted: a file and the key
    read there, or ``"environment variable NAME"``.
    """
    given = dict(settings.sources)
    return {field: given.get(field, "default") for field in core_settings()}
