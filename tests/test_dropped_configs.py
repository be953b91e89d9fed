"""Expected drops are quiet: a config the device cannot run, pruned or past the compile deadline gets no
warning, only its count in one line per tuning; an unexpected failure still warns (docs/guide.md,
"Dropped configs"). Kernels run in Triton's interpreter on the CPU; out of resources is faked, as a
config's pre-hook raising Triton's own ``OutOfResources``.
"""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
import triton
from kerneltune.core import CandidateFailedWarning
from kerneltune.core.driving import enable_feature
from search_doubles import Script, by_block, timer_plugin, use_session
from test_ascend_porting import make_scale_kernel, run_scale
from test_search_params import launch_double, make_double, search
from tuning_doubles import FakeClock, clock_plugin, install_session, stored_records

from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune


def out_of_shared_memory(named):
    raise triton.runtime.errors.OutOfResources(256 * 1024, 228 * 1024, "shared memory")


def broken(named):
    raise ValueError("a bug in the user's hook")


def tune_scale(configs):
    kernel = make_scale_kernel(configs)

    @contextual_autotune(n_repeat=2, n_warmup=0)
    def tuned():
        return run_scale(kernel)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x, y = tuned()
    torch.testing.assert_close(y, 3.0 * x)
    return kernel, [w for w in caught if issubclass(w.category, CandidateFailedWarning)]


def blocks_with(*pre_hooks):
    """A config per pre-hook (``None``: none), of 32, 64, 128, ... elements per program."""
    return [triton.Config({"BLOCK": 32 << i}, pre_hook=hook) for i, hook in enumerate(pre_hooks)]


def drop_lines(caplog):
    return [r for r in caplog.records if r.name.startswith("kerneltune") and "dropped" in r.getMessage()]


def test_a_config_out_of_resources_is_dropped_without_a_warning_and_counted_in_one_line(caplog):
    caplog.set_level(logging.INFO, logger="kerneltune")
    configs = blocks_with(None, out_of_shared_memory, out_of_shared_memory)
    kernel, warned = tune_scale(configs)
    assert warned == [], "an expected drop is no failure to warn about"
    assert kernel.best_config is configs[0]
    (line,) = drop_lines(caplog)
    assert line.levelno == logging.WARNING and line.name == "kerneltune"
    assert "\n" not in line.getMessage()
    assert "scale_kernel: 2 of 3 configs dropped for key (64, 'torch.float32', 'torch.float32')" in (
        line.getMessage()
    )
    assert "(2 OutOfResources)" in line.getMessage()


def test_the_drop_line_is_quiet_where_the_kerneltune_logger_is_asked_to_be(caplog):
    caplog.set_level(logging.ERROR, logger="kerneltune")
    _, warned = tune_scale(blocks_with(None, out_of_shared_memory))
    assert warned == [] and drop_lines(caplog) == []


def test_an_unexpected_failure_still_warns_beside_a_quiet_drop(caplog):
    caplog.set_level(logging.INFO, logger="kerneltune")
    _, warned = tune_scale(blocks_with(None, broken, out_of_shared_memory))
    (warning,) = warned
    assert "candidate [1] BLOCK=64" in str(warning.message) and "ValueError: a bug" in str(warning.message)
    (line,) = drop_lines(caplog)
    assert "1 of 3 configs dropped" in line.getMessage() and "(1 OutOfResources)" in line.getMessage()


def test_pruning_alone_is_counted_at_info_level(caplog):
    caplog.set_level(logging.INFO, logger="kerneltune")
    pruned = {"early_config_prune": lambda configs, named, **kwargs: configs[:2]}
    kernel = make_scale_kernel(blocks_with(None, None, None), prune_configs_by=pruned)

    @contextual_autotune(n_repeat=2, n_warmup=0)
    def tuned():
        return run_scale(kernel)

    tuned()
    (line,) = drop_lines(caplog)
    assert line.levelno == logging.INFO and "1 of 3 configs dropped" in line.getMessage()
    assert "(1 pruned)" in line.getMessage()


def test_the_verbose_lines_name_each_drop_and_show_the_count_once(capsys):
    kernel = make_scale_kernel(blocks_with(None, out_of_shared_memory))

    @contextual_autotune(n_repeat=2, n_warmup=0, verbose=True)
    def tuned():
        return run_scale(kernel)

    tuned()
    out = capsys.readouterr().out
    assert out.count("configs dropped") == 1
    assert "1 of 2 configs dropped" in out and "OutOfResources" in out


@pytest.mark.usefixtures("unchecked")  # the tuned work returns which config ran
def test_the_function_level_tuner_drops_out_of_resources_quietly(monkeypatch, isolated, caplog):
    caplog.set_level(logging.INFO, logger="kerneltune")
    clock = FakeClock()
    install_session(monkeypatch, extra=(clock_plugin(clock),), timer="scripted")

    @autotune(config_space=[{"block": 64}, {"block": 256}, {"block": 16}], key_fn=lambda x: x)
    def work(x, block):
        if block == 256:
            out_of_shared_memory({})
        if block == 16:
            raise ZeroDivisionError("a real bug")
        clock.advance(1.0)
        return block

    with pytest.warns(CandidateFailedWarning) as warned:
        assert work(1) == 64
    assert [str(w.message) for w in warned if "[2] block=<16>" in str(w.message)], "the bug still warns"
    assert not [w for w in warned if "OutOfResources" in str(w.message)]
    (line,) = drop_lines(caplog)
    assert "work: 1 of 3 configs dropped for key 1 (1 OutOfResources)" in line.getMessage()
    (record,) = stored_records(isolated, "work")
    assert record["candidates"][1]["error"].startswith("OutOfResources: out of resource: shared memory")


def test_a_search_params_kernel_counts_what_its_pruning_removes_as_pruned(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="kerneltune")
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    enable_feature("search_params")
    kernel = make_double(
        search(params=["BLOCK"], values=[16, 32, 64], strategy="exhaustive"),
        prune_configs_by={"early_config_prune": lambda configs, named, **kwargs: configs[:2]},
        pre_hook=script.hook,
    )
    launch_double(kernel)
    (line,) = drop_lines(caplog)
    assert line.levelno == logging.INFO and "pruned)" in line.getMessage(), line.getMessage()
