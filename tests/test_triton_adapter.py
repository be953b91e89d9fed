"""The Triton adapter against each row of its version table, and the driver over fakes.

triton 3.2, which cannot decorate a kernel without a GPU driver, is covered
by the fake in tests/triton_fakes.py; the installed triton is checked for
real. triton-ascend's rows run against the real triton-ascend 3.2.0 and
3.2.0rc4 (their ``Autotuner`` and ``AutoTilingTuner``, made by their
``triton.autotune``: 3.2.0's tiling tuner from ``hints``, 3.2.0rc4's from
``split_params`` and ``tiling_params``), where ``make test-tritons`` installs
them with only the NPU driver stood in (tests/ascend_stand_in.py); elsewhere
they skip. Kernels are :class:`~triton_fakes.FakeKernel` objects, and a
scripted clock makes every pick deterministic, but in the tests of the
auto-tiling tuners' generated tiles, which run a real kernel.
"""

from __future__ import annotations

import copy
import inspect
import threading
import types

import ascend_stand_in
import attrs
import kernels
import pytest
import torch
import triton
from kerneltune.core import (
    CandidateFailedWarning,
    Session,
    add_plugin,
    hookimpl,
    load_settings,
    remove_plugin,
)
from kerneltune.core.drivers import contextual as contextual_module
from kerneltune.plugins.triton import adapter, autotune, compiler
from kerneltune.plugins.triton.adapter import autotiling, layouts
from kerneltune.plugins.triton.interceptor import TritonInterceptor
from triton_fakes import (
    ARG_NAMES,
    Autotuner32,
    Config32,
    FakeKernel,
    KernelFailure,
    interceptor_plugin,
    later_ascend_autotune,
    other_kernel_function,
)
from tuning_doubles import FakeClock, clock_plugin

from triton_dist.autotuner import contextual_autotune

ARGS = ARG_NAMES
TRITON_ASCEND = ascend_stand_in.installed()
needs_triton_ascend = pytest.mark.skipif(
    not TRITON_ASCEND, reason="needs triton-ascend installed (make test-tritons runs it)"
)
#: ``hints={"enable_ascend_autotune": True}`` makes triton-ascend's ``AutoTilingTuner`` here.
needs_tiling_by_hints = pytest.mark.skipif(
    ascend_stand_in.auto_tiling_by_hints_missing() is not None,
    reason=ascend_stand_in.auto_tiling_by_hints_missing() or "",
)

#: ``split_params`` and ``tiling_params`` make triton-ascend's ``AutoTilingTuner`` here (3.2.0rc4).
needs_tiling_by_params = pytest.mark.skipif(
    ascend_stand_in.auto_tiling_by_params_missing() is not None,
    reason=ascend_stand_in.auto_tiling_by_params_missing() or "",
)
#: The keys 3.2.0rc4's auto-tiling tuner meets: the axis dict it documents, and a list, which its own
#: ``run`` cannot read (a key written as 3.2.0 takes it).
RC4_KEYS = (pytest.param({"x": "n"}, id="dict-key"), pytest.param(["n"], id="list-key"))


def ascend_tuner(kernel, configs, *, tiling=False):
    """triton-ascend's own tuner over ``kernel``: ``AutoTilingTuner`` with ``tiling``, else ``Autotuner``."""
    hints = {"enable_ascend_autotune": True} if tiling else None
    return triton.autotune(configs, ["n"], hints)(kernel)


class OverridingAutotuner32(Autotuner32):
    """A subclass with a ``run`` of its own, as triton-ascend's ``AutoTilingTuner`` has."""

    def run(self, *args, **kwargs):
        return super().run(*args, **kwargs)


def use_fakes(monkeypatch, clock, root):
    """Make the contextual tuner time with ``clock`` and intercept the fake family ``root``.

    :param root: ``None`` for the installed Triton's own autotuners, which the
        built-in interceptor patches.
    """
    plugins = (clock_plugin(clock), *(() if root is None else (interceptor_plugin(root),)))
    sessions = {}

    def session(settings=None, **overrides):  # current_session's signature
        settings = attrs.evolve(settings or load_settings(), timer="scripted", **overrides)
        if settings not in sessions:
            sessions[settings] = Session.create(settings, extra=plugins)
        return sessions[settings]

    monkeypatch.setattr(contextual_module, "current_session", session)
    # A fake kernel's run() is a launch whatever its arguments: nothing compiles
    # ahead, as under Triton's interpreter, on a GPU host too.
    monkeypatch.setattr(compiler, "config_compiler", lambda *args, **kwargs: None)


def test_version_table_rows():
    names = [layout.name for layout in layouts.LAYOUTS]
    assert len(names) == len(set(names))
    kernel = FakeKernel(FakeClock(), {})
    assert adapter.layout_of(Autotuner32(kernel, ARGS, [Config32({"BLOCK": 1})], ["n"])).name in names


@needs_triton_ascend
def test_triton_ascends_autotuner_is_its_row():
    kernel = FakeKernel(FakeClock(), {})
    plain = ascend_tuner(kernel, [triton.Config({"BLOCK": 1}), triton.Config({"BLOCK": 2})])
    assert type(plain).__name__ == "Autotuner" and plain.auto_profile_dir is None
    assert adapter.layout_of(plain).name == "triton-ascend-3.2"
    assert adapter.release_layout().name == "triton-ascend-3.2"


@needs_tiling_by_hints
def test_triton_ascends_auto_tiling_tuner_is_its_row():
    kernel = FakeKernel(FakeClock(), {})
    configs = [triton.Config({"BLOCK": 1}), triton.Config({"BLOCK": 2})]
    tiling = ascend_tuner(kernel, configs, tiling=True)
    assert type(tiling).__name__ == "AutoTilingTuner"
    assert adapter.layout_of(tiling).name == "triton-ascend-3.2-autotiling"
    assert adapter.candidate_configs(tiling) == configs
    assert adapter.pruned_configs(tiling, (None, 8), {"grid": (1,), "warmup": False}) == configs


@needs_tiling_by_params
@pytest.mark.parametrize("key", RC4_KEYS)
def test_triton_ascend_rc4s_auto_tiling_tuner_is_its_row(key):
    kernel = FakeKernel(FakeClock(), {})
    configs = [triton.Config({"BLOCK": 1}), triton.Config({"BLOCK": 2})]
    tiling = kernels.auto_tiled_by_params(kernel, configs, key)
    assert type(tiling).__name__ == "AutoTilingTuner" and tiling.keys == key
    assert adapter.layout_of(tiling).name == "triton-ascend-3.2rc4-autotiling"
    assert adapter.understood(type(tiling))
    assert adapter.tunable(tiling)
    assert adapter.candidate_configs(tiling) == configs
    assert autotiling.tiling_axes(tiling) == {"x": "n"}
    x = torch.zeros(4, dtype=torch.float16)
    assert adapter.tuning_key(tiling, (x, 9), {"grid": (1,)}) == (9, "torch.float16")


@needs_tiling_by_params
def test_a_list_key_of_rc4s_auto_tiling_tuner_becomes_the_axis_dict_its_run_reads():
    configs = [triton.Config({"BLOCK": 1}), triton.Config({"BLOCK": 2})]
    tiling = kernels.auto_tiled_by_params(FakeKernel(FakeClock(), {}), configs, ["n"])
    adapter.name_list_key_axes(tiling)
    assert tiling.keys == {"x": "n"}
    plain = ascend_tuner(FakeKernel(FakeClock(), {}), configs)
    adapter.name_list_key_axes(plain)
    assert plain.keys == ["n"], "a plain Autotuner's list key is its own"
    tiling.keys = [f"a{i}" for i in range(len(autotune.AXIS_NAMES) + 1)]
    with pytest.raises(ValueError, match=r"names 13 arguments; .* has 12 axes"):
        adapter.name_list_key_axes(tiling)


def test_installed_triton_is_in_the_table(recwarn):
    version = layouts.triton_version()
    layout = adapter.release_layout()
    assert version in layout.releases
    assert not [w for w in recwarn if "version table" in str(w.message)]


def test_tuning_key_list_and_axis_dict():
    kernel = FakeKernel(FakeClock(), {})
    configs = [Config32({"BLOCK": 1}), Config32({"BLOCK": 2})]
    x = torch.zeros(4, dtype=torch.float16)
    plain = Autotuner32(kernel, ARGS, configs, ["n"])
    assert adapter.tuning_key(plain, (x, 4), {"grid": (1,), "warmup": False}) == (4, "torch.float16")
    assert adapter.tuning_key(plain, (x,), {"n": 7, "grid": (1,)}) == (7, "torch.float16")


@needs_tiling_by_hints
def test_tuning_key_of_the_auto_tiling_tuners_axis_dict():
    kernel = FakeKernel(FakeClock(), {})
    x = torch.zeros(4, dtype=torch.float16)
    tiling = ascend_tuner(kernel, [triton.Config({"BLOCK": 1}), triton.Config({"BLOCK": 2})], tiling=True)
    assert tiling.keys == {"x": "n"}
    assert adapter.tuning_key(tiling, (x, 9), {"grid": (1,)}) == (9, "torch.float16")


def test_key_matches_real_triton():
    @triton.autotune(configs=[triton.Config({"B": 1}), triton.Config({"B": 2})], key=["n", "m"])
    @triton.jit
    def kernel(x_ptr, n, m, B: triton.language.constexpr):
        pass

    x = torch.zeros(2, dtype=torch.bfloat16)
    assert adapter.tuning_key(kernel, (x, 3), {"m": 5, "grid": (1,), "warmup": False}) == (
        3,
        5,
        "torch.bfloat16",
    )
    assert adapter.kernel_name(kernel) == "kernel"
    assert "def kernel" in adapter.kernel_source(kernel)
    assert adapter.tunable(kernel)


def test_pruned_configs_sets_nargs_only_while_pruning():
    seen = {}

    def prune(configs, named_args, **kwargs):
        seen["named"], seen["kwargs"] = dict(named_args), kwargs
        return configs[1:]

    configs = [Config32({"BLOCK": b}) for b in (1, 2, 3)]
    tuner = Autotuner32(FakeKernel(FakeClock(), {}), ARGS, configs, ["n"], {"early_config_prune": prune})
    assert adapter.pruned_configs(tuner, ("x", 4), {"grid": (2,), "warmup": False}) == configs[1:]
    assert seen["named"] == {"x": "x", "n": 4}
    assert seen["kwargs"] == {"grid": (2,), "warmup": False}
    assert tuner.nargs is None


def test_launch_config_runs_hooks_outside_around_and_reports_failures():
    events = []
    clock = FakeClock()

    def config_hook(nargs):
        events.append(("config.pre_hook", nargs["BLOCK"]))

    tuner = Autotuner32(
        FakeKernel(clock, {8: 1.0, 16: None}),
        ARGS,
        [],
        ["n"],
        pre_hook=lambda nargs, reset_only=False: events.append(("pre_hook", nargs["n"])),
        post_hook=lambda nargs, exception: events.append(("post_hook", type(exception).__name__)),
    )

    def around(thunk):
        events.append("timer start")
        thunk()
        events.append("timer stop")

    result = adapter.launch_config(
        tuner, ("x", 4), {"grid": (1,), "warmup": False}, Config32({"BLOCK": 8}, pre_hook=config_hook), around
    )
    assert result == "launched BLOCK=8"
    assert events == [
        ("config.pre_hook", 8),
        ("pre_hook", 4),
        "timer start",
        "timer stop",
        ("post_hook", "NoneType"),
    ]
    events.clear()
    with pytest.raises(KernelFailure):
        adapter.launch_config(tuner, ("x", 4), {"grid": (1,), "warmup": False}, Config32({"BLOCK": 16}))
    assert events == [("pre_hook", 4), ("post_hook", "KernelFailure")]
    with pytest.raises(ValueError, match="Conflicting meta-parameters: BLOCK"):
        adapter.launch_config(tuner, ("x", 4), {"BLOCK": 8}, Config32({"BLOCK": 16}))


def test_store_config_is_what_triton_reads():
    configs = [Config32({"BLOCK": 8}), Config32({"BLOCK": 16})]
    kernel = FakeKernel(FakeClock(), {8: 1.0, 16: 1.0})
    tuner = Autotuner32(kernel, ARGS, configs, ["n"])
    adapter.store_config(tuner, (4,), configs[1])
    assert adapter.cached_config(tuner, (4,)) is configs[1]
    assert tuner.best_config is configs[1]
    tuner[(1,)]("x", 4)
    assert kernel.calls[-1][1]["BLOCK"] == 16


def test_hints_parameter_per_release():
    # Upstream takes no hints; a triton-ascend release missing from the table fails here.
    expected = ascend_stand_in.HINTS_BY_RELEASE[ascend_stand_in.release()] if TRITON_ASCEND else None
    assert autotune.hints_parameter(triton.autotune) == expected
    assert autotune.hints_parameter(later_ascend_autotune) == "keyword"


def test_the_interceptor_patches_overriding_subclasses_once_and_passes_through_after():
    family = (Autotuner32, OverridingAutotuner32)
    assert [cls for cls, _ in adapter.own_runs(Autotuner32)] == list(family)
    overriding = OverridingAutotuner32(
        FakeKernel(FakeClock(), {8: 1.0}), ARGS, [Config32({"BLOCK": 8})], ["n"]
    )
    overriding.cache[(4,)] = overriding.configs[0]
    unpatched = overriding[(1,)]("x", 4)
    interceptor = TritonInterceptor()
    routed = []
    interceptor.install(lambda launch: routed.append(launch.name) or "routed", Autotuner32)
    try:
        replaced = {cls: cls.__dict__["run"] for cls in family}
        assert all(inspect.unwrap(run) is not run for run in replaced.values())
        assert overriding[(1,)]("x", 4) == "routed"
    finally:
        interceptor.uninstall()
    assert routed == ["kernel_function"]
    assert overriding[(1,)]("x", 4) == unpatched, "uninstalled: every launch reaches its own run"
    interceptor.install(lambda launch: "routed", Autotuner32)
    interceptor.uninstall()
    assert {cls: cls.__dict__["run"] for cls in family} == replaced, "patched once, then kept"


@needs_triton_ascend
def test_the_interceptor_reaches_triton_ascends_auto_tiling_tuner():
    from triton.runtime.autotiling_tuner import AutoTilingTuner
    from triton.runtime.autotuner import Autotuner

    interceptor = TritonInterceptor()
    interceptor.install(lambda launch: "routed")
    interceptor.uninstall()
    for cls in (Autotuner, AutoTilingTuner):
        run = cls.__dict__["run"]
        assert inspect.unwrap(run) is not run, cls


def test_interceptor_routes_only_the_installing_thread():
    clock = FakeClock()
    kernel = FakeKernel(clock, {8: 1.0, 16: 1.0})
    configs = [Config32({"BLOCK": 8}), Config32({"BLOCK": 16})]
    tuner = Autotuner32(kernel, ARGS, configs, ["n"])
    tuner.cache[(4,)] = configs[0]
    routed = []
    interceptor = TritonInterceptor()
    interceptor.install(lambda launch: routed.append(launch.key) or "routed", Autotuner32)
    try:
        assert tuner[(1,)]("x", 4) == "routed"
        results = []
        thread = threading.Thread(target=lambda: results.append(tuner[(1,)]("x", 4)))
        thread.start()
        thread.join(10)
        assert results == ["launched BLOCK=8"]
    finally:
        interceptor.uninstall()
    assert routed == [(4,)]
    assert tuner[(1,)]("x", 4) == "launched BLOCK=8"


COSTS = {8: 3.0, 16: 1.0, 32: 2.0, 64: None}


@pytest.mark.parametrize(
    ("make", "root", "config"),
    [
        pytest.param(
            lambda kernel, configs: Autotuner32(kernel, ARGS, configs, ["n"]),
            Autotuner32,
            Config32,
            id="triton-3.2",
        ),
        pytest.param(
            ascend_tuner,
            None,
            lambda kwargs: triton.Config(kwargs),
            id="triton-ascend-3.2",
            marks=needs_triton_ascend,
        ),
    ],
)
@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_contextual_tuning_on_each_release_shape(monkeypatch, tmp_path, make, root, config):
    clock = FakeClock()
    use_fakes(monkeypatch, clock, root)
    kernel = FakeKernel(clock, COSTS)
    configs = [config({"BLOCK": b}) for b in (8, 16, 32, 64)]
    tuner = make(kernel, configs)
    executions = []
    # A tensor: triton-ascend's auto-tiling tuner refuses a launch with none.
    x = torch.zeros(2)

    @contextual_autotune(n_repeat=3, n_warmup=2)
    def outer(x, n):
        executions.append(n)
        return tuner[(1,)](x, n)

    assert outer(x, 4) == "launched BLOCK=16"
    assert tuner.best_config is configs[1]
    assert tuner.cache == {(4, "torch.float32"): configs[1]}
    assert len(executions) == 4 * (2 + 3) + 1
    # Every launch ran with the call's own arguments; the failing candidate's
    # five launches were stood in for by a config that works.
    assert all(args == (x, 4) for args, _ in kernel.calls)
    assert [meta["BLOCK"] for _, meta in kernel.calls].count(64) == 0
    # And one more launch of the first config: the output check's probe of whether it writes x whole
    # (the fake writes nothing, so x, poisoned, stays poisoned, and no argument is poisoned after).
    assert len(kernel.calls) == 4 * 5 + 2
    log = (tmp_path / ".autotune_logs" / "rank-0.log").read_text()
    assert "config 3 warmup round 1/2: exception: KernelFailure: out of resources for BLOCK=64" in log
    assert "best config 1 [BLOCK=16]" in log


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
def test_waiting_kernels_and_failed_candidates_run_with_a_working_stand_in(monkeypatch):
    clock = FakeClock()
    use_fakes(monkeypatch, clock, Autotuner32)
    first_kernel = FakeKernel(clock, {8: None, 16: 2.0})
    second_kernel = FakeKernel(clock, {8: 5.0, 16: 1.0}, other_kernel_function)
    first = Autotuner32(first_kernel, ARGS, [Config32({"BLOCK": 8}), Config32({"BLOCK": 16})], ["n"])
    second = Autotuner32(second_kernel, ARGS, [Config32({"BLOCK": 8}), Config32({"BLOCK": 16})], ["n"])
    outputs = []

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def outer(n):
        outputs.append((first[(1,)]("a", n), second[(1,)]("b", n)))
        return outputs[-1]

    assert outer(2) == ("launched BLOCK=16", "launched BLOCK=16")
    # first takes executions 1-4 (2 candidates x 2 launches); second starts
    # in execution 4, right after first's last launch, and takes 4-7; 8 runs
    # with the picks. first's failing candidate 0, and second while it
    # waited, still ran with a config that works: no execution lost a launch.
    assert len(outputs) == 8
    assert all(a is not None and b is not None for a, b in outputs)
    assert first.best_config.kwargs == {"BLOCK": 16}
    assert second.best_config.kwargs == {"BLOCK": 16}


def test_single_candidate_after_pruning_is_stored_without_measuring(monkeypatch):
    clock = FakeClock()
    use_fakes(monkeypatch, clock, Autotuner32)
    kernel = FakeKernel(clock, {8: 1.0, 16: 1.0})
    configs = [Config32({"BLOCK": 8}), Config32({"BLOCK": 16})]
    tuner = Autotuner32(kernel, ARGS, configs, ["n"], {"early_config_prune": lambda cs, named, **kw: cs[1:]})
    calls = []

    @contextual_autotune()
    def outer(n):
        calls.append(n)
        return tuner[(1,)]("x", n)

    assert outer(3) == "launched BLOCK=16"
    assert calls == [3]
    assert tuner.cache == {(3,): configs[1]}


def drop_1639(pruned):
    """An ``early_config_prune`` dropping the generated ``BLOCK`` 1639, counting the drops in ``pruned``."""

    def prune(configs, named_args, **kwargs):
        kept = [c for c in configs if c.kwargs.get("BLOCK") != 1639]
        pruned.append(len(configs) - len(kept))
        return kept

    return prune


def tune_auto_tiled_add(kernel, pruned):
    """Tune ``kernel`` (``add_kernel`` under an auto-tiling tuner with :func:`drop_1639`) in context.

    Checks the sum, that the tuner's candidates were its generated tiles (2048, 1639), then the user's
    configs (4096, 512), that its pruning ran once and every kept one (no other) was measured, and
    that the pick is one of them, filed under the tuner's own key.
    """
    assert type(kernel).__name__ == "AutoTilingTuner"
    measured = []

    @hookimpl
    def kerneltune_kernel_tuned(event):
        rows = zip(event.candidates, event.errors, strict=True)
        measured.extend(c.config.kwargs["BLOCK"] for c, error in rows if error is None)

    plugin = types.SimpleNamespace(kerneltune_kernel_tuned=kerneltune_kernel_tuned)
    add_plugin(plugin)
    try:

        @contextual_autotune(n_repeat=1, n_warmup=0)
        def outer(x, y):
            return kernels.launch_add(kernel, x, y)

        x = torch.ones(kernels.AUTO_TILED_N)
        torch.testing.assert_close(outer(x, x), 2 * x)
    finally:
        remove_plugin(plugin)
    # Stock's candidates: the generated tiles (2048, 1639), then the user's configs, then the
    # kernel's own pruning (1639 dropped); every one measured, nothing else.
    assert [c.kwargs["BLOCK"] for c in kernel.configs] == [2048, 1639, 4096, 512]
    assert pruned == [1] and sorted(measured) == [512, 2048, 4096]
    assert kernel.best_config.kwargs["BLOCK"] in (512, 2048, 4096)
    key = (kernels.AUTO_TILED_N, "torch.float32", "torch.float32", "torch.float32")
    assert kernel.cache == {key: kernel.best_config}
    return outer, x


def users_configs():
    """The configs the user lists beside the generated tiles."""
    return [triton.Config({"BLOCK": 4096}), triton.Config({"BLOCK": 512})]


@needs_tiling_by_hints
def test_the_auto_tiling_tuner_is_tuned_over_its_generated_tiles_and_the_users_configs_after_pruning():
    pruned = []
    kernel = kernels.auto_tiled_add(
        users_configs(), prune_configs_by={"early_config_prune": drop_1639(pruned)}
    )
    tune_auto_tiled_add(kernel, pruned)


@needs_tiling_by_params
@pytest.mark.parametrize("key", RC4_KEYS)
def test_rc4s_auto_tiling_tuner_is_tuned_over_its_generated_tiles_and_the_users_configs(key):
    pruned = []
    kernel = kernels.auto_tiled_by_params(
        configs=users_configs(), key=key, prune_configs_by={"early_config_prune": drop_1639(pruned)}
    )
    outer, x = tune_auto_tiled_add(kernel, pruned)
    pick = kernel.best_config
    # Later launches, in context and out of it, are the tuner's own run's cache hits, whatever key
    # it was declared with: nothing is generated, pruned or measured again.
    torch.testing.assert_close(outer(x, x), 2 * x)
    torch.testing.assert_close(kernels.launch_add(kernel, x, x), 2 * x)
    assert kernel.best_config is pick and pruned == [1]


@needs_tiling_by_params
def test_rc4s_auto_tiling_tuner_declared_through_the_hooks_keeps_its_axis_dict():
    # triton_dist.autotune_hooks stands in Triton's triton.autotune: a dict key with split_params
    # reaches rc4's decorator as the dict it reads, so its own run works before any tuning.
    import triton_dist.autotune_hooks  # noqa: F401

    kernel = triton.autotune(configs=users_configs(), key={"x": "n"}, **copy.deepcopy(kernels.ADD_TILING))(
        kernels.add_kernel
    )
    assert kernel.keys == {"x": "n"}
    assert adapter.layout_of(kernel).name == "triton-ascend-3.2rc4-autotiling"
    # Its own run reads the key and gets as far as benchmarking, which the stand-in cannot do.
    x = torch.arange(4096, dtype=torch.float32)
    with pytest.raises(ascend_stand_in.StandInDriverError, match="cannot benchmark"):
        kernels.launch_add(kernel, x, x)
