"""The Triton target: `@triton.jit` kernels (codegen/triton), kept as a
Python module in the content-hash cache (Triton caches the binaries it
compiles from them), run through the Triton runtime (runtime/triton.py):
on a CUDA or ROCm device, or on the CPU in Triton's interpreter
(TRITON_INTERPRET=1). `aot_compile` compiles one kernel for a GPU without
one (the checks here: sm_90 and gfx942)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from braze.errors import BrazeError
from braze.runtime.native_cache import NativeCache, Toolchain, cache_dir
from braze.target import Built, Target, Unit
from braze.target.opencl import GpuOptions


@dataclass(frozen=True)
class TritonOptions(GpuOptions):
    # Time each kernel's launch configurations on the GPU the first time a
    # shape class is seen (runtime/autotune.py); False: the schedule's own.
    autotune: bool = True
    # f16/bf16 attentions are generated kernels too: tl.dot reads halves
    # natively and accumulates in f32.
    flash_attention_halves: bool = True


class TritonToolchain(Toolchain):
    """The 'build' of a Triton module: Python checks its syntax and the
    module is kept as the artifact; loading imports it."""

    title = "Python (Triton module)"
    source_name = "kernels.py"
    artifact_name = "module.py"

    def __init__(self):
        super().__init__(())

    def identity(self) -> str:
        import triton

        return f"triton {triton.__version__}"

    def run(self, source: Path, output: Path, entry: Path) -> None:
        text = source.read_text()
        try:
            compile(text, str(source), "exec")
        except SyntaxError as error:
            raise BrazeError(f"the Triton module {source} is not valid Python; the source is kept there.\n"
                             f"{error}") from None
        output.write_text(text)

    def load(self, path: Path):
        from braze.runtime.triton import load_module

        return load_module(path)


class TritonTarget(Target):
    name = "triton"
    gpu = True
    device = "cuda"
    options_type = TritonOptions
    # Threads per block in warps of 32 (num_warps); AMD's wavefronts of 64
    # hold two of them.
    schedule_target = "cuda"
    install = "pip install 'braze[triton]'"
    combo_arguments = 250
    # Query rows and keys per block of braze-lower-attention's schedule: a
    # tile of registers (the CPU's defaults are sized for its caches).
    attention_blocks = (64, 64)

    def fused_gemm_missing(self) -> str | None:
        return None  # codegen/triton/gemm.py: tl.dot tiles

    def flash_attention_missing(self) -> str | None:
        return None  # codegen/triton/attention.py

    def build(self, unit: Unit, options: TritonOptions) -> Built:
        from braze.runtime.autotune import Tuner
        from braze.runtime.triton import TritonKernels, check_mode

        check_mode()
        cache = NativeCache(directory=options.cache_dir, toolchain=TritonToolchain(), salt=options.key())
        module = cache.load(unit.source)
        tuner = Tuner(Path(options.cache_dir) if options.cache_dir else cache_dir(), tune=options.autotune)
        return Built(TritonKernels(module, tuner, self.run_device()), cache.source_path(unit.source),
                     cache.compilations == 0)

    def run_device(self) -> str:
        """The interpreter runs kernels on host tensors; otherwise the
        program lives on the current CUDA/ROCm device (torch's "cuda")."""
        from braze.runtime.triton import interpreting

        if interpreting():
            return "cpu"
        import torch

        return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cuda"

    def compiler_missing(self) -> str | None:
        try:
            import triton  # noqa: F401
        except ImportError:
            return "triton is not installed"
        return None

    def device_missing(self) -> str | None:
        from braze.runtime.triton import interpreting

        if interpreting():
            return None
        import torch

        if torch.cuda.is_available():
            return None
        return ("no CUDA or ROCm device (set TRITON_INTERPRET=1 to run the kernels in Triton's "
                "interpreter on the CPU)")


# The block sizes and switches kernels take as `tl.constexpr`s.
CONSTEXPRS = ("XBLOCK", "RBLOCK", "BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_E", "BLOCK_EV", "PRODUCT_GIVEN")


def signature(spec, config, index: str = "int32") -> tuple[dict, dict, dict]:
    """triton.compile's signature of a kernel (codegen/triton's parameter
    order), its constexprs and its compile options for launch `config`;
    `index`: its INDEX type ("int32" or "int64", a triton.language name)."""
    from braze.codegen.analysis import type_name
    from braze.codegen.triton.attention import head_blocks
    from braze.codegen.triton.emitter import SIGNATURE_TYPES, STRATEGIES

    options = config.launch_options(spec)
    if spec.strategy == "attention":  # BLOCK_E and BLOCK_EV follow the head dims
        options.update(head_blocks(spec, spec.static_domain))
    constants = {k: v for k, v in options.items() if k in CONSTEXPRS}
    if spec.strategy in STRATEGIES:  # a braze.kernel's index type (the tiled kernels index in 64 bits)
        constants["INDEX"] = index
    types = {}
    for n, tensor in enumerate(spec.input_types):
        types[f"in{n}"] = "*" + SIGNATURE_TYPES[type_name(tensor.element_type)]
    for n, tensor in enumerate(spec.result_types):
        types[f"out{n}"] = "*" + SIGNATURE_TYPES[type_name(tensor.element_type)]
    if spec.can_fail:
        types["failed"] = "*i32"
    types.update({f"n{d}": "i64" for d, size in enumerate(spec.static_domain) if size is None})
    types.update({f"s{n}_{d}": "i64" for n, tensor in enumerate(spec.input_types) for d in range(tensor.rank)})
    if spec.strategy == "gemm":  # the unfused alternative's product, in the operands' type
        types["product"] = types["in0"]
    types.update({name: "constexpr" for name in constants})
    return types, constants, {k: v for k, v in options.items() if k not in constants}


def aot_compile(jobs: list, target: str = "cuda:90") -> list[list[bytes]]:
    """Compiles Triton kernels ahead of time, without a GPU, for `target`
    ("cuda:<sm>": cubins, "hip:<gfx>": hsaco code objects). `jobs` is a list
    of (module source, [(KernelSpec, Config), ...] or [(KernelSpec, Config,
    index), ...] with `index` the INDEX type, "int32" by default); returns,
    per job, each kernel's binary in order.

    Triton's compiler runs in one child process (braze.target.triton_aot):
    a process whose triton was imported for the interpreter cannot compile,
    and compiling leaves the caller's process as it was. Kernels Triton
    refuses make one BrazeError naming each, its configuration and Triton's
    message."""
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="braze-triton-aot-") as scratch:
        folder = Path(scratch)
        request = {"target": target, "output": scratch, "modules": []}
        for number, (source, kernels) in enumerate(jobs):
            path = folder / f"module{number}.py"
            path.write_text(source)
            entries = []
            for spec, config, *index in kernels:
                types, constants, options = signature(spec, config, *index)
                entries.append({"name": spec.name, "signature": types, "constexprs": constants,
                                "options": options, "config": str(config)})
            request["modules"].append({"path": str(path), "kernels": entries})
        environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        run = subprocess.run([sys.executable, "-m", "braze.target.triton_aot"], input=json.dumps(request),
                             capture_output=True, text=True, env=environment)
        if run.returncode != 0:
            raise BrazeError(f"Triton's compiler did not run for {target}:\n{(run.stderr or run.stdout).strip()[-4000:]}")
        errors = json.loads((folder / "errors.json").read_text())
        if errors:
            raise BrazeError(f"Triton could not compile {len(errors)} kernel(s) for {target}:\n" + "\n".join(errors))
        return [[(folder / f"{number}-{k}.bin").read_bytes() for k in range(len(kernels))]
                for number, (_, kernels) in enumerate(jobs)]
