// braze prelude: pasted at the top of every generated C++ translation unit. Self-contained C++17;
// every name starts with bz_; all static inline or templates, so unused functions cost nothing.
// Compile with -fno-math-errno -fno-trapping-math on top of the usual flags: neither changes a result
// (nothing reads errno or FP exception flags), but without them sqrt/rsqrt stay scalar, and without
// AVX-512 (masked ops) so do most loops. No -ffast-math: inf and NaN must behave as in PyTorch.
//
// Why it is written this way:
// * Own branch-free polynomials, not libm: a libm call keeps a `#pragma omp simd` loop scalar, and
//   glibc declares its vector variants (libmvec) only under -ffast-math. Redeclaring those symbols
//   works and is 1.1-1.8x faster, but needs -lmvec, is 2.5-4 ulp off (exp, log, erf), and the scalar
//   remainder of a loop then computes differently from its vector body. This code is <= 1.6 ulp
//   (sigmoid 2.3; float erf 2.2, traded for speed: GELU is erf-bound), 1.4-3.9x faster than torch
//   (exp, log, tanh, erf; erf-GELU a little faster than torch's own), the same in vector and scalar.
// * Selects (`c ? a : b`), never `if`, so gcc can if-convert; special values are patched by selects
//   at the end, and inputs are clamped before float->int conversions so none is out of range.
//   int->float conversions (and float->int ones under a select) are replaced by the 1.5*2^mantissa
//   trick: gcc refuses to if-convert a conversion unless -fno-trapping-math (it may raise inexact).
// * Taylor coefficients (1/k!, 2/(2k+1)) where the reduced range makes them accurate enough; erf
//   and small-|x| tanh use our own weighted-minimax fits (erf's then tuned ulp by ulp against the
//   float results, its exp2 being a shortened one of its own: erf needs it only to ~1e-7).
// * bz_fma is a real fma when the target has one (single rounding in Cody-Waite reduction and
//   Horner steps); without FMA, a*b+c: slightly less accurate, never a slow libm call.
// * Float pow goes through double log/exp: |y log x| up to ~100 turns a 1-ulp float log error into
//   ~100 ulp. Double erf/pow and fmod-based floordiv/mod call libm and do not vectorize.
// * Half conversions are integer bit manipulation (not _Float16, which gcc 12 does not vectorize):
//   round to nearest even exactly like c10::Half/BFloat16; subnormal halves are rounded by adding
//   0.5f, whose float addition rounds to nearest even by itself.
// * Integer division has no SIMD form on x86: bz_floordiv/bz_mod stay scalar. b == 0 is undefined
//   behaviour (SIGFPE), as in C; the caller must check (PyTorch raises ZeroDivisionError).
#ifndef BZ_PRELUDE_H
#define BZ_PRELUDE_H
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#define BZ_INLINE static inline __attribute__((always_inline))

BZ_INLINE uint32_t bz_bits(float x) { uint32_t u; std::memcpy(&u, &x, 4); return u; }
BZ_INLINE uint64_t bz_bits(double x) { uint64_t u; std::memcpy(&u, &x, 8); return u; }
BZ_INLINE float bz_from_bits(uint32_t u) { float x; std::memcpy(&x, &u, 4); return x; }
BZ_INLINE double bz_from_bits(uint64_t u) { double x; std::memcpy(&x, &u, 8); return x; }

#ifdef __FMA__
BZ_INLINE float bz_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
BZ_INLINE double bz_fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
#else
BZ_INLINE float bz_fma(float a, float b, float c) { return a * b + c; }
BZ_INLINE double bz_fma(double a, double b, double c) { return a * b + c; }
#endif

// c0 + x*(c1 + x*(c2 + ...)), fully inlined so the coefficients stay immediate constants.
template <class T> BZ_INLINE T bz_poly(T, T c0) { return c0; }
template <class T, class... C> BZ_INLINE T bz_poly(T x, T c0, T c1, C... c) {
  return bz_fma(bz_poly(x, c1, T(c)...), x, c0);
}

// ---- half storage types (uint16_t in memory) ----
BZ_INLINE float bz_bf16_to_f32(uint16_t h) { return bz_from_bits((uint32_t)h << 16); }
BZ_INLINE uint16_t bz_f32_to_bf16(float x) {
  uint32_t u = bz_bits(x);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)(x != x ? (u >> 16) | 0x40u : rounded);  // NaN: keep sign/payload, make it quiet
}
BZ_INLINE float bz_f16_to_f32(uint16_t h) {
  uint32_t a = h & 0x7fffu, e = h & 0x7c00u;
  uint32_t sub = bz_bits(bz_from_bits(a | 0x3f000000u) - 0.5f);  // zero, subnormals: a * 2^-24
  uint32_t special = (a << 13) | (a > 0x7c00u ? 0x7fc00000u : 0x7f800000u);  // inf; NaN made quiet
  uint32_t r = e == 0x7c00u ? special : (e == 0 ? sub : (a << 13) + 0x38000000u);
  return bz_from_bits(r | ((uint32_t)(h & 0x8000u) << 16));
}
BZ_INLINE uint16_t bz_f32_to_f16(float x) {
  uint32_t u = bz_bits(x), a = u & 0x7fffffffu;
  uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;  // rebias, round half even
  uint32_t sub = bz_bits(bz_from_bits(a) + 0.5f) - 0x3f000000u;           // units of 2^-24
  uint32_t r = a > 0x7f800000u ? 0x7e00u : (a >= 0x477ff000u ? 0x7c00u : (a < 0x38800000u ? sub : normal));
  return (uint16_t)(r | ((u >> 16) & 0x8000u));
}
BZ_INLINE float bz_round_bf16(float x) { return bz_bf16_to_f32(bz_f32_to_bf16(x)); }
BZ_INLINE float bz_round_f16(float x) {  // same rounding as above without the 16-bit round trip (2.5x faster)
  uint32_t u = bz_bits(x), a = u & 0x7fffffffu;
  uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
  uint32_t sub = bz_bits((bz_from_bits(a) + 0.5f) - 0.5f);
  uint32_t r = a > 0x7f800000u ? a : (a >= 0x477ff000u ? 0x7f800000u : (a < 0x38800000u ? sub : normal));
  return bz_from_bits(r | (u & 0x80000000u));
}

// ---- float/double math ----
template <class T> struct bz_fp;
template <> struct bz_fp<float> {
  using U = uint32_t;
  static constexpr int M = 23, B = 127;  // mantissa bits, exponent bias
  static constexpr U sqrt_half = 0x3f3504f3u, mant = 0x7fffffu;
  static constexpr float shift = 0x1.8p23f, log2e = 0x1.715476p+0f;
  static constexpr float ln2hi = 0x1.62ep-1f, ln2lo = 0x1.0bfbe8p-15f;  // k*ln2hi exact for |k| < 2^11
  // exp(lo) underflows and exp(hi) overflows even after rounding; below em1lo expm1 rounds to -1.
  static constexpr float lo = -104.0f, hi = 89.0f, em1lo = -20.0f, min_normal = 0x1p-126f;
  BZ_INLINE float expm1_poly(float r) {  // |r| <= ln2/2: Taylor to r^7, truncation < 0.1 ulp
    return bz_fma(r * r, bz_poly(r, 1 / 2.0f, 1 / 6.0f, 1 / 24.0f, 1 / 120.0f, 1 / 720.0f, 1 / 5040.0f), r);
  }
  BZ_INLINE float log_poly(float z) { return bz_poly(z, 2 / 3.0f, 2 / 5.0f, 2 / 7.0f, 2 / 9.0f); }
};
template <> struct bz_fp<double> {
  using U = uint64_t;
  static constexpr int M = 52, B = 1023;
  static constexpr U sqrt_half = 0x3fe6a09e667f3bcdull, mant = 0xfffffffffffffull;
  static constexpr double shift = 0x1.8p52, log2e = 0x1.71547652b82fep+0;
  static constexpr double ln2hi = 0x1.62e42ffp-1, ln2lo = -0x1.718432a1b0e26p-35;
  static constexpr double lo = -746.0, hi = 710.0, em1lo = -40.0, min_normal = 0x1p-1022;
  BZ_INLINE double expm1_poly(double r) {  // Taylor to r^13
    return bz_fma(r * r, bz_poly(r, 1 / 2.0, 1 / 6.0, 1 / 24.0, 1 / 120.0, 1 / 720.0, 1 / 5040.0,
                                 1 / 40320.0, 1 / 362880.0, 1 / 3628800.0, 1 / 39916800.0,
                                 1 / 479001600.0, 1 / 6227020800.0), r);
  }
  BZ_INLINE double log_poly(double z) {
    return bz_poly(z, 2 / 3.0, 2 / 5.0, 2 / 7.0, 2 / 9.0, 2 / 11.0, 2 / 13.0, 2 / 15.0, 2 / 17.0,
                   2 / 19.0, 2 / 21.0);
  }
};

template <class T> BZ_INLINE T bz_pow2(int n) {  // 2^n for normal exponents
  using F = bz_fp<T>;
  return bz_from_bits((typename F::U)(n + F::B) << F::M);
}
// x = k*ln2 + r, |r| <= ln2/2 (Cody-Waite); returns k, r in *r. NaN/inf must be clamped first.
template <class T> BZ_INLINE int bz_exp_reduce(T x, T* r) {
  using F = bz_fp<T>;
  T k = bz_fma(x, F::log2e, F::shift) - F::shift;  // round to nearest integer
  *r = bz_fma(k, -F::ln2lo, bz_fma(k, -F::ln2hi, x));
  return (int)k;
}
template <class T> BZ_INLINE T bz_exp_t(T x) {
  using F = bz_fp<T>;
  T r, xc = x > F::lo ? x : F::lo;  // vmaxps/vminps patterns; NaN becomes lo
  xc = xc < F::hi ? xc : F::hi;
  int k = bz_exp_reduce(xc, &r), k1 = k >> 1;
  // two scalings: 2^k alone would leave the exponent range at both ends; the second one rounds
  // once into the subnormals.
  T y = (T(1) + F::expm1_poly(r)) * bz_pow2<T>(k1) * bz_pow2<T>(k - k1);
  return x != x ? x : y;
}
template <class T> BZ_INLINE T bz_expm1_t(T x) {
  using F = bz_fp<T>;
  T r, xc = x > F::em1lo ? x : F::em1lo;
  xc = xc < F::hi ? xc : F::hi;
  int k = bz_exp_reduce(xc, &r);
  T t = bz_pow2<T>(k - 1);  // 2^k (1 + p) - 1 = 2 (t p + (t - 1/2)): one rounding, no 2^128
  T p = F::expm1_poly(r), y = k == 0 ? p : 2 * bz_fma(t, p, t - T(0.5));  // k == 0: keeps subnormals
  return x != x ? x : std::copysign(y, x);  // sign: r*r*P + r turns -0 into +0
}
template <class T> BZ_INLINE T bz_log_t(T x) {
  using F = bz_fp<T>;
  using U = typename F::U;
  bool sub = x < F::min_normal;  // subnormal (zero and negatives are replaced at the end)
  U u = bz_bits(sub ? x * (T)(U(1) << F::M) : x) + (bz_bits(T(1)) - F::sqrt_half);
  U k = (u >> F::M) - (sub ? F::M : 0);  // biased exponent: k - B is the power of two
  T f = bz_from_bits((u & F::mant) + F::sqrt_half) - T(1);  // x = 2^(k-B) (1+f), 1+f in [sqrt .5, sqrt 2)
  // log(1+f) = 2 atanh(s), s = f/(2+f), arranged so the large terms are exact
  T dk = bz_from_bits(bz_bits(F::shift) + k - F::B) - F::shift;  // k - B, no int->FP conversion
  T s = f / (T(2) + f), z = s * s, hfsq = T(0.5) * f * f;
  T y = bz_fma(dk, F::ln2hi, f - (hfsq - bz_fma(s, hfsq + z * F::log_poly(z), dk * F::ln2lo)));
  const T inf = std::numeric_limits<T>::infinity();
  return x > 0 && x < inf ? y : (x == 0 ? -inf : (x > 0 ? x : std::numeric_limits<T>::quiet_NaN()));
}
template <class T> BZ_INLINE T bz_tanh_t(T x) {
  T a = std::fabs(x);
  T e = bz_expm1_t(2 * (a < T(20) ? a : T(20)));  // tanh(20) rounds to 1 in double
  T y = e / (e + T(2));
  if constexpr (sizeof(T) == 4) {  // |x| < 0.5625: x + x^3 P(x^2); e/(e+2) alone is 2.4 ulp off there
    T s = a * a;
    y = a < T(0.5625) ? bz_fma(a, s * bz_poly(s, -0x1.555548p-2f, 0x1.110c8cp-3f, -0x1.b90d16p-5f,
                                                 0x1.584c44p-6f, -0x1.95941cp-8f), a) : y;
  }
  return x != x ? x : std::copysign(y, x);
}
template <class T> BZ_INLINE T bz_sigmoid_t(T x) {
  // exp of -|x| only: no overflow, and e/(1+e) keeps tiny (even subnormal) results for x << 0
  T e = bz_exp_t(-std::fabs(x));
  return (x >= 0 ? T(1) : e) / (T(1) + e);
}

BZ_INLINE float bz_exp(float x) { return bz_exp_t(x); }
BZ_INLINE double bz_exp(double x) { return bz_exp_t(x); }
BZ_INLINE float bz_expm1(float x) { return bz_expm1_t(x); }
BZ_INLINE double bz_expm1(double x) { return bz_expm1_t(x); }
BZ_INLINE float bz_log(float x) { return bz_log_t(x); }
BZ_INLINE double bz_log(double x) { return bz_log_t(x); }
BZ_INLINE float bz_tanh(float x) { return bz_tanh_t(x); }
BZ_INLINE double bz_tanh(double x) { return bz_tanh_t(x); }
BZ_INLINE float bz_sigmoid(float x) { return bz_sigmoid_t(x); }
BZ_INLINE double bz_sigmoid(double x) { return bz_sigmoid_t(x); }
BZ_INLINE float bz_sqrt(float x) { return std::sqrt(x); }
BZ_INLINE double bz_sqrt(double x) { return std::sqrt(x); }
BZ_INLINE float bz_rsqrt(float x) { return 1.0f / std::sqrt(x); }  // as torch: no rsqrt14 estimate
BZ_INLINE double bz_rsqrt(double x) { return 1.0 / std::sqrt(x); }

BZ_INLINE float bz_erf(float x) {
  // <= 2.2 ulp, 1.3e-7 absolute. Both branches are computed and one is selected; everything that
  // issues on the FMA ports (Zen 4: fma, mul, compare, vpternlog, shifts) is what this costs, so
  // the polynomials are as short as the error allows and the sign is an integer add.
  float a = std::fabs(x), s = a * a;
  // |x| < 0.71875: erf(x) = x + x P(x^2), relative error; exact +-0 and subnormals
  float small = bz_fma(a, bz_poly(s, 0x1.06eba0p-3f, -0x1.8125ccp-2f, 0x1.cdd60ep-4f, -0x1.b0bfacp-6f,
                                  0x1.142072p-8f), a);
  // else erf(x) = 1 - 2^-(q + 2), q + 2 ~ -log2(erfc(|x|)) (the 2 keeps q, and its rounding, small
  // near the crossover); |x| clamped to 4, where 1 - 2^-(q + 2) rounds to 1 (erf does from 3.92 on)
  uint32_t ab = bz_bits(a);
  float t = bz_from_bits(ab < 0x40800000u ? ab : 0x40800000u);  // min(|x|, 4) as vpminud; NaN: 4
  float q = bz_poly(t, -0x1.ffabe8p+0f, 0x1.9f1c90p+0f, 0x1.dc8ddep-1f, 0x1.19201cp-3f, -0x1.91af3ep-6f,
                    0x1.1108f8p-9f);
  // 2^-(q + 2) = 2^(k - 2) 2^f, k = round(-q), |f| <= 1/2; k - 2 comes from the low bits of z
  float z = (0x1.8p23f - 2) - q, k = z - (0x1.8p23f - 2), f = -(q + k);
  float p = bz_poly(f, 1.0f, 0x1.62e42ap-1f, 0x1.ebf9c6p-3f, 0x1.c6b6d8p-5f, 0x1.3ce8acp-7f, 0x1.5bda3cp-10f);
  float e = bz_from_bits(bz_bits(p) + (bz_bits(z) << 23));
  float y = a >= 0.71875f ? 1.0f - e : small;  // NaN: small, NaN
  return bz_from_bits(bz_bits(y) + (bz_bits(x) & 0x80000000u));  // copysign: y >= 0 (+0 for +-0)
}
BZ_INLINE double bz_erf(double x) { return std::erf(x); }  // libm: not vectorized

BZ_INLINE float bz_pow(float x, float y) {
  const float inf = std::numeric_limits<float>::infinity();
  float ax = std::fabs(x), ay = std::fabs(y);
  float r = (float)bz_exp_t((double)y * bz_log_t((double)ax));
  // integer/odd y from 2^23 + |y| (its last mantissa bit is the parity), not an int conversion
  float m = ay < 0x1p23f ? ay + 0x1p23f : ay;
  bool integer = !(ay < 0x1p23f) || m - 0x1p23f == ay;  // NaN counts as integer: gives NaN anyway
  uint32_t odd_sign = integer && ay < 0x1p24f ? bz_bits(x) & (bz_bits(m) << 31) : 0u;  // x < 0, odd y
  r = bz_from_bits(bz_bits(r) ^ odd_sign);
  r = x < 0 && x > -inf && !integer ? std::numeric_limits<float>::quiet_NaN() : r;
  // pow(x, 0) = pow(1, y) = pow(-1, +-inf) = 1, even with NaN
  return y == 0 || x == 1 || (ax == 1 && ay == inf) ? 1.0f : r;
}
BZ_INLINE double bz_pow(double x, double y) { return std::pow(x, y); }  // libm: not vectorized

// ---- PyTorch semantics helpers ----
template <class I> BZ_INLINE I bz_floordiv_int(I a, I b) {
  if (b == -1) return a == std::numeric_limits<I>::min() ? a : -a;  // no INT_MIN / -1 trap: wraps
  I q = a / b, r = a % b;
  return q - (I)((r != 0) & ((r ^ b) < 0));
}
template <class I> BZ_INLINE I bz_mod_int(I a, I b) {
  if (b == -1) return 0;
  I r = a % b;
  return (r != 0) & ((r ^ b) < 0) ? r + b : r;
}
BZ_INLINE int64_t bz_floordiv(int64_t a, int64_t b) { return bz_floordiv_int(a, b); }
BZ_INLINE int32_t bz_floordiv(int32_t a, int32_t b) { return bz_floordiv_int(a, b); }
BZ_INLINE int64_t bz_mod(int64_t a, int64_t b) { return bz_mod_int(a, b); }
BZ_INLINE int32_t bz_mod(int32_t a, int32_t b) { return bz_mod_int(a, b); }
// torch.remainder / torch.floor_divide on floating point (c10 div_floor_floating); libm fmod.
template <class T> BZ_INLINE T bz_mod_fp(T a, T b) {
  T m = std::fmod(a, b);
  return m != 0 && ((b < 0) != (m < 0)) ? m + b : m;
}
template <class T> BZ_INLINE T bz_floordiv_fp(T a, T b) {
  if (b == 0) return a / b;
  T m = std::fmod(a, b), div = (a - m) / b;
  div = m != 0 && ((b < 0) != (m < 0)) ? div - 1 : div;
  if (div == 0) return std::copysign(T(0), a / b);
  T fl = std::floor(div);
  return div - fl > T(0.5) ? fl + 1 : fl;
}
BZ_INLINE float bz_mod(float a, float b) { return bz_mod_fp(a, b); }
BZ_INLINE double bz_mod(double a, double b) { return bz_mod_fp(a, b); }
BZ_INLINE float bz_floordiv(float a, float b) { return bz_floordiv_fp(a, b); }
BZ_INLINE double bz_floordiv(double a, double b) { return bz_floordiv_fp(a, b); }

// torch.maximum/minimum: NaN if either is NaN; otherwise the vmaxps/vminps choice.
template <class T> BZ_INLINE T bz_nan_max_t(T a, T b) { return a != a || b != b ? a + b : (a > b ? a : b); }
template <class T> BZ_INLINE T bz_nan_min_t(T a, T b) { return a != a || b != b ? a + b : (a < b ? a : b); }
BZ_INLINE float bz_nan_max(float a, float b) { return bz_nan_max_t(a, b); }
BZ_INLINE double bz_nan_max(double a, double b) { return bz_nan_max_t(a, b); }
BZ_INLINE float bz_nan_min(float a, float b) { return bz_nan_min_t(a, b); }
BZ_INLINE double bz_nan_min(double a, double b) { return bz_nan_min_t(a, b); }

#endif  // BZ_PRELUDE_H
