"""Targets whose kernels compile through the content-hash cache
(`compile_artifact`): CUDA runs through NVRTC and the driver API
(runtime/cuda.py) where torch sees a CUDA device; HIP has no runtime in this
build yet (compiling a program for it is refused with the reason); Metal
runs in the C++ shim (target/metal_shim). Also the toolchains they build
with, and ocloc for the OpenCL C."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from braze.errors import BrazeError
from braze.runtime.native_cache import NativeCache, Toolchain
from braze.target import Built, Target, Unit
from braze.target.opencl import ATTENTION_BLOCKS, GpuOptions


def _version(command: list[str]) -> str:
    # In a scratch directory: `ocloc query` also writes its answer to a file there.
    with tempfile.TemporaryDirectory(prefix="braze-version-") as scratch:
        run = subprocess.run(command, capture_output=True, text=True, cwd=scratch)
    return (run.stdout or run.stderr).strip()


class CommandToolchain(Toolchain):
    """A compiler run as a command: `program` with `flags`, then the
    source, then `output_flag` and the artifact's path."""

    program = ""
    output_flag = "-o"
    environment: dict = {}

    def identity(self) -> str:
        return "\n".join([self.program, _version([self.program, "--version"]), " ".join(self.flags)])

    def command(self, source: Path, output: Path) -> list[str]:
        return [self.program, *self.flags, str(source), self.output_flag, str(output)]

    def made(self, output: Path) -> Path:
        """Where the command leaves the artifact it was asked to write at `output`."""
        return output

    def run(self, source: Path, output: Path, entry: Path) -> None:
        command = self.command(source, output)
        run = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **self.environment})
        made = self.made(output)
        if run.returncode != 0 or not made.exists():
            raise BrazeError(
                f"{self.title} failed (exit {run.returncode}) on {source}; the source is kept there.\n"
                f"$ {shlex.join(command)}\n{(run.stderr + run.stdout).strip()}")
        if made != output:
            os.replace(made, output)
        (entry / "build.log").write_text(run.stderr + run.stdout)

    def load(self, path: Path):
        return path.read_bytes()


class NvccToolchain(CommandToolchain):
    title = "nvcc"
    program = "nvcc"
    source_name = "source.cu"
    artifact_name = "kernels.cubin"

    def __init__(self, arch: str):
        # -Xptxas -v: registers, spills and shared memory per kernel, kept in build.log.
        super().__init__(("-cubin", f"-arch={arch}", "-Xptxas", "-v", "-x", "cu"))


class HipccToolchain(CommandToolchain):
    title = "hipcc"
    program = "hipcc"
    source_name = "source.hip"
    artifact_name = "kernels.hsaco"
    environment = {"HIP_PLATFORM": "amd"}

    def __init__(self, arch: str):
        super().__init__(("--genco", f"--offload-arch={arch}", "-x", "hip"))


class OclocToolchain(CommandToolchain):
    """Intel's offline compiler for the OpenCL C (`ocloc compile`)."""

    title = "ocloc"
    program = "ocloc"
    source_name = "source.cl"
    artifact_name = "kernels.bin"

    def __init__(self, device: str):
        super().__init__(("compile", "-q", "-device", device, "-output_no_suffix", "-file"))

    def identity(self) -> str:
        return "\n".join([self.program, _version([self.program, "query", "OCL_DRIVER_VERSION"]), " ".join(self.flags)])

    def command(self, source: Path, output: Path) -> list[str]:
        # ocloc names the binary after -output and the device: write into a
        # folder, then take the one binary.
        return [self.program, *self.flags, str(source), "-output", output.stem,
                "-out_dir", str(output.parent)]

    def made(self, output: Path) -> Path:
        return output.with_suffix("")  # -output_no_suffix: the binary is named as asked


def _nvrtc():
    """cuda-bindings' NVRTC module, or a BrazeError saying how to get it."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        raise BrazeError("the cuda target's compiler 'nvrtc' needs cuda-bindings and nvidia-cuda-nvrtc "
                         "(pip install 'braze[cuda]'), or use the option compiler='nvcc'") from None
    return nvrtc


class NvrtcToolchain(Toolchain):
    """NVRTC (PyPI nvidia-cuda-nvrtc, through cuda-bindings), in process; no
    headers, no GPU needed."""

    title = "NVRTC"
    source_name = "source.cu"
    artifact_name = "kernels.cubin"

    def __init__(self, arch: str):
        super().__init__((f"--gpu-architecture={arch}",))

    def identity(self) -> str:
        nvrtc = _nvrtc()
        return f"nvrtc {nvrtc.nvrtcVersion()[1:]}\n" + " ".join(self.flags)

    def run(self, source: Path, output: Path, entry: Path) -> None:
        nvrtc = _nvrtc()
        _, program = nvrtc.nvrtcCreateProgram(source.read_bytes(), source.name.encode(), 0, [], [])
        try:
            flags = [flag.encode() for flag in self.flags]
            (status,) = nvrtc.nvrtcCompileProgram(program, len(flags), flags)
            _, size = nvrtc.nvrtcGetProgramLogSize(program)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(program, log)
            log = log.rstrip(b"\0 ").decode(errors="replace")
            if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise BrazeError(f"{self.title} failed ({status.name}) on {source}; the source is kept there.\n{log}")
            _, size = nvrtc.nvrtcGetCUBINSize(program)
            cubin = b" " * size
            nvrtc.nvrtcGetCUBIN(program, cubin)
            output.write_bytes(cubin)
            (entry / "build.log").write_text(log)
        finally:
            nvrtc.nvrtcDestroyProgram(program)

    def load(self, path: Path):
        return path.read_bytes()


@dataclass(frozen=True)
class VendorLibraryOptions(GpuOptions):
    # GEMMs and attention stay the vendor's (cuBLAS/hipBLAS, PyTorch's SDPA)
    # unless asked: those run on tensor cores, and the generated SIMT GEMM
    # (codegen/gpu_gemm.py) and thread-per-row attention
    # (codegen/gpu_attention.py) have not been timed on a GPU yet
    # (benchmarks/gpu_check.py --generated times both). Inductor's default
    # is the library's too.
    epilogue_fusion: bool = False
    flash_attention: bool = False


@dataclass(frozen=True)
class CudaOptions(VendorLibraryOptions):
    # "sm_90", "sm_90a", ...; "" = the current device's (sm_90 without one).
    arch: str = ""
    # "nvrtc" (PyPI, in process) or "nvcc" (the CUDA toolkit).
    compiler: str = "nvrtc"


@dataclass(frozen=True)
class HipOptions(VendorLibraryOptions):
    arch: str = "gfx90a"


@dataclass(frozen=True)
class MetalOptions(GpuOptions):
    pass


class CompileOnlyTarget(Target):
    """Emits and builds kernels through the cache; compiling a program to
    run is refused (no runtime yet) unless a subclass has one (`build`,
    `device_missing`: CUDA, Metal)."""

    gpu = True
    attention_blocks = ATTENTION_BLOCKS

    def fused_gemm_missing(self) -> str | None:
        return None  # codegen/gpu_gemm.py: shared-memory tiles

    def flash_attention_missing(self) -> str | None:
        return None  # codegen/gpu_attention.py: a thread per query row

    def toolchain(self, options, unit: Unit) -> Toolchain:
        raise NotImplementedError

    def compile_artifact(self, unit: Unit, options) -> tuple[Path, bytes, bool]:
        """Builds `unit` through the cache: the source's path, the binary,
        and whether it was a cache hit."""
        cache = NativeCache(directory=options.cache_dir, toolchain=self.toolchain(options, unit), salt=options.key())
        binary = cache.load(unit.source)
        return cache.source_path(unit.source), binary, cache.compilations == 0

    def build(self, unit: Unit, options) -> Built:
        raise BrazeError(self.device_missing())

    def device_missing(self) -> str | None:
        return (f"the {self.name} target has no runtime in this build yet: its kernels compile "
                f"(braze.codegen.emit, braze-translate --target={self.name}) but programs run on "
                f"'cpu' or 'opencl' (see docs/targets.md)")


class CudaTarget(CompileOnlyTarget):
    """CUDA C++ (codegen/cuda.py) built by NVRTC (or nvcc) into one cubin
    per function and run by runtime/cuda.py on torch's current CUDA device."""

    name = "cuda"
    device = "cuda"
    options_type = CudaOptions
    install = "pip install 'braze[cuda]' (NVRTC and cuda-bindings), or the CUDA toolkit's nvcc"
    # A combo's launch takes its buffers, `sizes` and `failed` as 8-byte
    # pointers; 250 buffers (2016 bytes) fit the 4 KB of parameters every
    # GPU and driver takes (32764 bytes only from CUDA 12.1 on Volta+).
    combo_arguments = 250

    def options(self, given=None):
        options = super().options(given)
        if options.compiler not in ("nvrtc", "nvcc"):
            raise BrazeError(f"cuda option compiler must be 'nvrtc' or 'nvcc', got {options.compiler!r}")
        if options.arch and not re.fullmatch(r"sm_\d+a?", options.arch):
            raise BrazeError(f"cuda option arch must look like sm_90, got {options.arch!r}")
        return options

    def toolchain(self, options: CudaOptions, unit: Unit) -> Toolchain:
        arch = options.arch or self.device_arch()
        return NvrtcToolchain(arch) if options.compiler == "nvrtc" else NvccToolchain(arch)

    def device_arch(self) -> str:
        """The current CUDA device's arch (sm_90 where there is none)."""
        import torch

        if not torch.cuda.is_available():
            return "sm_90"
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"

    def run_device(self) -> str:
        import torch

        return f"cuda:{torch.cuda.current_device()}"

    def build(self, unit: Unit, options: CudaOptions) -> Built:
        """A cubin for the current device's arch (unless `arch` says
        otherwise), loaded and launched through the driver API."""
        from braze.runtime.cuda import CudaKernels

        path, cubin, hit = self.compile_artifact(unit, options)
        return Built(CudaKernels(cubin, self.run_device(), launch_buffers=unit.launch_buffers), path, hit)

    def device_missing(self) -> str | None:
        import torch

        if torch.version.cuda is None:
            return f"this torch ({torch.__version__}) is built without CUDA"
        if not torch.cuda.is_available():
            return "torch sees no CUDA device (torch.cuda.is_available() is False)"
        try:
            from cuda.bindings import driver  # noqa: F401
        except ImportError:
            return "cuda-bindings (the CUDA driver API) is not installed"
        return None

    def compiler_missing(self) -> str | None:
        try:
            from cuda.bindings import nvrtc

            nvrtc.nvrtcVersion()
            return None
        except Exception:  # not installed, or its library does not load
            return None if shutil.which("nvcc") else "neither NVRTC (cuda-bindings) nor nvcc is installed"


class HipTarget(CompileOnlyTarget):
    name = "hip"
    device = "cuda"  # ROCm builds of torch name their device "cuda"
    options_type = HipOptions
    install = "apt-get install hipcc (ROCm; Debian's builds for gfx90a)"
    combo_arguments = 250  # as CUDA's: 4 KB of kernel arguments


    def toolchain(self, options: HipOptions, unit: Unit) -> Toolchain:
        return HipccToolchain(options.arch)

    def compiler_missing(self) -> str | None:
        return None if shutil.which("hipcc") else "hipcc is not on PATH"


class MetalTarget(CompileOnlyTarget):
    name = "metal"
    options_type = MetalOptions
    device = "cpu"  # here: kernels run in the C++ shim, on host tensors
    install = "a C++20 compiler (g++ 11+) for the shim; Apple's Metal toolchain is not used yet"
    # A Metal kernel's buffer argument table has 31 slots: a combo's buffers,
    # then `sizes` and `failed`.
    combo_arguments = 29


    def toolchain(self, options, unit: Unit) -> Toolchain:
        from braze.runtime.native_cache import cache_dir
        from braze.target.metal_shim import MetalShimToolchain

        return MetalShimToolchain(unit, options.cache_dir or cache_dir())

    def build(self, unit: Unit, options) -> Built:
        """Here: the kernels run in the C++ shim on the CPU (an emulation
        for testing; docs/targets.md)."""
        from braze.target.metal_shim import ShimKernels

        path, library, hit = self.compile_artifact(unit, options)
        return Built(ShimKernels(library, unit.launch_buffers), path, hit)

    def device_missing(self) -> str | None:
        return None  # the shim runs anywhere a C++20 compiler does

    def compiler_missing(self) -> str | None:
        from braze.runtime.native_cache import compiler

        try:
            compiler()
            return None
        except BrazeError as error:
            return str(error)
