"""Writing an AOT package: compile once, keep everything a later process
needs to run the program without the compiler (see docs/aot.md).

A package is a directory:

* `manifest.json`: format and braze version, target and device, the
  machine facts its code needs (architecture, CPU extensions), the compiler
  and flags, the signature, and a SHA-256 and size per file; its own
  checksum covers the rest of it;
* `program.json`: the built program (braze.aot.state), its template of
  constant values, the parameter list (name, shape, dtype) and the model's
  input/output structure;
* `kernels.cpp`, `kernels.so`: the kernels' source and the library built
  from it (absent when the program has no kernel);
* `constants.safetensors`: the program's constant tensors;
* `weights.safetensors`: the parameters (braze.aot.weights).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from braze.aot.loader import FORMAT, FORMAT_VERSION, MANIFEST, braze_version, file_digest, manifest_checksum
from braze.aot.machine import host_features
from braze.aot.state import Writer
from braze.aot.weights import write_weights
from braze.errors import BrazeError

# Program fields that are not written as they are: the template (its values
# go to the weights and constants files) and the step factory (made again
# from the package's library).
_NOT_WRITTEN = ("template", "kernels_runtime")


def package(model_or_exported, args=(), path=None, *, target: str = "cpu", kwargs: dict | None = None,
            dynamic_shapes=None, dynamic_spec=None, options: dict | None = None) -> Path:
    """Compiles `model_or_exported` (a module or function called with
    `args` and `kwargs`, or a `braze.ExportedProgram`) for `target` and
    writes an AOT package to the directory `path` (replaced if it exists).
    Dims marked in `dynamic_shapes` or `dynamic_spec` stay symbolic, as in
    `braze.compile`. Returns the package's path."""
    from braze.compiler import CompiledModel, compile, compile_mlir
    from braze.frontend import ExportedProgram

    if path is None:
        raise BrazeError("braze.aot.package needs a path to write the package to")
    if target != "cpu":
        raise BrazeError(f"braze.aot packages programs of the cpu target only so far, not {target!r}")
    started = time.perf_counter()
    if isinstance(model_or_exported, ExportedProgram):
        if dynamic_shapes is not None or dynamic_spec is not None:
            raise BrazeError("a braze.ExportedProgram has its dynamic dims already: export it with them")
        exported = model_or_exported
        model = CompiledModel(exported, compile_mlir(exported.module, target, parameters=exported.parameters,
                                                     options=options))
    else:
        model = compile(model_or_exported, args if isinstance(args, tuple) else (args,), kwargs=kwargs,
                        dynamic_shapes=dynamic_shapes, dynamic_spec=dynamic_spec, target=target, options=options)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.") as scratch:
        _write(model, Path(scratch), time.perf_counter() - started)
        if path.exists():
            shutil.rmtree(path)
        os.replace(scratch, path)
        Path(scratch).mkdir()  # for TemporaryDirectory's cleanup
    return path


def _write(model, directory: Path, compile_seconds: float) -> None:
    from torch.utils import _pytree as pytree

    from braze.runtime.native_cache import Toolchain, compiler
    from braze.target.cpu import compile_flags

    program = model.compiled.program
    stats = model.compiled.stats
    version = braze_version()
    files = []
    if program.kernels_runtime is not None:
        source = Path(stats["source"])
        shutil.copyfile(source, directory / "kernels.cpp")
        shutil.copyfile(source.with_name(Toolchain.artifact_name), directory / "kernels.so")
        files += ["kernels.cpp", "kernels.so"]

    folded = {slot for _, results in program.folded for slot in results}
    parameters, constants, template = {}, {}, []
    writer = Writer(program.kernels_runtime)
    for slot, value in enumerate(program.template):
        if slot in program.parameter_slots:
            name = program.parameter_slots[slot]
            parameters[name] = value
            template.append(["parameter", name])
        elif slot in folded:
            template.append(["folded", None])  # computed again from the weights when loaded
        elif isinstance(value, torch.Tensor):
            constants[f"slot{slot}"] = value
            template.append(["constant", f"slot{slot}"])
        else:
            template.append(["value", writer.encode(value, f"template[{slot}]")])
    write_weights(directory / "weights.safetensors", parameters, version)
    write_weights(directory / "constants.safetensors", constants, version)
    files += ["weights.safetensors", "constants.safetensors"]

    exported = model.exported
    state = {name: writer.encode(value, f"program.{name}") for name, value in vars(program).items()
             if name not in _NOT_WRITTEN}
    description = {
        "program": state,
        "template": template,
        "parameters": {name: {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                       for name, t in parameters.items()},
        "inputs": {"spec": pytree.treespec_dumps(exported._in_spec) if exported._in_spec is not None else None,
                   "none": list(exported.imported.none_inputs)},
        "outputs": {"spec": pytree.treespec_dumps(exported._out_spec) if exported._out_spec is not None else None,
                    "none": list(exported.imported.none_outputs)},
    }
    (directory / "program.json").write_text(json.dumps(description))
    files.append("program.json")

    check = program._arguments
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "braze": version,
        "torch": torch.__version__,
        "target": stats["target"],
        "device": str(program.device),
        **host_features(),
        "compiler": compiler(),
        "compiler_version": _compiler_version(),
        "flags": list(compile_flags()),
        "entry": program.name,
        "signature": {
            "arguments": [str(t) for t in program.argument_types],
            "dims": [None if specs is None else [None if s is None else str(s) for s in specs]
                     for specs in check.specs],
            "symbols": {name: str(r) + (f" multiple of {r.multiple_of}" if r.multiple_of > 1 else "")
                        for name, r in check.ranges.items()},
            "outputs": len(program.output_slots),
        },
        "compile_seconds": round(compile_seconds, 3),
        "files": {name: file_digest(directory / name) for name in files},
    }
    manifest["checksum"] = manifest_checksum(manifest)
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))


def _compiler_version() -> str:
    import shlex
    import subprocess

    from braze.runtime.native_cache import compiler

    run = subprocess.run(shlex.split(compiler()) + ["--version"], capture_output=True, text=True)
    return (run.stdout.splitlines() or [""])[0]
