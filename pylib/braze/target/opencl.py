"""The OpenCL target: OpenCL C (codegen/opencl.py), built by the OpenCL
driver (clBuildProgram through pyopencl) into a program binary kept in the
content-hash cache, run through pyopencl (runtime/opencl.py). Runs here on
PoCL (a CPU device); Intel GPUs take the same source."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from braze.runtime.native_cache import NativeCache, Toolchain
from braze.target import Built, Target, TargetOptions, Unit
from braze.errors import BrazeError


@dataclass(frozen=True)
class GpuOptions(TargetOptions):
    # Threads (work-items) per block (work-group): a power of two.
    threads: int = 256
    tune_convolutions: bool = False
    # f16/bf16 attentions are generated kernels too (codegen/gpu_attention.py
    # widens them to f32 as it stages them), as on Triton.
    flash_attention_halves: bool = True
    # f16/bf16 GEMMs are fused too (the tiled GEMM widens them as it stages them).
    epilogue_fusion_halves: bool = True


class OpenCLToolchain(Toolchain):
    """clBuildProgram for the process's device; the artifact is the device
    binary, which the driver loads without compiling again."""

    title = "the OpenCL compiler"
    source_name = "source.cl"
    artifact_name = "program.bin"

    def __init__(self):
        super().__init__(("-cl-std=CL1.2",))

    def identity(self) -> str:
        from braze.runtime.opencl import device_identity

        return device_identity() + "\n" + " ".join(self.flags)

    def run(self, source: Path, output: Path, entry: Path) -> None:
        import pyopencl as cl

        from braze.runtime.opencl import context

        ctx, _ = context()
        try:
            with warnings.catch_warnings():
                # The driver's warnings go to build.log, not to the user.
                warnings.simplefilter("ignore", cl.CompilerWarning)
                program = cl.Program(ctx, source.read_text()).build(options=list(self.flags))
        except cl.RuntimeError as error:
            raise BrazeError(f"{self.title} failed on {source}; the source is kept there.\n{error}") from None
        output.write_bytes(program.binaries[0])
        log = program.get_build_info(ctx.devices[0], cl.program_build_info.LOG)
        if log.strip():
            (entry / "build.log").write_text(log)

    def load(self, path: Path):
        import pyopencl as cl

        from braze.runtime.opencl import context

        ctx, _ = context()
        try:
            return cl.Program(ctx, ctx.devices, [path.read_bytes()]).build()
        except cl.Error:
            return None


# braze-lower-attention's (q-block, kv-block) for the C-like GPU renderers
# (this and target/compiled.py's), whose flash attention runs a thread per
# query row (codegen/gpu_attention.py): 32 rows keep a warp busy, and with
# 16 keys per block the f32 tiles of head dims up to 128 fit the 32 KiB of
# shared memory every one of the four targets offers.
ATTENTION_BLOCKS = (32, 16)


class OpenCLTarget(Target):
    name = "opencl"
    gpu = True
    device = "cpu"  # tensors stay on the host; kernels copy them to the OpenCL device
    options_type = GpuOptions
    install = "pip install 'braze[opencl]' and an OpenCL driver (Debian: pocl-opencl-icd)"
    # A combo's launch takes its buffers, `sizes` and `failed`, 8 bytes each;
    # the full profile guarantees CL_DEVICE_MAX_PARAMETER_SIZE >= 1024 bytes
    # (128 pointers): 100 buffers (816 bytes in all) leave a margin, and the
    # launcher checks the device's own limit (runtime/opencl.py).
    combo_arguments = 100

    attention_blocks = ATTENTION_BLOCKS

    def fused_gemm_missing(self) -> str | None:
        return None  # codegen/gpu_gemm.py: shared-memory tiles

    def flash_attention_missing(self) -> str | None:
        return None  # codegen/gpu_attention.py: a thread per query row

    def build(self, unit: Unit, options: GpuOptions) -> Built:
        from braze.runtime.opencl import OpenCLKernels

        cache = NativeCache(directory=options.cache_dir, toolchain=OpenCLToolchain(), salt=options.key())
        program = cache.load(unit.source)
        return Built(OpenCLKernels(program, unit.launch_buffers), cache.source_path(unit.source),
                     cache.compilations == 0)

    def compiler_missing(self) -> str | None:
        try:
            import pyopencl as cl
        except ImportError:
            return "pyopencl is not installed"
        try:
            platforms = cl.get_platforms()
        except cl.Error:
            platforms = []
        if not any(p.get_devices() for p in platforms):
            return "no OpenCL platform with a device"
        return None
