"""Settings: which plugins to use and how long to measure, from files and env.

Sources, later wins: built-in defaults; ``[tool.kerneltune]`` in
./pyproject.toml; ./kerneltune.toml (top-level keys, or a ``[kerneltune]``
table); the file named by ``$KERNELTUNE_CONFIG``; then the variables
the variables of :data:`ENV` and :data:`ENV_NEGATED`.
:func:`setting_sources` says which of them set each value.

Plugins declare settings of their own (:class:`SettingSpec`, through the
``kerneltune_add_settings`` hook). The files are read before the plugins are
known, so a key that is not a core setting is kept as given, with the
``KERNELTUNE_*`` variables outside the table, and :func:`resolve_declared`
checks them once the session knows what its plugins declared.
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from kerneltune.core.errors import ConfigError
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.parsers import (
    _name,
    _names,
    _path,
    boolean,
    integer,
    one_of,
    seconds,
)
from kerneltune.core.values.geometry import EFFORTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_CACHE_DIR = Path("~/.triton_dist/autotune")
#: The largest config file read. A pyproject.toml is kilobytes; a file linked to a device
#: or grown without bound is not a config file, and is refused before it fills memory.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: The longest timeout, in whole seconds, that this platform's waits take (about 24.8 days).
#: The isolation worker is waited for through poll(), whose timeout is a C int of
#: milliseconds, and lock waits stop at threading.TIMEOUT_MAX: a longer timeout would make
#: every wait raise OverflowError, failing every candidate.
MAX_TIMEOUT_S = int(min(threading.TIMEOUT_MAX, (2**31 - 1) / 1000))

#: The ``tune`` setting's values: tune a key that has no stored pick; run
#: the first candidate instead, measuring nothing; raise instead.
TUNE_AUTO = "auto"
TUNE_NEVER = "never"
TUNE_FAIL = "fail"
#: How hard a search strategy tries, cheapest first (the ``search_effort`` setting).
SEARCH_EFFORTS = EFFORTS


@attrs.frozen
class Settings:
    """Everything the engine reads from configuration, resolved and validated."""

    timer: str = "auto"
    cache: str = "auto"
    reducer: str = "auto"
    cache_dir: Path = DEFAULT_CACHE_DIR
    warmup: int = 5
    repeat: int = 10
    objective: str = "device"
    tie_rounds: int = 4
    compile_workers: int = 0
    compile_timeout: int = 600
    compile_pool: str = "processes"
    precompile: bool = True
    shard: bool = False
    block: tuple[str, ...] = ()
    always_tune: bool = False
    version_check: bool = False
    verify_pick: bool = False
    autoload: bool = True
    # Where each field was set, as (field, "file (key 'x')" or "environment variable X") pairs;
    # not part of equality, so sources that agree share one session.
    sources: tuple[tuple[str, str], ...] = attrs.field(default=(), eq=False, repr=False)
    progress: bool = True
    # Screen candidates in a worker process first ("subprocess"), and how long one may run there.
    isolate: str = "none"
    isolate_timeout: int = 60
    # Every tuner's verbose lines, as autotune_verbose=True, verbose=True or debug=True turn on for one.
    verbose: bool = False
    # What a key with no stored pick gets: a tuning, the first candidate unmeasured, or an error.
    tune: str = TUNE_AUTO
    # How generated spaces (search_params) are searched, unless a kernel's hint says otherwise:
    # the strategy's name or "auto", its effort, and its caps (0: none).
    search_strategy: str = "auto"
    search_effort: str = "default"
    search_budget_s: float = 0.0
    search_max_points: int = 0
    # A new key measures the best configs of the stored keys nearest to it ("nearest"), at most this many.
    warm_start: str = "off"
    warm_start_budget: int = 5
    # Re-check an uncertain stored pick (or one `kerneltune cache verify` marked) when a process loads it.
    recheck: bool = True
    # Keys of the files that are no core setting, as (field, raw value, file, key as written), in
    # reading order; and the KERNELTUNE_* variables outside ENV: what plugins may have declared.
    given: tuple[tuple[str, Any, str, str], ...] = attrs.field(default=(), repr=False)
    environment: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)
    # The plugins' settings, resolved from ``given`` and ``environment`` (:func:`resolve_declared`).
    declared: tuple[tuple[str, Any], ...] = attrs.field(default=(), repr=False)

    @property
    def cache_root(self) -> Path:
        """The cache directory with ``~`` expanded.

        :raises RuntimeError: when ``~`` cannot be expanded: no ``HOME`` and
            no passwd entry for this user.
        """
        return self.cache_dir.expanduser()

    def source(self, field: str) -> str | None:
        """The file and key, or the variable, that set ``field``; ``None`` for a default."""
        return dict(self.sources).get(field)

    def get(self, name: str) -> Any:
        """The value of the setting ``name`` that a plugin declared (``kerneltune_add_settings``).

        The session's settings hold every declared setting, from the files
        and variables, else its default.

        :raises ConfigError: when no plugin of the session declared ``name``.
        """
        for field, value in self.declared:
            if field == name:
                return value
        declared = ", ".join(field for field, _ in self.declared) or "none"
        raise ConfigError(f"no plugin declared the setting {name!r} (declared: {declared})")

    def with_given(self, **values: Any) -> Settings:
        """These settings with plugin-declared ``values`` given as a file's keys are, for programs and tests.

        They are checked, like every key, when a session resolves them.
        """
        added = tuple((name, value, "Settings.with_given", name) for name, value in values.items())
        return attrs.evolve(self, given=(*self.given, *added))


@attrs.frozen
class SettingSpec:
    """One setting a plugin declares through ``kerneltune_add_settings``.

    ``parse(value, where)`` turns what a file or variable holds into the
    value (a TOML value, or a variable's text), raising
    :class:`ConfigError` with ``where`` in the message: :func:`integer`,
    :func:`boolean`, :func:`one_of`, :func:`seconds` and :func:`text` are
    ready-made. ``env`` names the variables that set it, each beginning
    ``KERNELTUNE_``; the first one set wins over every file. ``display``
    turns a value into what listings show (a URL without its password).
    """

    name: str
    default: Any
    parse: Callable[[Any, str], Any]
    help: str
    env: tuple[str, ...] = ()
    display: Callable[[Any], str] | None = None


@attrs.frozen
class DeclaredSettings:
    """Every plugin's :class:`SettingSpec`, by setting name, and the plugin that declared each."""

    specs: dict[str, SettingSpec] = attrs.field(factory=dict)
    owners: dict[str, str] = attrs.field(factory=dict)


_FIELDS = {
    "timer": _name,
    "cache": _name,
    "reducer": _name,
    "cache_dir": _path,
    "warmup": integer(0),
    "repeat": integer(1),
    "objective": one_of("device", "wall"),
    "tie_rounds": integer(0),
    "compile_workers": integer(0),
    "compile_timeout": integer(0),
    "compile_pool": one_of("processes", "threads"),
    "precompile": boolean,
    "shard": boolean,
    "block": _names,
    "always_tune": boolean,
    "version_check": boolean,
    "verify_pick": boolean,
    "autoload": boolean,
    "progress": boolean,
    "isolate": one_of("none", "subprocess"),
    "isolate_timeout": integer(1, MAX_TIMEOUT_S, "seconds, the longest wait this platform takes"),
    "verbose": boolean,
    "tune": one_of(TUNE_AUTO, TUNE_NEVER, TUNE_FAIL),
    "search_strategy": _name,
    "search_effort": one_of(*SEARCH_EFFORTS),
    "search_budget_s": seconds,
    "search_max_points": integer(0),
    "warm_start": one_of("off", "nearest"),
    "warm_start_budget": integer(1),
    "recheck": boolean,
}

#: The variable naming one more config file, read after ./kerneltune.toml.
CONFIG_VARIABLE = "KERNELTUNE_CONFIG"

#: Environment variable -> the setting it sets; variables win over every file.
ENV = {
    "KERNELTUNE_TIMER": "timer",
    "KERNELTUNE_CACHE": "cache",
    "KERNELTUNE_REDUCER": "reducer",
    "KERNELTUNE_BLOCK_PLUGINS": "block",
    "KERNELTUNE_VERIFY_PICK": "verify_pick",
    "KERNELTUNE_OBJECTIVE": "objective",
    "KERNELTUNE_TIE_ROUNDS": "tie_rounds",
    "KERNELTUNE_COMPILE_WORKERS": "compile_workers",
    "KERNELTUNE_COMPILE_TIMEOUT": "compile_timeout",
    "KERNELTUNE_COMPILE_POOL": "compile_pool",
    "KERNELTUNE_PRECOMPILE": "precompile",
    "KERNELTUNE_SHARD": "shard",
    "TRITON_DIST_AUTOTUNE_CACHE_DIR": "cache_dir",
    "TRITON_DIST_AUTOTUNE_ALWAYS_TUNE": "always_tune",
    "TRITON_DIST_AUTOTUNE_VERSION_CHECK": "version_check",
    "KERNELTUNE_PROGRESS": "progress",
    "KERNELTUNE_ISOLATE": "isolate",
    "KERNELTUNE_ISOLATE_TIMEOUT": "isolate_timeout",
    "KERNELTUNE_VERBOSE": "verbose",
    "KERNELTUNE_TUNE": "tune",
    "KERNELTUNE_SEARCH_STRATEGY": "search_strategy",
    "KERNELTUNE_SEARCH_EFFORT": "search_effort",
    "KERNELTUNE_SEARCH_BUDGET_S": "search_budget_s",
    "KERNELTUNE_SEARCH_MAX_POINTS": "search_max_points",
    "KERNELTUNE_WARM_START": "warm_start",
    "KERNELTUNE_WARM_START_BUDGET": "warm_start_budget",
    "KERNELTUNE_RECHECK": "recheck",
    "KERNELTUNE_WARMUP": "warmup",
    "KERNELTUNE_REPEAT": "repeat",
}

#: What a plugin's variables begin with: :func:`load_settings` keeps those it does not know for the plugins.
PLUGIN_VARIABLE_PREFIX = "KERNELTUNE_"

#: Variables that switch a setting off when set to 1 (the setting is their negation).
ENV_NEGATED = {"KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD": "autoload"}


# Parsed files by path, with the (inode, mtime, size) they were parsed at. Settings are
# resolved on every contextual call and every function-level miss; parsing a
# project's pyproject.toml each time cost 1.7 ms, a stat costs microseconds.
_parsed: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def _read_toml(path: Path) -> dict[str, Any]:
    """The file's TOML, parsed again only when it changed; callers must not mutate it.

    :raises ConfigError: naming the file, for one that cannot be read, is not
        a regular file, is larger than :data:`MAX_CONFIG_BYTES`, is not UTF-8,
        is not valid TOML, or nests deeper than the parser can follow.
    """
    # The messages say all there is; the parser's own traceback would only bury them.
    try:
        status = path.stat()
        stamp = (status.st_ino, status.st_mtime_ns, status.st_size)
        known = _parsed.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
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
    _parsed[path] = (stamp, data)
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


def _apply(
    values: dict[str, Any],
    sources: dict[str, str],
    given: list[tuple[str, Any, str, str]],
    table: Mapping[str, Any],
    where: str,
    prefix: str,
) -> None:
    for key, raw in table.items():
        field = key.replace("-", "_")
        if field not in _FIELDS:
            # Perhaps a plugin's: resolve_declared decides once the plugins are known.
            given.append((field, _frozen(raw, f"{where}: key '{prefix}{key}'"), where, f"{prefix}{key}"))
            continue
        values[field] = _FIELDS[field](raw, f"{where}: key '{prefix}{key}'")
        sources[field] = f"{where} (key '{prefix}{key}')"


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
    """Resolve the core settings from every source, later sources winning.

    Keys and ``KERNELTUNE_*`` variables that no core setting has are kept
    for the plugins' settings (:func:`resolve_declared`, which a
    :class:`~kerneltune.core.Session` calls), and checked there.

    :param cwd: where to look for pyproject.toml and kerneltune.toml
        (default: the current directory).
    :param environ: the environment to read (default: ``os.environ``).
    :raises ConfigError: naming the file (or variable) and the key at fault.
    """
    cwd = Path.cwd() if cwd is None else cwd
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    given: list[tuple[str, Any, str, str]] = []

    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        table, prefix = _table(pyproject, "tool", "kerneltune")
        _apply(values, sources, given, table, str(pyproject), prefix)

    local = cwd / "kerneltune.toml"
    if local.is_file():
        _apply_file(values, sources, given, local)

    explicit = environ.get(CONFIG_VARIABLE)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            problem = "not a regular file" if path.exists() else "no such file"
            raise ConfigError(f"{CONFIG_VARIABLE}: {problem}: {path}")
        _apply_file(values, sources, given, path)

    for variable, field in ENV.items():
        raw = environ.get(variable)
        if raw is not None and raw != "":
            values[field] = _FIELDS[field](raw, f"environment variable {variable}")
            sources[field] = f"environment variable {variable}"
    for variable, field in ENV_NEGATED.items():
        raw = environ.get(variable)
        if raw is not None and raw != "":
            values[field] = not _FIELDS[field](raw, f"environment variable {variable}")
            sources[field] = f"environment variable {variable}"

    core = {CONFIG_VARIABLE, *ENV, *ENV_NEGATED}
    environment = sorted(
        (name, value)
        for name, value in environ.items()
        if name.startswith(PLUGIN_VARIABLE_PREFIX) and name not in core and value != ""
    )
    return Settings(
        **values,
        sources=tuple(sorted(sources.items())),
        given=tuple(given),
        environment=tuple(environment),
    )


def _apply_file(
    values: dict[str, Any], sources: dict[str, str], given: list[tuple[str, Any, str, str]], path: Path
) -> None:
    """A kerneltune.toml or ``$KERNELTUNE_CONFIG``: keys at its top, ``[kerneltune]``, ``[tool.kerneltune]``.

    The two tables are what a file copied from a pyproject.toml or written
    for kerneltune alone holds; any other table is a :class:`ConfigError`
    naming it, never a setting.
    """
    data = _read_toml(path)
    top = {key: value for key, value in data.items() if not isinstance(value, dict)}
    _apply(values, sources, given, top, str(path), "")
    for name, table in data.items():
        if not isinstance(table, dict):
            continue
        if name == "kerneltune":
            _apply(values, sources, given, table, str(path), "kerneltune.")
        elif name == "tool" and set(table) == {"kerneltune"} and isinstance(table["kerneltune"], dict):
            _apply(values, sources, given, table["kerneltune"], str(path), "tool.kerneltune.")
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
    values = {name: spec.default for name, spec in declared.specs.items()}
    sources = dict(settings.sources)
    for field, raw, where, key in settings.given:
        spec = declared.specs.get(field)
        if spec is None:
            known = ", ".join(sorted({*_FIELDS, *declared.specs}))
            raise ConfigError(f"{where}: unknown key '{key}' (known: {known})")
        values[field] = spec.parse(raw, f"{where}: key '{key}'")
        sources[field] = f"{where} (key '{key}')"
    environment = dict(settings.environment)
    for name, spec in declared.specs.items():
        for variable in spec.env:
            if variable in environment:
                values[name] = spec.parse(environment[variable], f"environment variable {variable}")
                sources[name] = f"environment variable {variable}"
                break
    _warn_unknown_variables(environment, declared)
    return attrs.evolve(
        settings, declared=tuple(sorted(values.items())), sources=tuple(sorted(sources.items()))
    )


def _warn_unknown_variables(environment: Mapping[str, str], declared: DeclaredSettings) -> None:
    """One warning per process for each ``KERNELTUNE_*`` variable no setting reads: most are misspelt."""
    known = {CONFIG_VARIABLE, *ENV, *ENV_NEGATED, *(v for spec in declared.specs.values() for v in spec.env)}
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
    return {field: given.get(field, "default") for field in _FIELDS}
