"""One rank of a contextual-tuning scenario over torch.distributed (gloo).

Run by tests/test_contextual_dist.py as
``python contextual_dist_worker.py SCENARIO RANK WORLD STORE OUT``; it joins
the group through the file ``STORE``, runs ``SCENARIO`` and writes what it
saw to ``OUT/rank-RANK.json`` (an ``error`` entry when the scenario raised).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
import torch.distributed as dist


def seed_example(rank: int) -> dict:
    """The seed's run_scale with is_dist=True on real interpreted kernels."""
    import triton
    from kernels import scale_kernel as scale_body

    from triton_dist.autotuner import contextual_autotune

    configs = [triton.Config({"BLOCK": 64}, num_warps=w) for w in (4, 8)]
    scale_kernel = triton.autotune(configs=configs, key=["n"])(scale_body)

    executions = []

    @contextual_autotune(is_dist=True, n_repeat=3, n_warmup=2)
    def run_scale(x, alpha):
        executions.append(1)
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 64),)](x, y, alpha, x.numel())
        return y

    x = torch.arange(128, dtype=torch.float32) * (rank + 1)
    y = run_scale(x, 3.0)
    return {
        "correct": bool(torch.allclose(y, 3.0 * x)),
        "pick": scale_kernel.configs.index(scale_kernel.best_config),
        "executions": len(executions),
    }


def slowest_rank_decides(rank: int) -> dict:
    """Per-rank scripted costs whose per-rank argmin differs from the argmin of the max."""
    import attrs
    from kerneltune.core import Session, load_settings
    from kerneltune.core.drivers import contextual as contextual_module
    from triton_fakes import ARG_NAMES, Autotuner32, Config32, FakeKernel, interceptor_plugin
    from tuning_doubles import FakeClock, clock_plugin

    from triton_dist.autotuner import contextual_autotune

    clock = FakeClock()
    plugins = (clock_plugin(clock), interceptor_plugin(Autotuner32))

    def session(settings=None, **overrides):  # current_session's signature
        settings = settings or load_settings()
        return Session.create(attrs.evolve(settings, timer="scripted", **overrides), extra=plugins)

    contextual_module.current_session = session
    # rank 0: 1 ms vs 5 ms; rank 1: 4 ms vs 2 ms. Max over ranks: 4 vs 5.
    costs = {8: 1.0, 16: 5.0} if rank == 0 else {8: 4.0, 16: 2.0}
    kernel = FakeKernel(clock, costs)
    configs = [Config32({"BLOCK": 8}), Config32({"BLOCK": 16})]
    tuner = Autotuner32(kernel, ARG_NAMES, configs, ["n"])

    @contextual_autotune(is_dist=True, n_repeat=2, n_warmup=1)
    def outer(n):
        return tuner[(1,)]("x", n)

    outer(5)
    return {"pick": configs.index(tuner.best_config)}


def ranks_prune_differently(rank: int) -> dict:
    """A kernel whose own pruning keeps different configs on each rank."""
    import triton
    import triton.language as tl

    from triton_dist.autotuner import contextual_autotune

    def prune(configs, named_args, **kwargs):
        return configs[rank:]

    @triton.autotune(
        configs=[triton.Config({"BLOCK": 64}, num_warps=w) for w in (2, 4, 8)],
        key=["n"],
        prune_configs_by={"early_config_prune": prune},
    )
    @triton.jit
    def fill_kernel(y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offsets, 1.0, mask=offsets < n)

    @contextual_autotune(is_dist=True, n_repeat=1, n_warmup=0)
    def outer():
        y = torch.empty(64)
        fill_kernel[(1,)](y, 64)
        return y

    outer()
    return {"finished": True}


def key_changes_every_execution(rank: int) -> dict:
    """A step counter in the key, and a collective in every execution of the outer function."""
    import triton
    import triton.language as tl

    from triton_dist.autotuner import contextual_autotune

    @triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=w) for w in (4, 8)], key=["n", "step"])
    @triton.jit
    def stepped_kernel(y_ptr, n, step, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offsets, 1.0, mask=offsets < n)

    executions = []

    @contextual_autotune(is_dist=True, n_repeat=1, n_warmup=1)
    def outer():
        executions.append(1)
        y = torch.empty(64)
        stepped_kernel[(1,)](y, 64, len(executions))
        dist.all_reduce(y)
        return y

    try:
        outer()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "executions": len(executions)}
    return {"executions": len(executions)}


def crash_on_one_rank_screened_out_on_both(rank: int) -> dict:
    """isolate = "subprocess": block 64 segfaults in rank 1's isolation worker only."""
    os.environ["KERNELTUNE_ISOLATE"] = "subprocess"
    import isolation_kernels as kernels

    from triton_dist.autotuner import contextual_autotune

    x = torch.arange(64, dtype=torch.float32)

    @contextual_autotune(is_dist=True, n_repeat=1, n_warmup=0)
    def outer():
        y = kernels.launch(kernels.doubled, x, CRASH=64 if rank == 1 else 0)
        dist.all_reduce(y)
        return y

    with kernels.observed() as outcomes:
        y = outer()
        return {
            "correct": bool(torch.equal(y, 4 * x)),
            "pick": kernels.doubled.best_config.kwargs["BLOCK"],
            "errors": outcomes.of("guarded_double", 64),
            "here": sorted({block for pid, block in kernels.launches() if pid == os.getpid()}),
            "worker": [block for pid, block in kernels.launches() if pid != os.getpid()],
        }


def auto_tiled_on_two_ranks(rank: int, by_params: bool = False) -> dict:
    """triton-ascend's auto-tiling tuner under is_dist=True: kerneltune tunes its generated tiles.

    :param by_params: declared as 3.2.0rc4 declares it (``split_params``, ``tiling_params`` and a
        dict key), not from hints as 3.2.0 does.
    """
    import kernels

    from triton_dist.autotuner import contextual_autotune

    kernel = kernels.auto_tiled_by_params() if by_params else kernels.auto_tiled_add()
    measured = []

    @contextual_autotune(is_dist=True, n_repeat=2, n_warmup=1)
    def outer(x, y):
        measured.append(1)
        return kernels.launch_add(kernel, x, y)

    x = torch.ones(kernels.AUTO_TILED_N)
    out = outer(x, x)
    return {
        "correct": bool(torch.equal(out, 2 * x)),
        "pick": kernel.best_config.kwargs,
        "configs": [c.kwargs for c in kernel.configs],
        "executions": len(measured),
    }


def unknown_tuner_class_refused(rank: int) -> dict:
    """An Autotuner subclass with a run() of its own, which the adapter does not know."""
    import triton
    from kernels import scale_kernel
    from triton.runtime.autotuner import Autotuner

    from triton_dist.autotuner import contextual_autotune

    class FirstConfigTuner(Autotuner):
        def run(self, *args, **kwargs):
            self.best_config = self.configs[0]
            return self.fn.run(*args, **kwargs, **self.configs[0].all_kwargs())

    configs = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]
    tuner = FirstConfigTuner(scale_kernel, scale_kernel.arg_names, configs, ["n"], None, None)

    @contextual_autotune(is_dist=True)
    def outer(x):
        y = torch.empty_like(x)
        tuner[(1,)](x, y, 2.0, x.numel())
        return y

    outer(torch.ones(64))
    return {"tuned": True}


def twins_on_every_rank(rank: int, split: bool = False) -> dict:
    """Eight configs that are four programs under the interpreter (num_warps ignored), is_dist=True.

    With ``split``, rank 1's backend tells every config apart, as a rank whose
    binaries differed would: the ranks must then measure every config, alike.
    """
    import triton
    from kernels import scale_kernel as scale_body
    from kerneltune.core import add_plugin, hookimpl
    from kerneltune.plugins.triton import programs

    from triton_dist.autotuner import contextual_autotune

    os.environ["KERNELTUNE_TWINS"] = "1"
    if split and rank == 1:
        programs.program_of = lambda tuner, args, kwargs: lambda config: ("own", id(config))
    measured: list[int] = []
    dropped: list[int] = []

    class Measured:
        @hookimpl
        def kerneltune_candidate_measured(self, event):
            (measured if event.measurement.error is None else dropped).append(event.candidate.index)

    add_plugin(Measured())
    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (32, 64, 128, 256) for w in (4, 8)]
    scale_kernel = triton.autotune(configs=configs, key=["n"])(scale_body)

    @contextual_autotune(is_dist=True, n_repeat=2, n_warmup=1)
    def run_scale(x):
        y = torch.empty_like(x)
        scale_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, 2.0, x.numel())
        return y

    x = torch.arange(256, dtype=torch.float32)
    y = run_scale(x)
    return {
        "correct": bool(torch.allclose(y, 2.0 * x)),
        "measured": sorted(measured),
        "dropped": sorted(dropped),
        "pick": scale_kernel.configs.index(scale_kernel.best_config),
    }


def wrong_on_one_rank(rank: int) -> dict:
    """Config 1, the fastest on both ranks, clamps what exceeds 100: wrong on rank 1's data alone."""
    import warnings

    import attrs
    import triton
    import triton.language as tl
    from kerneltune.core import Session, load_settings
    from kerneltune.core.drivers import contextual as contextual_module
    from kerneltune.core.errors import WrongOutputWarning
    from tuning_doubles import scripted_timer_plugin

    from triton_dist.autotuner import contextual_autotune

    noted: list[float] = []
    plugin = scripted_timer_plugin(lambda fn: (fn(), noted[-1])[1])

    def session(settings=None, **overrides):  # current_session's signature
        settings = settings or load_settings()
        return Session.create(attrs.evolve(settings, timer="scripted", **overrides), extra=(plugin,))

    contextual_module.current_session = session

    @triton.jit
    def clamped_double(x_ptr, y_ptr, n, BLOCK: tl.constexpr, CLAMP: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        if CLAMP:
            x = tl.minimum(x, 100.0)
        tl.store(y_ptr + offsets, 2.0 * x, mask=mask)

    configs = [
        triton.Config({"BLOCK": 64, "CLAMP": clamp}, pre_hook=lambda args, cost=cost: noted.append(cost))
        for clamp, cost in ((False, 10.0), (True, 1.0))
    ]

    def tuned(**options):
        """A kernel of its own under contextual_autotune(is_dist=True, **options)."""
        kernel = triton.autotune(configs=configs, key=["n"])(clamped_double)

        @contextual_autotune(is_dist=True, n_repeat=1, n_warmup=1, **options)
        def run(x):
            y = torch.empty_like(x)
            kernel[(1,)](x, y, x.numel())
            return y

        return kernel, run

    x = torch.arange(64, dtype=torch.float32) * (1 if rank == 0 else 10)
    # With is_dist the check is asked for by the decorator alone; the setting leaves it off.
    kernel, run = tuned()
    run(x)
    unchecked_pick = configs.index(kernel.best_config)
    kernel, run = tuned(check_outputs=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = run(x)
    return {
        "correct": bool(torch.equal(y, 2 * x)),
        "pick": configs.index(kernel.best_config),
        "unchecked_pick": unchecked_pick,
        "wrong": [str(w.message) for w in caught if issubclass(w.category, WrongOutputWarning)],
    }


SCENARIOS = {
    "seed": seed_example,
    "slowest": slowest_rank_decides,
    "mismatch": ranks_prune_differently,
    "stalled": key_changes_every_execution,
    "isolated": crash_on_one_rank_screened_out_on_both,
    "autotiling": auto_tiled_on_two_ranks,
    "autotiling_by_params": lambda rank: auto_tiled_on_two_ranks(rank, by_params=True),
    "unknown_tuner": unknown_tuner_class_refused,
    "twins": twins_on_every_rank,
    "wrong_on_one_rank": wrong_on_one_rank,
    "twins_split": lambda rank: twins_on_every_rank(rank, split=True),
}


def main() -> None:
    scenario, rank, world, store, out = sys.argv[1:6]
    rank, world = int(rank), int(world)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{store}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        result = SCENARIOS[scenario](rank)
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
    Path(out, f"rank-{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
