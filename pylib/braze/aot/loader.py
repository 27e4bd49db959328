"""Loading an AOT package: checks first (format, braze version, every
file's hash, the machine, the weights against the parameter list), then the
program made again from its description, calling the package's library. No
compiler and no MLIR: this module and what it imports load without them
(tests/python/aot proves it in a process where MLIR cannot be imported).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Mapping

import torch

from braze.aot.machine import check_machine
from braze.aot.state import Reader
from braze.aot.weights import WeightStore, check_parameters, read_weights
from braze.errors import BrazeError
from braze.runtime.cpu import CpuKernels
from braze.runtime.executor import Program

FORMAT = "braze-aot"
# Raised when the package layout or the program's description changes.
FORMAT_VERSION = 1
MANIFEST = "manifest.json"


def braze_version() -> str:
    try:
        return metadata.version("braze")
    except metadata.PackageNotFoundError:
        return "unknown"


def file_digest(path: Path) -> dict:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return {"sha256": digest.hexdigest(), "bytes": path.stat().st_size}


def manifest_checksum(manifest: dict) -> str:
    """The SHA-256 of the manifest's other entries (canonical JSON)."""
    rest = {key: value for key, value in manifest.items() if key != "checksum"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def read_manifest(path: Path) -> dict:
    """The package's manifest, after checking that it is whole and that this
    braze can read the package."""
    if not path.is_dir():
        raise BrazeError(f"AOT package {path} does not exist (a package is a directory written by braze.aot.package)")
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except OSError:
        raise BrazeError(f"AOT package {path} has no readable {MANIFEST}") from None
    except ValueError as error:
        raise BrazeError(f"AOT package {path}: {MANIFEST} is truncated or corrupted ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BrazeError(f"{path} is not a braze AOT package ({MANIFEST} does not say format {FORMAT!r})")
    if manifest.get("checksum") != manifest_checksum(manifest):
        raise BrazeError(f"AOT package {path}: {MANIFEST} is corrupted (its checksum does not match its contents)")
    if manifest["format_version"] != FORMAT_VERSION:
        raise BrazeError(f"AOT package {path} has format version {manifest['format_version']}; this braze reads "
                         f"version {FORMAT_VERSION}: package the model again")
    version = braze_version()
    if manifest["braze"] != version:
        raise BrazeError(f"AOT package {path} was written by braze {manifest['braze']}; this is braze {version}, "
                         f"which cannot run it (a package holds the runtime's own program): package the model "
                         f"again with this braze")
    return manifest


def _check_files(path: Path, manifest: dict, skip: set[str]) -> None:
    for name, expected in manifest["files"].items():
        if name in skip:
            continue
        file = path / name
        if not file.is_file():
            raise BrazeError(f"AOT package {path} is missing {name}")
        actual = file_digest(file)
        if actual["bytes"] != expected["bytes"]:
            raise BrazeError(f"AOT package {path}: {name} is truncated or corrupted "
                             f"({actual['bytes']} bytes, the manifest says {expected['bytes']})")
        if actual["sha256"] != expected["sha256"]:
            raise BrazeError(f"AOT package {path}: {name} is corrupted (its SHA-256 does not match the manifest)")


class _PackagedProgram(Program):
    """A program read from a package. Its template (constants, parameters
    and what the program computed from them when it was built) is made from
    the weight store's current snapshot: each call reads the snapshot once,
    so a swap of the store's weights never mixes two checkpoints in a call."""

    @property
    def template(self) -> list:
        snapshot = self.store.snapshot
        built = self._built
        if built[0] is not snapshot:
            built = (snapshot, self._template_for(snapshot))
            self._built = built
        return built[1]

    def _template_for(self, snapshot: Mapping[str, torch.Tensor]) -> list:
        env = list(self.base_template)
        for slot, name in self.parameter_slots.items():
            env[slot] = snapshot[name]
        for call, _ in self.folded:
            call(env)
        return env


class LoadedPackage:
    """A package's program, called like the model it was compiled from."""

    def __init__(self, path: Path, manifest: dict, program: _PackagedProgram, description: dict):
        from torch.utils import _pytree as pytree

        self.path = path
        self.manifest = manifest
        self.program = program
        inputs, outputs = description["inputs"], description["outputs"]
        self._in_spec = pytree.treespec_loads(inputs["spec"]) if inputs["spec"] else None
        self._out_spec = pytree.treespec_loads(outputs["spec"]) if outputs["spec"] else None
        self._none_inputs = set(inputs["none"])
        self._none_outputs = outputs["none"]

    @property
    def weights(self) -> WeightStore:
        return self.program.store

    def __call__(self, *args, **kwargs):
        from torch.utils import _pytree as pytree

        flat, spec = pytree.tree_flatten((args, kwargs))
        if self._in_spec is not None and spec != self._in_spec:
            raise BrazeError(f"inputs do not match the package's signature:\n got {spec}\n expected {self._in_spec}")
        for number in self._none_inputs:
            if flat[number] is not None:
                raise BrazeError(f"input #{number} was None when the model was packaged, so it must stay None")
        results = self.program(*[v for number, v in enumerate(flat) if number not in self._none_inputs])
        for number in self._none_outputs:
            results.insert(number, None)
        if self._out_spec is None:
            return results
        return pytree.tree_unflatten(results, self._out_spec)


def _store_for(path: Path, weights) -> WeightStore:
    if weights is None:
        return WeightStore.load(path / "weights.safetensors")
    if isinstance(weights, WeightStore):
        return weights
    if isinstance(weights, (str, Path)):
        return WeightStore.load(weights)
    if isinstance(weights, Mapping):
        return WeightStore(weights)
    raise BrazeError(f"weights= takes a WeightStore, a safetensors file's path or a state dict, "
                     f"not a {type(weights).__name__}")


def load(path, weights=None) -> LoadedPackage:
    """Loads the AOT package at `path` (see braze.aot.package). `weights`:
    None for the package's own weights file, or a `WeightStore` to share
    (several packages loaded with one store use one copy of the weights),
    a safetensors file's path, or a state dict; they must match the
    package's parameter list (names, shapes, dtypes)."""
    path = Path(path)
    manifest = read_manifest(path)
    check_machine(manifest, path)
    _check_files(path, manifest, set() if weights is None else {"weights.safetensors"})
    description = json.loads((path / "program.json").read_text())
    store = _store_for(path, weights)
    expected = {name: (p["shape"], getattr(torch, p["dtype"])) for name, p in description["parameters"].items()}
    source = "the package's weights" if weights is None else "the weights given"
    check_parameters(expected, store.snapshot, source)

    kernels = None
    if (path / "kernels.so").exists():
        try:
            kernels = CpuKernels(ctypes.CDLL(str((path / "kernels.so").resolve())))
        except OSError as error:
            raise BrazeError(f"AOT package {path}: kernels.so does not load on this machine: {error}") from None
    reader = Reader(kernels.function if kernels is not None else _no_library, kernels)
    program = _PackagedProgram.__new__(_PackagedProgram)
    program.__dict__.update({name: reader.decode(value) for name, value in description["program"].items()})
    program.kernels_runtime = kernels
    constants = read_weights(path / "constants.safetensors")
    program.base_template = [_template_value(kind, value, constants, reader)
                             for kind, value in description["template"]]
    program.store = store
    program._built = (None, None)
    return LoadedPackage(path, manifest, program, description)


def _template_value(kind: str, value, constants: dict, reader: Reader):
    if kind == "constant":
        return constants[value]
    if kind == "value":
        return reader.decode(value)
    return None  # a parameter or a folded value: filled per weight snapshot


def _no_library(name: str):
    raise BrazeError(f"the package's program calls native function {name}, but the package has no kernels.so")
