"""Short labels for triton.Config candidates: what was chosen, not every default."""

from __future__ import annotations

import pytest
from kerneltune.plugins.triton.configs import compile_effort, config_label

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

triton = pytest.importorskip("triton")

#: A config with the installed release's defaults.
DEFAULT = triton.Config({})


@pytest.mark.parametrize(
    ("config", "label"),
    [
        (triton.Config({"BLOCK_M": 64, "BLOCK_N": 128}, num_warps=8), "BLOCK_M=64, BLOCK_N=128, num_warps=8"),
        (triton.Config({"BLOCK": 256}), "BLOCK=256"),
        # The release's own defaults read as nothing: num_warps 4 and num_stages 3 upstream, 4 and 2
        # on triton-ascend 3.2.0, None and None on 3.2.0rc4.
        (
            triton.Config({"BLOCK": 256}, num_warps=DEFAULT.num_warps, num_stages=DEFAULT.num_stages),
            "BLOCK=256",
        ),
        (triton.Config({"BLOCK": 32}, num_stages=1, maxnreg=128), "BLOCK=32, num_stages=1, maxnreg=128"),
        (triton.Config({}, num_ctas=2), "num_ctas=2"),
        (triton.Config({}), "defaults"),
    ],
)
def test_a_config_reads_as_its_kwargs_and_changed_options(config, label):
    assert config_label(config) == label


def test_a_kwarg_equal_to_an_option_default_is_still_shown():
    # Meta-parameters are what the user tunes: always named, whatever their value.
    assert config_label(triton.Config({"num_warps_hint": 4, "GROUP": 1})) == "num_warps_hint=4, GROUP=1"


def test_what_is_not_a_config_reads_as_itself():
    assert config_label({"BLOCK": 64}) == "{'BLOCK': 64}"


def test_function_level_labels_name_a_config_by_what_it_sets(isolated):
    from tuning_doubles import stored_records

    from triton_dist.tune import autotune

    space = [{"cfg": triton.Config({"BLOCK": 256}, num_warps=8)}, {"cfg": triton.Config({"BLOCK": 512})}]

    @autotune(config_space=space, key_fn=lambda n: n)
    def launcher(n, cfg):
        return cfg.kwargs["BLOCK"]

    launcher(3)
    (record,) = stored_records(isolated, "launcher")
    labels = [row["label"] for row in record["candidates"]]
    assert labels == ["cfg=<BLOCK=256, num_warps=8>", "cfg=<BLOCK=512>"]


def test_the_compile_effort_grows_with_the_tile_and_its_stages():
    small = triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_stages=2)
    large = triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_stages=3)
    assert compile_effort(small) == 32 * 32 * 32 * 2
    assert compile_effort(large) == 128 * 256 * 64 * 3
    # A function-level candidate: a mapping of the launcher's arguments, a config among them or not.
    assert compile_effort({"config": large, "name": "mm"}) == compile_effort(large)
    assert compile_effort({"BLOCK_SIZE": 1024, "num_stages": 4}) == 4096
    # Nothing to go by: no guess, and those keep the order handed over.
    assert compile_effort(triton.Config({"GROUP_M": 8}, num_stages=3)) == 0
    assert compile_effort({"BLOCK": True, "block": "wide"}) == 0
    assert compile_effort(["BLOCK", 64]) == 0
