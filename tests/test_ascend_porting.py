"""Porting from triton-ascend and DLCompiler: what their users' kernels meet under kerneltune.

Each test here is one line of docs/ascend.md's porting table: dict keys
(``{axis name: argument name}``) with triton-ascend's meaning, the timings
Triton's own tuning leaves on a kernel (``configs_timings``, ``bench_time``),
the running Triton's own ``TRITON_PRINT_AUTOTUNING`` message, and searched
compile options that land where the ``Config`` class keeps them. Kernels
run in Triton's interpreter on the CPU, with one or two programs per launch.
"""

from __future__ import annotations

import math
from pathlib import Path

import kernels
import pytest
import torch
import triton
import triton.language as tl
import triton.runtime.autotuner
from kerneltune.core import CandidateFailedWarning
from kerneltune.plugins.triton import adapter, configs
from kerneltune.plugins.triton.adapter import layouts
from kerneltune.plugins.triton.autotune import DICT_KEY_ROW, dict_key_arguments
from kerneltune.plugins.triton.search_params.kernel import make_autotune
from search_doubles import Script, by_block, interpreter_family, timer_plugin, use_session
from tuning_doubles import family_plugin

import triton_dist.autotune_hooks  # noqa: F401
from triton_dist.autotuner import contextual_autotune

DOCS = Path(__file__).resolve().parents[1] / "docs" / "ascend.md"


def double_body(x, y_ptr, n, BLOCK: tl.constexpr):
    # The first argument is named x, like triton-ascend's axis: a key read by axis names would take
    # the tensor itself.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x + offsets, mask=mask) * 2, mask=mask)


def launch_double(kernel, n=32, **options):
    x = torch.arange(n, dtype=torch.float32)
    y = torch.zeros_like(x)
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, **options)
    assert torch.equal(y, 2 * x)


def make_scale_kernel(configs, **options):
    return triton.autotune(configs=configs, key=["n"], **options)(kernels.scale_kernel)


def run_scale(kernel, n=64):
    x = torch.randn(n)
    y = torch.empty_like(x)
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, 3.0, n)
    return x, y


# -- dict keys -------------------------------------------------------------------------------------


def test_a_search_params_kernel_with_a_dict_key_is_keyed_by_the_arguments_it_names(monkeypatch):
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    hints = {"search_params": {"params": ["BLOCK"], "values": [16, 32]}}
    kernel = triton.autotune(configs=[], key={"x": "n"}, hints=hints, pre_hook=script.hook)(
        triton.jit(double_body)
    )
    assert kernel.keys == ["n"]
    launch_double(kernel, n=32)
    first = kernel.last_search
    assert first.key[0] == (32, "torch.float32", "torch.float32")
    assert kernel.best_config.kwargs["BLOCK"] == 32
    launch_double(kernel, n=32)
    assert kernel.last_search is first, "the same n reuses the pick"
    launch_double(kernel, n=24)
    assert kernel.last_search is not first and kernel.last_search.key[0][0] == 24


def test_tritons_own_autotune_gets_a_dict_key_as_the_arguments_it_names():
    configs_ = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    kernel = triton.autotune(configs=configs_, key={"x": "n"})(triton.jit(double_body))
    assert kernel.keys == ["n"]

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run():
        launch_double(kernel, n=32)

    run()
    assert list(kernel.cache) == [(32, "torch.float32", "torch.float32")]


def test_a_dict_key_with_a_name_triton_ascend_lacks_is_refused_with_the_porting_tables_line():
    with pytest.raises(ValueError) as caught:
        triton.autotune(configs=[], key={"q": "n"})
    message = str(caught.value)
    assert "'q' is no triton-ascend axis name" in message
    assert f"{DICT_KEY_ROW[0]}: {DICT_KEY_ROW[1]}" in message
    assert f"| {DICT_KEY_ROW[0]} | {DICT_KEY_ROW[1]} |" in DOCS.read_text(), "the page holds the line quoted"
    hints = {"search_params": {"params": ["BLOCK"]}}
    with pytest.raises(ValueError, match="no triton-ascend axis name"):
        triton.autotune(configs=[], key={"rq": "n"}, hints=hints)


def test_the_auto_tiling_tuner_gets_a_dict_key_only_in_the_axis_order_it_gives_a_list(monkeypatch):
    received = []

    def ascend_autotune(configs, key, hints=None, prune_configs_by=None):
        """triton-ascend 3.2.0's decorator, as far as the key goes: it zips its axis names with a list."""
        received.append(key)
        return lambda fn: fn

    monkeypatch.setattr(triton.runtime.autotuner, "autotune", ascend_autotune)
    autotune = make_autotune(ascend_autotune)
    tiles = {"enable_ascend_autotune": True}
    autotune([], {"x": "M", "y": "N"}, tiles)
    autotune(configs=[], key={"y": "N"})
    assert received == [["M", "N"], ["N"]]
    with pytest.raises(ValueError, match="it must name the axes x, y in that order") as caught:
        autotune([], {"y": "M", "x": "N"}, tiles)
    assert DICT_KEY_ROW[1] in str(caught.value)
    # Another library's decorator in Triton's place reads its keys itself.
    assert make_autotune(lambda configs, key, **options: key)(configs=[], key={"rx": "N"}) == {"rx": "N"}


def test_the_auto_tiling_tuner_made_from_split_params_keeps_its_dict_key(monkeypatch):
    received = []

    def rc4_autotune(
        configs, key, prune_configs_by=None, split_params=None, tiling_params=None, low_dims=None
    ):
        """triton-ascend 3.2.0rc4's decorator, as far as the key goes: it reads a dict, axis by name."""
        received.append(key)
        return lambda fn: fn

    monkeypatch.setattr(triton.runtime.autotuner, "autotune", rc4_autotune)
    autotune = make_autotune(rc4_autotune)
    autotune([], {"y": "M", "x": "N"}, split_params={"x": "BLOCK"}, tiling_params={}, low_dims=["x"])
    autotune(configs=[], key={"x": "N"}, tiling_params={"x": "SUB"})
    # Without either, the dict is the list of the arguments it names, as for Triton's own Autotuner.
    autotune(configs=[], key={"x": "N"})
    assert received == [{"y": "M", "x": "N"}, {"x": "N"}, ["N"]]


def test_dict_key_arguments_leaves_a_list_key_alone():
    assert dict_key_arguments(["n"]) is None
    assert dict_key_arguments({"x": "M", "rx": "N"}) == ["M", "N"]
    with pytest.raises(ValueError, match="its values must be argument names"):
        dict_key_arguments({"x": 1})


# -- what Triton's own tuning leaves on the kernel ---------------------------------------------------


@pytest.mark.expected_warning(CandidateFailedWarning, match="failed for key")
@pytest.mark.filterwarnings("ignore:.*compile to the same program:RuntimeWarning")
def test_contextual_tuning_leaves_configs_timings_and_bench_time_as_tritons_own_tuning_does(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_TWINS", "1")  # tests/conftest.py turns them off
    listed = [
        triton.Config({"BLOCK": 32}),
        # The interpreter ignores num_warps: one program with the first, measured once (twins).
        triton.Config({"BLOCK": 32}, num_warps=8),
        triton.Config({"BLOCK": kernels.INVALID_BLOCKS[0]}),
        triton.Config({"BLOCK": 64}),
        triton.Config({"BLOCK": 16}),
    ]
    pruned = {"early_config_prune": lambda configs, named, **kwargs: configs[:4]}
    kernel = make_scale_kernel(listed, prune_configs_by=pruned)

    @contextual_autotune(n_repeat=3, n_warmup=0)
    def tuned():
        return run_scale(kernel)

    x, y = tuned()
    torch.testing.assert_close(y, 3.0 * x)
    timings = kernel.configs_timings
    assert list(timings) == listed[:4], "the configs the kernel's pruning kept, in its order"
    for config in (listed[0], listed[3]):
        median, low, high = timings[config]
        assert all(math.isfinite(t) and t > 0 for t in (median, low, high)) and low <= high
    assert timings[listed[2]] == [math.inf] * 3, "a config that failed, as Triton's benchmarker has it"
    assert timings[listed[1]] == timings[listed[0]], "a twin has the times of the config measured for it"
    assert min(timings, key=timings.get) is kernel.best_config
    assert isinstance(kernel.bench_time, float) and kernel.bench_time > 0

    before = kernel.bench_time
    tuned()
    assert kernel.bench_time == before, "a pick served from the cache leaves them as they were"


def test_print_autotuning_prints_the_running_tritons_own_message_after_contextual_tuning(monkeypatch, capsys):
    kernel = make_scale_kernel([triton.Config({"BLOCK": block}) for block in (32, 64)])
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")

    @contextual_autotune(n_repeat=2, n_warmup=0)
    def tuned():
        return run_scale(kernel)

    tuned()
    out = capsys.readouterr().out
    layout = adapter.layout_of(kernel)
    expected = adapter.autotuning_message(
        layout, "scale_kernel", (64, "torch.float32", "torch.float32"), kernel.bench_time, kernel.best_config
    )
    assert out == expected + "\n"
    if layout.prints_key:
        assert out.startswith(
            "Triton autotuning for function scale_kernel,\n"
            "with key as (64, 'torch.float32', 'torch.float32'),\n"
        )
        assert out.endswith(f",\nbest config selected: {kernel.best_config};\n")
    tuned()
    assert capsys.readouterr().out == "", "a cached pick prints nothing"


def test_the_message_is_each_releases_own():
    config = triton.Config({"BLOCK": 64})
    one_line = adapter.autotuning_message(layouts._BY_NAME["triton-ascend-3.2"], "k", (8,), 1.234, config)
    assert one_line == (
        f"Triton autotuning for function k finished after 1.23s; best config selected: {config};"
    )
    with_key = adapter.autotuning_message(layouts._BY_NAME["triton-3.4-3.9"], "k", (8,), 1.234, config)
    assert with_key == (
        f"Triton autotuning for function k,\nwith key as (8,),\nfinished after 1.23s,\n"
        f"best config selected: {config};"
    )


def test_a_search_prints_the_running_tritons_message_and_its_own_account_only_when_verbose(
    monkeypatch, capsys
):
    script = Script(by_block({16: 2.0, 32: 1.0}, "BLOCK"))
    use_session(monkeypatch, timer_plugin(script))
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    for n, debug in ((32, False), (24, True)):
        hints = {"search_params": {"params": ["BLOCK"], "values": [16, 32], "debug": debug}}
        kernel = triton.autotune(configs=[], key=["n"], hints=hints, pre_hook=script.hook)(
            triton.jit(double_body)
        )
        launch_double(kernel, n=n)
        out = capsys.readouterr().out
        summary = kernel.last_search
        expected = adapter.autotuning_message(
            adapter.release_layout(), "double_body", summary.key[0], summary.seconds, kernel.best_config
        )
        assert expected + "\n" in out
        account = "2 of 2 candidates measured, 0 dropped; picked BLOCK=32 at 1.0000 ms"
        assert (account in out) is debug
        assert ("kerneltune" in out) is debug


# -- searched compile options as Config attributes -----------------------------------------------


class AscendLikeConfig(triton.Config):
    """triton-ascend 3.2.0's ``Config`` as far as its NPU options go.

    They come through ``**options``, live as attributes (``None``: the
    compiler's default) and reach the launch through ``all_kwargs()``.
    """

    def __init__(self, kwargs, num_warps=4, num_stages=2, num_ctas=1, maxnreg=None, pre_hook=None, **options):
        super().__init__(
            kwargs,
            num_warps=num_warps,
            num_stages=num_stages,
            num_ctas=num_ctas,
            maxnreg=maxnreg,
            pre_hook=pre_hook,
        )
        self.multibuffer = options.get("multibuffer")

    def all_kwargs(self):
        own = {} if self.multibuffer is None else {"multibuffer": self.multibuffer}
        return {**super().all_kwargs(), **own}


def test_a_searched_option_the_config_holds_is_set_as_its_attribute(monkeypatch):
    monkeypatch.setattr(triton, "Config", AscendLikeConfig)
    assert "multibuffer" in configs.config_attributes()
    assert "multibuffer" not in configs.config_fields()
    made = configs.make_config({"BLOCK": 64}, {"multibuffer": False, "num_warps": 8, "unknown_option": 1})
    assert made.multibuffer is False and made.num_warps == 8
    assert made.kwargs == {"BLOCK": 64, "unknown_option": 1}, "only what the Config lacks joins the kwargs"
    assert made.all_kwargs()["multibuffer"] is False, "the option still reaches the launch"
    given = AscendLikeConfig({"BLOCK": 64, "multibuffer": True})
    fixed = configs.config_with_options(given, {"multibuffer": False})
    assert fixed.multibuffer is False and "multibuffer" not in fixed.kwargs
    assert given.kwargs == {"BLOCK": 64, "multibuffer": True}, "the user's config is left as it was"


def test_best_config_reads_the_searched_option(monkeypatch):
    # The interpreter drops keywords the kernel does not take (triton-ascend's, widened by
    # tests/ascend_stand_in.py, drops the NPU's options), as the NPU JIT takes them as options.
    monkeypatch.setattr(triton, "Config", AscendLikeConfig)
    script = Script(by_block({(32, None): 3.0, (32, True): 2.0, (32, False): 1.0}, "BLOCK", "multibuffer"))
    family = interpreter_family("test-buffers", "vector", [{}, {"multibuffer": True}, {"multibuffer": False}])
    use_session(monkeypatch, timer_plugin(script), family_plugin(family))
    hints = {"search_params": {"params": ["BLOCK"], "values": [32]}}
    kernel = triton.autotune(configs=[], key=["n"], hints=hints, pre_hook=script.hook)(
        triton.jit(double_body)
    )
    launch_double(kernel, n=32)
    assert kernel.best_config.multibuffer is False
    assert "multibuffer" not in kernel.best_config.kwargs


def test_the_porting_section_opens_the_page_with_the_import_change():
    text = DOCS.read_text()
    first_section = text.index("\n## ")
    porting = text.index("\n## Porting")
    assert porting == first_section, "the porting section comes first, after the opening paragraph"
    assert "import triton.backends.dicp_triton.ascend_autotune_hooks" in text
    assert "import triton_dist.autotune_hooks" in text
