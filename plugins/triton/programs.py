"""What a compiled Triton kernel is besides its compile: the program a config launches, its launcher.

:func:`program_of` tells twins (configs compiled to one program) apart, so
each is measured once; :func:`build_launcher` builds a release's host-side
C launcher ahead, in a compile process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import zlib
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

from kerneltune.plugins.triton import adapter

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows compiles on threads, with no launcher built ahead
    fcntl = None  # type: ignore[assignment]


#: Launch settings in a compiled kernel's metadata that change how its binary runs.
LAUNCH_METADATA = ("num_warps", "num_ctas", "shared", "cluster_dims", "launch_cooperative_grid", "launch_pdl")


def _plain(value: Any) -> Hashable:
    """``value`` as a hashable, for a program's identity."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return cast(Hashable, value)


def program_of(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Callable[[Any], Hashable | None]:
    """A function telling which program a config of ``tuner`` launches with this launch's arguments.

    Compiled: the binary (its digest) with the launch settings in its
    metadata (warps, CTAs, shared memory, ...), the config's meta-parameters
    (the grid may read them) and its pre-hook; the compile is found in the
    kernel's in-process cache after COMPILE. Under Triton's interpreter,
    which ignores ``num_warps``, ``num_stages`` and the NPU's compile
    options, the meta-parameters and pre-hook alone. ``None`` where there
    is no binary to compare.
    """
    fn = tuner.fn

    def config_part(config: Any) -> Hashable:
        meta = tuple(sorted((name, _plain(value)) for name, value in config.kwargs.items()))
        return meta, _plain(getattr(config, "pre_hook", None))

    if adapter.interpreting():
        return lambda config: ("interpreted", config_part(config))

    def program(config: Any) -> Hashable | None:
        compiled = fn.run(*args, **{**kwargs, **config.all_kwargs(), "warmup": True})
        binary = getattr(compiled, "kernel", None)
        if not isinstance(binary, (bytes, str)):
            return None
        digest = hashlib.sha256(binary.encode() if isinstance(binary, str) else binary).hexdigest()
        metadata = getattr(compiled, "metadata", None)
        launch = tuple((name, _plain(getattr(metadata, name, None))) for name in LAUNCH_METADATA)
        return digest, launch, config_part(config)

    return program


_launcher_file: int | None = None


def launcher_lock() -> int | None:
    """This process's launcher lock file (made once, removed from the folder at once), ``None`` where
    a system has no ``fcntl`` locks."""
    global _launcher_file
    if _launcher_file is None and fcntl is not None:
        with contextlib.suppress(OSError):
            descriptor, path = tempfile.mkstemp(prefix="kerneltune-launchers-")
            os.unlink(path)
            _launcher_file = descriptor
    return _launcher_file


#: Byte ranges of the launcher lock file, one per kernel name (by its checksum).
LAUNCHER_SLOTS = 1 << 16


def build_launcher(compiled: Any, descriptor: int | None) -> None:
    """In a compile process: build the host-side launcher the parent's first launch would build.

    Releases before 3.7 build a small C module per kernel signature at a
    kernel's first launch, kept in Triton's cache: measuring would start
    with that build. The first compile process of each kernel to finish
    builds it instead, beside its siblings' compiles; a lock (``lockf``,
    held until the process exits) makes the others skip it. Best effort: on
    any error the first launch builds it as before.

    :param descriptor: the parent's lock file (:func:`launcher_lock`); ``None``: nothing is built.
    """
    if descriptor is None or fcntl is None:
        return
    with contextlib.suppress(Exception):
        name = str(getattr(compiled.metadata, "name", ""))
        slot = zlib.crc32(name.encode()) % LAUNCHER_SLOTS
        fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
        from triton.runtime import driver

        launcher_cls = getattr(driver.active, "launcher_cls", None)
        if launcher_cls is not None:
            launcher_cls(compiled.src, compiled.metadata)
