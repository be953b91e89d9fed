"""Settings from ./pyproject.toml, ./kerneltune.toml, $KERNELTUNE_CONFIG and the environment."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import re
from pathlib import Path

import pytest
from kerneltune.core import ConfigError, PluginError, Session, Settings, hookimpl, load_settings
from kerneltune.core.plugin_system.parsers import integer
from tuning_doubles import record_files

from triton_dist.tune import autotune

# Their tuned functions return which config ran (its n, its cost), on purpose: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_defaults_without_files_or_variables(tmp_path):
    settings = load_settings(cwd=tmp_path, environ={})
    assert settings == Settings()
    assert (settings.get("timer"), settings.get("cache"), settings.get("reducer")) == ("auto", "auto", "auto")
    assert (settings.get("warmup"), settings.get("repeat")) == (5, 10)
    assert settings.cache_root == Path("~/.triton_dist/autotune").expanduser()
    assert not settings.get("always_tune") and not settings.get("version_check")


def test_pyproject_tool_table_is_read(tmp_path):
    _write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "x"\n\n[tool.ruff]\nline-length = 3\n\n'
        '[tool.kerneltune]\ntimer = "wallclock"\ncache = "msgpack"\nwarmup = 1\nrepeat = 2\n'
        'cache-dir = "/somewhere"\nblock = ["a", "b"]\n',
    )
    settings = load_settings(cwd=tmp_path, environ={})
    assert settings == Settings(
        timer="wallclock", cache="msgpack", warmup=1, repeat=2, cache_dir=Path("/somewhere"), block=("a", "b")
    )


def test_pyproject_without_our_table_changes_nothing(tmp_path):
    _write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n[tool.other]\ntimer = 3\n')
    assert load_settings(cwd=tmp_path, environ={}) == Settings()


def test_sources_layer_later_wins(tmp_path):
    _write(
        tmp_path / "pyproject.toml",
        '[tool.kerneltune]\ntimer = "from-pyproject"\ncache = "from-pyproject"\nreducer = "from-pyproject"\n'
        "warmup = 1\n",
    )
    _write(tmp_path / "kerneltune.toml", 'cache = "from-local"\nreducer = "from-local"\nrepeat = 2\n')
    explicit = _write(tmp_path / "elsewhere.toml", 'reducer = "from-explicit"\n')
    environ = {"KERNELTUNE_CONFIG": str(explicit)}

    settings = load_settings(cwd=tmp_path, environ=environ)
    assert (settings.get("timer"), settings.get("cache"), settings.get("reducer")) == (
        "from-pyproject",
        "from-local",
        "from-explicit",
    )
    assert (settings.get("warmup"), settings.get("repeat")) == (1, 2), (
        "keys a later file does not set are kept"
    )

    environ.update(
        KERNELTUNE_TIMER="env-timer", KERNELTUNE_CACHE="env-cache", KERNELTUNE_REDUCER="env-reducer"
    )
    settings = load_settings(cwd=tmp_path, environ=environ)
    assert (settings.get("timer"), settings.get("cache"), settings.get("reducer")) == (
        "env-timer",
        "env-cache",
        "env-reducer",
    )


def test_each_environment_override_alone(tmp_path):
    _write(tmp_path / "kerneltune.toml", 'timer = "t"\ncache = "c"\nreducer = "r"\n')
    for variable, field in [
        ("KERNELTUNE_TIMER", "timer"),
        ("KERNELTUNE_CACHE", "cache"),
        ("KERNELTUNE_REDUCER", "reducer"),
    ]:
        settings = load_settings(cwd=tmp_path, environ={variable: "from-env"})
        values = {"timer": "t", "cache": "c", "reducer": "r", field: "from-env"}
        assert (settings.get("timer"), settings.get("cache"), settings.get("reducer")) == (
            values["timer"],
            values["cache"],
            values["reducer"],
        )


def test_empty_variable_does_not_override(tmp_path):
    _write(tmp_path / "kerneltune.toml", 'timer = "wallclock"\n')
    assert load_settings(cwd=tmp_path, environ={"KERNELTUNE_TIMER": ""}).get("timer") == "wallclock"


def test_kerneltune_toml_may_use_a_kerneltune_table(tmp_path):
    _write(tmp_path / "kerneltune.toml", '[kerneltune]\ncache = "memory"\nrepeat = 4\n')
    settings = load_settings(cwd=tmp_path, environ={})
    assert (settings.get("cache"), settings.get("repeat")) == ("memory", 4)


def test_environment_variables_of_the_seed(tmp_path):
    environ = {
        "TRITON_DIST_AUTOTUNE_ALWAYS_TUNE": "1",
        "TRITON_DIST_AUTOTUNE_VERSION_CHECK": "1",
        "TRITON_DIST_AUTOTUNE_CACHE_DIR": str(tmp_path / "picks"),
    }
    settings = load_settings(cwd=tmp_path, environ=environ)
    assert settings.get("always_tune") and settings.get("version_check")
    assert settings.cache_root == tmp_path / "picks"
    environ.update(TRITON_DIST_AUTOTUNE_ALWAYS_TUNE="0", TRITON_DIST_AUTOTUNE_VERSION_CHECK="0")
    settings = load_settings(cwd=tmp_path, environ=environ)
    assert not settings.get("always_tune") and not settings.get("version_check")


def test_verbose_from_a_file_or_the_environment(tmp_path):
    assert not load_settings(cwd=tmp_path, environ={}).get("verbose")
    _write(tmp_path / "kerneltune.toml", "verbose = true\n")
    assert load_settings(cwd=tmp_path, environ={}).get("verbose")
    settings = load_settings(cwd=tmp_path, environ={"KERNELTUNE_VERBOSE": "0"})
    assert (
        not settings.get("verbose")
        and settings.source("verbose") == "environment variable KERNELTUNE_VERBOSE"
    )


def test_cache_dir_from_environment_beats_the_file(tmp_path):
    _write(tmp_path / "kerneltune.toml", 'cache_dir = "/from/file"\n')
    assert load_settings(cwd=tmp_path, environ={}).get("cache_dir") == Path("/from/file")
    settings = load_settings(cwd=tmp_path, environ={"TRITON_DIST_AUTOTUNE_CACHE_DIR": "/from/env"})
    assert settings.get("cache_dir") == Path("/from/env")


# -- errors name the file and the key ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("warmup = -1\n", "warmup"),
        ("repeat = 0\n", "repeat"),
        ('repeat = "ten"\n', "repeat"),
        ("warmup = true\n", "warmup"),
        ("timer = 3\n", "timer"),
        ('cache = "  "\n', "cache"),
        ("reducer = []\n", "reducer"),
        ("cache_dir = 5\n", "cache_dir"),
        ("block = [1]\n", "block"),
        ('always_tune = "sometimes"\n', "always_tune"),
        ('verbose = "very"\n', "verbose"),
    ],
)
@pytest.mark.parametrize("where", ["kerneltune.toml", "pyproject.toml", "explicit"])
def test_bad_value_names_file_and_key(tmp_path, text, key, where):
    if where == "pyproject.toml":
        path = _write(tmp_path / "pyproject.toml", "[tool.kerneltune]\n" + text)
    elif where == "kerneltune.toml":
        path = _write(tmp_path / "kerneltune.toml", text)
    else:
        path = _write(tmp_path / "mine.toml", text)

    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, environ={"KERNELTUNE_CONFIG": str(path)} if where == "explicit" else {})

    message = str(info.value)
    assert str(path) in message
    assert f"'{'tool.kerneltune.' if where == 'pyproject.toml' else ''}{key}'" in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("where", ["kerneltune.toml", "pyproject.toml", "explicit"])
def test_unknown_key_names_file_and_key_and_lists_core_and_plugin_keys(tmp_path, where):
    text = 'timr = "wallclock"\n'
    if where == "pyproject.toml":
        path = _write(tmp_path / "pyproject.toml", "[tool.kerneltune]\n" + text)
    else:
        path = _write(tmp_path / ("kerneltune.toml" if where == "kerneltune.toml" else "mine.toml"), text)
    # Plugins declare settings too, so an unknown key is found once the session knows its plugins.
    settings = load_settings(
        cwd=tmp_path, environ={"KERNELTUNE_CONFIG": str(path)} if where == "explicit" else {}
    )
    with pytest.raises(ConfigError) as info:
        Session.create(settings)
    message = str(info.value)
    assert str(path) in message
    assert f"unknown key '{'tool.kerneltune.' if where == 'pyproject.toml' else ''}timr'" in message
    assert re.search(r"\(known: .*redis_url.*repeat.*timer.*warmup", message), message


@pytest.mark.parametrize("name", ["kerneltune.toml", "pyproject.toml"])
def test_invalid_toml_names_the_file(tmp_path, name):
    path = _write(tmp_path / name, "timer = = wallclock\n")
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        load_settings(cwd=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_tool_kerneltune_must_be_a_table(tmp_path):
    path = _write(tmp_path / "pyproject.toml", '[tool]\nkerneltune = "json"\n')
    with pytest.raises(ConfigError, match=r"\[tool.kerneltune\] must be a table") as info:
        load_settings(cwd=tmp_path, environ={})
    assert str(path) in str(info.value)


def test_missing_explicit_config_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"KERNELTUNE_CONFIG: no such file: .*nowhere\.toml"):
        load_settings(cwd=tmp_path, environ={"KERNELTUNE_CONFIG": str(tmp_path / "nowhere.toml")})


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TRITON_DIST_AUTOTUNE_ALWAYS_TUNE", "maybe"),
        ("TRITON_DIST_AUTOTUNE_VERSION_CHECK", "2"),
        ("KERNELTUNE_TIMER", "   "),
        ("KERNELTUNE_VERBOSE", "loud"),
    ],
)
def test_bad_environment_value_names_the_variable(tmp_path, variable, value):
    with pytest.raises(ConfigError, match=f"environment variable {variable}"):
        load_settings(cwd=tmp_path, environ={variable: value})


# -- hostile files and variables: one ConfigError naming where ------------------------------

HOSTILE_FILES = {
    "not UTF-8": (b'cache = "caf\xe9"\n', "not UTF-8 text (at byte offset 12: invalid continuation byte)"),
    "5000 deep": (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "not valid TOML: arrays or tables nested"),
}


@pytest.mark.parametrize("hostile", HOSTILE_FILES)
@pytest.mark.parametrize("where", ["kerneltune.toml", "pyproject.toml", "explicit"])
def test_a_file_that_is_no_toml_text_is_a_config_error_naming_it(tmp_path, hostile, where):
    content, message = HOSTILE_FILES[hostile]
    path = tmp_path / ("mine.toml" if where == "explicit" else where)
    path.write_bytes(content)
    environ = {"KERNELTUNE_CONFIG": str(path)} if where == "explicit" else {}
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, environ=environ)
    assert str(info.value).startswith(f"{path}: {message}")
    assert "\n" not in str(info.value)


def test_a_hostile_file_surfaces_at_a_tuned_call_as_a_config_error(tmp_path):
    path = tmp_path / "kerneltune.toml"
    path.write_bytes(HOSTILE_FILES["not UTF-8"][0])
    work, calls = _tuned()
    with pytest.raises(ConfigError, match="not UTF-8 text") as info:
        work(1)
    assert str(path) in str(info.value) and calls == []


def test_a_config_file_over_the_size_cap_is_refused(tmp_path, monkeypatch):
    from kerneltune.core.plugin_system import settings as settings_module

    monkeypatch.setattr(settings_module, "MAX_CONFIG_BYTES", 16)
    path = _write(tmp_path / "kerneltune.toml", "# " + "x" * 16 + "\nrepeat = 2\n")
    with pytest.raises(ConfigError, match=f"{path}: cannot read config file: larger than 16 bytes"):
        load_settings(cwd=tmp_path, environ={})


@pytest.mark.parametrize("value", ["²", "٣", "1²", "9" * 5000, "0x10", "1_000"])
def test_a_count_from_a_variable_takes_ascii_digits_only(tmp_path, value):
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, environ={"KERNELTUNE_TIE_ROUNDS": value})
    message = str(info.value)
    assert message.startswith("environment variable KERNELTUNE_TIE_ROUNDS: expected an integer >= 0, got ")
    assert len(message) < 200


def test_a_count_from_a_variable_may_have_spaces_and_a_sign(tmp_path):
    assert load_settings(cwd=tmp_path, environ={"KERNELTUNE_TIE_ROUNDS": " 3 "}).get("tie_rounds") == 3
    with pytest.raises(ConfigError, match=r"got -1$"):
        load_settings(cwd=tmp_path, environ={"KERNELTUNE_TIE_ROUNDS": "-1"})


def test_a_timeout_past_what_the_platform_waits_is_refused_where_it_is_set(tmp_path):
    from kerneltune.core.plugin_system.parsers import MAX_TIMEOUT_S

    path = _write(tmp_path / "kerneltune.toml", "isolate_timeout = 10_000_000\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, environ={})
    assert str(info.value) == (
        f"{path}: key 'isolate_timeout': expected an integer from 1 to {MAX_TIMEOUT_S} "
        "(seconds, the longest wait this platform takes), got 10000000"
    )
    path.unlink()
    with pytest.raises(ConfigError, match=r"environment variable KERNELTUNE_ISOLATE_TIMEOUT: .* to "):
        load_settings(cwd=tmp_path, environ={"KERNELTUNE_ISOLATE_TIMEOUT": str(MAX_TIMEOUT_S + 1)})

    # The longest accepted is a wait the isolation worker's pipe takes.
    environ = {"KERNELTUNE_ISOLATE_TIMEOUT": str(MAX_TIMEOUT_S)}
    assert load_settings(cwd=tmp_path, environ=environ).get("isolate_timeout") == MAX_TIMEOUT_S
    reader, writer = multiprocessing.Pipe(duplex=False)
    writer.send(None)
    assert multiprocessing.connection.wait([reader], MAX_TIMEOUT_S) == [reader]
    reader.close()
    writer.close()


def test_compile_deadline_and_timeout_have_a_largest_value(tmp_path):
    from kerneltune.core.compiling.options import MAX_DEADLINE
    from kerneltune.core.plugin_system.parsers import MAX_TIMEOUT_S

    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, environ={"KERNELTUNE_COMPILE_DEADLINE": "9" * 400})
    assert str(info.value).startswith(
        f"environment variable KERNELTUNE_COMPILE_DEADLINE: expected an integer from 0 to {MAX_DEADLINE} "
        "(times the median compile of its siblings), got "
    )
    with pytest.raises(
        ConfigError, match=f"KERNELTUNE_COMPILE_TIMEOUT: expected an integer from 0 to {MAX_TIMEOUT_S}"
    ):
        load_settings(cwd=tmp_path, environ={"KERNELTUNE_COMPILE_TIMEOUT": str(MAX_TIMEOUT_S + 1)})
    settings = load_settings(cwd=tmp_path, environ={"KERNELTUNE_COMPILE_DEADLINE": str(MAX_DEADLINE)})
    assert settings.get("compile_deadline") == MAX_DEADLINE


# -- the files reach a real tuning ---------------------------------------------------------


def _tuned():
    calls = []

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def configured(x, n):
        calls.append(n)
        return x * n

    return configured, calls


def test_config_files_steer_a_real_tuning(monkeypatch, tmp_path, isolated):
    _write(tmp_path / "pyproject.toml", '[tool.kerneltune]\ncache = "msgpack"\nwarmup = 1\nrepeat = 1\n')
    work, calls = _tuned()
    work(1)
    assert len(calls) == 2 * 2 + 1
    assert record_files(isolated, "configured", "msgpack") and not record_files(
        isolated, "configured", "json"
    )

    _write(tmp_path / "kerneltune.toml", "repeat = 2\n")
    monkeypatch.setenv("KERNELTUNE_CACHE", "json")
    work, calls = _tuned()
    work(2)
    assert len(calls) == 2 * 3 + 1
    assert record_files(isolated, "configured", "json")


def test_cache_dir_from_the_config_file(monkeypatch, tmp_path):
    monkeypatch.delenv("TRITON_DIST_AUTOTUNE_CACHE_DIR")
    _write(tmp_path / "kerneltune.toml", f'cache_dir = "{tmp_path / "from-file"}"\n')
    work, _ = _tuned()
    work(1)
    assert record_files(tmp_path / "from-file", "configured")


def test_a_bad_file_surfaces_at_the_first_tuned_call(tmp_path):
    path = _write(tmp_path / "kerneltune.toml", "warmup = -3\n")
    work, calls = _tuned()
    with pytest.raises(ConfigError, match="'warmup'") as info:
        work(1)
    assert str(path) in str(info.value)
    assert calls == []
    assert work(1, autotune=False) == 1, "autotune=False reads no configuration"


def test_unchanged_sources_are_read_once_and_an_edited_file_or_a_variable_again(tmp_path, monkeypatch):
    from kerneltune.core.plugin_system import settings as settings_module

    parses = []
    real_loads = settings_module.tomllib.loads
    monkeypatch.setattr(settings_module.tomllib, "loads", lambda text: parses.append(1) or real_loads(text))
    path = _write(tmp_path / "kerneltune.toml", "repeat = 2\n")

    first = load_settings(cwd=tmp_path, environ={})
    assert first.get("repeat") == 2
    assert load_settings(cwd=tmp_path, environ={}) is first
    assert len(parses) == 1

    assert load_settings(cwd=tmp_path, environ={"KERNELTUNE_REPEAT": "5"}).get("repeat") == 5
    assert load_settings(cwd=tmp_path, environ={}) == first
    path.write_text("repeat = 30\n")
    assert load_settings(cwd=tmp_path, environ={}).get("repeat") == 30
    assert len(parses) == 4


# -- settings that plugins declare ---------------------------------------------------------


class Declaring:
    """A plugin declaring ``rounds`` (an integer >= 1, default 3, or KERNELTUNE_ROUNDS)."""

    def __init__(self, name: str = "rounds", env: tuple[str, ...] = ("KERNELTUNE_ROUNDS",)) -> None:
        self.name, self.env = name, env

    @hookimpl
    def kerneltune_add_settings(self, add):
        add(self.name, default=3, parse=integer(1), help="how many rounds", env=self.env)


def test_a_plugin_reads_its_setting_from_the_files_then_its_variable(tmp_path):
    plugin = Declaring()
    assert Session.create(load_settings(tmp_path, {}), extra=(plugin,)).settings.get("rounds") == 3
    path = _write(tmp_path / "kerneltune.toml", "rounds = 5\n")
    session = Session.create(load_settings(tmp_path, {}), extra=(plugin,))
    assert session.settings.get("rounds") == 5
    assert session.settings.source("rounds") == f"{path} (key 'rounds')"
    session = Session.create(load_settings(tmp_path, {"KERNELTUNE_ROUNDS": "7"}), extra=(plugin,))
    assert (session.settings.get("rounds"), session.settings.source("rounds")) == (
        7,
        "environment variable KERNELTUNE_ROUNDS",
    )
    assert Session.create(Settings().with_given(rounds=2), extra=(plugin,)).settings.get("rounds") == 2


def test_a_plugins_bad_value_names_the_file_and_key_or_the_variable(tmp_path):
    path = _write(tmp_path / "pyproject.toml", "[tool.kerneltune]\nrounds = 0\n")
    with pytest.raises(
        ConfigError, match=rf"{re.escape(str(path))}: key 'tool.kerneltune.rounds': expected an"
    ):
        Session.create(load_settings(tmp_path, {}), extra=(Declaring(),))
    path.unlink()
    with pytest.raises(ConfigError, match="environment variable KERNELTUNE_ROUNDS: expected an integer"):
        Session.create(load_settings(tmp_path, {"KERNELTUNE_ROUNDS": "many"}), extra=(Declaring(),))


def test_a_setting_declared_twice_or_over_a_core_one_is_an_error_naming_the_plugins():
    with pytest.raises(
        PluginError, match=r"setting 'rounds' is declared by two plugins: .*Declaring and .*#2"
    ):
        Session.create(Settings(), extra=(Declaring(), Declaring(env=())))
    with pytest.raises(PluginError, match="declares the setting 'warmup', which is a core setting"):
        Session.create(Settings(), extra=(Declaring("warmup", env=()),))
    with pytest.raises(PluginError, match="variable KERNELTUNE_TIMER already sets core setting 'timer'"):
        Session.create(Settings(), extra=(Declaring(env=("KERNELTUNE_TIMER",)),))
    with pytest.raises(PluginError, match="variable 'ROUNDS' must begin with KERNELTUNE_"):
        Session.create(Settings(), extra=(Declaring(env=("ROUNDS",)),))


def test_reading_a_setting_no_plugin_declared_is_an_error():
    with pytest.raises(ConfigError, match=r"no plugin declared the setting 'rounds' \(declared: redis_ttl"):
        Session.create(Settings()).settings.get("rounds")


# -- the switches: misspelt variables, tables, one case rule ---------------------------------------


def test_a_misspelt_variable_warns_once_with_the_name_it_was_meant_to_be(tmp_path):
    environ = {"KERNELTUNE_TUNNE": "fail", "KERNELTUNE_VERBSE": "1", "KERNELTUNE_ROUNDS": "4"}
    with pytest.warns(RuntimeWarning) as caught:
        Session.create(load_settings(tmp_path, environ), extra=(Declaring(),))
        Session.create(load_settings(tmp_path, environ), extra=(Declaring(),))
    messages = sorted(str(w.message) for w in caught if "sets nothing" in str(w.message))
    assert messages == [
        "kerneltune: environment variable KERNELTUNE_TUNNE sets nothing: no setting of kerneltune or of "
        "its plugins reads it; did you mean KERNELTUNE_TUNE?",
        "kerneltune: environment variable KERNELTUNE_VERBSE sets nothing: no setting of kerneltune or of "
        "its plugins reads it; did you mean KERNELTUNE_VERBOSE?",
    ], "once each, and not for the plugin's own variable"


def test_a_misspelt_triton_dist_variable_warns_too(tmp_path):
    environ = {"TRITON_DIST_AUTOTUNE_ALWAYS_TUEN": "1"}
    with pytest.warns(RuntimeWarning) as caught:
        Session.create(load_settings(tmp_path, environ))
    assert [str(w.message) for w in caught if "sets nothing" in str(w.message)] == [
        "kerneltune: environment variable TRITON_DIST_AUTOTUNE_ALWAYS_TUEN sets nothing: no setting of "
        "kerneltune or of its plugins reads it; did you mean TRITON_DIST_AUTOTUNE_ALWAYS_TUNE?"
    ]


def test_warmup_and_repeat_have_variables_too(tmp_path):
    settings = load_settings(tmp_path, {"KERNELTUNE_WARMUP": "2", "KERNELTUNE_REPEAT": "7"})
    assert (settings.get("warmup"), settings.get("repeat")) == (2, 7)
    assert settings.source("repeat") == "environment variable KERNELTUNE_REPEAT"
    with pytest.raises(ConfigError, match="environment variable KERNELTUNE_REPEAT: expected an integer >= 1"):
        load_settings(tmp_path, {"KERNELTUNE_REPEAT": "0"})


@pytest.mark.parametrize(
    "text",
    [
        '[tool.kerneltune]\nrepeat = 3\ntimer = "wallclock"\n',
        '[kerneltune]\nrepeat = 3\ntimer = "wallclock"\n',
        'timer = "wallclock"\n[kerneltune]\nrepeat = 3\n',
    ],
    ids=["tool table", "own table", "keys and table"],
)
def test_kerneltune_toml_may_hold_the_pyproject_table_or_its_own(tmp_path, text):
    _write(tmp_path / "kerneltune.toml", text)
    settings = load_settings(tmp_path, {})
    assert (settings.get("repeat"), settings.get("timer")) == (3, "wallclock")
    Session.create(settings)  # hashable: no table reaches the settings


@pytest.mark.parametrize(
    ("text", "table"),
    [
        ("[kerneltune]\nrepeat = 3\n[other]\nx = 1\n", "[other]"),
        ("[tool.kerneltune]\nrepeat = 3\n[tool.ruff]\nline-length = 3\n", "[tool.ruff]"),
        ("[settings]\nrepeat = 3\n", "[settings]"),
    ],
)
def test_any_other_table_in_kerneltune_toml_is_a_config_error_naming_it(tmp_path, text, table):
    path = _write(tmp_path / "kerneltune.toml", text)
    with pytest.raises(
        ConfigError, match=rf"^{re.escape(str(path))}: table {re.escape(table)} is no kerneltune"
    ):
        load_settings(tmp_path, {})


def test_a_plugin_setting_given_an_array_or_a_table(tmp_path):
    _write(tmp_path / "kerneltune.toml", "rounds = [1, 2]\n")
    with pytest.raises(ConfigError, match="key 'rounds': expected an integer >= 1, got \\(1, 2\\)"):
        Session.create(load_settings(tmp_path, {}), extra=(Declaring(),))
    _write(tmp_path / "kerneltune.toml", "[kerneltune.rounds]\nx = 1\n")
    with pytest.raises(ConfigError, match=r"key 'kerneltune\.rounds': holds a table"):
        load_settings(tmp_path, {})


def test_enumerated_names_are_compared_without_case(tmp_path, monkeypatch):
    settings = load_settings(
        tmp_path, {"KERNELTUNE_SEARCH_STRATEGY": "EXHAUSTIVE", "KERNELTUNE_TIMER": "WallClock"}
    )
    session = Session.create(settings)
    assert session.registries.search_strategies.select(settings.get("search_strategy")).name == "exhaustive"
    assert session.make_timer().name == "wallclock"
    assert load_settings(tmp_path, {"KERNELTUNE_WARM_START": "Nearest"}).get("warm_start") == "nearest"

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x, warm_start="Nearest")
    def work(x, n):
        return x * n

    assert work.warm_start == "nearest"
    assert session.registries.timers.select("AUTO") is session.registries.timers.select("auto")


def test_two_plugins_registering_names_that_differ_only_in_case_clash():
    class Upper:
        name = "WallClock"

        @classmethod
        def is_available(cls):
            return True

    class Registering:
        @hookimpl
        def kerneltune_register_timers(self, register):
            register(Upper)

    with pytest.raises(
        PluginError, match=r"timer 'WallClock' is registered by two plugins: .* \(as 'wallclock'\)"
    ):
        Session.create(Settings(), extra=(Registering(),))
