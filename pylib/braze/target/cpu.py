"""The CPU target: C++ with OpenMP (codegen/cpp), built by the host C++
compiler into one shared library per function, called through ctypes."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from braze.machine import cpu_flags
from braze.target import Built, Target, TargetOptions, Unit


def compile_flags() -> tuple[str, ...]:
    """What the host C++ compiler builds generated kernels with."""
    from braze.codegen.cpp.emitter import COMPILE_FLAGS, GATHER_FLAGS
    from braze.runtime.native_cache import DEFAULT_FLAGS, first_accepted

    return DEFAULT_FLAGS + COMPILE_FLAGS + first_accepted(GATHER_FLAGS)


def _without_amx() -> bool:
    return "amx_bf16" not in cpu_flags()


@dataclass(frozen=True)
class CpuOptions(TargetOptions):
    # f16/bf16 attentions are generated flash kernels where the CPU has no
    # AMX: torch's half SDPA there is its slow path (AMD Zen 4, 2 threads:
    # a grouped-query decode layer in bf16 13.5 ms with it, 5.0 ms with the
    # generated kernel; docs/cpu.md). With AMX the library's stays (its
    # brgemm kernels: 0.93 against 1.08 ms on a bf16 decode step's attention).
    flash_attention_halves: bool = field(default_factory=_without_amx)


class CpuTarget(Target):
    name = "cpu"
    options_type = CpuOptions
    device = "cpu"
    install = "apt-get install g++ (or set CXX)"
    combo_arguments = 250
    # A lone GEMM of at most 4 static rows takes the fused GEMM's GEMV
    # (benchmarks/cpu/gemv.py --models linear, 1 thread, against the library's GEMM:
    # f32 M = 1-2 1.0x, M = 4 1.4-1.8x, M = 8 1.2-1.9x, M = 16 0.8-0.9x;
    # bf16 with AVX512-BF16 M = 1-4 1.2-4.2x, M = 8 0.87-0.89x on its
    # panels). 4 gains for both.
    decode_gemm_rows = 4
    # 1x1 convolutions up to 2^23 multiply-adds run as GEMMs: oneDNN's
    # convolution costs 40-90 us more per call at small sizes (a
    # [2, 64, 1, 1] -> 240 channels 100 us, as addmm 13 us). Measured on the
    # zoo's CNNs in one process (AMD Zen 4, 2 threads), no GEMMs / up to
    # 2^23 / up to 2^26: mobilenet_v3_small f32 4.82 / 3.44 / 3.45 ms,
    # efficientnet_b0 f32 18.57 / 16.96 / 18.34 (its 25088-row GEMMs lost
    # to oneDNN); docs/cpu.md.
    convolution_gemm_work = 1 << 23
    # The flash attention's work items take a decode step's query heads of
    # one key/value head together (docs/cpu.md: attention).
    attention_group_heads = True

    def fused_gemm_missing(self) -> str | None:
        from braze.runtime import blas

        return blas.missing()

    def flash_attention_missing(self) -> str | None:
        return self.fused_gemm_missing()  # both are built on the BLAS

    def pipeline(self, options: TargetOptions) -> str:
        tune = ",braze-tune-convolutions" if options.tune_convolutions else ""
        return super().pipeline(options) + tune

    def _cache(self, options: TargetOptions):
        from braze.codegen.cpp.emitter import PRELUDE
        from braze.runtime.native_cache import NativeCache, PreludeToolchain, cache_dir

        directory = options.cache_dir or cache_dir()
        return NativeCache(directory=directory, salt=options.key(),
                           toolchain=PreludeToolchain(compile_flags(), PRELUDE, directory))

    def build(self, unit: Unit, options: TargetOptions) -> Built:
        from braze.runtime.cpu import CpuKernels

        cache = self._cache(options)
        library = cache.load(unit.source)
        return Built(CpuKernels(library), cache.source_path(unit.source), cache.compilations == 0)

    def compiler_missing(self) -> str | None:
        import os

        if os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++"):
            return None
        return "no C++ compiler (c++, g++ or $CXX)"
