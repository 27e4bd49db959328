// The two CPU realisations of a fused GEMM that issue 12 asks to measure,
// on one epilogue (bias + erf-GELU, braze's own vectorized erf), float32,
// row-major C[M, N] = A[M, K] W[N, K]^T (nn.Linear's layout):
//
//   microkernel  a register-blocked micro-kernel (6 x 64 accumulators in
//                AVX-512 registers) over packed panels (A: MC x KC, B: KC x
//                NC, BLIS's loop order), the epilogue applied to each 6 x 64
//                tile while it is in registers, after its last K block;
//   mkl_panels   MKL's sgemm_ (from torch's libtorch_cpu.so, passed in as a
//                function pointer) on row panels of C, each thread its own
//                panels, the epilogue applied to each panel while it is in
//                cache (the form braze's C++ emitter generates);
//   mkl_separate one multi-threaded sgemm_ on all of C, then the epilogue
//                as a separate OpenMP pass (GEMM + separate epilogue kernel).
//
// Built and driven by benchmarks/cpu/fused_gemm_variants.py.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "../../pylib/braze/codegen/cpp/prelude.h"

typedef void (*sgemm_t)(const char*, const char*, const int*, const int*, const int*, const float*,
                        const float*, const int*, const float*, const int*, const float*, float*, const int*);
static sgemm_t mkl_sgemm;
typedef size_t (*pack_size_t)(int, int, int, int);
typedef void (*pack_t)(int, int, int, int, int, int, float, const float*, int, float*);
typedef void (*compute_t)(int, int, int, int, int, int, const float*, int, const float*, int, float, float*, int);
static pack_size_t mkl_pack_size;
static pack_t mkl_pack;
static compute_t mkl_compute;
extern "C" void set_packed(void* size, void* pack, void* compute) {
  mkl_pack_size = (pack_size_t)size;
  mkl_pack = (pack_t)pack;
  mkl_compute = (compute_t)compute;
}

extern "C" void set_sgemm(void* f) { mkl_sgemm = (sgemm_t)f; }
extern "C" void set_threads(int threads) { omp_set_num_threads(threads); }

static inline float gelu(float x) { return 0.5f * x * (1.0f + bz_erf(x * 0.70710678118654752f)); }

// ---- MKL on row panels ---------------------------------------------------------------------------
// C^T = W A^T in column-major: sgemm_('T', 'N', n, m, k, W, ldw = K, A, lda = K, C, ldc).
static void panel_gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* w,
                       int64_t ldw, float* c, int64_t ldc) {
  const char t = 'T', nt = 'N';
  const int M = (int)n, N = (int)m, K = (int)k, LDW = (int)ldw, LDA = (int)lda, LDC = (int)ldc;
  const float one = 1.0f, zero = 0.0f;
  mkl_sgemm(&t, &nt, &M, &N, &K, &one, w, &LDW, a, &LDA, &zero, c, &LDC);
}

extern "C" void mkl_panels(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n,
                           int64_t k, int64_t panel_rows, int64_t panel_cols) {
  const int64_t row_panels = (m + panel_rows - 1) / panel_rows;
  const int64_t col_panels = (n + panel_cols - 1) / panel_cols;
#pragma omp parallel
  {
    float* acc = (float*)std::aligned_alloc(64, sizeof(float) * panel_rows * panel_cols);
#pragma omp for schedule(static)
    for (int64_t task = 0; task < row_panels * col_panels; ++task) {
      const int64_t m0 = task / col_panels * panel_rows, n0 = task % col_panels * panel_cols;
      const int64_t rows = std::min(panel_rows, m - m0), cols = std::min(panel_cols, n - n0);
      panel_gemm(rows, cols, k, a + m0 * k, k, w + n0 * k, k, acc, cols);
      for (int64_t r = 0; r < rows; ++r) {
        float* __restrict o = out + (m0 + r) * n + n0;
        const float* __restrict p = acc + r * cols;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) o[c] = gelu(p[c] + bias[n0 + c]);
      }
    }
    std::free(acc);
  }
}

// W^T packed once per call (MKL's own panel format), then row panels of C against it.
extern "C" void mkl_packed(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n,
                           int64_t k, int64_t panel_rows) {
  enum { ROW_MAJOR = 101, TRANS = 112, NO_TRANS = 111, B_MATRIX = 162, PACKED = 151 };
  float* packed = (float*)std::aligned_alloc(64, (mkl_pack_size(B_MATRIX, (int)m, (int)n, (int)k) + 63) / 64 * 64);
  mkl_pack(ROW_MAJOR, B_MATRIX, TRANS, (int)m, (int)n, (int)k, 1.0f, w, (int)k, packed);
  const int64_t panels = (m + panel_rows - 1) / panel_rows;
#pragma omp parallel
  {
    float* acc = (float*)std::aligned_alloc(64, sizeof(float) * panel_rows * n);
#pragma omp for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t m0 = p * panel_rows, rows = std::min(panel_rows, m - m0);
      mkl_compute(ROW_MAJOR, NO_TRANS, PACKED, (int)rows, (int)n, (int)k, a + m0 * k, (int)k, packed, (int)k, 0.0f,
                  acc, (int)n);
      for (int64_t r = 0; r < rows; ++r) {
        float* __restrict o = out + (m0 + r) * n;
        const float* __restrict q = acc + r * n;
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) o[c] = gelu(q[c] + bias[c]);
      }
    }
    std::free(acc);
  }
  std::free(packed);
}

extern "C" void mkl_separate(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n,
                             int64_t k) {
  panel_gemm(m, n, k, a, k, w, k, out, n);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < m; ++r) {
    float* __restrict o = out + r * n;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) o[c] = gelu(o[c] + bias[c]);
  }
}

// ---- the register-blocked micro-kernel ---------------------------------------------------------
constexpr int64_t MR = 6, NR = 64, KC = 256, MC = 96, NC = 1024;

// A block [MC, KC] as MR-row slivers: sliver s holds, per k, MR consecutive values.
static void pack_a(const float* a, int64_t lda, int64_t rows, int64_t depth, float* packed) {
  for (int64_t s = 0; s < rows; s += MR)
    for (int64_t p = 0; p < depth; ++p)
      for (int64_t r = 0; r < MR; ++r) *packed++ = s + r < rows ? a[(s + r) * lda + p] : 0.0f;
}

// B = W^T block [KC, NC] as NR-column slivers: sliver s holds, per k, NR consecutive values.
static void pack_b(const float* w, int64_t ldw, int64_t cols, int64_t depth, float* packed) {
  for (int64_t s = 0; s < cols; s += NR)
    for (int64_t p = 0; p < depth; ++p)
      for (int64_t c = 0; c < NR; ++c) *packed++ = s + c < cols ? w[(s + c) * ldw + p] : 0.0f;
}

// C tile [MR, NR] (+)= A sliver x B sliver over `depth`; on the last K block the epilogue runs on
// the registers and the tile is stored once.
static void micro_kernel(int64_t depth, const float* __restrict a, const float* __restrict b, float* c, int64_t ldc,
                         int64_t rows, int64_t cols, bool first, bool last, const float* bias) {
  __m512 acc[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < depth; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), b2 = _mm512_loadu_ps(b + 32),
                 b3 = _mm512_loadu_ps(b + 48);
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(a[r]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(x, b2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(x, b3, acc[r][3]);
    }
    a += MR;
    b += NR;
  }
  alignas(64) float tile[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 4; ++v) _mm512_store_ps(&tile[r][16 * v], acc[r][v]);
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict o = c + r * ldc;
    if (!first)
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) tile[r][j] += o[j];
    if (last)
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) o[j] = gelu(tile[r][j] + bias[j]);
    else
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) o[j] = tile[r][j];
  }
}

extern "C" void microkernel(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n,
                            int64_t k) {
  // Each thread takes column blocks of C (its own packed B), all rows.
  const int64_t col_blocks = (n + NC - 1) / NC;
  const int64_t threads = omp_get_max_threads();
  const int64_t nc = col_blocks >= threads ? NC : ((n + threads - 1) / threads + NR - 1) / NR * NR;
  const int64_t blocks = (n + nc - 1) / nc;
#pragma omp parallel
  {
    float* packed_a = (float*)std::aligned_alloc(64, sizeof(float) * (MC + MR) * KC);
    float* packed_b = (float*)std::aligned_alloc(64, sizeof(float) * (nc + NR) * KC);
#pragma omp for schedule(static)
    for (int64_t jb = 0; jb < blocks; ++jb) {
      const int64_t j0 = jb * nc, cols = std::min(nc, n - j0);
      for (int64_t p0 = 0; p0 < k; p0 += KC) {
        const int64_t depth = std::min(KC, k - p0);
        pack_b(w + j0 * k + p0, k, cols, depth, packed_b);
        for (int64_t i0 = 0; i0 < m; i0 += MC) {
          const int64_t rows = std::min(MC, m - i0);
          pack_a(a + i0 * k + p0, k, rows, depth, packed_a);
          for (int64_t js = 0; js < cols; js += NR)
            for (int64_t is = 0; is < rows; is += MR)
              micro_kernel(depth, packed_a + is * depth, packed_b + js * depth, out + (i0 + is) * n + j0 + js, n,
                           std::min(MR, rows - is), std::min(NR, cols - js), p0 == 0, p0 + KC >= k,
                           bias + j0 + js);
        }
      }
    }
    std::free(packed_a);
    std::free(packed_b);
  }
}
