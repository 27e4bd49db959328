"""braze.aot: packages written once and loaded without the compiler;
numerics against eager PyTorch, bad packages and weights refused with a
BrazeError, weights shared and swapped through a WeightStore."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import braze  # noqa: E402
from braze import aot  # noqa: E402
from braze.aot.loader import manifest_checksum  # noqa: E402
from braze.errors import BrazeError  # noqa: E402

from torch import nn  # noqa: E402


class Block(nn.Module):
    """Linear, GELU, Linear with a residual and a LayerNorm: GEMMs on
    transposed parameters (folded when the program is built), kernels,
    constants."""

    def __init__(self, width: int = 32, hidden: int = 64):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))) * 2.0 + 1.0


def _model(seed: int = 0) -> Block:
    torch.manual_seed(seed)
    return Block().eval()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("aot")


@pytest.fixture(scope="module")
def static_package(cache):
    return aot.package(_model(), (torch.randn(8, 32),), cache / "static")


@pytest.fixture(scope="module")
def dynamic_package(cache):
    batch = braze.ShapeVar("batch", min=1, max=64)
    spec = braze.dynamic_spec(x={0: batch})
    return aot.package(_model(), (torch.randn(8, 32),), cache / "dynamic", dynamic_spec=spec)


def _copy(package: Path, tmp_path: Path) -> Path:
    target = tmp_path / package.name
    shutil.copytree(package, target)
    return target


def _rewrite_manifest(package: Path, **changes) -> None:
    """Edits the manifest and signs it again, as a package built elsewhere
    would be signed."""
    manifest = json.loads((package / "manifest.json").read_text())
    manifest.update(changes)
    manifest["checksum"] = manifest_checksum(manifest)
    (package / "manifest.json").write_text(json.dumps(manifest))


def test_static_package_matches_eager(static_package):
    model = _model()
    loaded = aot.load(static_package)
    x = torch.randn(8, 32)
    torch.testing.assert_close(loaded(x), model(x))
    manifest = loaded.manifest
    assert manifest["target"] == "cpu" and manifest["signature"]["arguments"] == ["tensor<8x32xf32>"]
    assert set(manifest["files"]) >= {"kernels.cpp", "kernels.so", "program.json", "weights.safetensors"}


def test_dynamic_package_matches_eager_at_every_size(dynamic_package):
    model = _model()
    loaded = aot.load(dynamic_package)
    assert loaded.manifest["signature"]["symbols"] == {"batch": "[1, 64]"}
    for batch in (1, 5, 8, 64):
        x = torch.randn(batch, 32)
        torch.testing.assert_close(loaded(x), model(x))
    with pytest.raises(BrazeError, match="batch = 65 is outside its range"):
        loaded(torch.randn(65, 32))
    with pytest.raises(BrazeError, match="argument #0 dim 1 is 31"):
        loaded(torch.randn(4, 31))


# The child process cannot import MLIR; afterwards none of braze's compiler
# modules may have been loaded either.
_COMPILER = ("mlir", "braze.ir", "braze.passes", "braze.compiler", "braze.codegen", "braze.frontend",
             "braze.target", "braze.reference", "braze._braze", "braze._native", "braze.dialects")

_NO_COMPILER = textwrap.dedent("""
    import importlib.abc, sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "mlir" or name.startswith("mlir."):
                raise ModuleNotFoundError(f"blocked: {{name}}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    import torch
    from braze import aot

    for package, x, y in zip(*[iter(sys.argv[1:])] * 3):
        torch.save(aot.load(package)(torch.load(x)), y)
    from braze.errors import BrazeError  # a plain exception here: there is no MLIR

    try:
        aot.load(sys.argv[1])(torch.zeros(2, 32))
    except BrazeError as error:
        assert "argument #0 dim 0 is 2 but the function expects 8" in str(error), error
    else:
        raise AssertionError("a wrong argument was accepted")
    imported = sorted(m for m in sys.modules if any(m == c or m.startswith(c + ".") for c in {compiler!r}))
    assert not imported, imported
    print("ok")
""")


def test_loads_and_runs_without_mlir_or_the_compiler(static_package, dynamic_package, tmp_path):
    inputs = {"static": torch.randn(8, 32), "dynamic": torch.randn(3, 32)}
    arguments = []
    for name, package in (("static", static_package), ("dynamic", dynamic_package)):
        torch.save(inputs[name], tmp_path / f"{name}-x.pt")
        arguments += [str(package), str(tmp_path / f"{name}-x.pt"), str(tmp_path / f"{name}-y.pt")]
    script = tmp_path / "run.py"
    script.write_text(_NO_COMPILER.format(compiler=_COMPILER))
    # No C++ compiler either: the package carries its binary.
    env = dict(os.environ, CXX="/nonexistent/c++", PATH="/nonexistent")
    run = subprocess.run([sys.executable, str(script), *arguments], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"
    for name, x in inputs.items():
        torch.testing.assert_close(torch.load(tmp_path / f"{name}-y.pt"), _model()(x))


def test_the_blocker_does_block(tmp_path):
    """The child process above would fail on any import of MLIR."""
    script = tmp_path / "run.py"
    script.write_text(_NO_COMPILER.format(compiler=_COMPILER).split("import torch")[0] + "import braze.compiler\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "blocked: mlir" in run.stderr


@pytest.mark.parametrize("name", ["kernels.so", "program.json", "constants.safetensors", "weights.safetensors"])
def test_refuses_a_corrupted_file(name, static_package, tmp_path):
    package = _copy(static_package, tmp_path)
    data = bytearray((package / name).read_bytes())
    data[len(data) // 2] ^= 0x40
    (package / name).write_bytes(bytes(data))
    with pytest.raises(BrazeError, match=f"{name} is corrupted"):
        aot.load(package)


@pytest.mark.parametrize("name", ["kernels.so", "program.json", "weights.safetensors"])
def test_refuses_a_truncated_file(name, static_package, tmp_path):
    package = _copy(static_package, tmp_path)
    data = (package / name).read_bytes()
    (package / name).write_bytes(data[: len(data) // 3])
    with pytest.raises(BrazeError, match=f"{name} is truncated or corrupted"):
        aot.load(package)


def test_refuses_a_truncated_or_edited_manifest(static_package, tmp_path):
    package = _copy(static_package, tmp_path)
    text = (package / "manifest.json").read_text()
    (package / "manifest.json").write_text(text[: len(text) // 2])
    with pytest.raises(BrazeError, match="manifest.json is truncated or corrupted"):
        aot.load(package)
    (package / "manifest.json").write_text(text.replace('"cpu_features": [', '"cpu_features": ["avx1024", '))
    with pytest.raises(BrazeError, match="checksum does not match"):
        aot.load(package)
    with pytest.raises(BrazeError, match="does not exist"):
        aot.load(tmp_path / "nothing-here")


def test_refuses_missing_cpu_features_another_gpu_or_version(static_package, tmp_path):
    package = _copy(static_package, tmp_path)
    manifest = json.loads((package / "manifest.json").read_text())
    _rewrite_manifest(package, cpu_features=manifest["cpu_features"] + ["avx1024_imaginary"])
    with pytest.raises(BrazeError, match="CPU features this machine lacks: avx1024_imaginary"):
        aot.load(package)
    _rewrite_manifest(package, cpu_features=manifest["cpu_features"], machine="riscv64")
    with pytest.raises(BrazeError, match="built for riscv64 CPUs"):
        aot.load(package)
    if not torch.cuda.is_available():
        _rewrite_manifest(package, machine=manifest["machine"], device="cuda:0", gpu="NVIDIA H200 (sm_90)")
        with pytest.raises(BrazeError, match=r"runs on cuda:0 \(NVIDIA H200 \(sm_90\)\), but this machine has no CUDA"):
            aot.load(package)
    _rewrite_manifest(package, device="cpu", braze="0.0.0-other")
    with pytest.raises(BrazeError, match="written by braze 0.0.0-other; this is braze"):
        aot.load(package)
    _rewrite_manifest(package, braze=manifest["braze"], format_version=99)
    with pytest.raises(BrazeError, match="format version 99"):
        aot.load(package)


def test_refuses_weights_that_do_not_match_the_parameters(static_package, tmp_path):
    state = {k: v.clone() for k, v in _model().state_dict().items()}
    wrong_shape = dict(state, **{"fc1.weight": torch.zeros(64, 31)})
    with pytest.raises(BrazeError, match=r"fc1\.weight is f32\[64, 31\], the package expects f32\[64, 32\]"):
        aot.load(static_package, weights=wrong_shape)
    wrong_dtype = dict(state, **{"fc2.bias": state["fc2.bias"].double()})
    with pytest.raises(BrazeError, match=r"fc2\.bias is f64\[32\], the package expects f32\[32\]"):
        aot.load(static_package, weights=wrong_dtype)
    missing = {k: v for k, v in state.items() if k != "norm.weight"}
    with pytest.raises(BrazeError, match=r"norm\.weight is missing"):
        aot.load(static_package, weights=missing)
    truncated = tmp_path / "w.safetensors"
    truncated.write_bytes((static_package / "weights.safetensors").read_bytes()[:100])
    with pytest.raises(BrazeError, match="not a valid safetensors file"):
        aot.load(static_package, weights=truncated)


class _ConvCumsum(nn.Module):
    """A channels-last convolution (its weight converted per call when
    loaded) and cumsum, which braze runs as an extern aten call."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)).cumsum(dim=-1)


def test_convolutions_and_extern_calls_load_and_follow_swapped_weights(tmp_path):
    torch.manual_seed(0)
    model, other = _ConvCumsum().eval(), _ConvCumsum().eval()
    x = torch.randn(2, 3, 8, 8)
    package = aot.package(model, (x,), tmp_path / "conv")
    steps = json.loads((package / "program.json").read_text())["program"]["steps"]
    assert "braze.extern" in json.dumps(steps) and "braze.convolution" in json.dumps(steps)
    store = aot.WeightStore(model.state_dict())
    loaded = aot.load(package, weights=store)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x))
        store.swap(other.state_dict())
        torch.testing.assert_close(loaded(x), other(x))


def test_other_weights_give_that_checkpoints_numbers(static_package):
    other = _model(seed=1)
    loaded = aot.load(static_package, weights=aot.WeightStore(other.state_dict()))
    x = torch.randn(8, 32)
    torch.testing.assert_close(loaded(x), other(x))


def test_packages_share_one_copy_of_the_weights(static_package, dynamic_package):
    store = aot.WeightStore.load(static_package / "weights.safetensors")
    first = aot.load(static_package, weights=store)
    second = aot.load(dynamic_package, weights=store)
    x = torch.randn(8, 32)
    torch.testing.assert_close(first(x), second(x))
    for program in (first.program, second.program):
        template = program.template
        pointers = {name: template[slot].data_ptr() for slot, name in program.parameter_slots.items()}
        assert pointers == {name: store[name].data_ptr() for name in pointers}


class _Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2048, 4096) / 64)  # 32 MiB

    def forward(self, x):
        return x @ self.weight.t()


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_shared_weights_are_resident_once(tmp_path):
    """Four packages (two shapes, two copies each) over one store: resident
    memory grows by far less than one more copy of the 32 MiB weight."""
    model = _Wide().eval()
    prefill = aot.package(model, (torch.randn(16, 4096),), tmp_path / "prefill")
    decode = aot.package(model, (torch.randn(1, 4096),), tmp_path / "decode")
    store = aot.WeightStore.load(prefill / "weights.safetensors")
    weight_bytes = store.nbytes()
    for name in store.names():  # read once: the file's pages are resident now
        store[name].sum()
    before = _resident_bytes()
    loaded = [aot.load(p, weights=store) for p in (prefill, decode, prefill, decode)]
    x = torch.randn(1, 4096)
    for package in loaded[1::2]:
        torch.testing.assert_close(package(x), model(x), rtol=1e-4, atol=1e-4)
    grown = _resident_bytes() - before
    assert grown < weight_bytes // 2, (grown, weight_bytes)
    own = aot.load(decode)  # its own weights file: one more copy
    assert own.weights.nbytes() == weight_bytes
    assert own.weights["weight"].data_ptr() != store["weight"].data_ptr()


class _Mixable(nn.Module):
    """y = (x @ a.t()) * s + b: a call mixing two checkpoints' a, s and b
    gives neither checkpoint's result."""

    def __init__(self, seed: int):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.a = nn.Parameter(torch.randn(256, 256, generator=generator))
        self.s = nn.Parameter(torch.rand(256, generator=generator) + 1)
        self.b = nn.Parameter(torch.randn(256, generator=generator) * 10)

    def forward(self, x):
        return (x @ self.a.t()) * self.s + self.b


def test_swap_while_running_never_mixes_checkpoints(tmp_path):
    old, new = _Mixable(0).eval(), _Mixable(1).eval()
    x = torch.randn(64, 256)
    package = aot.package(old, (x,), tmp_path / "mixable")
    store = aot.WeightStore(old.state_dict())
    loaded = aot.load(package, weights=store)
    with torch.no_grad():
        expected = {"old": old(x), "new": new(x)}
    seen = {"old": 0, "new": 0}
    failures = []
    stop = threading.Event()

    def run():
        while not stop.is_set():
            y = loaded(x)
            matches = [k for k, e in expected.items() if torch.allclose(y, e, rtol=1e-4, atol=1e-3)]
            if len(matches) != 1:
                failures.append(y)
                return
            seen[matches[0]] += 1

    worker = threading.Thread(target=run)
    worker.start()
    try:
        for number in range(200):
            store.swap((new if number % 2 == 0 else old).state_dict())
            if failures:
                break
    finally:
        stop.set()
        worker.join()
    assert not failures, "a call mixed the two checkpoints' weights"
    assert seen["old"] and seen["new"], seen
    store.swap(new.state_dict())
    torch.testing.assert_close(loaded(x), expected["new"], rtol=1e-4, atol=1e-3)


def test_swap_refuses_other_shapes_or_names():
    store = aot.WeightStore(_model().state_dict())
    state = _model(seed=1).state_dict()
    with pytest.raises(BrazeError, match=r"fc1\.bias is f32\[3\], the store expects f32\[64\]"):
        store.swap(dict(state, **{"fc1.bias": torch.zeros(3)}))
    with pytest.raises(BrazeError, match="the store has no weight.s. extra"):
        store.swap(dict(state, extra=torch.zeros(1)))


def test_the_example_of_docs_aot_md_runs(tmp_path, monkeypatch):
    import re

    text = (Path(__file__).resolve().parents[3] / "docs" / "aot.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/aot.md", "exec"), {"__name__": "aot_doc"})
    assert (tmp_path / "mlp.braze" / "manifest.json").exists()


class _Gated(nn.Module):
    """A torch.cond whose true branch has a kernel and a weight: the
    package's regions share its library and its weights."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda y: self.linear(y).relu(), lambda y: y * 2, (x,))


def test_control_flow_package_takes_both_branches(tmp_path):
    model = _Gated()
    x = torch.randn(3, 4).abs()
    aot.package(model, (x,), tmp_path / "gated")
    loaded = aot.load(tmp_path / "gated")
    for sign in (1, -1):
        torch.testing.assert_close(loaded(sign * x), model(sign * x))
