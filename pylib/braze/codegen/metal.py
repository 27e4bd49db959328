"""Metal Shading Language: the GPU structure (codegen/gpu.py) spelled with
`device`/`threadgroup` address spaces, buffer and thread-position
attributes. MSL has no double and no erf, expm1 or log1p: f64 kernels are
refused, and the three functions are defined in the head."""

from __future__ import annotations

from braze.codegen.gpu import STORAGE_TYPES, C_FUNCTIONS, GpuRenderer

_HEAD = """\
// braze Metal kernels (MSL 2.x).
#include <metal_stdlib>
using namespace metal;
#define BZ_FN static inline
#define bz_as_float(u) as_type<float>(u)
#define bz_as_uint(x) as_type<uint32_t>(x)
#define BZ_NAN_F NAN
#define BZ_INF_F INFINITY
// A pointer into threadgroup memory (how a combo's sub-kernels get their share of the
// launch's pool). The C++ shim that runs this file on a CPU (target/metal_shim) turns
// `threadgroup` declarations into statics, which a pointer type cannot carry: it defines
// this name empty first.
#ifndef BZ_THREADGROUP_POINTER
#define BZ_THREADGROUP_POINTER threadgroup
#endif
// exp(x) - 1 and log(1 + x) without cancellation near 0 (Kahan's forms).
static inline float bz_expm1(float x) {
  float u = exp(x);
  return u == 1.0f ? x : (u - 1.0f == -1.0f ? -1.0f : (u - 1.0f) * x / log(u));
}
static inline float bz_log1p(float x) {
  float u = 1.0f + x;
  return u == 1.0f ? x : log(u) * x / (u - 1.0f);
}
// erf: Abramowitz-Stegun 7.1.26 (absolute error < 1.5e-7), odd.
static inline float bz_erf(float x) {
  float a = fabs(x), t = 1.0f / (1.0f + 0.3275911f * a);
  float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t - 0.284496736f) * t
                    + 0.254829592f) * t * exp(-a * a);
  return copysign(y, x);
}"""

_STORAGE_NO_DOUBLE = {k: v for k, v in STORAGE_TYPES.items() if k != "f64"}
_OWN = {"math.expm1": "bz_expm1", "math.log1p": "bz_log1p", "math.erf": "bz_erf"}


class MetalRenderer(GpuRenderer):
    language = "Metal"
    extension = ".metal"
    storage_types = dict(_STORAGE_NO_DOUBLE, i1="uint8_t")
    compute_types = dict(_STORAGE_NO_DOUBLE, f16="float", bf16="float")
    functions = {op: {"float": _OWN.get(op, name)} for op, name in C_FUNCTIONS.items()}
    head = _HEAD
    kernel_prefix = "kernel void"
    global_space = "device"
    shared_space = "threadgroup"
    shared_pointer_space = "BZ_THREADGROUP_POINTER"
    # A kernel's buffer argument table has 31 entries ([[buffer(0)]] to [[buffer(30)]]).
    max_launch_parameters = 31
    barrier = "threadgroup_barrier(mem_flags::mem_threadgroup)"
    local_id = "bz_tid"
    block_id = "bz_bid"
    int64_min = "((int64_t)(-9223372036854775807L - 1))"

    # Apple GPUs' SIMD group.
    warp = 32

    def shuffle_down(self, value: str, delta: str, c_type: str) -> str:
        return f"simd_shuffle_down({value}, (ushort){delta})"

    def broadcast_first(self, value: str, c_type: str) -> str:
        return f"simd_broadcast({value}, (ushort)0)"

    def launch_parameters(self, params: list[str]) -> list[str]:
        params = [f"{p} [[buffer({n})]]" for n, p in enumerate(params)]
        return params + ["uint bz_tid [[thread_position_in_threadgroup]]",
                         "uint bz_bid [[threadgroup_position_in_grid]]"]
