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
// * Float sin/cos/tan, asin/acos/atan/atan2, sinh/cosh, log1p, exp2 and log2 compute in double and
//   round once: <= 0.5 ulp and a hair (sin/cos/tan of every magnitude, through an exact table
//   reduction), 0.5-0.8x torch's speed (atan 1.8x; exp2 0.25x). Their double versions call libm.
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
#include <algorithm>
#include <limits>

#define BZ_INLINE static inline __attribute__((always_inline))
// For kernels that evaluate transcendental functions: bound by arithmetic, not memory, they run
// faster in 512-bit vectors, which gcc's tuning for AVX-512 cores avoids by default (measured on a
// Xeon: a BatchNorm + SiLU 1.2-1.4 ms instead of 1.55, GELU 1.0 instead of 1.4, 2.4M floats).
// Without AVX-512 it changes nothing.
#if defined(__x86_64__) && defined(__clang__)
#define BZ_WIDE_VECTORS __attribute__((min_vector_width(512)))
#elif defined(__x86_64__) && defined(__GNUC__)
#define BZ_WIDE_VECTORS __attribute__((target("prefer-vector-width=512")))
#else
#define BZ_WIDE_VECTORS
#endif

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
// e5m2 is the high byte of an f16; e4m3fn has 4 exponent bits (bias 7), 3 mantissa bits, no infinities
// and NaN at S.1111.111. Branch-free, as bz_f16_to_f32, so that loops over them vectorise (a table of the
// 256 values made a GEMV over fp8 weights gather each one).
BZ_INLINE float bz_e5m2_to_f32(uint8_t x) { return bz_f16_to_f32((uint16_t)(x << 8)); }
BZ_INLINE float bz_e4m3fn_to_f32(uint8_t x) {
  const uint32_t a = x & 0x7fu;
  const uint32_t sub = bz_bits(bz_from_bits((121u << 23) | (a << 20)) - 0x1p-6f);  // exponent 0: a * 2^-9
  const uint32_t r = a == 0x7fu ? 0x7fc00000u : (a < 8u ? sub : (a << 20) + (120u << 23));
  return bz_from_bits(r | (uint32_t)(x & 0x80u) << 24);
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
  // At or below lo the result rounds to +0: such lanes (a causal mask's -inf after softmax's
  // max is subtracted, say) compute exp(0) and are replaced by 0. Scaling them down instead
  // underflows, and on x86 every underflowing product costs a microcode assist, ten times the
  // whole exp. NaN takes the same lanes and is returned as is.
  bool zero = !(x > F::lo);
  T r, xc = zero ? T(0) : x;
  xc = xc < F::hi ? xc : F::hi;
  int k = bz_exp_reduce(xc, &r), k1 = k >> 1;
  // two scalings: 2^k alone would leave the exponent range at both ends; the second one rounds
  // once into the subnormals.
  T y = (T(1) + F::expm1_poly(r)) * bz_pow2<T>(k1) * bz_pow2<T>(k - k1);
  return x != x ? x : (zero ? T(0) : y);
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

// ---- trigonometric, hyperbolic, log1p, exp2, log2 ----
// A float computes in double, where the reductions and polynomials below are far more accurate
// than a float needs: the one rounding at the end leaves <= 0.5 ulp and a hair, with no
// double-float tricks (vectors are half as wide; still 8 lanes with AVX-512). A double calls libm
// (not vectorized).

// Row e: (2^s * 2/pi) mod 4 for the floats with biased exponent e, |x| = m 2^s (s = e - 150; 1 - 150
// for subnormals; inf/NaN: zeros), split into three doubles: the first two hold 29 significant bits
// each, so that their products with a 24-bit integer are exact.
static const double bz_quarter_turns[3][256] = {  // [part][e]: gathers of doubles at one index
  {
    0x1.45f306dp-150, 0x1.45f306dp-150, 0x1.45f306dp-149, 0x1.45f306dp-148, 0x1.45f306dp-147, 0x1.45f306dp-146,
    0x1.45f306dp-145, 0x1.45f306dp-144, 0x1.45f306dp-143, 0x1.45f306dp-142, 0x1.45f306dp-141, 0x1.45f306dp-140,
    0x1.45f306dp-139, 0x1.45f306dp-138, 0x1.45f306dp-137, 0x1.45f306dp-136, 0x1.45f306dp-135, 0x1.45f306dp-134,
    0x1.45f306dp-133, 0x1.45f306dp-132, 0x1.45f306dp-131, 0x1.45f306dp-130, 0x1.45f306dp-129, 0x1.45f306dp-128,
    0x1.45f306dp-127, 0x1.45f306dp-126, 0x1.45f306dp-125, 0x1.45f306dp-124, 0x1.45f306dp-123, 0x1.45f306dp-122,
    0x1.45f306dp-121, 0x1.45f306dp-120, 0x1.45f306dp-119, 0x1.45f306dp-118, 0x1.45f306dp-117, 0x1.45f306dp-116,
    0x1.45f306dp-115, 0x1.45f306dp-114, 0x1.45f306dp-113, 0x1.45f306dp-112, 0x1.45f306dp-111, 0x1.45f306dp-110,
    0x1.45f306dp-109, 0x1.45f306dp-108, 0x1.45f306dp-107, 0x1.45f306dp-106, 0x1.45f306dp-105, 0x1.45f306dp-104,
    0x1.45f306dp-103, 0x1.45f306dp-102, 0x1.45f306dp-101, 0x1.45f306dp-100, 0x1.45f306dp-99, 0x1.45f306dp-98,
    0x1.45f306dp-97, 0x1.45f306dp-96, 0x1.45f306dp-95, 0x1.45f306dp-94, 0x1.45f306dp-93, 0x1.45f306dp-92,
    0x1.45f306dp-91, 0x1.45f306dp-90, 0x1.45f306dp-89, 0x1.45f306dp-88, 0x1.45f306dp-87, 0x1.45f306dp-86,
    0x1.45f306dp-85, 0x1.45f306dp-84, 0x1.45f306dp-83, 0x1.45f306dp-82, 0x1.45f306dp-81, 0x1.45f306dp-80,
    0x1.45f306dp-79, 0x1.45f306dp-78, 0x1.45f306dp-77, 0x1.45f306dp-76, 0x1.45f306dp-75, 0x1.45f306dp-74,
    0x1.45f306dp-73, 0x1.45f306dp-72, 0x1.45f306dp-71, 0x1.45f306dp-70, 0x1.45f306dp-69, 0x1.45f306dp-68,
    0x1.45f306dp-67, 0x1.45f306dp-66, 0x1.45f306dp-65, 0x1.45f306dp-64, 0x1.45f306dp-63, 0x1.45f306dp-62,
    0x1.45f306dp-61, 0x1.45f306dp-60, 0x1.45f306dp-59, 0x1.45f306dp-58, 0x1.45f306dp-57, 0x1.45f306dp-56,
    0x1.45f306dp-55, 0x1.45f306dp-54, 0x1.45f306dp-53, 0x1.45f306dp-52, 0x1.45f306dp-51, 0x1.45f306dp-50,
    0x1.45f306dp-49, 0x1.45f306dp-48, 0x1.45f306dp-47, 0x1.45f306dp-46, 0x1.45f306dp-45, 0x1.45f306dp-44,
    0x1.45f306dp-43, 0x1.45f306dp-42, 0x1.45f306dp-41, 0x1.45f306dp-40, 0x1.45f306dp-39, 0x1.45f306dp-38,
    0x1.45f306dp-37, 0x1.45f306dp-36, 0x1.45f306dp-35, 0x1.45f306dp-34, 0x1.45f306dp-33, 0x1.45f306dp-32,
    0x1.45f306dp-31, 0x1.45f306dp-30, 0x1.45f306dp-29, 0x1.45f306dp-28, 0x1.45f306dp-27, 0x1.45f306dp-26,
    0x1.45f306dp-25, 0x1.45f306dp-24, 0x1.45f306dp-23, 0x1.45f306dp-22, 0x1.45f306dp-21, 0x1.45f306dp-20,
    0x1.45f306dp-19, 0x1.45f306dp-18, 0x1.45f306dp-17, 0x1.45f306dp-16, 0x1.45f306dp-15, 0x1.45f306dp-14,
    0x1.45f306dp-13, 0x1.45f306dp-12, 0x1.45f306dp-11, 0x1.45f306dp-10, 0x1.45f306dp-9, 0x1.45f306dp-8,
    0x1.45f306dp-7, 0x1.45f306dp-6, 0x1.45f306dp-5, 0x1.45f306dp-4, 0x1.45f306dp-3, 0x1.45f306dp-2,
    0x1.45f306dp-1, 0x1.45f306dp+0, 0x1.45f306dp+1, 0x1.17cc1b7p+0, 0x1.17cc1b7p+1, 0x1.7cc1b72p-2,
    0x1.7cc1b72p-1, 0x1.7cc1b72p+0, 0x1.7cc1b72p+1, 0x1.f306dc9p+0, 0x1.f306dc9p+1, 0x1.e60db93p+1,
    0x1.cc1b727p+1, 0x1.9836e4ep+1, 0x1.306dc9cp+1, 0x1.836e4e4p-1, 0x1.836e4e4p+0, 0x1.836e4e4p+1,
    0x1.06dc9c8p+1, 0x1.b72722p-4, 0x1.b72722p-3, 0x1.b72722p-2, 0x1.b72722p-1, 0x1.b72722p+0,
    0x1.b72722p+1, 0x1.6e4e441p+1, 0x1.b939105p+0, 0x1.b939105p+1, 0x1.727220ap+1, 0x1.c9c882ap+0,
    0x1.c9c882ap+1, 0x1.9391054p+1, 0x1.27220a9p+1, 0x1.391054ap-1, 0x1.391054ap+0, 0x1.391054ap+1,
    0x1.c882a53p-1, 0x1.c882a53p+0, 0x1.c882a53p+1, 0x1.91054a7p+1, 0x1.220a94fp+1, 0x1.1054a7fp-1,
    0x1.1054a7fp+0, 0x1.1054a7fp+1, 0x1.054a7fp-2, 0x1.054a7fp-1, 0x1.054a7fp+0, 0x1.054a7fp+1,
    0x1.529fc27p-4, 0x1.529fc27p-3, 0x1.529fc27p-2, 0x1.529fc27p-1, 0x1.529fc27p+0, 0x1.529fc27p+1,
    0x1.4a7f09dp+0, 0x1.4a7f09dp+1, 0x1.29fc275p+0, 0x1.29fc275p+1, 0x1.4fe13abp-1, 0x1.4fe13abp+0,
    0x1.4fe13abp+1, 0x1.3f84eafp+0, 0x1.3f84eafp+1, 0x1.fc2757dp-1, 0x1.fc2757dp+0, 0x1.fc2757dp+1,
    0x1.f84eafap+1, 0x1.f09d5f4p+1, 0x1.e13abe8p+1, 0x1.c2757d1p+1, 0x1.84eafa3p+1, 0x1.09d5f47p+1,
    0x1.3abe8fap-3, 0x1.3abe8fap-2, 0x1.3abe8fap-1, 0x1.3abe8fap+0, 0x1.3abe8fap+1, 0x1.d5f47d4p-1,
    0x1.d5f47d4p+0, 0x1.d5f47d4p+1, 0x1.abe8fa9p+1, 0x1.57d1f53p+1, 0x1.5f47d4dp+0, 0x1.5f47d4dp+1,
    0x1.7d1f534p+0, 0x1.7d1f534p+1, 0x1.f47d4d3p+0, 0x1.f47d4d3p+1, 0x1.e8fa9a6p+1, 0x1.d1f534dp+1,
    0x1.a3ea69bp+1, 0x1.47d4d37p+1, 0x1.1f534ddp+0, 0x1.1f534ddp+1, 0x1.f534ddcp-2, 0x1.f534ddcp-1,
    0x1.f534ddcp+0, 0x1.f534ddcp+1, 0x1.ea69bb8p+1, 0x1.d4d377p+1, 0x1.a9a6eep+1, 0x1.534ddcp+1,
    0x1.4d37703p+0, 0x1.4d37703p+1, 0x1.34ddc0dp+0, 0,
  },
  {
    0x1.9391054p-179, 0x1.9391054p-179, 0x1.9391054p-178, 0x1.9391054p-177, 0x1.9391054p-176, 0x1.9391054p-175,
    0x1.9391054p-174, 0x1.9391054p-173, 0x1.9391054p-172, 0x1.9391054p-171, 0x1.9391054p-170, 0x1.9391054p-169,
    0x1.9391054p-168, 0x1.9391054p-167, 0x1.9391054p-166, 0x1.9391054p-165, 0x1.9391054p-164, 0x1.9391054p-163,
    0x1.9391054p-162, 0x1.9391054p-161, 0x1.9391054p-160, 0x1.9391054p-159, 0x1.9391054p-158, 0x1.9391054p-157,
    0x1.9391054p-156, 0x1.9391054p-155, 0x1.9391054p-154, 0x1.9391054p-153, 0x1.9391054p-152, 0x1.9391054p-151,
    0x1.9391054p-150, 0x1.9391054p-149, 0x1.9391054p-148, 0x1.9391054p-147, 0x1.9391054p-146, 0x1.9391054p-145,
    0x1.9391054p-144, 0x1.9391054p-143, 0x1.9391054p-142, 0x1.9391054p-141, 0x1.9391054p-140, 0x1.9391054p-139,
    0x1.9391054p-138, 0x1.9391054p-137, 0x1.9391054p-136, 0x1.9391054p-135, 0x1.9391054p-134, 0x1.9391054p-133,
    0x1.9391054p-132, 0x1.9391054p-131, 0x1.9391054p-130, 0x1.9391054p-129, 0x1.9391054p-128, 0x1.9391054p-127,
    0x1.9391054p-126, 0x1.9391054p-125, 0x1.9391054p-124, 0x1.9391054p-123, 0x1.9391054p-122, 0x1.9391054p-121,
    0x1.9391054p-120, 0x1.9391054p-119, 0x1.9391054p-118, 0x1.9391054p-117, 0x1.9391054p-116, 0x1.9391054p-115,
    0x1.9391054p-114, 0x1.9391054p-113, 0x1.9391054p-112, 0x1.9391054p-111, 0x1.9391054p-110, 0x1.9391054p-109,
    0x1.9391054p-108, 0x1.9391054p-107, 0x1.9391054p-106, 0x1.9391054p-105, 0x1.9391054p-104, 0x1.9391054p-103,
    0x1.9391054p-102, 0x1.9391054p-101, 0x1.9391054p-100, 0x1.9391054p-99, 0x1.9391054p-98, 0x1.9391054p-97,
    0x1.9391054p-96, 0x1.9391054p-95, 0x1.9391054p-94, 0x1.9391054p-93, 0x1.9391054p-92, 0x1.9391054p-91,
    0x1.9391054p-90, 0x1.9391054p-89, 0x1.9391054p-88, 0x1.9391054p-87, 0x1.9391054p-86, 0x1.9391054p-85,
    0x1.9391054p-84, 0x1.9391054p-83, 0x1.9391054p-82, 0x1.9391054p-81, 0x1.9391054p-80, 0x1.9391054p-79,
    0x1.9391054p-78, 0x1.9391054p-77, 0x1.9391054p-76, 0x1.9391054p-75, 0x1.9391054p-74, 0x1.9391054p-73,
    0x1.9391054p-72, 0x1.9391054p-71, 0x1.9391054p-70, 0x1.9391054p-69, 0x1.9391054p-68, 0x1.9391054p-67,
    0x1.9391054p-66, 0x1.9391054p-65, 0x1.9391054p-64, 0x1.9391054p-63, 0x1.9391054p-62, 0x1.9391054p-61,
    0x1.9391054p-60, 0x1.9391054p-59, 0x1.9391054p-58, 0x1.9391054p-57, 0x1.9391054p-56, 0x1.9391054p-55,
    0x1.9391054p-54, 0x1.9391054p-53, 0x1.9391054p-52, 0x1.9391054p-51, 0x1.9391054p-50, 0x1.9391054p-49,
    0x1.9391054p-48, 0x1.9391054p-47, 0x1.9391054p-46, 0x1.9391054p-45, 0x1.9391054p-44, 0x1.9391054p-43,
    0x1.9391054p-42, 0x1.9391054p-41, 0x1.9391054p-40, 0x1.9391054p-39, 0x1.9391054p-38, 0x1.9391054p-37,
    0x1.9391054p-36, 0x1.9391054p-35, 0x1.9391054p-34, 0x1.9391054p-33, 0x1.9391054p-32, 0x1.9391054p-31,
    0x1.9391054p-30, 0x1.9391054p-29, 0x1.9391054p-28, 0x1.391054ap-31, 0x1.391054ap-30, 0x1.c882a53p-32,
    0x1.c882a53p-31, 0x1.c882a53p-30, 0x1.c882a53p-29, 0x1.91054a7p-29, 0x1.91054a7p-28, 0x1.220a94fp-28,
    0x1.1054a7fp-30, 0x1.1054a7fp-29, 0x1.1054a7fp-28, 0x1.054a7fp-31, 0x1.054a7fp-30, 0x1.054a7fp-29,
    0x1.054a7fp-28, 0x1.529fc27p-33, 0x1.529fc27p-32, 0x1.529fc27p-31, 0x1.529fc27p-30, 0x1.529fc27p-29,
    0x1.529fc27p-28, 0x1.4a7f09dp-29, 0x1.29fc275p-30, 0x1.29fc275p-29, 0x1.29fc275p-28, 0x1.4fe13abp-30,
    0x1.4fe13abp-29, 0x1.4fe13abp-28, 0x1.3f84eafp-29, 0x1.fc2757dp-31, 0x1.fc2757dp-30, 0x1.fc2757dp-29,
    0x1.f09d5f4p-30, 0x1.f09d5f4p-29, 0x1.f09d5f4p-28, 0x1.e13abe8p-28, 0x1.c2757d1p-28, 0x1.3abe8fap-34,
    0x1.3abe8fap-33, 0x1.3abe8fap-32, 0x1.3abe8fap-31, 0x1.3abe8fap-30, 0x1.3abe8fap-29, 0x1.3abe8fap-28,
    0x1.5f47d4dp-34, 0x1.5f47d4dp-33, 0x1.5f47d4dp-32, 0x1.5f47d4dp-31, 0x1.5f47d4dp-30, 0x1.5f47d4dp-29,
    0x1.7d1f534p-30, 0x1.7d1f534p-29, 0x1.f47d4d3p-30, 0x1.f47d4d3p-29, 0x1.d1f534dp-30, 0x1.d1f534dp-29,
    0x1.d1f534dp-28, 0x1.47d4d37p-29, 0x1.47d4d37p-28, 0x1.f534ddcp-33, 0x1.f534ddcp-32, 0x1.f534ddcp-31,
    0x1.f534ddcp-30, 0x1.f534ddcp-29, 0x1.f534ddcp-28, 0x1.ea69bb8p-28, 0x1.d4d377p-28, 0x1.a9a6eep-28,
    0x1.34ddc0dp-32, 0x1.34ddc0dp-31, 0x1.34ddc0dp-30, 0x1.34ddc0dp-29, 0x1.34ddc0dp-28, 0x1.a6ee06dp-30,
    0x1.a6ee06dp-29, 0x1.a6ee06dp-28, 0x1.4ddc0dbp-28, 0x1.377036dp-29, 0x1.bb81b6cp-31, 0x1.bb81b6cp-30,
    0x1.bb81b6cp-29, 0x1.bb81b6cp-28, 0x1.dc0db62p-30, 0x1.dc0db62p-29, 0x1.dc0db62p-28, 0x1.b81b6c5p-28,
    0x1.7036d8ap-28, 0x1.c0db629p-29, 0x1.81b6c52p-29, 0x1.81b6c52p-28, 0x1.b6c52b3p-35, 0x1.b6c52b3p-34,
    0x1.b6c52b3p-33, 0x1.b6c52b3p-32, 0x1.b6c52b3p-31, 0x1.b6c52b3p-30, 0x1.b6c52b3p-29, 0x1.b6c52b3p-28,
    0x1.b629599p-30, 0x1.b629599p-29, 0x1.6c52b32p-29, 0,
  },
  {
    0x1.4fe13abe8fa9ap-208, 0x1.4fe13abe8fa9ap-208, 0x1.4fe13abe8fa9ap-207, 0x1.4fe13abe8fa9ap-206, 0x1.4fe13abe8fa9ap-205,
    0x1.4fe13abe8fa9ap-204, 0x1.4fe13abe8fa9ap-203, 0x1.4fe13abe8fa9ap-202, 0x1.4fe13abe8fa9ap-201, 0x1.4fe13abe8fa9ap-200,
    0x1.4fe13abe8fa9ap-199, 0x1.4fe13abe8fa9ap-198, 0x1.4fe13abe8fa9ap-197, 0x1.4fe13abe8fa9ap-196, 0x1.4fe13abe8fa9ap-195,
    0x1.4fe13abe8fa9ap-194, 0x1.4fe13abe8fa9ap-193, 0x1.4fe13abe8fa9ap-192, 0x1.4fe13abe8fa9ap-191, 0x1.4fe13abe8fa9ap-190,
    0x1.4fe13abe8fa9ap-189, 0x1.4fe13abe8fa9ap-188, 0x1.4fe13abe8fa9ap-187, 0x1.4fe13abe8fa9ap-186, 0x1.4fe13abe8fa9ap-185,
    0x1.4fe13abe8fa9ap-184, 0x1.4fe13abe8fa9ap-183, 0x1.4fe13abe8fa9ap-182, 0x1.4fe13abe8fa9ap-181, 0x1.4fe13abe8fa9ap-180,
    0x1.4fe13abe8fa9ap-179, 0x1.4fe13abe8fa9ap-178, 0x1.4fe13abe8fa9ap-177, 0x1.4fe13abe8fa9ap-176, 0x1.4fe13abe8fa9ap-175,
    0x1.4fe13abe8fa9ap-174, 0x1.4fe13abe8fa9ap-173, 0x1.4fe13abe8fa9ap-172, 0x1.4fe13abe8fa9ap-171, 0x1.4fe13abe8fa9ap-170,
    0x1.4fe13abe8fa9ap-169, 0x1.4fe13abe8fa9ap-168, 0x1.4fe13abe8fa9ap-167, 0x1.4fe13abe8fa9ap-166, 0x1.4fe13abe8fa9ap-165,
    0x1.4fe13abe8fa9ap-164, 0x1.4fe13abe8fa9ap-163, 0x1.4fe13abe8fa9ap-162, 0x1.4fe13abe8fa9ap-161, 0x1.4fe13abe8fa9ap-160,
    0x1.4fe13abe8fa9ap-159, 0x1.4fe13abe8fa9ap-158, 0x1.4fe13abe8fa9ap-157, 0x1.4fe13abe8fa9ap-156, 0x1.4fe13abe8fa9ap-155,
    0x1.4fe13abe8fa9ap-154, 0x1.4fe13abe8fa9ap-153, 0x1.4fe13abe8fa9ap-152, 0x1.4fe13abe8fa9ap-151, 0x1.4fe13abe8fa9ap-150,
    0x1.4fe13abe8fa9ap-149, 0x1.4fe13abe8fa9ap-148, 0x1.4fe13abe8fa9ap-147, 0x1.4fe13abe8fa9ap-146, 0x1.4fe13abe8fa9ap-145,
    0x1.4fe13abe8fa9ap-144, 0x1.4fe13abe8fa9ap-143, 0x1.4fe13abe8fa9ap-142, 0x1.4fe13abe8fa9ap-141, 0x1.4fe13abe8fa9ap-140,
    0x1.4fe13abe8fa9ap-139, 0x1.4fe13abe8fa9ap-138, 0x1.4fe13abe8fa9ap-137, 0x1.4fe13abe8fa9ap-136, 0x1.4fe13abe8fa9ap-135,
    0x1.4fe13abe8fa9ap-134, 0x1.4fe13abe8fa9ap-133, 0x1.4fe13abe8fa9ap-132, 0x1.4fe13abe8fa9ap-131, 0x1.4fe13abe8fa9ap-130,
    0x1.4fe13abe8fa9ap-129, 0x1.4fe13abe8fa9ap-128, 0x1.4fe13abe8fa9ap-127, 0x1.4fe13abe8fa9ap-126, 0x1.4fe13abe8fa9ap-125,
    0x1.4fe13abe8fa9ap-124, 0x1.4fe13abe8fa9ap-123, 0x1.4fe13abe8fa9ap-122, 0x1.4fe13abe8fa9ap-121, 0x1.4fe13abe8fa9ap-120,
    0x1.4fe13abe8fa9ap-119, 0x1.4fe13abe8fa9ap-118, 0x1.4fe13abe8fa9ap-117, 0x1.4fe13abe8fa9ap-116, 0x1.4fe13abe8fa9ap-115,
    0x1.4fe13abe8fa9ap-114, 0x1.4fe13abe8fa9ap-113, 0x1.4fe13abe8fa9ap-112, 0x1.4fe13abe8fa9ap-111, 0x1.4fe13abe8fa9ap-110,
    0x1.4fe13abe8fa9ap-109, 0x1.4fe13abe8fa9ap-108, 0x1.4fe13abe8fa9ap-107, 0x1.4fe13abe8fa9ap-106, 0x1.4fe13abe8fa9ap-105,
    0x1.4fe13abe8fa9ap-104, 0x1.4fe13abe8fa9ap-103, 0x1.4fe13abe8fa9ap-102, 0x1.4fe13abe8fa9ap-101, 0x1.4fe13abe8fa9ap-100,
    0x1.4fe13abe8fa9ap-99, 0x1.4fe13abe8fa9ap-98, 0x1.4fe13abe8fa9ap-97, 0x1.4fe13abe8fa9ap-96, 0x1.4fe13abe8fa9ap-95,
    0x1.4fe13abe8fa9ap-94, 0x1.4fe13abe8fa9ap-93, 0x1.4fe13abe8fa9ap-92, 0x1.4fe13abe8fa9ap-91, 0x1.4fe13abe8fa9ap-90,
    0x1.4fe13abe8fa9ap-89, 0x1.4fe13abe8fa9ap-88, 0x1.4fe13abe8fa9ap-87, 0x1.4fe13abe8fa9ap-86, 0x1.4fe13abe8fa9ap-85,
    0x1.4fe13abe8fa9ap-84, 0x1.4fe13abe8fa9ap-83, 0x1.4fe13abe8fa9ap-82, 0x1.4fe13abe8fa9ap-81, 0x1.4fe13abe8fa9ap-80,
    0x1.4fe13abe8fa9ap-79, 0x1.4fe13abe8fa9ap-78, 0x1.4fe13abe8fa9ap-77, 0x1.4fe13abe8fa9ap-76, 0x1.4fe13abe8fa9ap-75,
    0x1.4fe13abe8fa9ap-74, 0x1.4fe13abe8fa9ap-73, 0x1.4fe13abe8fa9ap-72, 0x1.4fe13abe8fa9ap-71, 0x1.4fe13abe8fa9ap-70,
    0x1.4fe13abe8fa9ap-69, 0x1.4fe13abe8fa9ap-68, 0x1.4fe13abe8fa9ap-67, 0x1.4fe13abe8fa9ap-66, 0x1.4fe13abe8fa9ap-65,
    0x1.4fe13abe8fa9ap-64, 0x1.4fe13abe8fa9ap-63, 0x1.4fe13abe8fa9ap-62, 0x1.4fe13abe8fa9ap-61, 0x1.4fe13abe8fa9ap-60,
    0x1.4fe13abe8fa9ap-59, 0x1.4fe13abe8fa9ap-58, 0x1.4fe13abe8fa9ap-57, 0x1.fc2757d1f534ep-61, 0x1.fc2757d1f534ep-60,
    0x1.f09d5f47d4d37p-61, 0x1.f09d5f47d4d37p-60, 0x1.f09d5f47d4d37p-59, 0x1.f09d5f47d4d37p-58, 0x1.e13abe8fa9a6fp-58,
    0x1.e13abe8fa9a6fp-57, 0x1.c2757d1f534dep-57, 0x1.3abe8fa9a6eep-63, 0x1.3abe8fa9a6eep-62, 0x1.3abe8fa9a6eep-61,
    0x1.3abe8fa9a6eep-60, 0x1.3abe8fa9a6eep-59, 0x1.3abe8fa9a6eep-58, 0x1.3abe8fa9a6eep-57, 0x1.5f47d4d377037p-63,
    0x1.5f47d4d377037p-62, 0x1.5f47d4d377037p-61, 0x1.5f47d4d377037p-60, 0x1.5f47d4d377037p-59, 0x1.5f47d4d377037p-58,
    0x1.7d1f534ddc0dbp-59, 0x1.f47d4d377036ep-60, 0x1.f47d4d377036ep-59, 0x1.f47d4d377036ep-58, 0x1.d1f534ddc0db6p-59,
    0x1.d1f534ddc0db6p-58, 0x1.d1f534ddc0db6p-57, 0x1.47d4d377036d9p-58, 0x1.f534ddc0db629p-63, 0x1.f534ddc0db629p-62,
    0x1.f534ddc0db629p-61, 0x1.f534ddc0db629p-60, 0x1.f534ddc0db629p-59, 0x1.f534ddc0db629p-58, 0x1.f534ddc0db629p-57,
    0x1.ea69bb81b6c53p-57, 0x1.34ddc0db6295ap-63, 0x1.34ddc0db6295ap-62, 0x1.34ddc0db6295ap-61, 0x1.34ddc0db6295ap-60,
    0x1.34ddc0db6295ap-59, 0x1.34ddc0db6295ap-58, 0x1.34ddc0db6295ap-57, 0x1.bb81b6c52b328p-65, 0x1.bb81b6c52b328p-64,
    0x1.bb81b6c52b328p-63, 0x1.bb81b6c52b328p-62, 0x1.bb81b6c52b328p-61, 0x1.bb81b6c52b328p-60, 0x1.bb81b6c52b328p-59,
    0x1.bb81b6c52b328p-58, 0x1.dc0db6295993cp-60, 0x1.dc0db6295993cp-59, 0x1.b81b6c52b3279p-59, 0x1.b81b6c52b3279p-58,
    0x1.b81b6c52b3279p-57, 0x1.c0db6295993c4p-59, 0x1.c0db6295993c4p-58, 0x1.b6c52b3278872p-66, 0x1.b6c52b3278872p-65,
    0x1.b6c52b3278872p-64, 0x1.b6c52b3278872p-63, 0x1.b6c52b3278872p-62, 0x1.b6c52b3278872p-61, 0x1.b6c52b3278872p-60,
    0x1.b6c52b3278872p-59, 0x1.b6c52b3278872p-58, 0x1.6c52b32788721p-61, 0x1.6c52b32788721p-60, 0x1.6c52b32788721p-59,
    0x1.6c52b32788721p-58, 0x1.6c52b32788721p-57, 0x1.6295993c43904p-59, 0x1.6295993c43904p-58, 0x1.6295993c43904p-57,
    0x1.8a5664f10e41p-58, 0x1.14acc9e21c821p-58, 0x1.4acc9e21c821p-61, 0x1.4acc9e21c821p-60, 0x1.4acc9e21c821p-59,
    0x1.4acc9e21c821p-58, 0x1.2b3278872084p-59, 0x1.2b3278872084p-58, 0x1.2b3278872084p-57, 0x1.5993c439041fep-59,
    0x1.5993c439041fep-58, 0x1.664f10e4107f9p-59, 0x1.664f10e4107f9p-58, 0x1.664f10e4107f9p-57, 0x1.3c439041fe516p-66,
    0x1.3c439041fe516p-65, 0x1.3c439041fe516p-64, 0x1.3c439041fe516p-63, 0x1.3c439041fe516p-62, 0x1.3c439041fe516p-61,
    0x1.3c439041fe516p-60, 0x1.3c439041fe516p-59, 0x1.e21c820ff28b2p-61, 0x1.e21c820ff28b2p-60, 0x1.e21c820ff28b2p-59,
    0,
  },
};

// x = k*pi/2 + r for a finite float x: returns k mod 4 (the quadrant) and r in *r, |r| <= pi/4.
// |x| = m 2^s exactly, m < 2^24 an integer, so |x| 2/pi = m ((2^s 2/pi) mod 4) mod 4. That is one
// table row and the same arithmetic for every x (no branch to vectorize around, and no limit on
// |x| as Cody-Waite would have): the first product is exact and taken mod 4 exactly, the second
// added as an exact two-sum, and the fraction left after rounding to the nearest quadrant is
// accurate to ~2^-80, however close x is to a multiple of pi/2.
BZ_INLINE uint64_t bz_trig_reduce(float x, double* r) {
  uint32_t u = bz_bits(x) & 0x7fffffffu;
  int32_t e = (int32_t)(u >> 23);  // a signed 32-bit index: what gathers take
  double m = bz_from_bits((uint64_t)(0x4330000000000000ull | (u & 0x7fffffu) | (uint32_t)(e != 0) << 23)) - 0x1p52;
  double p0 = m * bz_quarter_turns[0][e], p1 = m * bz_quarter_turns[1][e];
  p0 -= 4 * std::floor(p0 * 0.25);
  double hi = p0 + p1, b = hi - p0, lo = (p0 - (hi - b)) + (p1 - b);
  double k = std::nearbyint(hi), f = (hi - k) + bz_fma(m, bz_quarter_turns[2][e], lo);
  double sign = std::signbit(x) ? -1.0 : 1.0;  // sin(-x) = -sin(x): -0 stays -0
  *r = sign * f * 0x1.921fb54442d18p+0;
  return bz_bits(sign * k + 0x1.8p52) & 3u;  // k mod 4, also for negative k, without a conversion
}
// sin and cos of |r| <~ pi/4 (Taylor; the first neglected terms are 2e-14 relative)
BZ_INLINE double bz_sin_poly(double r) {
  double z = r * r;
  return bz_fma(r * z, bz_poly(z, -1 / 6.0, 1 / 120.0, -1 / 5040.0, 1 / 362880.0, -1 / 39916800.0,
                               1 / 6227020800.0), r);
}
BZ_INLINE double bz_cos_poly(double r) {
  double z = r * r;
  return bz_poly(z, 1.0, -1 / 2.0, 1 / 24.0, -1 / 720.0, 1 / 40320.0, -1 / 3628800.0, 1 / 479001600.0,
                 -1 / 87178291200.0);
}
// NaN and +-inf give NaN (x - x); sin and tan of +-0 are x itself (r + r^3 P sums -0 to +0).
BZ_INLINE float bz_sin(float x) {
  double r;
  uint64_t q = bz_trig_reduce(x, &r);
  double s = bz_sin_poly(r), c = bz_cos_poly(r);
  double y = q & 1 ? c : s;
  y = q & 2 ? -y : y;
  return std::fabs(x) <= std::numeric_limits<float>::max() ? (x == 0 ? x : (float)y) : x - x;
}
BZ_INLINE float bz_cos(float x) {
  double r;
  uint64_t q = bz_trig_reduce(x, &r);
  double s = bz_sin_poly(r), c = bz_cos_poly(r);
  double y = q & 1 ? -s : c;
  y = q & 2 ? -y : y;
  return std::fabs(x) <= std::numeric_limits<float>::max() ? (float)y : x - x;
}
BZ_INLINE float bz_tan(float x) {
  double r;
  uint64_t q = bz_trig_reduce(x, &r);
  double s = bz_sin_poly(r), c = bz_cos_poly(r);
  double y = q & 1 ? -c / s : s / c;
  return std::fabs(x) <= std::numeric_limits<float>::max() ? (x == 0 ? x : (float)y) : x - x;
}
BZ_INLINE double bz_sin(double x) { return std::sin(x); }
BZ_INLINE double bz_cos(double x) { return std::cos(x); }
BZ_INLINE double bz_tan(double x) { return std::tan(x); }

// atan(t) for 0 <= t <= 1: atan(t) = pi/4 + atan((t - 1)/(t + 1)) above tan(pi/8), so the Taylor
// series runs over |u| <= 0.4143 (first neglected term 3e-11 relative).
BZ_INLINE double bz_atan01(double t) {
  bool upper = t > 0x1.a827999fcef32p-2;
  double u = upper ? (t - 1) / (t + 1) : t, z = u * u;
  double p = bz_fma(u * z, bz_poly(z, -1 / 3.0, 1 / 5.0, -1 / 7.0, 1 / 9.0, -1 / 11.0, 1 / 13.0, -1 / 15.0,
                                   1 / 17.0, -1 / 19.0, 1 / 21.0, -1 / 23.0), u);
  return upper ? 0x1.921fb54442d18p-1 + p : p;
}
// atan of any double (|t| > 1 through pi/2 - atan(1/|t|); +-inf gives +-pi/2, NaN NaN)
BZ_INLINE double bz_atan_d(double t) {
  double a = std::fabs(t);
  bool inverted = a > 1;
  double y = bz_atan01(inverted ? 1 / a : a);
  return std::copysign(inverted ? 0x1.921fb54442d18p+0 - y : y, t);
}
BZ_INLINE float bz_atan(float x) { return (float)bz_atan_d(x); }
BZ_INLINE float bz_asin(float x) {  // |x| = 1: x/0 = +-inf; |x| > 1: sqrt of a negative, NaN
  double xd = x;
  return (float)bz_atan_d(xd / std::sqrt((1 - xd) * (1 + xd)));
}
BZ_INLINE float bz_acos(float x) {  // x = -1: 2/0 = inf, pi; |x| > 1: a negative ratio, NaN
  double xd = x;
  return (float)(2 * bz_atan_d(std::sqrt((1 - xd) / (1 + xd))));
}
BZ_INLINE float bz_atan2(float y, float x) {
  double a = std::fabs((double)y), b = std::fabs((double)x);
  // the smaller over the larger; both zero or both infinite are the C99 cases 0 and 1
  double t = a == b ? (a == 0 ? 0.0 : 1.0) : (a < b ? a / b : b / a);
  double r = bz_atan01(t);
  r = a > b ? 0x1.921fb54442d18p+0 - r : r;
  r = std::signbit(x) ? 0x1.921fb54442d18p+1 - r : r;  // atan2(+-0, -0) = +-pi
  return x != x || y != y ? x + y : (float)std::copysign(r, (double)y);
}
BZ_INLINE double bz_atan(double x) { return std::atan(x); }
BZ_INLINE double bz_asin(double x) { return std::asin(x); }
BZ_INLINE double bz_acos(double x) { return std::acos(x); }
BZ_INLINE double bz_atan2(double y, double x) { return std::atan2(y, x); }

// |x| is clamped to 100 (float overflows from 89.4 on; NaN passes the comparison and stays NaN)
BZ_INLINE float bz_sinh(float x) {  // expm1 keeps small |x| accurate: sinh = (e + e/(e+1)) / 2
  double a = std::fabs((double)x), e = bz_expm1_t(a > 100 ? 100.0 : a);
  return (float)std::copysign(0.5 * (e + e / (e + 1)), (double)x);
}
BZ_INLINE float bz_cosh(float x) {
  double a = std::fabs((double)x), e = bz_exp_t(a > 100 ? 100.0 : a);
  return (float)(0.5 * (e + 1 / e));
}
BZ_INLINE double bz_sinh(double x) { return std::sinh(x); }
BZ_INLINE double bz_cosh(double x) { return std::cosh(x); }

BZ_INLINE float bz_log1p(float x) {
  // u = 1 + x rounds (for |x| < 2^-29); log(u) + (x - (u - 1)) / u puts the lost part back.
  // u = 0 (x = -1), u < 0, inf and NaN are log's own special cases; -0 stays -0.
  double xd = x, u = 1 + xd, l = bz_log_t(u);
  double y = xd > -1 && xd < std::numeric_limits<double>::infinity() ? l + (xd - (u - 1)) / u : l;
  return x == 0 ? x : (float)y;
}
BZ_INLINE float bz_exp2(float x) { return (float)bz_exp_t((double)x * 0x1.62e42fefa39efp-1); }
BZ_INLINE float bz_log2(float x) { return (float)(bz_log_t((double)x) * 0x1.71547652b82fep+0); }
BZ_INLINE double bz_log1p(double x) { return std::log1p(x); }
BZ_INLINE double bz_exp2(double x) { return std::exp2(x); }
BZ_INLINE double bz_log2(double x) { return std::log2(x); }

// floor, ceil, trunc, round half to even (nearbyint in the default rounding mode): one instruction
// each with SSE4.1, and exact.
BZ_INLINE float bz_roundeven(float x) { return std::nearbyint(x); }
BZ_INLINE double bz_roundeven(double x) { return std::nearbyint(x); }

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

// torch.maximum/minimum: NaN if either is NaN (b when b is: a > NaN is false; then a when a is); otherwise
// the vmaxps/vminps choice. Two selects of one test each: under -fno-trapping-math gcc 12 vectorizes a
// loop of them, where `a != a || b != b ? a + b : ...` and `a > b || a != a ? a : b` left a padded
// max-pool's loop scalar.
template <class T> BZ_INLINE T bz_nan_max_t(T a, T b) { const T m = a > b ? a : b; return a != a ? a : m; }
template <class T> BZ_INLINE T bz_nan_min_t(T a, T b) { const T m = a < b ? a : b; return a != a ? a : m; }
BZ_INLINE float bz_nan_max(float a, float b) { return bz_nan_max_t(a, b); }
BZ_INLINE double bz_nan_max(double a, double b) { return bz_nan_max_t(a, b); }
BZ_INLINE float bz_nan_min(float a, float b) { return bz_nan_min_t(a, b); }
BZ_INLINE double bz_nan_min(double a, double b) { return bz_nan_min_t(a, b); }

#endif  // BZ_PRELUDE_H
