"""contextual_autotune checks each candidate of a kernel launch against a reference config's writes.

Real ``@triton.autotune`` kernels in Triton's interpreter (conftest sets
TRITON_INTERPRET=1), one or two programs per launch. A timer reads a fake
clock that each config's pre-hook sets, so that the wrong config is the
fastest: without the check it would be picked.
"""

from __future__ import annotations

import threading
import warnings

import ascend_stand_in
import kernels
import pytest
import torch
import triton
import triton.language as tl
from kerneltune.core import add_plugin, remove_plugin
from kerneltune.core.drivers.checked_launches import LaunchCheck
from kerneltune.core.errors import NoValidConfigError, UncheckedOutputsError, WrongOutputWarning
from kerneltune.core.machine import passes
from kerneltune.plugins.triton.configs import config_label
from tuning_doubles import scripted_timer_plugin

from triton_dist.autotuner import contextual_autotune

DEVICE = kernels.DEVICE
N = 100
KEY = (N, "torch.float32", "torch.float32")


@pytest.fixture
def clock(monkeypatch):
    """``clock[cost]``: the milliseconds each launch reads, by the ``COST`` its config's pre-hook notes."""
    noted: list[float] = []
    plugin = scripted_timer_plugin(lambda fn: (fn(), noted[-1])[1])
    add_plugin(plugin)
    monkeypatch.setenv("KERNELTUNE_TIMER", "scripted")
    yield noted
    remove_plugin(plugin)


def config(noted, cost, **meta):
    """A config whose launches read ``cost`` ms on the fake clock."""
    return triton.Config(meta, pre_hook=lambda args: noted.append(cost))


@triton.jit
def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, SCRIBBLE: tl.constexpr):
    """``y = 2 * x``; with ``EVEN`` it assumes ``BLOCK`` divides ``n`` and drops the remainder, with
    ``SCRIBBLE`` it also zeroes ``x``, its input."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < ((n // BLOCK) * BLOCK if EVEN else n)
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, 2.0 * x, mask=mask)
    if SCRIBBLE:
        tl.store(x_ptr + offsets, tl.zeros_like(x), mask=mask)


def doubling(noted, wrong, **options):
    """``double_kernel`` over a right config (10 ms) and a ``wrong`` one (1 ms, the fastest)."""
    right = config(noted, 10.0, BLOCK=64, EVEN=False, SCRIBBLE=False)
    fast = config(noted, 1.0, BLOCK=64, **{"EVEN": False, "SCRIBBLE": False, **wrong})
    return triton.autotune(configs=[right, fast], key=["n"], **options)(double_kernel)


def launch(kernel, x, y):
    kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y


def tune(kernel, x, **options):
    """Tune ``kernel`` in a call that doubles ``x`` into a fresh buffer; the warnings it gave."""

    @contextual_autotune(n_repeat=1, n_warmup=1, **options)
    def run(x):
        return launch(kernel, x, torch.empty_like(x))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(x)
    return caught


def wrong_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, WrongOutputWarning)]


@pytest.mark.parametrize(
    ("wrong", "what"),
    [
        ({"EVEN": True}, "argument y_ptr: 36 of 100 values off, largest absolute error"),
        ({"SCRIBBLE": True}, "argument x_ptr: changed, which the reference leaves alone"),
    ],
    ids=["drops-the-remainder", "writes-into-its-input"],
)
def test_a_fast_wrong_config_is_never_picked_and_is_recorded_and_warned_about_once(
    clock, tmp_path, monkeypatch, wrong, what
):
    # The first pass in two rounds, as on the host's clock by default: the wrong one comes up again.
    monkeypatch.setenv("KERNELTUNE_TIE_ROUNDS", "2")
    kernel = doubling(clock, wrong)
    results = []

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x):
        results.append(launch(kernel, x, torch.empty_like(x)))
        return results[-1]

    x = torch.randn(N, device=DEVICE)
    expected = 2 * x
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(run(x), expected)
        torch.testing.assert_close(run(x), expected)
    assert kernel.best_config is kernel.configs[0]
    (message,) = wrong_warnings(caught)
    assert message.startswith(
        f"kerneltune: kernel double_kernel: 1 candidate(s) for key {KEY!r} differ from the reference [0] "
    )
    assert f"and were dropped:\n  [1] {config_label(kernel.configs[1])}: " in message and what in message
    assert "the reference may be the wrong one" in message, "no other candidate agrees with the reference"
    log = (tmp_path / ".autotune_logs" / "rank-0.log").read_text()
    reference, dropped = (config_label(c) for c in kernel.configs)
    assert (
        f"config 1 warmup round 1/1: exception: WrongOutput: differs from the reference [0] {reference}: "
        in log
    )
    assert f"config 1 mean invalid [{dropped}] failed: WrongOutput: differs from the reference [0] " in log
    assert log.count("config 1 ") == 2, "its later round's launch ran the reference as a stand-in"
    assert kernel.configs_timings[kernel.configs[1]] == [float("inf")] * 3
    # Every execution, tuning ones included, saw the reference's writes, never the wrong candidate's;
    # and the input is the caller's.
    torch.testing.assert_close(x, expected / 2)
    assert len(results) >= 2 * 3
    for y in results:
        torch.testing.assert_close(y, expected)


def three(noted, wrong):
    """``double_kernel`` over two right configs (10 and 5 ms) and a ``wrong`` one (1 ms), listed last."""
    right = (
        config(noted, cost, BLOCK=block, EVEN=False, SCRIBBLE=False)
        for cost, block in ((10.0, 64), (5.0, 32))
    )
    fast = config(noted, 1.0, BLOCK=64, **{"EVEN": False, "SCRIBBLE": False, **wrong})
    return triton.autotune(configs=[*right, fast], key=["n"])(double_kernel)


@pytest.mark.parametrize(
    ("wrong", "what", "changing"),
    [
        ({"EVEN": True}, "argument y_ptr: 36 of 100 values off, largest absolute error", False),
        ({"SCRIBBLE": True}, "argument x_ptr: changed, which the reference leaves alone", False),
        ({"EVEN": True}, "argument y_ptr: 36 of 100 values off, largest absolute error", True),
        ({}, "", True),
    ],
    ids=["drops-the-remainder", "writes-into-its-input", "on-changing-inputs", "right-on-changing-inputs"],
)
def test_a_candidate_whose_verdict_waits_for_its_samples_is_judged_as_one_judged_at_once(
    clock, tmp_path, monkeypatch, wrong, what, changing
):
    # Once a candidate agreed with the reference, a later one's verdict is read with its samples;
    # where the inputs changed since the reference ran, it runs again on what the reference ran on.
    kernel = three(clock, wrong)

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x, y):
        if changing:
            x.mul_(1.5)
        return launch(kernel, x, y)

    x = torch.randn(N, device=DEVICE)
    given = x.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = run(x, 2 * x)  # the buffer holds the result before any launch: poisoned all the same
    torch.testing.assert_close(y, 2 * x)
    if not changing:  # an input the candidate wrote into is the caller's again
        assert torch.equal(x, given)
    if not what:
        assert kernel.best_config is kernel.configs[2] and not wrong_warnings(caught)
        return
    assert kernel.best_config is kernel.configs[1]
    (message,) = wrong_warnings(caught)
    assert f"and were dropped:\n  [2] {config_label(kernel.configs[2])}: " in message and what in message
    log = (tmp_path / ".autotune_logs" / "rank-0.log").read_text()
    assert "config 2 mean invalid [" in log and "failed: WrongOutput: differs from the reference [0] " in log
    assert kernel.configs_timings[kernel.configs[2]] == [float("inf")] * 3


def test_a_candidate_wrong_in_its_checked_launch_alone_is_dropped_as_a_race(clock):
    # As a race between programs would: the fast config's first launch leaves its last program
    # out, its later launches do not. Its verdict, read with its samples, comes from that first
    # launch; run again for the message, it agrees, and the difference is named for what it is.
    kernel = three(clock, {})
    fast = kernel.configs[2]
    fast.kwargs["BLOCK"] = 16
    launches = []

    def grid(meta):
        programs = triton.cdiv(N, meta["BLOCK"])
        if meta["BLOCK"] == 16:
            launches.append(programs)
            return (programs - (len(launches) == 1),)
        return (programs,)

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x):
        y = torch.empty_like(x)
        kernel[grid](x, y, N)
        return y

    x = torch.randn(N, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(run(x), 2 * x)
    assert len(launches) > 2, "its timed launches ran whole"
    assert kernel.best_config is kernel.configs[1]
    (message,) = wrong_warnings(caught)
    assert f"[2] {config_label(fast)}: argument y_ptr: differs from the reference's after the " in message
    assert "not after a second (a race between its programs?)" in message


def test_launches_of_another_shape_under_the_same_key_are_judged_on_their_own(clock):
    # The key holds n alone: from the sixth execution on, the kernel is handed a 10x10 view of the
    # same values, after the reference and the first candidate ran on the flat tensor. A later
    # candidate's comparison is queued only for arguments shaped as the reference's.
    kernel = three(clock, {"EVEN": True})
    shapes = []

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x):
        x = x.view(10, 10) if len(shapes) >= 5 else x
        shapes.append(tuple(x.shape))
        return launch(kernel, x, torch.empty_like(x)).reshape(-1)

    x = torch.randn(N, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(run(x), 2 * x)
    assert {(N,), (10, 10)} <= set(shapes)
    assert kernel.best_config is kernel.configs[1]
    assert "argument y_ptr: 36 of 100 values off" in wrong_warnings(caught)[0]


@pytest.mark.parametrize(
    ("wrong", "what"),
    [({"EVEN": True}, "argument y_ptr: differs from"), ({"SCRIBBLE": True}, "argument x_ptr: changed")],
    ids=["drops-the-remainder", "writes-into-its-input"],
)
def test_a_waiting_verdict_read_where_the_arguments_changed_shape_comes_from_its_flags(
    clock, tmp_path, wrong, what
):
    # The key holds n alone: once the fast config launched (its verdict waiting), the kernel is
    # handed a 10x10 view; at its last launch there is nothing shaped as the reference's to run it
    # again on, and its flags are the verdict (the run again raised a RuntimeError on 19d967c).
    kernel = three(clock, wrong)

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x):
        x = x.view(10, 10) if 1.0 in clock else x
        return launch(kernel, x, torch.empty_like(x)).reshape(-1)

    x = torch.randn(N, device=DEVICE)
    expected = 2 * x
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(x)
    assert kernel.best_config is kernel.configs[1]
    (message,) = wrong_warnings(caught)
    assert f"  [2] {config_label(kernel.configs[2])}: {what}" in message
    assert "not run again for the figures, the launch's arguments having other shapes since" in message
    log = (tmp_path / ".autotune_logs" / "rank-0.log").read_text()
    assert "config 2 mean invalid [" in log and "failed: WrongOutput: differs from the reference [0] " in log
    if "EVEN" in wrong:
        torch.testing.assert_close(result, expected)


def test_outputs_holding_infinities_and_nans_are_judged_whole_and_right_configs_pass(clock):
    # The reference's output holds an infinity and a NaN: the quick flags cannot pass it, so its
    # candidates are judged at once by the full verdict, where the same infinity and NaN agree:
    # the third right config, which would be judged with its samples elsewhere, is picked.
    configs = [
        config(clock, cost, BLOCK=block, EVEN=even, SCRIBBLE=False)
        for cost, block, even in ((10.0, 64, False), (5.0, 32, False), (2.0, 16, False), (1.0, 64, True))
    ]
    kernel = triton.autotune(configs=configs, key=["n"])(double_kernel)
    x = torch.randn(N, device=DEVICE)
    x[3], x[7] = float("inf"), float("nan")

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x):
        return launch(kernel, x, torch.empty_like(x))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(run(x), 2 * x, equal_nan=True)
    assert kernel.best_config is kernel.configs[2]
    (message,) = wrong_warnings(caught)
    assert f"[3] {config_label(kernel.configs[3])}: argument y_ptr: 36 of 100 values off" in message


def test_the_call_returns_a_right_result_where_a_wrong_candidate_fed_later_work_before_its_verdict(clock):
    # The candidate judged with its samples had its timed launches, whose wrong writes reached the
    # work after them in those executions; the call's result comes from an execution after them.
    kernel = three(clock, {"EVEN": True})
    results = []

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run(x):
        results.append(launch(kernel, x, torch.empty_like(x)) * 3)
        return results[-1]

    x = torch.randn(N, device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WrongOutputWarning)
        torch.testing.assert_close(run(x), 6 * x)
    assert kernel.best_config is kernel.configs[1]
    assert any(not torch.allclose(z, 6 * x) for z in results[:-1]), "no execution saw the wrong writes"


def test_check_outputs_off_lets_the_fastest_be_picked_however_wrong(clock, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_CHECK_OUTPUTS", "off")
    kernel = doubling(clock, {"EVEN": True})
    caught = tune(kernel, torch.randn(N, device=DEVICE))
    assert kernel.best_config is kernel.configs[1] and not wrong_warnings(caught)

    option = doubling(clock, {"EVEN": True})
    monkeypatch.setenv("KERNELTUNE_CHECK_OUTPUTS", "on")
    caught = tune(option, torch.randn(N, device=DEVICE), check_outputs=False)
    assert option.best_config is option.configs[1] and not wrong_warnings(caught)


def test_an_output_that_already_holds_the_result_still_shows_the_elements_a_candidate_skips(clock):
    # The caller's buffer holds the right answer before any launch (as a reused buffer does from the
    # last execution): the skipped elements would pass unseen, but the candidate's run gets them poisoned.
    kernel = doubling(clock, {"EVEN": True})

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x, y):
        return launch(kernel, x, y)

    x = torch.randn(N, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = run(x, 2 * x)
    assert kernel.best_config is kernel.configs[0]
    torch.testing.assert_close(y, 2 * x)
    assert "argument y_ptr: 36 of 100 values off" in wrong_warnings(caught)[0]


@triton.jit
def add_kernel(x_ptr, w_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    """``y = x + w``; with ``EVEN`` it drops the remainder of ``n`` by ``BLOCK``."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < ((n // BLOCK) * BLOCK if EVEN else n)
    total = tl.load(x_ptr + offsets, mask=mask, other=0.0) + tl.load(w_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, total, mask=mask)


def test_where_the_output_held_the_result_the_reference_finds_what_it_writes_whole_in_two_launches(
    clock, monkeypatch
):
    # Nothing changed by the reference's run: one launch with every argument poisoned finds what it
    # writes, one more that it writes all of it, however many arguments the kernel has.
    configs = [config(clock, 10.0, BLOCK=64, EVEN=False), config(clock, 1.0, BLOCK=64, EVEN=True)]
    kernel = triton.autotune(configs=configs, key=["n"])(add_kernel)
    probed = []
    probe = LaunchCheck._probe

    def recorded(check, *args):
        blind = probe(check, *args)
        probed.append((blind, set(check.poisons)))
        return blind

    monkeypatch.setattr(LaunchCheck, "_probe", recorded)

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x, w, y):
        kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x, w, y, N)
        return y

    x, w = torch.randn(N, device=DEVICE), torch.randn(N, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = run(x, w, x + w)
    torch.testing.assert_close(y, x + w)
    assert kernel.best_config is kernel.configs[0]
    assert "argument y_ptr: 36 of 100 values off" in wrong_warnings(caught)[0]
    # The reference's checked launch, the probe's two, its timed one; a stand-in for the wrong
    # candidate's timed launch; the tuned call's.
    assert clock.count(10.0) == 1 + 2 + 1 + 1 + 1
    assert probed == [({"y_ptr"}, {"y_ptr"})], "the inputs' fills, made to find what it writes, are let go"


def test_the_reference_runs_again_where_an_input_changed_not_for_an_output_it_writes_whole(clock):
    # Both configs right: the reference (10 ms) runs for the second candidate's check only where
    # what it would leave differs from what it left, not for the fresh buffer of each execution.
    def reference_runs(changing: bool) -> int:
        configs = [
            config(clock, cost, BLOCK=block, EVEN=False, SCRIBBLE=False)
            for cost, block in ((10.0, 64), (1.0, 32))
        ]
        kernel = triton.autotune(configs=configs, key=["n"])(double_kernel)

        @contextual_autotune(n_repeat=1, n_warmup=1)
        def run(x):
            if changing:
                x.mul_(1.5)  # an input with other contents at every execution
            return launch(kernel, x, torch.empty_like(x))

        clock.clear()
        x = torch.randn(N, device=DEVICE)
        with warnings.catch_warnings():
            warnings.simplefilter("error", WrongOutputWarning)
            y = run(x)
        torch.testing.assert_close(y, 2 * x)
        return clock.count(10.0)

    assert reference_runs(changing=True) == reference_runs(changing=False) + 1


def test_a_candidate_run_on_other_inputs_than_the_reference_ran_on_is_held_to_it_on_them(clock):
    # The input changes at every execution: the reference runs again on what each candidate runs on.
    kernel = doubling(clock, {"EVEN": True})

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x):
        x.mul_(1.5)
        return launch(kernel, x, torch.empty_like(x))

    x = torch.randn(N, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = run(x)
    assert kernel.best_config is kernel.configs[0]
    torch.testing.assert_close(y, 2 * x)
    assert "argument y_ptr: 36 of 100 values off" in wrong_warnings(caught)[0]


def test_only_the_reference_and_the_first_candidate_wait_on_the_device_in_their_run(clock, monkeypatch):
    waits: list[int] = []
    read = passes.read
    monkeypatch.setattr(passes, "read", lambda flags: (waits.append(len(flags)), read(flags))[1])
    counted: dict[tuple[str, int], int] = {}

    def counting(step):
        original = getattr(LaunchCheck, step)

        def count(check, launch, candidate, *rest):
            waits.clear()
            try:
                return original(check, launch, candidate, *rest)
            finally:
                counted[step, candidate.index] = len(waits)

        monkeypatch.setattr(LaunchCheck, step, count)

    counting("run")
    counting("settle")
    configs = [
        config(clock, 10.0 - i, BLOCK=b, EVEN=False, SCRIBBLE=False) for i, b in enumerate((16, 32, 64, 128))
    ]
    kernel = triton.autotune(configs=configs, key=["n"])(double_kernel)

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x):
        return launch(kernel, x, torch.empty_like(x))

    run(torch.randn(N, device=DEVICE))
    # The reference: which arguments it changed, then whether it writes its output whole; the first
    # candidate after it (which may find the reference the odd one out): whether the inputs hold what
    # the reference ran on, then its verdict. Each later one: its verdict read with its samples.
    assert {k: v for k, v in counted.items() if k[0] == "run"} == {
        ("run", 0): 2,
        ("run", 1): 2,
        ("run", 2): 0,
        ("run", 3): 0,
    }
    assert {k: v for k, v in counted.items() if k[0] == "settle" and v} == {
        ("settle", 2): 1,
        ("settle", 3): 1,
    }


@triton.jit
def sum_kernel(x_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
    """``out[0] = sum(x)``, one program adding ``BLOCK`` elements at a time (``n`` a constant: older
    interpreters, triton-ascend's, loop over constants only)."""
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        total += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(out_ptr, tl.sum(total, axis=0))


def test_configs_of_a_reduction_that_add_in_another_order_all_pass(clock):
    blocks = (16, 32, 64, 128)
    kernel = triton.autotune(
        configs=[config(clock, float(8 - i), BLOCK=b) for i, b in enumerate(blocks)], key=["n"]
    )(sum_kernel)
    # Positive terms: a sum that cancels to near zero would be off by more than fp32's tolerance, which
    # is a fraction of the output's own magnitude.
    x = torch.rand(1000, generator=torch.Generator().manual_seed(1)).to(DEVICE) * 100
    sums = []
    for block in blocks:
        out = torch.zeros(1, device=DEVICE)
        sum_kernel[(1,)](x, out, x.numel(), BLOCK=block)
        sums.append(out.item())
    assert len(set(sums)) > 1, "the orders of addition give sums that differ in their last bits"

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def total(x):
        out = torch.empty(1, device=DEVICE)
        kernel[(1,)](x, out, x.numel())
        return out

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = total(x)
    assert not wrong_warnings(caught)
    assert kernel.best_config is kernel.configs[-1], "the fastest, right within the tolerance"
    assert all(times[0] < float("inf") for times in kernel.configs_timings.values())
    torch.testing.assert_close(result, x.sum().reshape(1), rtol=1e-5, atol=1e-3)


def test_matmul_tiles_that_add_in_another_order_all_pass(clock):
    # float16 in, float32 out (where the order of addition shows); not bfloat16: Triton's interpreter
    # computes a bfloat16 tl.dot wrongly (NumPy has no bfloat16).
    dtype = torch.float16
    blocks = (16, 32, 64)  # tl.dot takes K >= 16 (triton-ascend 3.2.0's checks it)
    kernel = triton.autotune(
        configs=[config(clock, float(4 - i), BLOCK_K=b) for i, b in enumerate(blocks)], key=["S"]
    )(kernels.tiled_matmul)
    generator = torch.Generator().manual_seed(2)
    a, b = (torch.randn(64, 64, generator=generator).to(dtype).to(DEVICE) for _ in range(2))
    products = []
    for block in blocks:
        c = torch.empty(64, 64, device=DEVICE)
        kernels.tiled_matmul[(1,)](a, b, c, 64, BLOCK_K=block)
        products.append(c)
    assert any(not torch.equal(products[0], c) for c in products), "the tiles add in another order"

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def product(a, b):
        c = torch.empty(64, 64, device=DEVICE)
        kernel[(1,)](a, b, c, 64)
        return c

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = product(a, b)
    assert not wrong_warnings(caught)
    assert kernel.best_config is kernel.configs[-1], "the fastest, right within the tolerance"
    torch.testing.assert_close(result, a.float() @ b.float(), rtol=1e-4, atol=1e-3)


def test_a_reference_two_others_agree_against_is_dropped_and_they_are_kept(clock):
    # The first config is the wrong one: the next, asked for a second opinion, agrees with the one
    # after the reference, so the reference is the odd one out.
    wrong = config(clock, 1.0, BLOCK=64, EVEN=True, SCRIBBLE=False)
    rights = [config(clock, c, BLOCK=b, EVEN=False, SCRIBBLE=False) for b, c in ((32, 10.0), (64, 5.0))]
    kernel = triton.autotune(configs=[wrong, *rights], key=["n"])(double_kernel)
    x = torch.randn(N, device=DEVICE)
    (message,) = wrong_warnings(tune(kernel, x))
    assert kernel.best_config is rights[1], "the fastest of those left"
    assert "1 candidate(s)" in message and "differ from the reference [1] " in message
    assert f"\n  [0] {config_label(wrong)}: differs from [1] " in message and ", which agree: " in message
    assert "may be the wrong one" not in message


def test_a_reference_only_one_other_differs_from_stands_and_is_reported(clock):
    wrong = config(clock, 10.0, BLOCK=64, EVEN=True, SCRIBBLE=False)
    right = config(clock, 1.0, BLOCK=32, EVEN=False, SCRIBBLE=False)
    kernel = triton.autotune(configs=[wrong, right], key=["n"])(double_kernel)
    (message,) = wrong_warnings(tune(kernel, torch.randn(N, device=DEVICE)))
    assert kernel.best_config is wrong, "no second opinion: the reference stands"
    assert message.endswith(
        "no candidate that ran agrees with the reference: the reference may be the wrong one"
    )


def test_a_second_opinion_that_agrees_with_the_reference_drops_the_candidate(clock):
    right, also_right = (
        config(clock, c, BLOCK=b, EVEN=False, SCRIBBLE=False) for b, c in ((64, 10.0), (32, 5.0))
    )
    wrong = config(clock, 1.0, BLOCK=64, EVEN=True, SCRIBBLE=False)
    kernel = triton.autotune(configs=[right, wrong, also_right], key=["n"])(double_kernel)
    (message,) = wrong_warnings(tune(kernel, torch.randn(N, device=DEVICE)))
    assert kernel.best_config is also_right
    assert "1 candidate(s)" in message and "differ from the reference [0] " in message
    assert "may be the wrong one" not in message


@pytest.mark.filterwarnings("ignore::kerneltune.core.CandidateFailedWarning")
def test_when_no_candidate_is_valid_the_error_lists_the_wrong_ones(clock, monkeypatch):
    # The reference's own timed runs fail (a timer that cannot read them); the other one was wrong.
    kernel = doubling(clock, {"EVEN": True})
    reads = []

    def time_of(fn):
        fn()
        reads.append(clock[-1])
        if clock[-1] == 10.0:
            raise RuntimeError("the timer lost this run")
        return clock[-1]

    plugin = scripted_timer_plugin(time_of, "failing")
    add_plugin(plugin)
    monkeypatch.setenv("KERNELTUNE_TIMER", "failing")
    try:

        @contextual_autotune(n_repeat=1, n_warmup=1)
        def run(x):
            return launch(kernel, x, torch.empty_like(x))

        with pytest.raises(NoValidConfigError) as info:
            run(torch.randn(N, device=DEVICE))
    finally:
        remove_plugin(plugin)
    text = str(info.value)
    assert text.startswith("cannot find valid config")
    assert "differ from the reference [0]" in text and "[1] " in text


needs_tiling_by_hints = pytest.mark.skipif(
    ascend_stand_in.auto_tiling_by_hints_missing() is not None,
    reason=ascend_stand_in.auto_tiling_by_hints_missing() or "",
)


@triton.jit
def even_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """``out = x + y`` that assumes ``BLOCK`` divides ``n``: a tile that does not drops the remainder."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # as triton-ascend's parser finds the axis BLOCK splits
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, x + y, mask=offsets < (n // BLOCK) * BLOCK)


@needs_tiling_by_hints
@pytest.mark.filterwarnings("ignore::kerneltune.core.UncertainPickWarning")
def test_a_wrong_tiling_that_triton_ascend_generates_is_never_picked(monkeypatch):
    # For AUTO_TILED_N elements it generates BLOCK 2048, which divides it, and 1639, which does not;
    # the fake clock makes 1639 the fastest.
    noted: list[float] = []

    def note(args, reset_only=False):
        noted.append(1.0 if args["BLOCK"] == 1639 else 5.0)

    plugin = scripted_timer_plugin(lambda fn: (fn(), noted[-1])[1])
    add_plugin(plugin)
    monkeypatch.setenv("KERNELTUNE_TIMER", "scripted")
    kernel = triton.autotune(configs=[], key=["n"], hints={"enable_ascend_autotune": True}, pre_hook=note)(
        even_add_kernel
    )
    try:

        @contextual_autotune(n_repeat=1, n_warmup=0)
        def outer(x, y):
            return kernels.launch_add(kernel, x, y)

        x = torch.randn(kernels.AUTO_TILED_N)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.testing.assert_close(outer(x, x), 2 * x)
    finally:
        remove_plugin(plugin)
    assert type(kernel).__name__ == "AutoTilingTuner"
    assert sorted(c.kwargs["BLOCK"] for c in kernel.configs) == [1639, 2048]
    assert kernel.best_config.kwargs["BLOCK"] == 2048
    (message,) = wrong_warnings(caught)
    assert "1 candidate(s)" in message and "BLOCK=1639" in message
    assert "argument out_ptr: " in message


@pytest.mark.parametrize("strict", [False, True])
def test_arguments_over_the_budget_are_not_checked_with_a_notice_or_under_strict_an_error(
    clock, monkeypatch, strict
):
    monkeypatch.setenv("KERNELTUNE_CHECK_OUTPUTS_BUDGET", "1")
    kernel = doubling(clock, {"EVEN": True})

    @contextual_autotune(n_repeat=1, n_warmup=1, check_outputs="strict" if strict else None)
    def run(x):
        y = torch.empty_like(x)
        kernel[(2,)](x, y, N)  # the first N of 2**18 elements: 2 MiB of tensors, one program's work
        return y

    x = torch.randn(2**18, device=DEVICE)
    if strict:
        with pytest.raises(
            UncheckedOutputsError, match="check_outputs is strict and its tensor arguments hold"
        ):
            run(x)
        assert not kernel.cache
        return
    with pytest.warns(
        RuntimeWarning, match="over check_outputs_budget .1 MiB.; its candidates' outputs are not"
    ):
        run(x)
    assert kernel.best_config is kernel.configs[1], "unchecked, the fastest is picked"


def test_no_kernel_is_warmed_for_tensors_off_a_cuda_device():
    started = threading.active_count()
    wait = passes.warm([torch.ones(3), 1.5, "x"], lambda value: pytest.fail("warmed a CPU tensor"))
    assert threading.active_count() == started
    wait()


@triton.jit
def double_and_add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    """``y = 2 * x`` and ``z += x``, in place."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, 2.0 * x, mask=mask)
    tl.store(z_ptr + offsets, tl.load(z_ptr + offsets, mask=mask, other=0.0) + x, mask=mask)


def test_an_argument_a_kernel_changes_in_place_only_on_later_inputs_is_changed_once_per_execution(clock):
    # The first execution's input is zero, so the reference changes z by nothing and only y, which
    # it writes whole, counts as written; later executions change x, and every run adds it to z.
    # The reference runs for a candidate's check on copies, which go back: z gets x once per execution.
    kernel = triton.autotune(
        configs=[config(clock, 10.0, BLOCK=64), config(clock, 1.0, BLOCK=32)], key=["n"]
    )(double_and_add_kernel)
    executions: list[float] = []

    @contextual_autotune(n_repeat=1, n_warmup=1)
    def run(x, z):
        executions.append(float(len(executions)))
        x.fill_(executions[-1])
        y = torch.empty_like(x)
        kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x, y, z, N)
        return y

    x, z = torch.zeros(N, device=DEVICE), torch.zeros(N, device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WrongOutputWarning)
        y = run(x, z)
    assert kernel.best_config is kernel.configs[1]
    torch.testing.assert_close(y, 2 * x)
    torch.testing.assert_close(z, torch.full_like(z, sum(executions)))
