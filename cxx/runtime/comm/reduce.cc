#include "reduce.h"

#include <algorithm>
#include <cstring>

namespace braze::comm {
namespace {

uint32_t BitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

float FloatOf(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// IEEE half and bfloat16 are reduced in float32 and rounded back to nearest
// even, the way torch's CPU kernels do it.
float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; man <<= 1; } while ((man & 0x400) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return FloatOf(bits);
}

uint16_t FloatToHalf(float f) {
  uint32_t x = BitsOf(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan
    return sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0);
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // overflow rounds to inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    // Adding 0.5 aligns the mantissa so the FPU does the rounding.
    return sign | (uint16_t)(BitsOf(FloatOf(absx) + 0.5f) - 0x3f000000u);
  }
  uint32_t mant_odd = (absx >> 13) & 1;
  absx += ((15u - 127u) << 23) + 0xfffu + mant_odd;
  return sign | (uint16_t)(absx >> 13);
}

float Bf16ToFloat(uint16_t b) { return FloatOf((uint32_t)b << 16); }

uint16_t FloatToBf16(float f) {
  uint32_t x = BitsOf(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40;  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1);
  return x >> 16;
}

template <typename T>
inline T Apply(T a, T b, braze_reduce_op_t op) {
  switch (op) {
    case BRAZE_REDUCE_PROD: return a * b;
    case BRAZE_REDUCE_MIN: return std::min(a, b);
    case BRAZE_REDUCE_MAX: return std::max(a, b);
    default: return a + b;  // SUM and AVG
  }
}

// One loop per op so the compiler vectorises the common SUM case.
template <typename T, typename F>
void Combine(T* dst, const T* a, const T* b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

template <typename T>
void ReduceNative(T* dst, const void* const* srcs, size_t nsrcs, size_t count,
                  braze_reduce_op_t op) {
  const T* first = static_cast<const T*>(srcs[0]);
  if (nsrcs == 1) {
    if (dst != first) std::memcpy(dst, first, count * sizeof(T));
    return;
  }
  for (size_t s = 1; s < nsrcs; ++s) {
    const T* a = s == 1 ? first : dst;
    const T* b = static_cast<const T*>(srcs[s]);
    switch (op) {
      case BRAZE_REDUCE_PROD: Combine(dst, a, b, count, [](T x, T y) { return x * y; }); break;
      case BRAZE_REDUCE_MIN: Combine(dst, a, b, count, [](T x, T y) { return y < x ? y : x; }); break;
      case BRAZE_REDUCE_MAX: Combine(dst, a, b, count, [](T x, T y) { return x < y ? y : x; }); break;
      default: Combine(dst, a, b, count, [](T x, T y) { return x + y; }); break;
    }
  }
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Reduce16(uint16_t* dst, const void* const* srcs, size_t nsrcs, size_t count,
              braze_reduce_op_t op) {
  for (size_t i = 0; i < count; ++i) {
    float acc = ToF(static_cast<const uint16_t*>(srcs[0])[i]);
    for (size_t s = 1; s < nsrcs; ++s)
      acc = Apply(acc, ToF(static_cast<const uint16_t*>(srcs[s])[i]), op);
    dst[i] = FromF(acc);
  }
}

}  // namespace

size_t DtypeSize(braze_dtype_t dtype) {
  switch (dtype) {
    case BRAZE_DTYPE_FLOAT16:
    case BRAZE_DTYPE_BFLOAT16: return 2;
    case BRAZE_DTYPE_INT64: return 8;
    default: return 4;
  }
}

const char* DtypeName(braze_dtype_t dtype) {
  switch (dtype) {
    case BRAZE_DTYPE_FLOAT32: return "float32";
    case BRAZE_DTYPE_FLOAT16: return "float16";
    case BRAZE_DTYPE_BFLOAT16: return "bfloat16";
    case BRAZE_DTYPE_INT32: return "int32";
    case BRAZE_DTYPE_INT64: return "int64";
  }
  return "unknown";
}

bool DtypeValid(int dtype) {
  return dtype >= BRAZE_DTYPE_FLOAT32 && dtype <= BRAZE_DTYPE_INT64;
}

const char* ReduceOpName(braze_reduce_op_t op) {
  switch (op) {
    case BRAZE_REDUCE_SUM: return "sum";
    case BRAZE_REDUCE_PROD: return "prod";
    case BRAZE_REDUCE_MIN: return "min";
    case BRAZE_REDUCE_MAX: return "max";
    case BRAZE_REDUCE_AVG: return "avg";
  }
  return "unknown";
}

void ReduceInto(void* dst, const void* const* srcs, size_t nsrcs, size_t count,
                braze_dtype_t dtype, braze_reduce_op_t op) {
  switch (dtype) {
    case BRAZE_DTYPE_FLOAT32: ReduceNative(static_cast<float*>(dst), srcs, nsrcs, count, op); break;
    case BRAZE_DTYPE_INT32: ReduceNative(static_cast<int32_t*>(dst), srcs, nsrcs, count, op); break;
    case BRAZE_DTYPE_INT64: ReduceNative(static_cast<int64_t*>(dst), srcs, nsrcs, count, op); break;
    case BRAZE_DTYPE_FLOAT16:
      Reduce16<HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(dst), srcs, nsrcs, count, op);
      break;
    case BRAZE_DTYPE_BFLOAT16:
      Reduce16<Bf16ToFloat, FloatToBf16>(static_cast<uint16_t*>(dst), srcs, nsrcs, count, op);
      break;
  }
}

void FinishAverage(void* data, size_t count, braze_dtype_t dtype, int divisor) {
  switch (dtype) {
    case BRAZE_DTYPE_FLOAT32: {
      float* p = static_cast<float*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= divisor;
      break;
    }
    case BRAZE_DTYPE_INT32: {
      int32_t* p = static_cast<int32_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= divisor;
      break;
    }
    case BRAZE_DTYPE_INT64: {
      int64_t* p = static_cast<int64_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= divisor;
      break;
    }
    case BRAZE_DTYPE_FLOAT16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = FloatToHalf(HalfToFloat(p[i]) / divisor);
      break;
    }
    case BRAZE_DTYPE_BFLOAT16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = FloatToBf16(Bf16ToFloat(p[i]) / divisor);
      break;
    }
  }
}

}  // namespace braze::comm
