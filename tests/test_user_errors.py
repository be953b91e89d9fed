"""Errors and warnings that name the right thing (issue 38, item 3).

A misspelt call-time control is refused before any candidate runs; what the
user's ``key_fn`` or ``prune_fn`` raises or answers wrongly is reported as
theirs; warnings point at the user's line; an unusable ``cache_dir`` says
what is wrong with it, on a tuning and on the command line.
"""

from __future__ import annotations

import os
import warnings

import pytest
from click.testing import CliRunner
from kerneltune import cli
from kerneltune.core import CandidateFailedWarning, UncertainPickWarning, UserFunctionError

from triton_dist.tune import autotune

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")


def _work(calls, **options):
    @autotune(config_space=[{"n": 1}, {"n": 2}], **options)
    def work(x, n):
        calls.append(n)
        return x * n

    return work


# -- call-time controls -------------------------------------------------------------------------


def test_a_misspelt_control_is_refused_before_any_candidate_runs(isolated):
    calls: list[int] = []
    work = _work(calls, key_fn=lambda x, **kwargs: x)

    with pytest.raises(TypeError, match=r"autotune_verbos=True; did you mean autotune_verbose\?"):
        work(3, autotune_verbos=True)
    assert calls == [], "no candidate ran"
    with pytest.raises(TypeError, match=r"did you mean autotune_allow_arg_overwrite\?"):
        work(3, autotune_allow_overwrite=True, autotune=False)
    assert calls == []

    assert work(3) == 3 * calls[-1], "the spelt-right call tunes"
    ran = len(calls)
    with pytest.raises(TypeError, match="did you mean autotune_pg"):
        work(3, autotune_gp=None)  # a cache hit refuses it too
    assert len(calls) == ran


def test_a_misspelt_control_reaching_a_functions_kwargs_is_warned_about_once(isolated):
    received = []

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x, **kwargs: x)
    def work(x, n, **kwargs):
        received.append(kwargs)
        return x

    with pytest.warns(
        RuntimeWarning,
        match=r"autotune_verbos=True goes to the function's \*\*kwargs, not to "
        r"the tuner; did you mean autotune_verbose\?",
    ):
        work(3, autotune_verbos=True)
    assert received[-1] == {"autotune_verbos": True}, "the function gets it, as before"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        work(4, autotune_verbos=True)  # once per name
        work(3, autotune_budget=1)  # close to no control


@pytest.mark.parametrize("control", ["autotune", "autotune_verbose", "autotune_allow_arg_overwrite"])
def test_a_control_takes_true_or_false(isolated, control):
    calls: list[int] = []
    work = _work(calls, key_fn=lambda x, **kwargs: x)
    with pytest.raises(TypeError, match=f"work: {control} takes True or False, got 'no'"):
        work(3, **{control: "no"})
    assert calls == [], "refused before any candidate runs"


def test_contextual_autotune_refuses_a_flag_that_is_no_bool_and_the_bare_decorator():
    from triton_dist.autotuner import contextual_autotune

    for options, match in (
        ({"is_dist": "yes"}, "is_dist takes True or False, got 'yes'"),
        ({"flush_cache": 0}, "flush_cache takes True or False, got 0"),
        ({"verbose": None}, "verbose takes True or False, got None"),
    ):
        with pytest.raises(TypeError, match=match):
            contextual_autotune(**options)(lambda: None)

    def outer():
        return None

    with pytest.raises(TypeError, match=r"write @contextual_autotune\(\) above outer, with parentheses"):
        contextual_autotune(outer)


def test_a_parameter_of_the_function_named_autotune_something_is_its_own(isolated):
    seen = []

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x, autotune_budget=0: x)
    def work(x, n, autotune_budget=0):
        seen.append(autotune_budget)
        return x * n

    work(2, autotune_budget=7)
    work(2, autotune_budget=8)
    assert set(seen) == {7, 8}


# -- key_fn and prune_fn ------------------------------------------------------------------------


def _broken_key(x):
    return {"x": x}["y"]


def test_what_key_fn_raises_names_key_fn_and_the_function(isolated):
    calls: list[int] = []
    work = _work(calls, key_fn=_broken_key)

    with pytest.raises(UserFunctionError, match=r"work: key_fn _broken_key raised KeyError: 'y'") as raised:
        work(3)
    assert isinstance(raised.value.__cause__, KeyError), "the original is chained"
    assert raised.value.role == "key_fn" and raised.value.function is _broken_key
    assert calls == []


def test_a_key_fn_that_cannot_take_the_arguments_says_so(isolated):
    work = _work([], key_fn=lambda: 0)
    with pytest.raises(TypeError, match=r"key_fn .*<lambda>.* cannot be called as key_fn\(<int>\)"):
        work(3)


def test_what_prune_fn_raises_names_prune_fn_and_the_function(isolated):
    def picky(config, x):
        raise ZeroDivisionError("no configs today")

    calls: list[int] = []
    work = _work(calls, key_fn=lambda x: x, prune_fn=picky)
    with pytest.raises(UserFunctionError, match=r"work: prune_fn .*picky raised ZeroDivisionError") as raised:
        work(3)
    assert isinstance(raised.value.__cause__, ZeroDivisionError)
    assert raised.value.role == "prune_fn"
    assert calls == []


def test_a_prune_fn_with_the_wrong_signature_is_named(isolated):
    work = _work([], key_fn=lambda x: x, prune_fn=lambda config: True)
    with pytest.raises(
        TypeError, match=r"prune_fn .*<lambda>\(config\) cannot be called as prune_fn\(config"
    ):
        work(3)


@pytest.mark.parametrize(("answer", "what"), [(None, "None"), ([{"n": 1}], "a list")])
def test_a_prune_fn_answering_no_bool_says_so(isolated, answer, what):
    work = _work([], key_fn=lambda x: x, prune_fn=lambda config, x: answer)
    with pytest.raises(TypeError, match=rf"prune_fn .*<lambda> returned {what} for config") as raised:
        work(3)
    assert "removed every candidate" not in str(raised.value)
    assert "True to keep it or False to drop it" in str(raised.value)


# -- warnings point at the user's line --------------------------------------------------------


def _recorded(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return caught


def test_warnings_of_a_tuning_point_at_the_callers_line(isolated):
    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def flaky(x, n):
        if n == 1:
            raise RuntimeError("out of memory")
        return x * n

    caught = _recorded(lambda: flaky(3))
    failed = [w for w in caught if issubclass(w.category, CandidateFailedWarning)]
    assert failed and all(w.filename == __file__ for w in failed), [(w.filename, w.lineno) for w in caught]


def test_a_refused_cache_folder_warns_at_the_callers_line_and_says_not_a_directory(
    isolated, monkeypatch, tmp_path
):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(blocker))
    work = _work([], key_fn=lambda x: x)

    caught = _recorded(lambda: work(3))
    mine = [w for w in caught if "kerneltune" in str(w.message)]
    assert mine, "the refused folder is reported"
    assert all(w.filename == __file__ for w in mine), [(w.filename, w.lineno, str(w.message)) for w in mine]
    stored = [str(w.message) for w in mine if "cannot store the pick" in str(w.message)]
    assert stored and "not a directory" in stored[0] and "File exists" not in stored[0], stored


def test_session_and_store_warnings_use_the_users_frame(isolated, monkeypatch):
    # UncertainPickWarning, the pick-store warning and the others go through user_stacklevel.
    from kerneltune.core.plugin_system import session as session_module

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    work = _work([], key_fn=lambda x: x)
    session = session_module.current_session()
    monkeypatch.setattr(type(session.cache), "store", refuse)
    caught = _recorded(lambda: work(5))
    stored = [w for w in caught if "cannot store the pick" in str(w.message)]
    assert stored and stored[0].filename == __file__, [(w.filename, str(w.message)) for w in caught]
    assert all(w.filename == __file__ for w in caught if issubclass(w.category, UncertainPickWarning))


# -- the command line and an unusable cache_dir -----------------------------------------------


def test_cache_list_and_report_refuse_a_cache_dir_that_is_a_file(isolated, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(blocker))
    for command in (["cache", "list"], ["cache", "list", "--json"], ["report"]):
        result = CliRunner().invoke(cli.main, command)
        assert result.exit_code == 1, (command, result.output)
        assert f"cache_dir {blocker}: not a directory" in result.stderr, result.stderr

    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(blocker / "below"))
    result = CliRunner().invoke(cli.main, ["cache", "list"])
    assert result.exit_code == 1 and f"({blocker} is a file)" in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder")
def test_cache_list_refuses_an_unreadable_cache_dir(isolated, monkeypatch, tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir(mode=0)
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(folder))
    try:
        result = CliRunner().invoke(cli.main, ["cache", "list"])
    finally:
        folder.chmod(0o700)
    assert result.exit_code == 1 and "cannot read it" in result.stderr


def test_cache_list_refuses_a_cache_dir_it_cannot_list(isolated, monkeypatch, tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    monkeypatch.setenv("TRITON_DIST_AUTOTUNE_CACHE_DIR", str(folder))
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(folder):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    for command in (["cache", "list"], ["report"]):
        result = CliRunner().invoke(cli.main, command)
        assert result.exit_code == 1, (command, result.output)
        assert f"cache_dir {folder}: cannot read it (Permission denied)" in result.stderr


def test_a_missing_configured_cache_dir_is_an_empty_cache(isolated):
    listed = CliRunner().invoke(cli.main, ["cache", "list"])
    assert listed.exit_code == 0 and "no records" in listed.stdout
    reported = CliRunner().invoke(cli.main, ["report"])
    assert reported.exit_code == 1 and "no records" in reported.stderr
