"""Prints a `braze.flash_attention` as one C++ function with a kernel's ABI
(`extern "C" int <name>(void* const* buffers, const int64_t* sizes)`, see
codegen/attention.py for what `sizes` holds).

The work items are batch x heads x query blocks, split statically among
the threads. Each item walks the keys a block at a time: the scores of its
query rows against the block are one BLAS GEMM (MKL, set by
`braze_set_blas` as for fused GEMMs) into a per-thread buffer, where the
scale and the mask are applied by the loop this file spells (the only part
that differs between attentions); `bz_attention` (the prelude below) then
updates each row's running max and sum, rescales the accumulator, and adds
the probabilities times the value block with a second GEMM. f16/bf16
go through MKL's half GEMMs (f32 products), the probabilities rounded to
the element type for the second (as eager's softmax result is); the output
is rounded once.
"""

from __future__ import annotations

from mlir import ir

from braze.codegen.attention import AttentionAnalysis
from braze.codegen.cpp.gemm import pairs_gemm_wins
from braze.codegen.renderer import CStyleRenderer
from braze.errors import BrazeError

# Below this many multiply-adds an attention runs on one thread.
PARALLEL_WORK = 1 << 20

ATTENTION_PRELUDE = r"""
// ---- flash attention: GEMMs from the BLAS above, an online softmax between them ----
// Up to this many query rows an item scores keys with dot products, not the BLAS (decode steps); an
// item of grouped heads (its rows one per query head, any row stride) always does.
#define BZ_ATTENTION_GEMV_ROWS 4
// A block's score rows are padded to a multiple of this many columns, the padding read as masked keys, so
// that the loops over a row run in whole vectors: gcc 12 leaves a loop's remainder scalar, and a row of
// Swin's 49 keys spent as long on its one-element (bf16: 17-element) remainder as on the rest.
#define BZ_ATTENTION_LANES 16
BZ_INLINE int64_t bz_attention_width(int64_t cols) {
  return (cols + BZ_ATTENTION_LANES - 1) / BZ_ATTENTION_LANES * BZ_ATTENTION_LANES;
}
BZ_INLINE float bz_same(float x) { return x; }
BZ_INLINE double bz_same(double x) { return x; }
// One work item's state: T the storage type, A the accumulator (float; double for double), widen/narrow
// convert between them. Buffers are per thread, sized for the largest block. Halves (T uint16_t) go
// through MKL's half GEMMs (`half_gemm`: bf16 or f16 operands, f32 products), or bz_gemm_bf16_pairs where
// `pairs` (bf16 on a CPU with AVX512-BF16 and no AMX), the probabilities rounded to T for the second one, as
// eager's softmax result is before its product with v.
template <class T, class A, A (*widen)(T), T (*narrow)(A)>
struct bz_attention {
  static constexpr bool same = sizeof(T) == sizeof(A);
  int64_t e, ev, ldq = 0;
  int64_t dot_rows = BZ_ATTENTION_GEMV_ROWS;  // up to this many rows: dot products (grouped heads: all)
  bz_hgemm_fn half_gemm;
  bool pairs;
  uint32_t* pairs_lhs = nullptr;  // bz_gemm_bf16_pairs' buffers
  uint16_t* pairs_rhs = nullptr;
  A *scores, *acc, *row_max, *row_sum;
  A* block_max;      // per row, the max of the block's scaled, masked scores (the spelled loop's)
  T* probabilities;  // halves: the scores rounded for the second GEMM
  const T* q = nullptr;
  bz_attention(int64_t q_block, int64_t kv_block, int64_t e_, int64_t ev_, bz_hgemm_fn half_gemm_ = nullptr,
               bool pairs_ = false)
      : e(e_), ev(ev_), half_gemm(half_gemm_), pairs(pairs_) {
    const int64_t width = bz_attention_width(kv_block);
    scores = (A*)std::malloc(sizeof(A) * q_block * width);
    acc = (A*)std::malloc(sizeof(A) * q_block * ev);
    row_max = (A*)std::malloc(sizeof(A) * q_block);
    row_sum = (A*)std::malloc(sizeof(A) * q_block);
    block_max = (A*)std::malloc(sizeof(A) * q_block);
    probabilities = same ? nullptr : (T*)std::malloc(sizeof(T) * q_block * width);
#if defined(__AVX512BF16__)
    if (pairs) {
      const int64_t depth = std::max<int64_t>(e, kv_block);
      pairs_lhs = (uint32_t*)std::malloc(sizeof(uint32_t) * bz_pairs_lhs_words(q_block, depth));
      pairs_rhs = (uint16_t*)std::malloc(sizeof(uint16_t) * bz_pairs_rhs_halves(depth));
    }
#else
    pairs = false;
#endif
  }
  ~bz_attention() {
    std::free(scores); std::free(acc); std::free(row_max); std::free(row_sum); std::free(block_max);
    std::free(probabilities); std::free(pairs_lhs); std::free(pairs_rhs);
  }
  // A new item: `rows` query rows (row stride ld), no key seen yet.
  void begin(int64_t rows, const T* query, int64_t ld) {
    q = query;
    ldq = ld;
    for (int64_t r = 0; r < rows; ++r) {
      row_max[r] = -std::numeric_limits<A>::infinity();
      row_sum[r] = 0;
    }
    std::fill(acc, acc + rows * ev, A(0));
  }
  // The raw scores of the item's rows against `cols` keys (row stride ld): [rows][width], width =
  // bz_attention_width(cols), the columns past cols left for the spelled loop to mask. A few rows (a
  // decode step) read each key once with dot products: the BLAS would pack the block first. The pairs GEMM
  // reads the keys in place, and takes a grouped item's rows past BZ_ATTENTION_GEMV_ROWS (a bf16 LLaMA
  // decode layer, 8 heads per key/value head: 5.54 -> 5.20 ms; docs/cpu.md).
  A* score(int64_t rows, int64_t cols, int64_t width, const T* key, int64_t ld) {
    if (rows <= dot_rows && !(pairs && rows > BZ_ATTENTION_GEMV_ROWS)) {
      for (int64_t c = 0; c < cols; ++c) {
        const T* k = key + c * ld;
        for (int64_t r = 0; r < rows; ++r) {
          const T* qr = q + r * ldq;
          // 16 lanes of partial sums (a reduction clause left this loop scalar for halves).
          A part[16] = {};
          int64_t i = 0;
          for (; i + 16 <= e; i += 16) {
            #pragma omp simd
            for (int64_t l = 0; l < 16; ++l) part[l] += widen(qr[i + l]) * widen(k[i + l]);
          }
          for (; i < e; ++i) part[0] += widen(qr[i]) * widen(k[i]);
          for (int64_t width = 8; width > 0; width /= 2) {  // a tree, not 16 dependent adds
            #pragma omp simd
            for (int64_t l = 0; l < width; ++l) part[l] += part[l + width];
          }
          scores[r * width + c] = part[0];
        }
      }
    } else if constexpr (same) {
      bz_gemm(false, true, rows, cols, e, (const A*)q, ldq, (const A*)key, ld, scores, width);
    } else {
#if defined(__AVX512BF16__)
      if (pairs) {
        bz_gemm_bf16_pairs<false>(rows, cols, e, [&](int64_t r, int64_t i) { return q[r * ldq + i]; },
                                  [&](int64_t i, int64_t c) { return key[c * ld + i]; }, key, ld, scores, width, pairs_lhs,
                                  pairs_rhs);
        return scores;
      }
#endif
      bz_gemm_half(half_gemm, false, true, rows, cols, e, (const uint16_t*)q, ldq, (const uint16_t*)key, ld,
                   scores, width);
    }
    return scores;
  }
  // The scaled, masked scores of one block, padding included (and their row maxima in block_max) into
  // the running softmax, then acc += P V.
  void update(int64_t rows, int64_t cols, int64_t width, const T* value, int64_t ld) {
    const bool blas = rows > dot_rows;
    for (int64_t r = 0; r < rows; ++r) {
      A* s = scores + r * width;
      T* p = probabilities + r * width;  // halves only
      const A new_max = block_max[r] > row_max[r] ? block_max[r] : row_max[r];
      // Every key of the block masked (a causal mask's later blocks): weights 0, nothing to rescale.
      if (block_max[r] == -std::numeric_limits<A>::infinity()) {
        std::fill(s, s + cols, A(0));
        if constexpr (!same) std::fill(p, p + cols, narrow(A(0)));
        continue;
      }
      // exp(-inf) = 0 drops what came before a first finite score; a NaN score makes the row NaN.
      const A correction = bz_exp(row_max[r] - new_max);
      A total = 0;
      if constexpr (same) {
        #pragma omp simd reduction(+:total) simdlen(BZ_ATTENTION_LANES)
        for (int64_t c = 0; c < width; ++c) {
          s[c] = bz_exp(s[c] - new_max);
          total += s[c];
        }
      } else {
        #pragma omp simd reduction(+:total) simdlen(BZ_ATTENTION_LANES)
        for (int64_t c = 0; c < width; ++c) {
          const A weight = bz_exp(s[c] - new_max);
          s[c] = weight;
          if (blas) p[c] = narrow(weight);
          total += weight;
        }
      }
      row_sum[r] = row_sum[r] * correction + total;
      row_max[r] = new_max;
      if (correction != A(1)) {
        A* a = acc + r * ev;
        #pragma omp simd
        for (int64_t c = 0; c < ev; ++c) a[c] *= correction;
      }
    }
    if (!blas) {  // each value row read once, for every query row
      for (int64_t c = 0; c < cols; ++c) {
        const T* v = value + c * ld;
        for (int64_t r = 0; r < rows; ++r) {
          const A p = scores[r * width + c];
          A* a = acc + r * ev;
          #pragma omp simd
          for (int64_t i = 0; i < ev; ++i) a[i] += p * widen(v[i]);
        }
      }
    } else if constexpr (same) {
      bz_gemm(false, false, rows, ev, cols, scores, width, (const A*)value, ld, acc, ev, A(1));
    } else {
#if defined(__AVX512BF16__)
      if (pairs) {
        bz_gemm_bf16_pairs<true>(rows, ev, cols, [&](int64_t r, int64_t i) { return probabilities[r * width + i]; },
                                 [&](int64_t i, int64_t c) { return value[i * ld + c]; }, nullptr, 0, acc, ev, pairs_lhs,
                                 pairs_rhs, true);
        return;
      }
#endif
      bz_gemm_half(half_gemm, false, false, rows, ev, cols, (const uint16_t*)probabilities, width,
                   (const uint16_t*)value, ld, acc, ev, 1.0f);
    }
  }
  // acc / sum into the output rows (`ld` apart); a row with no key kept is 0, or NaN.
  void end(int64_t rows, T* out, int64_t ld, bool masked_rows_nan) {
    for (int64_t r = 0; r < rows; ++r) {
      const A sum = row_sum[r];
      const A empty = masked_rows_nan ? std::numeric_limits<A>::quiet_NaN() : A(0);
      const A inverse = sum == A(0) ? A(0) : A(1) / sum;
      #pragma omp simd
      for (int64_t c = 0; c < ev; ++c)
        out[r * ld + c] = narrow(sum == A(0) ? empty : acc[r * ev + c] * inverse);
    }
  }
};
"""

_STORAGE = {"f32": ("float", "float", "bz_same", "bz_same"), "f64": ("double", "double", "bz_same", "bz_same"),
            "bf16": ("uint16_t", "float", "bz_bf16_to_f32", "bz_f32_to_bf16"),
            "f16": ("uint16_t", "float", "bz_f16_to_f32", "bz_f32_to_f16")}


class AttentionRenderer:
    def __init__(self, analysis: AttentionAnalysis):
        self.a = analysis

    def _stride(self, number: int, dim: int) -> str:
        """Input `number`'s stride along `dim`: 0 where it broadcasts, 1 along
        its last dim (the executor makes a last dim of another stride
        contiguous, so loads there are vector loads), else the size's."""
        if self.a.broadcasts(number, dim):
            return "0"
        return "1" if dim == self.a.inputs[number].type.rank - 1 else f"stride{number}_{dim}"

    def _offset(self, number: int, index: list[tuple[int, str]]) -> str:
        """Input `number`'s element offset at (dim, index expression) pairs."""
        strides = [(i, self._stride(number, d)) for d, i in index]
        terms = [i if stride == "1" else f"{i} * {stride}" for i, stride in strides if stride != "0"]
        return " + ".join(terms) or "0"

    def _row_stride(self, number: int, length: str) -> str:
        """Input `number`'s row stride for the BLAS, at least a row's `length`
        (a dim of size 1 carries stride 0 here)."""
        return f"std::max<int64_t>({self._stride(number, self.a.batch)}, {length})"

    def _mask_dims(self) -> tuple[int | None, int | None]:
        """The mask's dims along the query rows and along the keys (None
        where the mask has fewer dims)."""
        a = self.a
        shift = a.rank - a.mask.type.rank  # the frame is [batch..., rows, keys]
        return tuple(position - shift if position >= shift else None for position in (a.batch, a.batch + 1))

    def _mask_row(self) -> list[str]:
        """The line setting `mask_row`, the mask at the row's query and the
        block's first key: hoisted, so that the loop over the keys indexes
        it by the key alone (an index through the lambda's captured strides
        is reloaded each step, and left that loop scalar)."""
        a = self.a
        if a.causal or a.mask is None:
            return []
        row_dim, key_dim = self._mask_dims()
        index = [(d, i) for d, i in ((row_dim, f"i{a.l}"), (key_dim, "kv0")) if d is not None]
        return [f"          const auto* __restrict mask_row = mask + {self._offset(3, index)};"]

    def _score(self) -> str:
        """The softmax's input at key `c` of a row, from the raw score
        `row[c]`: minus infinity at the padding past the block's `cols`."""
        minus_infinity = f"-std::numeric_limits<{self.accumulator}>::infinity()"
        return f"c < cols ? {self._kept_score(minus_infinity)} : {minus_infinity}"

    def _kept_score(self, minus_infinity: str) -> str:
        """The softmax's input at a key of the block: scaled (soft-capped),
        masked."""
        a = self.a
        scaled = a.capped("row[c]", "bz_tanh", lambda value: f"({self.accumulator}){value!r}")
        if a.causal:
            return f"(i{a.s} > i{a.l} ? {minus_infinity} : {scaled})"
        if a.mask is None:
            return scaled
        _, key_dim = self._mask_dims()
        load = f"mask_row[{'c' if key_dim is not None and not a.broadcasts(3, key_dim) else '0'}]"
        if a.mask_element == "i1":
            return f"({load} ? {scaled} : {minus_infinity})"
        half = CStyleRenderer.half_load.get(a.mask_element)
        return f"{scaled} + ({self.accumulator}){f'{half}({load})' if half else load}"

    def render(self) -> str:
        a = self.a
        storage, self.accumulator, widen, narrow = _STORAGE[a.element]
        mask_type = {"i1": "uint8_t", "bf16": "uint16_t", "f16": "uint16_t", "f32": "float",
                     "f64": "double"}.get(a.mask_element)
        lines = [f'extern "C" BZ_WIDE_VECTORS int {a.name}(void* const* buffers, const int64_t* sizes) {{']
        for number, name in enumerate(("query", "key", "value", "mask")[:len(a.inputs)]):
            c_type = mask_type if number == 3 else storage
            lines.append(f"  const {c_type}* __restrict in{number} = (const {c_type}*)buffers[{number}];  // {name}")
        lines.append(f"  {storage}* __restrict out0 = ({storage}*)buffers[{len(a.inputs)}];")
        for dim, size in enumerate(a.domain):
            lines.append(f"  const int64_t n{dim} = {size if size is not None else f'sizes[{dim}]'};")
        offset = len(a.domain)
        for number, value in enumerate(a.inputs):
            for dim in range(value.type.rank):
                if self._stride(number, dim).startswith("stride"):
                    lines.append(f"  const int64_t stride{number}_{dim} = sizes[{offset + dim}];")
            offset += value.type.rank
        b, l, ev, s, e = a.batch, f"n{a.l}", f"n{a.ev}", f"n{a.s}", f"n{a.e}"
        if a.gqa:  # each key/value head serves `group` query heads
            lines.append(f"  const int64_t group = n{b - 1} / std::max<int64_t>(n{a.key_heads}, 1);")
        batches = " * ".join(f"n{d}" for d in range(b)) or "1"
        half_gemm = f", bz_gemm_{a.element}" if a.element in ("bf16", "f16") else ""
        if a.element == "bf16" and pairs_gemm_wins():
            half_gemm += ", true"  # bz_gemm_bf16_pairs for both products
        # grouped_heads: an item per key/value head, its rows the one query
        # row of each of the heads it serves (any row stride: dot products).
        grouped = a.grouped_heads
        capacity = f"std::max<int64_t>({a.q_block}, group)" if grouped else str(a.q_block)
        lines += [
            f"  const int64_t q_blocks = ({l} + {a.q_block - 1}) / {a.q_block};",
            f"  const int64_t tasks = {batches} / group;" if grouped else f"  const int64_t tasks = {batches} * q_blocks;",
            f"  bz_parallel(tasks > 1 && {batches} * {l} * {s} * ({e} + {ev}) >= {PARALLEL_WORK}, [&]() -> int {{",
            f"    bz_attention<{storage}, {self.accumulator}, {widen}, {narrow}> item({capacity}, {a.kv_block}, {e}, "
            f"{ev}{half_gemm});",
        ]
        if grouped:
            lines.append("    item.dot_rows = group;")
        lines += [
            "    #pragma omp for schedule(static)",
            "    for (int64_t task = 0; task < tasks; ++task) {",
            "      int64_t rest = task;",
            "      const int64_t block = rest % q_blocks; rest /= q_blocks;",
        ]
        for d in reversed(range(b)):
            if grouped and d == b - 1:  # the first query head of the item's key/value head
                lines.append(f"      const int64_t i{d} = rest % n{a.key_heads} * group; rest /= n{a.key_heads};")
            else:
                lines.append(f"      const int64_t i{d} = rest % n{d}; rest /= n{d};")
        head = [(d, f"i{d}") for d in range(b)]
        kv_head = [(d, "(i{0} / group)".format(d) if a.gqa and d == b - 1 else f"i{d}") for d in range(b)]
        rows = "group" if grouped else f"std::min<int64_t>({a.q_block}, {l} - q0)"
        lines += [
            f"      const int64_t q0 = block * {a.q_block}, rows = {rows};",
            f"      const auto* query = in0 + {self._offset(0, head + [(b, 'q0')])};",
            f"      const auto* key = in1 + {self._offset(1, kv_head)};",
            f"      const auto* value = in2 + {self._offset(2, kv_head)};",
        ]
        if a.mask is not None:
            mask_rank = a.mask.type.rank
            mask_batch = [(j, f"i{a.rank - mask_rank + j}") for j in range(mask_rank)
                          if a.rank - mask_rank + j < b]
            lines.append(f"      const auto* mask = in3 + {self._offset(3, mask_batch)};")
        # Causal: the keys after the item's last row are masked for all of its rows.
        keys = f"std::min<int64_t>({s}, q0 + rows)" if a.causal else s
        # The rows of an item of grouped heads are its heads, at one query row.
        out_ld = f"{a.result_step(b - 1 if grouped else a.l)} * {ev}"
        lines += [
            f"      const int64_t keys = {keys};",
            f"      item.begin(rows, query, {self._stride(0, b - 1) if grouped else self._row_stride(0, e)});",
            f"      for (int64_t kv0 = 0; kv0 < keys; kv0 += {a.kv_block}) {{",
            f"        const int64_t cols = std::min<int64_t>({a.kv_block}, keys - kv0), width = bz_attention_width(cols);",
            f"        {self.accumulator}* scores = item.score(rows, cols, width, key + kv0 * {self._stride(1, b)}, "
            f"{self._row_stride(1, e)});",
            "        for (int64_t r = 0; r < rows; ++r) {",
            f"          const int64_t i{a.l} = {'q0' if grouped else 'q0 + r'};",
            f"          {self.accumulator}* row = scores + r * width;",
            f"          {self.accumulator} top = -std::numeric_limits<{self.accumulator}>::infinity();",
            "          int nan = 0;  // a NaN score makes the row NaN, as in eager's softmax",
            *self._mask_row(),
            "          #pragma omp simd reduction(max:top) reduction(|:nan) simdlen(BZ_ATTENTION_LANES)",
            "          for (int64_t c = 0; c < width; ++c) {",
            *([f"            const int64_t i{a.s} = kv0 + c;"] if a.causal else []),
            f"            row[c] = {self._score()};",
            "            top = row[c] > top ? row[c] : top;",
            "            nan |= row[c] != row[c];",
            "          }",
            f"          item.block_max[r] = nan ? std::numeric_limits<{self.accumulator}>::quiet_NaN() : top;",
            "        }",
            f"        item.update(rows, cols, width, value + kv0 * {self._stride(2, b)}, {self._row_stride(2, ev)});",
            "      }",
            f"      item.end(rows, out0 + ({a.result_row('q0')}) * {ev}, {out_ld}, {str(a.masked_rows_nan).lower()});",
            "    }",
            "    return 0;",
            "  });",
            "  (void)sizes;",
            "  return 0;",
            "}",
        ]
        return "\n".join(lines)


def render(op: ir.OpView, name: str) -> tuple[str, object]:
    """The function of flash attention `op` named `name`, and its KernelSpec."""
    analysis = AttentionAnalysis(op, name)
    if analysis.element not in _STORAGE:
        raise BrazeError(f"flash attention {name}: the CPU has no BLAS product of {analysis.element}")
    return AttentionRenderer(analysis).render(), analysis.spec()
