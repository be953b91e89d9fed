"""The contextual tuner's log: ``./.autotune_logs/rank-<rank>.log``, appended.

One line per warm-up or timed launch of a candidate and a summary per
(kernel, key); docs/contextual.md ("Logs") says what each holds. The rank is
the process's global rank in torch.distributed, so ranks never write to one
file. While a kernel is tuned the file stays open (a
:class:`~kerneltune.core.private_files.PrivateAppender`); its summary closes
it (opening it for each launch cost about 20 us a launch).
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path

from kerneltune.core import KernelTuned, LaunchMeasured, PrivateAppender, hookimpl, user_stacklevel

LOG_DIR = Path(".autotune_logs")

#: The logs open while kernels are tuned, by path (relative: a new working directory opens anew);
#: closed by a kernel's summary.
_logs = PrivateAppender(private_folders=False)


def _rank() -> int:
    # Only ask torch.distributed if the program imported it: a tuner without
    # it must not pay for importing it.
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return 0


def _append(text: str, *, last: bool = False) -> None:
    """Append ``text``'s lines, stamped; ``last``: then close every log open here (a kernel is tuned)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    lines = "".join(f"{stamp} {line}\n" for line in text.splitlines())
    path = LOG_DIR / f"rank-{_rank()}.log"
    try:
        _logs.write(path, lines)
    except OSError as exc:
        # The log records a tuning, it is not part of it: a read-only working
        # directory must not cost the picks. One message for every line, so
        # Python's default warning filter shows it once.
        warnings.warn(
            f"kerneltune: cannot write the contextual tuning log {path} ({exc}); tuning goes on without it",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    finally:
        if last:
            _logs.close()


def _ms(value: float) -> str:
    return f"{value:.6f} ms" if math.isfinite(value) else "invalid"


@hookimpl
def kerneltune_launch_measured(event: LaunchMeasured) -> None:
    if event.error is not None:
        outcome = f"exception: {event.error}"
    elif event.time_ms is None:
        outcome = "done"
    else:
        outcome = _ms(event.time_ms)
    line = (
        f"kernel {event.kernel} key {event.key!r} config {event.candidate.index} "
        f"{event.phase} round {event.round}/{event.rounds}: {outcome}"
    )
    trace = "".join(f"\n    {part}" for part in (event.traceback or "").splitlines())
    _append(line + trace)


@hookimpl
def kerneltune_kernel_tuned(event: KernelTuned) -> None:
    errors = event.errors or (None,) * len(event.candidates)
    lines = [
        f"kernel {event.kernel} key {event.key!r}: config {c.index} mean {_ms(t)} [{c.label}]"
        + ("" if error is None else f" failed: {error}")
        for c, t, error in zip(event.candidates, event.means, errors, strict=True)
    ]
    if event.best is None:
        lines.append(f"kernel {event.kernel} key {event.key!r}: cannot find valid config")
    else:
        lines.append(
            f"kernel {event.kernel} key {event.key!r}: best config {event.best.index} "
            f"[{event.best.label}] over {event.world_size} rank(s)"
        )
    _append("\n".join(lines), last=True)
