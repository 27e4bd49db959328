"""CUDA C++ and HIP: the GPU structure (codegen/gpu.py) spelled for nvcc,
NVRTC and hipcc. No headers are included (NVRTC's include path is empty):
the fixed-width integer types are typedefs here, half conversions come from
the GPU prelude."""

from __future__ import annotations

from braze.codegen.gpu import C_FUNCTIONS, GpuRenderer

# CUDA's float functions carry an `f` (expf); the double ones do not.
_CUDA_FUNCTIONS = {op: {"float": name + "f", "double": name} for op, name in C_FUNCTIONS.items()}

_TYPEDEFS = """\
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef signed char int8_t;
typedef unsigned char uint8_t;"""
_MACROS = """\
#define BZ_FN static __device__ __forceinline__
#define bz_as_float(u) __uint_as_float(u)
#define bz_as_uint(x) __float_as_uint(x)
#define BZ_NAN_F __int_as_float(0x7fc00000)
#define BZ_INF_F __int_as_float(0x7f800000)
#define BZ_NAN_D __longlong_as_double(0x7ff8000000000000LL)
#define BZ_INF_D __longlong_as_double(0x7ff0000000000000LL)"""
# NVRTC has no headers: the integer types are typedefs there; nvcc has them.
_CUDA_HEAD = ("// braze CUDA kernels: compile with nvcc -cubin or NVRTC; no headers needed.\n"
              "#ifdef __CUDACC_RTC__\n" + _TYPEDEFS + "\n#else\n#include <stdint.h>\n#endif\n" + _MACROS)


class CudaRenderer(GpuRenderer):
    language = "CUDA C++"
    extension = ".cu"
    functions = _CUDA_FUNCTIONS
    head = _CUDA_HEAD
    shared_space = "__shared__"
    barrier = "__syncthreads()"
    local_id = "threadIdx.x"
    block_id = "blockIdx.x"

    device_prefix = "static __device__"
    # A __global__ function's parameters may hold 4 KB on every GPU and
    # driver (32764 bytes only from CUDA 12.1 on Volta and later); HIP's
    # are limited alike.
    max_launch_parameters = 4096 // 8

    warp = 32
    # nvcc left a flash attention's 16 scores in local memory (a 64-byte stack
    # frame at sm_90) without it.
    unroll = "#pragma unroll"

    def launch_prefix(self, threads: int) -> str:
        return f'extern "C" __global__ void __launch_bounds__({threads})'

    def shuffle_down(self, value: str, delta: str, c_type: str) -> str:
        return self._shuffled("__shfl_down_sync(0xffffffffu, {}, " + delta + ")", value, c_type)

    def broadcast_first(self, value: str, c_type: str) -> str:
        return self._shuffled("__shfl_sync(0xffffffffu, {}, 0)", value, c_type)

    @staticmethod
    def _shuffled(call: str, value: str, c_type: str) -> str:
        """`call` over `value`; the shuffles take 32 and 64-bit types, so
        narrower integers travel as int."""
        if c_type in ("int16_t", "int8_t", "uint16_t", "uint8_t", "bool"):
            return f"({c_type}){call.format(f'(int){value}')}"
        return call.format(value)

    def parameters(self) -> list[str]:
        # Inputs are read-only for the kernel's whole run: __restrict__ lets
        # loads go through the read-only cache. (A result may reuse an input
        # buffer only in pointwise kernels, which read before they write.)
        params = super().parameters()
        restrict = " __restrict__" if self.a.reduce else ""
        count = len(self.a.inputs)
        return [p.replace("* in", f"*{restrict} in", 1) if k < count else p for k, p in enumerate(params)]


class HipRenderer(CudaRenderer):
    language = "HIP"
    extension = ".hip"
    # AMD's wavefront on CDNA (gfx90a); HIP's shuffles take no mask.
    warp = 64
    head = ("// braze HIP kernels: compile with hipcc --genco --offload-arch=<gfx> (HIP_PLATFORM=amd).\n"
            "#include <hip/hip_runtime.h>\n" + _MACROS)

    def shuffle_down(self, value: str, delta: str, c_type: str) -> str:
        return self._shuffled("__shfl_down({}, " + delta + ")", value, c_type)

    def broadcast_first(self, value: str, c_type: str) -> str:
        return self._shuffled("__shfl({}, 0)", value, c_type)
