"""Picks made on a busy machine: stored as right, or marked uncertain, never confidently wrong.

A tuned function whose configs cost 1.0, 1.2, 1.44 and 1.73 times the
cheapest (listed in another order; ``--scales 1.12,1.0`` for two configs
12 % apart) is tuned in ``--processes`` fresh
processes while ``--load`` other processes keep every core busy, each
tuning storing its record in a cache folder of its own. Then, with the load
gone:

1. an oracle times every config in ``--oracle-rounds`` interleaved rounds
   (CPU: the host clock, median; GPU: ``triton.testing.do_bench``, median of
   rounds) and judges each stored pick: right when within 2 % of the
   fastest config;
2. as many fresh processes tune on the quiet machine (how many are confident);
3. every uncertain record from the busy phase is loaded by one more fresh,
   quiet process, which re-checks it (docs/measuring.md, "Uncertain picks"), and the
   re-checked record is judged again.

``--device cpu`` tunes host work (a Python loop, ``objective = "wall"``);
``--device cuda`` a Triton kernel whose loop count is the config
(``objective = "device"``), with the host load beside it. Printed: each
phase's table, the counts (and the rate of confident wrong picks under
load and on the quiet host), with the oracle's spread between rounds.

    python3 bench/noisy.py [--device cpu|cuda] [--processes 10] [--load N] [--scales A,B,...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: What each config costs, in units of the cheapest, in the order they are listed.
SCALES = (1.44, 1.0, 1.73, 1.2)
#: A pick within this fraction of the oracle's fastest config is right.
RIGHT = 0.02
#: Loop iterations of one unit of host work (about 4 ms on a 2-core VM).
CPU_UNIT = 100_000
#: Loop trips of one unit of the GPU kernel.
GPU_UNIT = 20_000


def spin(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total += i
    return total


# -- the tuned work, in a worker process --------------------------------------------------------


def gpu_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def busy_kernel(x_ptr, n, TRIPS: tl.constexpr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        for _ in range(TRIPS):
            x = x * 1.000001 + 0.5
        tl.store(x_ptr + offsets, x, mask=mask)

    return busy_kernel


def work_function(device: str, unit: int, scales: tuple[float, ...]):
    """The function each worker tunes: one config per scale, keyed by nothing.

    Its configs do different amounts of work on purpose, so their outputs differ:
    ``check_outputs=False`` keeps the output check from dropping all but the first.
    """
    from triton_dist.tune import autotune

    configs = [{"scale": scale} for scale in scales]
    if device == "cpu":

        @autotune(config_space=configs, key_fn=lambda: "noisy", check_outputs=False)
        def noisy_work(scale):
            return spin(int(unit * scale))

        return noisy_work, ()
    import torch

    kernel = gpu_kernel()
    x = torch.zeros(1 << 14, device="cuda")

    @autotune(config_space=configs, key_fn=lambda x: "noisy", check_outputs=False)
    def noisy_work(x, scale):
        kernel[(x.numel() // 1024,)](x, x.numel(), TRIPS=int(unit * scale), BLOCK=1024)

    return noisy_work, (x,)


def worker(args: argparse.Namespace) -> None:
    """Tune once with the cache folder given, and print what the record says."""
    work, arguments = work_function(args.device, args.unit, args.scales)
    started = time.perf_counter()
    work(*arguments)
    seconds = time.perf_counter() - started
    (path,) = Path(os.environ["TRITON_DIST_AUTOTUNE_CACHE_DIR"], "noisy_work").glob("[0-9a-f]*.json")
    record = json.loads(path.read_text())
    print(
        json.dumps(
            {
                "pick": record["best"]["index"],
                # Records of a kerneltune without verdicts read as confident: they were served so.
                "confidence": record.get("confidence", "confident"),
                "rivals": record.get("rivals", []),
                "rechecks": record.get("rechecks", 0),
                "seconds": seconds,
            }
        )
    )


# -- the phases ----------------------------------------------------------------------------------


def run_worker(args: argparse.Namespace, cache: Path) -> dict[str, Any]:
    env = {**os.environ, "TRITON_DIST_AUTOTUNE_CACHE_DIR": str(cache)}
    env["KERNELTUNE_OBJECTIVE"] = "wall" if args.device == "cpu" else "device"
    command = [sys.executable, __file__, "--worker", f"--device={args.device}", f"--unit={args.unit}"]
    command.append(f"--scales={','.join(map(str, args.scales))}")
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"worker failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def load_process(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        spin(10_000)


def under_load(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    """Tune in fresh processes while ``args.load`` processes spin beside them."""
    spinners = [
        multiprocessing.Process(target=load_process, args=(3600,), daemon=True) for _ in range(args.load)
    ]
    for spinner in spinners:
        spinner.start()
    try:
        time.sleep(0.5)
        return [run_worker(args, root / f"busy-{i}") for i in range(args.processes)]
    finally:
        for spinner in spinners:
            spinner.terminate()
        for spinner in spinners:
            spinner.join()


def oracle(args: argparse.Namespace) -> tuple[list[float], float]:
    """Each config's time on the quiet machine (interleaved rounds), and the rounds' spread.

    The spread is, over the configs, the largest ratio of a config's slowest
    round to its fastest, less one.
    """
    rounds: list[list[float]] = [[] for _ in args.scales]
    if args.device == "cpu":
        for r in range(args.oracle_rounds):
            order = list(range(len(args.scales)))
            order = order[r % len(order) :] + order[: r % len(order)]
            for i in order:
                runs = []
                for _ in range(5):
                    started = time.perf_counter()
                    spin(int(args.unit * args.scales[i]))
                    runs.append((time.perf_counter() - started) * 1e3)
                rounds[i].append(min(runs))
    else:
        import torch
        import triton.testing

        kernel = gpu_kernel()
        x = torch.zeros(1 << 14, device="cuda")
        grid = (x.numel() // 1024,)
        for r in range(args.oracle_rounds):
            order = list(range(len(args.scales)))
            order = order[r % len(order) :] + order[: r % len(order)]
            for i in order:
                trips = int(args.unit * args.scales[i])

                def launch(trips: int = trips) -> None:
                    kernel[grid](x, x.numel(), TRIPS=trips, BLOCK=1024)

                rounds[i].append(triton.testing.do_bench(launch, warmup=25, rep=100))
    times = [statistics.median(r) for r in rounds]
    spread = max(max(r) / min(r) - 1 for r in rounds)
    return times, spread


def judge(outcomes: list[dict[str, Any]], times: list[float]) -> list[dict[str, Any]]:
    best = min(times)
    for outcome in outcomes:
        outcome["regret"] = times[outcome["pick"]] / best - 1
        outcome["right"] = outcome["regret"] <= RIGHT
    return outcomes


def show(title: str, outcomes: list[dict[str, Any]], scales: tuple[float, ...]) -> None:
    print(f"\n{title}")
    print("  process  pick  scale  regret   confidence  rivals   tuning s")
    for i, o in enumerate(outcomes):
        print(
            f"  {i:>7}  [{o['pick']}]   {scales[o['pick']]:<5}  {o['regret']:>6.1%}   {o['confidence']:<10}  "
            f"{o['rivals']!s:<8} {o['seconds']:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--load", type=int, default=2 * (os.cpu_count() or 1), help="busy processes")
    parser.add_argument("--oracle-rounds", type=int, default=21)
    parser.add_argument("--unit", type=int, default=None, help="work per unit (loop iterations)")
    parser.add_argument(
        "--scales",
        type=lambda text: tuple(float(s) for s in text.split(",")),
        default=SCALES,
        help="each config's cost in units, comma-separated",
    )
    parser.add_argument("--smoke", action="store_true", help="a quick run of every phase (CI)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.unit is None:
        args.unit = CPU_UNIT if args.device == "cpu" else GPU_UNIT
    if args.worker:
        worker(args)
        return
    if args.smoke:
        args.processes, args.load, args.oracle_rounds, args.unit = 2, 2, 5, args.unit // 10
    with tempfile.TemporaryDirectory(prefix="kerneltune-noisy-") as folder:
        root = Path(folder)
        scales = args.scales
        print(f"{args.device}: {len(scales)} configs costing {scales} units; {args.load} busy processes")
        busy = under_load(args, root)
        times, spread = oracle(args)
        shown = ", ".join(f"{t:.4f}" for t in times)
        print(f"oracle (quiet, {args.oracle_rounds} interleaved rounds, ms): {shown}")
        print(f"oracle spread between rounds: {spread:.1%}")
        judge(busy, times)
        show(f"under load ({args.load} busy processes beside each tuning)", busy, args.scales)
        quiet = judge([run_worker(args, root / f"quiet-{i}") for i in range(args.processes)], times)
        show("quiet", quiet, args.scales)
        rechecked = []
        for i, outcome in enumerate(busy):
            if outcome["confidence"] == "uncertain":
                again = judge([run_worker(args, root / f"busy-{i}")], times)[0]
                again["process"] = i
                rechecked.append(again)
        show(
            "re-checked in a quiet process (each uncertain record of the busy phase)", rechecked, args.scales
        )
    confident_wrong = sum(1 for o in busy if o["confidence"] == "confident" and not o["right"])
    quiet_confident_wrong = sum(1 for o in quiet if o["confidence"] == "confident" and not o["right"])
    summary = {
        "busy_right_or_uncertain": sum(1 for o in busy if o["right"] or o["confidence"] == "uncertain"),
        "busy_confident_wrong": confident_wrong,
        "busy_right": sum(1 for o in busy if o["right"]),
        "quiet_confident": sum(1 for o in quiet if o["confidence"] == "confident"),
        "quiet_confident_wrong": quiet_confident_wrong,
        "quiet_right": sum(1 for o in quiet if o["right"]),
        "rechecked": len(rechecked),
        "rechecked_right_and_confident": sum(
            1 for o in rechecked if o["right"] and o["confidence"] == "confident"
        ),
        "processes": args.processes,
        "busy_seconds_mean": statistics.mean(o["seconds"] for o in busy),
        "quiet_seconds_mean": statistics.mean(o["seconds"] for o in quiet),
    }
    print("\nsummary")
    print(
        f"  under load: {summary['busy_right_or_uncertain']}/{args.processes} right or uncertain "
        f"({summary['busy_right']} right, {confident_wrong} confident and wrong)"
    )
    confident = summary["quiet_confident"]
    print(f"  quiet: {confident}/{args.processes} confident ({summary['quiet_right']} right)")
    print(
        f"  confident and wrong: {confident_wrong / args.processes:.0%} of picks under load, "
        f"{quiet_confident_wrong / args.processes:.0%} on the quiet host"
    )
    print(
        f"  re-checked: {summary['rechecked_right_and_confident']}/{summary['rechecked']} became the right, "
        "confident pick"
    )
    print(
        f"  mean tuning time: {summary['busy_seconds_mean']:.2f} s under load, "
        f"{summary['quiet_seconds_mean']:.2f} s quiet"
    )
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "device": args.device,
                    "scales": args.scales,
                    "oracle_ms": times,
                    "oracle_spread": spread,
                    "busy": busy,
                    "quiet": quiet,
                    "rechecked": rechecked,
                    "summary": summary,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
