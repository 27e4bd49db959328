// braze GPU prelude: pasted into every generated GPU kernel source (CUDA, HIP, OpenCL C, Metal)
// after the target's own head, which defines the fixed-width integer names (int64_t, uint32_t,
// uint16_t, uint8_t, ...), BZ_FN (the qualifier of a device function), bz_as_float/bz_as_uint (bit casts
// between float and uint32_t), BZ_NAN_F/BZ_INF_F and, where the target has double, BZ_NAN_D/BZ_INF_D.
// No headers: NVRTC's include path is empty. Every name starts with bz_.
//
// Half types live in memory as uint16_t and compute in float. The conversions are the CPU
// prelude's (round to nearest even, exactly like c10::Half/BFloat16; NaN made quiet), so every
// target rounds alike.
#ifndef BZ_GPU_PRELUDE
#define BZ_GPU_PRELUDE

BZ_FN float bz_bf16_to_f32(uint16_t h) { return bz_as_float((uint32_t)h << 16); }
BZ_FN uint16_t bz_f32_to_bf16(float x) {
  uint32_t u = bz_as_uint(x);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)(x != x ? (u >> 16) | 0x40u : rounded);
}
BZ_FN float bz_f16_to_f32(uint16_t h) {
  uint32_t a = h & 0x7fffu, e = h & 0x7c00u;
  uint32_t sub = bz_as_uint(bz_as_float(a | 0x3f000000u) - 0.5f);
  uint32_t special = (a << 13) | (a > 0x7c00u ? 0x7fc00000u : 0x7f800000u);
  uint32_t r = e == 0x7c00u ? special : (e == 0 ? sub : (a << 13) + 0x38000000u);
  return bz_as_float(r | ((uint32_t)(h & 0x8000u) << 16));
}
BZ_FN uint16_t bz_f32_to_f16(float x) {
  uint32_t u = bz_as_uint(x), a = u & 0x7fffffffu;
  uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  uint32_t sub = bz_as_uint(bz_as_float(a) + 0.5f) - 0x3f000000u;
  uint32_t r = a > 0x7f800000u ? 0x7e00u : (a >= 0x477ff000u ? 0x7c00u : (a < 0x38800000u ? sub : normal));
  return (uint16_t)(r | ((u >> 16) & 0x8000u));
}
// 8-bit floats (a scaled_mm's operands, stored as bytes), widened exactly: E5M2 is the top byte
// of an f16; E4M3FN has bias 7, subnormals m * 2^-9, no infinities and NaN at S.1111.111.
BZ_FN float bz_f8e5m2_to_f32(uint8_t b) { return bz_f16_to_f32((uint16_t)((uint16_t)b << 8)); }
BZ_FN float bz_f8e4m3fn_to_f32(uint8_t b) {
  uint32_t e = ((uint32_t)b >> 3) & 15u, m = (uint32_t)b & 7u;
  float magnitude = e == 0 ? (float)m * 0.001953125f : bz_as_float(((e + 120u) << 23) | (m << 20));
  return (b & 0x7fu) == 0x7fu ? BZ_NAN_F : ((b & 0x80u) ? -magnitude : magnitude);
}
BZ_FN float bz_round_bf16(float x) { return bz_bf16_to_f32(bz_f32_to_bf16(x)); }
BZ_FN float bz_round_f16(float x) { return bz_f16_to_f32(bz_f32_to_f16(x)); }

// NaN-propagating max/min (PyTorch's maximum/minimum and max/min reductions). Operands are
// always named values, so the macros evaluate nothing twice.
#define bz_nan_max(a, b) ((a) != (a) || (b) != (b) ? (a) + (b) : ((a) > (b) ? (a) : (b)))
#define bz_nan_min(a, b) ((a) != (a) || (b) != (b) ? (a) + (b) : ((a) < (b) ? (a) : (b)))

#endif
