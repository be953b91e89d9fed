"""How long until N compile processes have all begun: forked one after another, or as a tree.

COMPILE forks a compile process per candidate; forking copies the forking
process's page tables, so each fork of a process holding torch (and, on a
GPU, a CUDA context) takes milliseconds. This script times, side by side in
one process, alternating:

* ``serial``: N forks one after another from this process (COMPILE before
  `792d031`);
* ``tree``: one :func:`kerneltune.core.compiling.fork_tree.fork` of N, until
  every compile process has reported its pid.

Each child exits at once, so the figure is the forking alone. It prints the
median of ``--reps`` runs of each and their ratio. With a CUDA device
present, torch's CUDA context is made first, as in a tuning process.
``--ballast`` touches that many MB of extra heap, for a larger process.

    python3 bench/fork_tree.py [--n 16,48] [--reps 5] [--ballast 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from kerneltune.core.compiling import fork_tree


def _exit_now(index: int) -> None:
    os._exit(0)


def serial(n: int) -> float:
    """Seconds until the last of ``n`` forks, one after another, has begun."""
    began = time.perf_counter()
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        pids.append(pid)
    took = time.perf_counter() - began
    for pid in pids:
        os.waitpid(pid, 0)
    return took


def as_tree(n: int) -> float:
    """Seconds until all ``n`` compile processes of a tree have said they began."""
    began = time.perf_counter()
    _, compiles = fork_tree.fork(n, _exit_now)  # type: ignore[arg-type]
    for compile in compiles:
        while compile.pid is None and not compile.ended(0.001):
            pass
    took = time.perf_counter() - began
    for compile in compiles:
        while not compile.ended(0.01):
            pass
        compile.release()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="16,48", help="compile processes per run, comma-separated")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ballast", type=int, default=0, help="MB of extra heap to touch first")
    args = parser.parse_args()
    ballast = [bytearray(1 << 20) for _ in range(args.ballast)]
    for block in ballast:
        block[::4096] = b"x" * len(block[::4096])
    device = "cpu"
    try:
        import torch

        if torch.cuda.is_available():
            torch.zeros(1, device="cuda")
            device = torch.cuda.get_device_name()
    except ImportError:
        pass
    print(f"device {device}, {os.cpu_count()} cores, ballast {args.ballast} MB")
    print(f"{'n':>4} {'serial ms':>10} {'tree ms':>9} {'tree/serial':>13}")
    for n in (int(word) for word in args.n.split(",")):
        runs: dict[str, list[float]] = {"serial": [], "tree": []}
        for _ in range(args.reps):
            runs["serial"].append(serial(n))
            runs["tree"].append(as_tree(n))
        s, b = (statistics.median(runs[name]) for name in ("serial", "tree"))
        print(f"{n:>4} {s * 1e3:>10.1f} {b * 1e3:>9.1f} {b / s:>13.2f}")


if __name__ == "__main__":
    main()
