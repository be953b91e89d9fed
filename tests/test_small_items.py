"""Issue 38's smaller items: contextual tune = 'fail' advice, pruned in the tuning log,
"trimmed mean" in verbose lines, and a private contextual log file."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

import kernels
import pytest
import torch
import triton
from kerneltune.core import NoStoredPickError, private_files
from kerneltune.plugins.observers import contextual_log

from triton_dist.autotuner import contextual_autotune
from triton_dist.tune import autotune

BLOCK = 64


def make_scale_kernel():
    configs = [triton.Config({"BLOCK": BLOCK}, num_warps=w) for w in (4, 8)]
    return triton.autotune(configs=configs, key=["n"])(kernels.scale_kernel)


def launch_scale(kernel, x, alpha):
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, alpha, x.numel())
    return y


def test_contextual_tune_fail_advises_this_process_or_a_disk_cache(monkeypatch, isolated):
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run_scale(x):
        return launch_scale(scale_kernel, x, 2.0)

    monkeypatch.setenv("KERNELTUNE_TUNE", "fail")
    with pytest.raises(NoStoredPickError) as info:
        run_scale(torch.randn(64, device=kernels.DEVICE))
    message = str(info.value)
    assert "contextual picks live only in this process" in message
    assert "tune this key earlier in this process" in message
    assert "set contextual_cache = 'disk' and keep its cache" in message


def test_function_tune_fail_still_advises_keeping_the_cache(monkeypatch, isolated):
    @autotune(config_space=[{"n": 1}], key_fn=lambda x: x)
    def work(x, n):
        return x * n

    monkeypatch.setenv("KERNELTUNE_TUNE", "fail")
    with pytest.raises(NoStoredPickError, match="and keep its cache") as info:
        work(3)
    assert "contextual" not in str(info.value)


def test_tuning_log_says_pruned_and_trimmed_mean(capsys, isolated):
    @autotune(
        config_space=[{"n": 1}, {"n": 2}],
        key_fn=lambda x: x,
        prune_fn=lambda config, x: config["n"] == 1,
    )
    def work(x, n):
        return x * n

    assert work(3, autotune_verbose=True) == 3
    out = capsys.readouterr().out
    assert "[0] n=<1>: trimmed mean " in out
    assert ": mean " not in out
    log = (isolated / "work" / "tune-rank0.log").read_text()
    table = [line for line in log.splitlines() if line.startswith("    [")]
    assert any(line.startswith("    [1] pruned ") for line in table), log
    assert not any(" inf " in line for line in table), log


def test_contextual_log_file_is_private(monkeypatch, isolated):
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run_scale(x):
        return launch_scale(scale_kernel, x, 2.0)

    run_scale(torch.randn(64, device=kernels.DEVICE))
    log = isolated.parent / ".autotune_logs" / "rank-0.log"
    assert log.exists()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def open_files() -> set[str]:
    """What this process's file descriptors point to now."""
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile (listdir's own)
            held.add(os.readlink(f"/proc/self/fd/{fd}"))
    return held


def test_the_contextual_log_is_opened_once_per_kernel_tuned_and_closed_after(monkeypatch, isolated):
    opened = []
    real = private_files._open

    def noting(path, flags, *rest):
        opened.append(Path(path).name)
        return real(path, flags, *rest)

    monkeypatch.setattr(private_files, "_open", noting)
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=2, n_warmup=1)
    def run_scale(x):
        return launch_scale(scale_kernel, x, 2.0)

    run_scale(torch.randn(64, device=kernels.DEVICE))
    log = isolated.parent / ".autotune_logs" / "rank-0.log"
    assert opened.count("rank-0.log") == 1, opened
    assert str(log.resolve()) not in open_files(), "closed with the kernel's summary"
    lines = log.read_text().splitlines()
    configs = len(scale_kernel.configs)
    assert sum(" round " in line for line in lines) == 3 * configs, "a line per launch, all written"
    assert sum(" mean " in line for line in lines) == configs and "best config" in lines[-1]


def test_the_contextual_log_goes_into_a_log_folder_others_made_as_it_is(monkeypatch, isolated):
    folder = isolated.parent / ".autotune_logs"
    folder.mkdir(mode=0o775)
    folder.chmod(0o775)  # as a umask of 002 leaves the folder the real Triton-distributed makes
    contextual_log._append("kernel k key 1 config 0 warmup round 1/1: done", last=True)
    assert "warmup round 1/1: done" in (folder / "rank-0.log").read_text()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o775, "left as it was"
    assert stat.S_IMODE((folder / "rank-0.log").stat().st_mode) == 0o600


def test_a_contextual_log_removed_while_open_is_written_anew(monkeypatch, isolated):
    # A tuning cut short (an interrupt) leaves its log open; the folder is then removed by hand.
    contextual_log._append("kernel k key 1 config 0 warmup round 1/1: done")
    folder = isolated.parent / ".autotune_logs"
    assert str((folder / "rank-0.log").resolve()) in open_files()
    (folder / "rank-0.log").unlink()
    scale_kernel = make_scale_kernel()

    @contextual_autotune(n_repeat=1, n_warmup=0)
    def run_scale(x):
        return launch_scale(scale_kernel, x, 2.0)

    run_scale(torch.randn(64, device=kernels.DEVICE))
    lines = (folder / "rank-0.log").read_text().splitlines()
    assert sum(" round " in line for line in lines) == len(scale_kernel.configs)
    assert "best config" in lines[-1]
