"""The Triton target: `@triton.jit` kernels (codegen/triton), kept as a
Python module in the content-hash cache (Triton caches the binaries it
compiles from them), run through the Triton runtime (runtime/triton.py):
on a CUDA or ROCm device, or on the CPU in Triton's interpreter
(TRITON_INTERPRET=1). `aot_compile` compiles one kernel for a GPU without
one (the checks here: sm_90 and gfx942)."""

from __future__ import annotations

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

    def build(self, unit: Unit, options: TritonOptions) -> Built:
        from braze.runtime.autotune import Tuner
        from braze.runtime.triton import TritonKernels

        cache = NativeCache(directory=options.cache_dir, toolchain=TritonToolchain(), salt=options.key())
        module = cache.load(unit.source)
        tuner = Tuner(Path(options.cache_dir) if options.cache_dir else cache_dir(), tune=options.autotune)
        return Built(TritonKernels(module, tuner), cache.source_path(unit.source),
                     cache.compilations == 0)

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


def signature(spec, constants: dict) -> tuple[dict, dict]:
    """triton.compile's signature of a kernel (codegen/triton's parameter
    order) and its constexprs."""
    from braze.codegen.analysis import type_name
    from braze.codegen.triton.emitter import SIGNATURE_TYPES

    types = {}
    for n, tensor in enumerate(spec.input_types):
        types[f"in{n}"] = "*" + SIGNATURE_TYPES[type_name(tensor.element_type)]
    for n, tensor in enumerate(spec.result_types):
        types[f"out{n}"] = "*" + SIGNATURE_TYPES[type_name(tensor.element_type)]
    if spec.can_fail:
        types["failed"] = "*i32"
    types.update({f"n{d}": "i64" for d, size in enumerate(spec.static_domain) if size is None})
    types.update({f"s{n}_{d}": "i64" for n, tensor in enumerate(spec.input_types) for d in range(tensor.rank)})
    for name in constants:
        types[name] = "constexpr"
    return types, constants


def aot_compile(module, spec, config, target: str = "cuda:90"):
    """Compiles kernel `spec.name` of a loaded (not interpreted) module for
    `target` ("cuda:<sm>" or "hip:<gfx>") with launch `config`, without a
    GPU; returns Triton's CompiledKernel (`.asm["cubin"]` or `["hsaco"]`).
    A compile error is a BrazeError naming the kernel and Triton's message."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    backend, arch = target.split(":")
    gpu = GPUTarget("cuda", int(arch), 32) if backend == "cuda" else GPUTarget("hip", arch, 64)
    options = config.launch_options(spec)
    constants = {k: v for k, v in options.items() if k in ("XBLOCK", "RBLOCK")}
    types, constexprs = signature(spec, constants)
    function = getattr(module, spec.name)
    source = ASTSource(function, types, constexprs=constexprs)
    compile_options = {k: v for k, v in options.items() if k not in constants}
    try:
        return triton.compile(source, target=gpu, options=compile_options)
    except Exception as error:
        raise BrazeError(f"Triton could not compile kernel {spec.name} for {target} ({config}):\n{error}") from None
