// The fused GEMM's and flash attention's C++ (codegen/cpp/gemm.py pastes it, after the #defines of its measured
// constants, into a source with a fused GEMM or a flash attention). The BLAS, in runtime/blas.py's NAMES order;
// then row-major wrappers.
// ---- fused GEMMs: MKL from torch, set by braze_set_blas (runtime/blas.py) ----
typedef void (*bz_sgemm_fn)(const char*, const char*, const int*, const int*, const int*, const float*,
                            const float*, const int*, const float*, const int*, const float*, float*, const int*);
typedef void (*bz_dgemm_fn)(const char*, const char*, const int*, const int*, const int*, const double*,
                            const double*, const int*, const double*, const int*, const double*, double*, const int*);
typedef void (*bz_hgemm_fn)(int, int, int, int, int, int, float, const uint16_t*, int, const uint16_t*, int, float,
                            float*, int);
static bz_sgemm_fn bz_sgemm;
static bz_dgemm_fn bz_dgemm;
static bz_hgemm_fn bz_gemm_bf16, bz_gemm_f16;
extern "C" void braze_set_blas(void* const* functions) {
  bz_sgemm = (bz_sgemm_fn)functions[0];
  bz_dgemm = (bz_dgemm_fn)functions[1];
  bz_gemm_bf16 = (bz_hgemm_fn)functions[2];
  bz_gemm_f16 = (bz_hgemm_fn)functions[3];
}
// Row-major C[m, n] (row stride ldc) = A B + beta C: A is [m, k] (ta: stored as [k, m]), B is [k, n] (tb:
// stored as [n, k]), with row strides lda and ldb. The Fortran BLAS is column-major: it computes
// C^T = B^T A^T.
template <class T, class F>
static inline void bz_gemm_cm(F gemm, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                              const T* b, int64_t ldb, T* c, int64_t ldc, T beta) {
  const char transa = ta ? 'T' : 'N', transb = tb ? 'T' : 'N';
  const int rows = (int)n, cols = (int)m, depth = (int)k, la = (int)lda, lb = (int)ldb, lc = (int)ldc;
  const T one = 1;
  gemm(&transb, &transa, &rows, &cols, &depth, &one, b, &lb, a, &la, &beta, c, &lc);
}
static inline void bz_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                           const float* b, int64_t ldb, float* c, int64_t ldc, float beta = 0) {
  bz_gemm_cm(bz_sgemm, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, beta);
}
static inline void bz_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                           const double* b, int64_t ldb, double* c, int64_t ldc, double beta = 0) {
  bz_gemm_cm(bz_dgemm, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, beta);
}
// Runs `body` (a lambda returning its failed flag, its worksharing loops orphaned `omp for`s) in an OpenMP
// parallel region when `parallel`, else on the calling thread outside any region. MKL called inside an
// inactive region (`#pragma omp parallel if(false)`) opened a nested team of its own on every call: a
// 256 x 4 x 768 product (a mixture-of-experts router) took 1.3-2.4 ms there and 0.05 ms outside.
template <class F>
static inline int bz_parallel(bool parallel, F body) {
  int failed = 0;
  if (parallel) {
    #pragma omp parallel reduction(|:failed)
    failed |= body();
  } else {
    failed = body();
  }
  return failed;
}
// How a fused GEMM's C (batches of m x n) splits into panels, one task each: column panels of at most
// max_cols columns, narrowed (to min_cols or more) until the tasks divide among the threads (3 panels of
// 1024 columns on 2 threads leave one idle for a panel); then row panels of at most max_floats / cols rows
// (64 or more), as many more as make the tasks a multiple of the threads. whole_rows: one column panel.
struct bz_panels {
  int64_t col_panels, cols, row_panels, rows, tasks;  // cols, rows: the largest panel's
};
static inline bz_panels bz_plan_panels(int64_t batches, int64_t m, int64_t n, int64_t threads, bool whole_rows,
                                       int64_t max_cols, int64_t min_cols, int64_t max_floats) {
  bz_panels plan;
  plan.col_panels = whole_rows ? 1 : std::max<int64_t>(1, (n + max_cols - 1) / max_cols);
  if (!whole_rows && batches * plan.col_panels % threads != 0) {
    const int64_t even = ((batches * plan.col_panels + threads - 1) / threads * threads + batches - 1) / batches;
    if (n / even >= min_cols) plan.col_panels = even;
  }
  plan.cols = std::max<int64_t>(1, (n + plan.col_panels - 1) / plan.col_panels);
  const int64_t max_rows = std::max<int64_t>(64, max_floats / plan.cols);
  plan.row_panels = std::max<int64_t>(1, (m + max_rows - 1) / max_rows);
  while (batches * plan.col_panels * plan.row_panels % threads != 0 && plan.row_panels < m) ++plan.row_panels;
  plan.rows = std::max<int64_t>(1, (m + plan.row_panels - 1) / plan.row_panels);
  plan.tasks = batches * plan.row_panels * plan.col_panels;
  return plan;
}
// The rows [*first, *first + *count) of row panel `panel` of `panels` over m rows. Panels differ by one row
// at most: a short last panel (811 rows after two of 5461, 6272 rows on 2 threads) left one thread with
// most of the work.
static inline void bz_panel_rows(int64_t panel, int64_t m, int64_t panels, int64_t* first, int64_t* count) {
  *first = panel * m / panels;
  *count = (panel + 1) * m / panels - *first;
}
// ---- operands widened before the BLAS (8-bit floats, int8 weights; see docs/cpu.md) ----
// dst (row stride cols) = convert(src) over a rows x cols block of src (row stride ld).
template <class S, class D, class F>
static inline void bz_widen(const S* src, int64_t ld, int64_t rows, int64_t cols, D* dst, F convert) {
  for (int64_t r = 0; r < rows; ++r) {
    const S* in = src + r * ld;
    D* out = dst + r * cols;
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[c] = convert(in[c]);
  }
}
// f16/bf16 (uint16_t storage) into a float C, through MKL's row-major CBLAS.
static inline void bz_gemm_half(bz_hgemm_fn gemm, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float* c,
                                int64_t ldc, float beta = 0) {
  enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
  gemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b,
       (int)ldb, beta, c, (int)ldc);
}
#if defined(__AVX512BF16__)
#include <immintrin.h>
#include <cstring>
// A GEMV step of bf16 rows by bf16 weight rows on AVX512-BF16: sums[g][r] = the dot product of x's row r (row
// stride ldx) with weight row w[g] over the first K consumed (returned: a multiple of 32; the caller adds the
// rest). Each instruction multiplies 16 pairs of neighbours of each vector and adds both products to one of
// 16 f32 lanes: the products are exact and the sums f32 as the widening loop's (in another order), but bf16
// inputs below the normal range count as zero. It reads half the vectors of widen-then-FMA and needs no
// conversions (benchmarks/cpu/gemv.py; docs/cpu.md).
template <int ROWS, int GROUP>
static inline int64_t bz_dot_bf16_pairs(const uint16_t* x, int64_t ldx, const uint16_t* const* w, int64_t k,
                                        float (*sums)[ROWS]) {
  int64_t kb = 0;
  if (k * (int64_t)sizeof(uint16_t) < BZ_GEMV_INTERLEAVED_ROW_BYTES) {
    // Weight rows shorter than a page are read whole, one after another: one stream through memory (with the
    // rows interleaved, Zen 4 read 768-long rows at 0.5-0.7x the speed; docs/cpu.md), four chains per row.
    constexpr int C = 4;
    for (int g = 0; g < GROUP; ++g) {
      __m512 part[ROWS][C];
      #pragma GCC unroll 16
      for (int r = 0; r < ROWS; ++r)
        #pragma GCC unroll 4
        for (int c = 0; c < C; ++c) part[r][c] = _mm512_setzero_ps();
      kb = 0;
      for (; kb + 32 * C <= k; kb += 32 * C)
        #pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          const __m512bh wv = (__m512bh)_mm512_loadu_si512(w[g] + kb + 32 * c);
          #pragma GCC unroll 16
          for (int r = 0; r < ROWS; ++r)
            part[r][c] = _mm512_dpbf16_ps(part[r][c], (__m512bh)_mm512_loadu_si512(x + r * ldx + kb + 32 * c), wv);
        }
      for (; kb + 32 <= k; kb += 32) {
        const __m512bh wv = (__m512bh)_mm512_loadu_si512(w[g] + kb);
        #pragma GCC unroll 16
        for (int r = 0; r < ROWS; ++r)
          part[r][0] = _mm512_dpbf16_ps(part[r][0], (__m512bh)_mm512_loadu_si512(x + r * ldx + kb), wv);
      }
      #pragma GCC unroll 16
      for (int r = 0; r < ROWS; ++r)
        sums[g][r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(part[r][0], part[r][1]),
                                                        _mm512_add_ps(part[r][2], part[r][3])));
    }
    return kb;
  }
  // Longer rows: the group's rows side by side, each x vector loaded once for all of them.
  __m512 part[ROWS][GROUP];
  #pragma GCC unroll 16
  for (int r = 0; r < ROWS; ++r)
    #pragma GCC unroll 16
    for (int g = 0; g < GROUP; ++g) part[r][g] = _mm512_setzero_ps();
  for (; kb + 32 <= k; kb += 32) {
    __m512bh wv[GROUP];
    #pragma GCC unroll 16
    for (int g = 0; g < GROUP; ++g) wv[g] = (__m512bh)_mm512_loadu_si512(w[g] + kb);
    #pragma GCC unroll 16
    for (int r = 0; r < ROWS; ++r) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + r * ldx + kb);
      #pragma GCC unroll 16
      for (int g = 0; g < GROUP; ++g) part[r][g] = _mm512_dpbf16_ps(part[r][g], xv, wv[g]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < ROWS; ++r)
    #pragma GCC unroll 16
    for (int g = 0; g < GROUP; ++g) sums[g][r] = _mm512_reduce_add_ps(part[r][g]);
  return kb;
}
// ---- bf16 products where the CPU has AVX512-BF16 but no AMX (docs/cpu.md: MKL's half GEMM there ran at its
// f32 speed) ----
// Columns col[0..7] of 16 rows of C (a row per lane) into its rows 0..rows-1 (row stride ldc), columns 0..nb-1,
// added to what they hold where `add`. Transposed in registers (unpack, shuffle, two-source permute), then a masked
// store per row: a scalar loop reading the columns one element at a time took 13% of a bf16 window attention's
// kernel (Swin-T, K of 32 and 49, where a tile's products are few).
BZ_INLINE void bz_store_rows8(const __m512* col, float* c, int64_t ldc, int rows, int nb, bool add) {
  __m512 t[8], u[8];
  #pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {  // per 128-bit lane (rows 4L..4L+3): columns 2p, 2p+1 of two rows each
    t[2 * p] = _mm512_unpacklo_ps(col[2 * p], col[2 * p + 1]);
    t[2 * p + 1] = _mm512_unpackhi_ps(col[2 * p], col[2 * p + 1]);
  }
  #pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {  // u[4 half + j], lane L: row 4L + j, columns 4 half..4 half + 3
    const __m512* s = t + 4 * half;
    u[4 * half] = _mm512_shuffle_ps(s[0], s[2], 0x44);
    u[4 * half + 1] = _mm512_shuffle_ps(s[0], s[2], 0xEE);
    u[4 * half + 2] = _mm512_shuffle_ps(s[1], s[3], 0x44);
    u[4 * half + 3] = _mm512_shuffle_ps(s[1], s[3], 0xEE);
  }
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const __mmask16 keep = (__mmask16)((1u << nb) - 1);
  #pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    // Rows j and 4 + j (low and high 8 lanes), then rows 8 + j and 12 + j.
    const __m512 both[2] = {_mm512_permutex2var_ps(u[j], first, u[4 + j]),
                            _mm512_permutex2var_ps(u[j], second, u[4 + j])};
    #pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const int row = 8 * (q / 2) + 4 * (q % 2) + j;
      if (row >= rows) continue;
      // The high 8 lanes are stored from 8 floats before the row (masked lanes neither read nor fault).
      float* at = c + row * ldc - 8 * (q % 2);
      const __mmask16 lanes = (__mmask16)(keep << (8 * (q % 2)));
      __m512 value = both[q / 2];
      if (add) value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(lanes, at));
      _mm512_mask_storeu_ps(at, lanes, value);
    }
  }
}
// C's rows of a group of 16 * H rows (rows of them there), columns 0..nb-1 (row stride ldc; added to where `add`) =
// the dot products of the rows, packed as pairs of neighbours along K (xp: one 32-bit lane per row, 16 * H lanes
// per pair), with row n of w (NB rows of bf16 along K) over `pairs` pairs. Each pair of a w row is broadcast and
// one vdpbf16ps multiplies 16 rows by it: exact products, f32 sums.
template <int H, int NB>
static inline void bz_pairs_tile(const uint32_t* xp, const uint16_t* const* w, int64_t pairs, float* c, int64_t ldc,
                                 int64_t rows, int nb, bool add) {
  static_assert(NB == 8, "bz_store_rows8 stores tiles of 8 columns");
  __m512 acc[NB][H];
  const uint16_t* w_row[NB];
  #pragma GCC unroll 16
  for (int n = 0; n < NB; ++n) {
    w_row[n] = w[n];
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) acc[n][h] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh x[H];
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) x[h] = (__m512bh)_mm512_loadu_si512(xp + (p * H + h) * 16);
    #pragma GCC unroll 16
    for (int n = 0; n < NB; ++n) {
      int32_t pair;
      std::memcpy(&pair, w_row[n] + 2 * p, sizeof(pair));
      const __m512bh b = (__m512bh)_mm512_set1_epi32(pair);
      #pragma GCC unroll 4
      for (int h = 0; h < H; ++h) acc[n][h] = _mm512_dpbf16_ps(acc[n][h], x[h], b);
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
    if (16 * h >= rows) break;
    __m512 col[NB];
    #pragma GCC unroll 16
    for (int n = 0; n < NB; ++n) col[n] = acc[n][h];
    bz_store_rows8(col, c + 16 * h * ldc, ldc, (int)std::min<int64_t>(16, rows - 16 * h), nb, add);
  }
}
// C [rows, cols] (f32, row stride ldc) = A B (accumulate: C += A B) over depth k, on one thread; a(r, kk) and
// b(kk, col) give the bf16 bits of A's and B's elements. In blocks of DEPTH of K: A's rows are packed into xp
// (groups of 16 * H rows, pairs of neighbours); B's columns are read as rows of K, in place from w (row stride
// ldw) where w is given and the block has whole pairs, else packed into wbuf (where an int8 or fp8 weight is
// widened; B_ALONG_N: B is stored with its rows along N); then tiles of NB of B's columns by a group of A's rows.
template <int H, int NB, int DEPTH, bool B_ALONG_N, class A, class B>
static void bz_pairs_gemm(int64_t rows, int64_t cols, int64_t k, A a, B b, const uint16_t* w, int64_t ldw,
                          float* c, int64_t ldc, uint32_t* xp, uint16_t* wbuf, bool accumulate) {
  constexpr int R = 16 * H;
  const int64_t groups = (rows + R - 1) / R;
  if (k == 0 && !accumulate)
    for (int64_t r = 0; r < rows; ++r) std::fill(c + r * ldc, c + r * ldc + cols, 0.0f);
  for (int64_t k0 = 0; k0 < k; k0 += DEPTH) {
    const int64_t kc = std::min<int64_t>(DEPTH, k - k0), whole = kc / 2, pairs = (kc + 1) / 2;
    for (int64_t g = 0; g < groups; ++g)
      for (int i = 0; i < R; ++i) {
        uint32_t* dst = xp + g * pairs * R + i;
        const int64_t r = g * R + i;
        if (r >= rows) {
          for (int64_t p = 0; p < pairs; ++p) dst[p * R] = 0;
          continue;
        }
        for (int64_t p = 0; p < whole; ++p)
          dst[p * R] = (uint32_t)a(r, k0 + 2 * p) | (uint32_t)a(r, k0 + 2 * p + 1) << 16;
        if (pairs > whole) dst[whole * R] = a(r, k0 + kc - 1);
      }
    // B's tile is packed just before its use, where it stays in cache for every group of rows.
    const bool packed = w == nullptr || pairs > whole;  // an odd last element pairs with a zero
    for (int64_t n0 = 0; n0 < cols; n0 += NB) {
      const int nb = (int)std::min<int64_t>(NB, cols - n0);
      // A short last tile repeats B's last column; those results are not stored.
      const uint16_t* w_rows[NB];
      for (int n = 0; n < NB; ++n)
        w_rows[n] = packed ? wbuf + n * 2 * pairs : w + std::min<int64_t>(n0 + n, cols - 1) * ldw + k0;
      // Packed in the order B is stored: along N, a tile's columns share each row's line.
      if (packed && B_ALONG_N)
        for (int64_t kk = 0; kk < kc; ++kk)
          for (int n = 0; n < NB; ++n) wbuf[n * 2 * pairs + kk] = b(k0 + kk, std::min<int64_t>(n0 + n, cols - 1));
      else if (packed)
        for (int n = 0; n < NB; ++n) {
          const int64_t col = std::min<int64_t>(n0 + n, cols - 1);
          #pragma omp simd
          for (int64_t kk = 0; kk < kc; ++kk) wbuf[n * 2 * pairs + kk] = b(k0 + kk, col);
        }
      if (packed && pairs > whole)
        for (int n = 0; n < NB; ++n) wbuf[n * 2 * pairs + kc] = 0;
      for (int64_t g = 0; g < groups; ++g)
        bz_pairs_tile<H, NB>(xp + g * pairs * R, w_rows, pairs, c + g * R * ldc + n0, ldc,
                             std::min<int64_t>(R, rows - g * R), nb, k0 > 0 || accumulate);
    }
  }
}
// bz_pairs_gemm in its measured shape (codegen/cpp/gemm.py: PAIRS_*); its buffers: xp of
// bz_pairs_lhs_words(rows, k) words, wbuf of bz_pairs_rhs_halves(k) halves.
static inline int64_t bz_pairs_lhs_words(int64_t rows, int64_t k) {
  return (rows + 31) / 32 * 32 * (std::min<int64_t>(k, BZ_PAIRS_DEPTH) / 2 + 1);
}
static inline int64_t bz_pairs_rhs_halves(int64_t k) {
  return BZ_PAIRS_COLUMNS * (std::min<int64_t>(k, BZ_PAIRS_DEPTH) + 1);
}
template <bool B_ALONG_N, class A, class B>
static void bz_gemm_bf16_pairs(int64_t rows, int64_t cols, int64_t k, A a, B b, const uint16_t* w, int64_t ldw,
                               float* c, int64_t ldc, uint32_t* xp, uint16_t* wbuf, bool accumulate = false) {
  if (rows <= BZ_PAIRS_SMALL_ROWS)
    bz_pairs_gemm<1, BZ_PAIRS_COLUMNS, BZ_PAIRS_DEPTH, B_ALONG_N>(rows, cols, k, a, b, w, ldw, c, ldc, xp, wbuf, accumulate);
  else
    bz_pairs_gemm<2, BZ_PAIRS_COLUMNS, BZ_PAIRS_DEPTH, B_ALONG_N>(rows, cols, k, a, b, w, ldw, c, ldc, xp, wbuf, accumulate);
}
#endif
