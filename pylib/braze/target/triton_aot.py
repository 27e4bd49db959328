"""`python -m braze.target.triton_aot`: compiles the kernels of Triton
modules for a GPU without one (braze.target.triton.aot_compile runs it in a
child process). Reads a JSON request on stdin: the target ("cuda:90",
"hip:gfx942"), an output folder and modules, each a path and, per kernel,
its name, signature, constexprs and compile options. Writes
`<module>-<kernel>.bin` (the cubin or hsaco) per kernel, numbered in
request order, and `errors.json`: one message per kernel Triton refused
(its name, configuration and Triton's message)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path


def main() -> int:
    request = json.load(sys.stdin)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    backend, arch = request["target"].split(":")
    gpu = GPUTarget("cuda", int(arch), 32) if backend == "cuda" else GPUTarget("hip", arch, 64)
    binary_kind = "cubin" if backend == "cuda" else "hsaco"
    output = Path(request["output"])
    errors = []
    for number, entry in enumerate(request["modules"]):
        spec = importlib.util.spec_from_file_location(f"braze_triton_aot{number}", entry["path"])
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # Triton resolves the kernels' globals through it
        spec.loader.exec_module(module)
        for k, kernel in enumerate(entry["kernels"]):
            # INDEX arrives by name: a triton.language type does not travel in JSON.
            constexprs = dict(kernel["constexprs"])
            if "INDEX" in constexprs:
                constexprs["INDEX"] = getattr(triton.language, constexprs["INDEX"])
            source = ASTSource(getattr(module, kernel["name"]), kernel["signature"], constexprs=constexprs)
            try:
                compiled = triton.compile(source, target=gpu, options=kernel["options"])
            except Exception as error:  # Triton's compile errors have no common base
                errors.append(f"kernel {kernel['name']} ({kernel['config']}): {error}")
                continue
            (output / f"{number}-{k}.bin").write_bytes(compiled.asm[binary_kind])
    (output / "errors.json").write_text(json.dumps(errors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
