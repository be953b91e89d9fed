"""Contextual tuning where a process restarts: fresh processes, a filled Triton cache, side by side.

GPU run, from the repository root (.peer/ is ignored: fetch it here once, and
carry it to the device machine):

    python3 bench/restart.py --fetch-peer /tmp/tdw/triton_dist-0.0.0-py3-none-any.whl
    python3 bench/restart.py --reps 4 --sides kerneltune,kerneltune-disk,triton-dist,stock --json restart.json

What every restart pays: the first call of the tuned work in a new process
whose Triton cache already holds every config's binary, so nothing is
compiled and only the tuner's own cost and its measuring remain. Each
measurement is a fresh process; it times the first call, from the call until
its result is on the device; imports, CUDA start-up, the sides' set-up and
the check of the result against a reference are not timed, alike for every
side. The 16-config bf16 4096^3 matmul of bench/regret.py and bench/cold.py,
tuned by

* ``kerneltune``: ``triton_dist.autotuner.contextual_autotune()`` around the
  launch of a ``triton.autotune`` kernel (bench/cold.py's ``contextual``);
* ``kerneltune-disk``: the same with ``KERNELTUNE_CONTEXTUAL_CACHE=disk`` and
  one ``TRITON_DIST_AUTOTUNE_CACHE_DIR`` for the whole run, so picks persist
  from process to process: the first rep tunes and stores (reported apart),
  the later reps are the restart figure;
* ``triton-dist``: the real Triton-distributed's ``contextual_autotune``,
  unmodified, around the same launch: its ``triton_dist/autotuner.py``,
  unpacked from the ``triton-dist`` wheel by ``--fetch-peer`` into the
  ignored folder .peer/ and loaded from there as ``peer_triton_dist_autotuner``
  (the wheel is never installed: its own ``triton`` package would replace
  Triton's). It logs every step under ``torch.distributed.get_rank()``, so its
  processes start a one-rank gloo group first, untimed;
* ``stock``: ``triton.autotune`` (its own do_bench tuning), for reference;
* ``kerneltune-settled``: the ``kerneltune`` side with measuring waiting for
  every program to load first, as before `91066d9` (``BENCH_LOAD_BESIDE=off``);
* ``kerneltune-before``: the ``kerneltune`` side with kerneltune imported from
  the folder ``BENCH_BEFORE`` names (an earlier tree, installed there with
  ``pip install --target``), for a before-and-after in one run.

First one cold process per tuner (stock, then kerneltune) fills a new
``TRITON_CACHE_DIR`` with every program either compiles; a separate warm
process (the oracle) times every config with bench/regret.py's interleaved
``do_bench`` rounds; then ``--reps`` rounds, each running every side once in
turn in a fresh process on that Triton cache. A pick's regret is its oracle
time over the fastest's, minus one. ``--timeline`` prints, per process, when
each kernel was loaded onto the device (``load+``/``load-``), each full
collection of Python's garbage collector (``gc+``/``gc-``) and, for
kerneltune, when each candidate was measured; with ``BENCH_PROFILE=<folder>``
(an absolute path) each child writes its main thread's profile there.

    python3 bench/restart.py [--reps 4] [--sides ...] [--oracle-rounds 5] [--json FILE] [--timeline]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

from kerneltune.core import add_plugin, hookimpl
from scratch import scratch

HERE = Path(__file__).resolve().parent
PEER_DIR = HERE.parent / ".peer"
#: The one file of the triton-dist wheel this bench runs, and the name it is loaded under.
PEER_MEMBER = "triton_dist/autotuner.py"
PEER_MODULE = "peer_triton_dist_autotuner"
SHAPE = (4096, 4096, 4096)
DISK = "KERNELTUNE_CONTEXTUAL_CACHE"
#: side -> (what the child runs, extra environment)
SIDES: dict[str, tuple[str, dict[str, str]]] = {
    "kerneltune": ("kerneltune", {}),
    "kerneltune-disk": ("kerneltune", {DISK: "disk"}),
    "kerneltune-before": ("kerneltune", {}),
    "kerneltune-settled": ("kerneltune", {"BENCH_LOAD_BESIDE": "off"}),
    "triton-dist": ("triton-dist", {}),
    "stock": ("stock", {}),
}


def fetch_peer(wheel: Path, into: Path = PEER_DIR) -> Path:
    """Unpack Triton-distributed's autotuner.py, and nothing else, from ``wheel`` into ``into``.

    The file is stored under a name that no import of ``triton_dist`` can
    reach, beside SOURCE.json (the wheel, and both digests, so a run can say
    what it measured and :func:`load_peer` can refuse an edited copy). It is
    loaded alone, so it may import nothing from its own package: a wheel
    whose autotuner does is refused, naming the imports.
    """
    data = wheel.read_bytes()
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read(PEER_MEMBER)
    siblings = package_imports(source)
    if siblings:
        raise SystemExit(
            f"{wheel.name}: {PEER_MEMBER} imports {', '.join(siblings)} from its own package;"
            " this bench loads that one file alone"
        )
    into.mkdir(parents=True, exist_ok=True)
    path = into / f"{PEER_MODULE}.py"
    path.write_bytes(source)
    origin = {
        "wheel": wheel.name,
        "wheel_sha256": hashlib.sha256(data).hexdigest(),
        "member": PEER_MEMBER,
        "sha256": hashlib.sha256(source).hexdigest(),
    }
    (into / "SOURCE.json").write_text(json.dumps(origin, indent=2) + "\n")
    return path


def package_imports(source: bytes) -> list[str]:
    """What ``source`` imports from the ``triton_dist`` package (absolute or relative), sorted."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level or module.split(".")[0] == "triton_dist":
                found.add(module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "triton_dist")
    return sorted(found)


def peer_source(into: Path = PEER_DIR) -> dict[str, str]:
    """Where the fetched peer file came from (SOURCE.json), once its digest shows it unedited."""
    path = into / f"{PEER_MODULE}.py"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run bench/restart.py --fetch-peer WHEEL first")
    origin = json.loads((into / "SOURCE.json").read_text())
    if hashlib.sha256(path.read_bytes()).hexdigest() != origin["sha256"]:
        raise SystemExit(f"{path} differs from {origin['member']} of {origin['wheel']}: fetch it again")
    return origin


def load_peer(into: Path = PEER_DIR) -> ModuleType:
    """Triton-distributed's autotuner module, as fetched, under the name ``peer_triton_dist_autotuner``.

    Loading it runs its module body, which replaces Triton's
    ``Autotuner.run`` with its own (as importing it does in Triton-distributed).
    """
    peer_source(into)
    spec = importlib.util.spec_from_file_location(PEER_MODULE, into / f"{PEER_MODULE}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[PEER_MODULE] = module
    spec.loader.exec_module(module)
    return module


def import_regret() -> ModuleType:
    """bench/regret.py, with this process's environment as its parent gave it.

    regret.py sets ``TRITON_DIST_AUTOTUNE_ALWAYS_TUNE`` and
    ``KERNELTUNE_CACHE=memory`` when imported, so that its tunings start from
    scratch; a restart must keep the settings it was started with, or the
    disk side could never find its stored pick.
    """
    given = dict(os.environ)
    import regret

    os.environ.clear()
    os.environ.update(given)
    return regret


class Tunings:
    """Observer: what kerneltune did in this process: tunings, candidates measured, picks loaded, the pick."""

    def __init__(self) -> None:
        self.started = 0
        self.measured = 0
        self.loaded = 0
        self.pick: int | None = None

    @hookimpl
    def kerneltune_tuning_started(self, event: Any) -> None:
        self.started += 1

    @hookimpl
    def kerneltune_candidate_measured(self, event: Any) -> None:
        self.measured += 1

    @hookimpl
    def kerneltune_tuning_finished(self, event: Any) -> None:
        self.pick = None if event.best is None else event.best.index

    @hookimpl
    def kerneltune_pick_loaded(self, event: Any) -> None:
        self.loaded += 1
        self.pick = event.best.index


def child(mode: str, oracle_rounds: int) -> dict[str, Any]:
    """One fresh process's measurement (the environment already holds its caches and settings)."""
    import torch

    regret = import_regret()
    torch.manual_seed(0)
    torch.cuda.init()
    work = regret.matmul(*SHAPE)
    if mode == "oracle":
        for config in work.configs:
            work.launch(config)
        return {"oracle_ms": regret.oracle(work, oracle_rounds)}
    from cold import Timeline, start_profile, write_profile  # bench/ is on the path as a script

    result: dict[str, Any] = {}
    timeline = Timeline()
    if mode == "kerneltune":
        timeline.watch_warm_up()  # and the loads, and the session
    else:
        timeline.watch_loads()
    if mode == "kerneltune":
        from triton_dist.autotuner import contextual_autotune

        tunings = Tunings()
        add_plugin(tunings)
        add_plugin(timeline)
    elif mode == "triton-dist":
        import torch.distributed as dist

        contextual_autotune = load_peer().contextual_autotune
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    torch.cuda.synchronize()
    profile = start_profile()
    started = timeline.started = time.perf_counter()
    tuned = work.autotuned()
    if mode == "stock":
        work.launch_autotuned(tuned)
    else:

        @contextual_autotune()
        def outer() -> None:
            work.launch_autotuned(tuned)

        outer()
    torch.cuda.synchronize()
    result["seconds"] = time.perf_counter() - started
    write_profile(profile, mode)
    result["timeline"] = timeline.events
    best = getattr(tuned, "best_config", None)
    result["pick"] = work.configs.index(best) if best is not None else None
    work.check()  # after the clock: a reference product is no part of the tuning
    if mode == "kerneltune":
        # A pick served from disk need not pass through the Autotuner's own fields: the events say it too.
        result.update(tunings=tunings.started, measured=tunings.measured, loaded=tunings.loaded)
        result.update(event_pick=tunings.pick, pick=result["pick"] if best is not None else tunings.pick)
    elif mode == "triton-dist":
        dist.destroy_process_group()
    return result


def spawn(side: str, triton_cache: str, picks: str, oracle_rounds: int = 0) -> dict[str, Any]:
    """Run ``side`` (or ``oracle``) in a fresh process on ``triton_cache``, picks under ``picks``.

    The child runs in a directory of its own: Triton-distributed's tuner
    writes ./.autotune_logs/rank-0.log wherever it runs, and would overwrite
    the working directory's.
    """
    mode, extra = SIDES.get(side, (side, {}))
    env = {k: v for k, v in os.environ.items() if k != DISK}
    env.update(extra, TRITON_CACHE_DIR=triton_cache, TRITON_DIST_AUTOTUNE_CACHE_DIR=picks)
    if side == "kerneltune-before":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (before_tree(), env.get("PYTHONPATH"))))
    cwd = Path(fresh("child"))
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        mode,
        "--store",
        str(cwd / "result.json"),
    ]
    done = subprocess.run(
        [*command, "--oracle-rounds", str(oracle_rounds)], cwd=cwd, env=env, timeout=300, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{side}: the child failed with exit status {done.returncode} (its error is above)")
    return json.loads((cwd / "result.json").read_text()) | {"cwd": str(cwd)}


def before_tree() -> str:
    """Where the ``kerneltune-before`` side imports kerneltune from: ``BENCH_BEFORE``."""
    before = os.environ.get("BENCH_BEFORE", "")
    if not before:
        raise SystemExit(
            "the kerneltune-before side needs BENCH_BEFORE: the folder an earlier tree is installed in"
        )
    return before


def fresh(what: str) -> str:
    return str(scratch(f"kerneltune-restart-{what}-"))


def regret_of(pick: int, oracle_ms: list[float]) -> float:
    return oracle_ms[pick] / min(oracle_ms) - 1


def summarise(results: dict[str, list[dict[str, Any]]], oracle_ms: list[float]) -> list[dict[str, Any]]:
    """One row per side (``kerneltune-disk``: its first rep, which tunes and stores, in a row of its own).

    Each row: its processes' seconds, their median, the median over the
    ``triton-dist`` and ``stock`` rows' (where run), and each pick's regret.
    """
    groups: list[tuple[str, list[dict[str, Any]]]] = []
    for side, runs in results.items():
        if side == "kerneltune-disk":
            groups.append(("kerneltune-disk, rep 1 (tunes, stores)", runs[:1]))
            runs = runs[1:]
        if runs:
            groups.append((side, runs))
    medians = {name: statistics.median(r["seconds"] for r in runs) for name, runs in groups}
    rows = []
    for name, runs in groups:
        row: dict[str, Any] = {
            "side": name,
            "seconds": [r["seconds"] for r in runs],
            "median_s": medians[name],
            "picks": [r["pick"] for r in runs],
            "regrets": [regret_of(r["pick"], oracle_ms) for r in runs],
        }
        for base in ("triton-dist", "stock"):
            if base in medians:
                row[f"over_{base}"] = medians[name] / medians[base]
        if "measured" in runs[0]:
            row["measured"] = [r["measured"] for r in runs]
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]], oracle_ms: list[float]) -> None:
    print(f"\n{'side':<40} {'median s':>9} {'/ triton-dist':>14} {'/ stock':>8}  picks, regret")
    for row in rows:
        ratios = [row.get(f"over_{base}") for base in ("triton-dist", "stock")]
        shown = [f"{r:.3f}" if r is not None else "-" for r in ratios]
        picks = ", ".join(f"[{p}] {g:.2%}" for p, g in zip(row["picks"], row["regrets"], strict=True))
        measured = f"  (measured {row['measured']})" if "measured" in row else ""
        print(f"{row['side']:<40} {row['median_s']:>9.3f} {shown[0]:>14} {shown[1]:>8}  {picks}{measured}")
        print(f"{'':<40} each: {', '.join(f'{s:.3f}' for s in row['seconds'])}")
    print(f"(oracle's fastest of the 16 configs: {min(oracle_ms) * 1000:.1f} us)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=4, help="fresh processes per side")
    parser.add_argument("--sides", default=",".join(SIDES), help=f"of {', '.join(SIDES)}")
    parser.add_argument("--oracle-rounds", type=int, default=5)
    parser.add_argument("--json", help="write every number here")
    parser.add_argument(
        "--timeline", action="store_true", help="print when each kernel loaded and was measured"
    )
    parser.add_argument(
        "--fetch-peer", metavar="WHEEL", help=f"unpack {PEER_MEMBER} from this triton-dist wheel into .peer/"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fetch_peer:
        path = fetch_peer(Path(args.fetch_peer))
        print(f"{path} ({json.loads((path.parent / 'SOURCE.json').read_text())['sha256'][:12]})")
        return
    if args.child:
        Path(args.store).write_text(json.dumps(child(args.child, args.oracle_rounds)))
        return
    sides = args.sides.split(",")
    unknown = sorted(set(sides) - set(SIDES))
    if unknown:
        raise SystemExit(f"unknown sides {unknown}: choose from {', '.join(SIDES)}")
    peer = peer_source() if "triton-dist" in sides else None  # a missing or edited copy stops the run here
    if "kerneltune-before" in sides:
        before_tree()
    import torch
    import triton

    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}")
    if peer:
        print(f"triton-dist: {peer['member']} of {peer['wheel']} (sha256 {peer['sha256'][:12]})")
    triton_cache = fresh("triton")
    warm_up = {side: spawn(side, triton_cache, fresh("picks")) for side in ("stock", "kerneltune")}
    print(
        "Triton cache filled by one cold process each: "
        + ", ".join(f"{side} {r['seconds']:.2f} s" for side, r in warm_up.items()),
        flush=True,
    )
    oracle_ms = spawn("oracle", triton_cache, fresh("picks"), args.oracle_rounds)["oracle_ms"]
    series = fresh("disk-picks")  # kerneltune-disk's picks, kept from process to process
    results: dict[str, list[dict[str, Any]]] = {}
    for rep in range(1, args.reps + 1):
        for side in sides:
            result = spawn(side, triton_cache, series if side == "kerneltune-disk" else fresh("picks"))
            results.setdefault(side, []).append(result)
            measured = f"  measured {result['measured']}" if "measured" in result else ""
            print(
                f"  rep {rep} {side:<16} {result['seconds']:7.3f} s  pick {result['pick']}{measured}",
                flush=True,
            )
            if args.timeline and result.get("timeline"):
                print(
                    "    " + " ".join(f"{s:.3f}:{what}{i}" for s, what, i in result["timeline"]), flush=True
                )
    rows = summarise(results, oracle_ms)
    print_table(rows, oracle_ms)
    if args.json:
        record = {
            "device": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "peer": peer,
            "warm_up": warm_up,
            "oracle_ms": oracle_ms,
            "results": results,
            "rows": rows,
        }
        Path(args.json).write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
