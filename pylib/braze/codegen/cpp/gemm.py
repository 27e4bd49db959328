"""Prints a `braze.fused_gemm` as one C++ function with a kernel's ABI
(`extern "C" int <name>(void* const* buffers, const int64_t* sizes)`, see
codegen/gemm.py for what `sizes` holds).

Two forms, chosen from the shape (measured: docs/cpu.md):

* panels: MKL (the BLAS torch loaded; runtime/blas.py passes its functions
  to `braze_set_blas`) computes C one panel at a time into a per-thread f32
  buffer, each thread its own panels, and the epilogue runs over the panel
  while it is in cache, writing the outputs and the row statistics. A
  panel is up to `PANEL_COLUMNS` columns (all of N when there are row
  statistics) by as many rows as make the panels a multiple of the threads
  (narrower columns first: equal shares, no thread idle while another
  finishes a panel), at most `panel_floats()` floats, one core's L2 cache
  of them: the BLAS packs its operands again per call, so small panels
  lose (benchmarks/cpu/fused_gemm_variants.py, 1 thread: 64 rows
  0.64-0.76x torch.mm's speed, 256 x 256 0.79-0.91x, all rows x 1024
  columns 0.86-0.90x, against 0.85-0.90x for the GEMM plus a separate
  epilogue), and a panel larger than L2 is read back for the epilogue
  from further out (docs/cpu.md: Swin-T's MLP on AMD Zen 4).
* GEMV (a static M of at most `GEMV_ROWS`, one in `GEMV_HALF_ROWS` for
  bf16/f16 weights: decode shapes): each row of the weight is read once
  for all M rows of the input, a few weight rows at a time, the threads
  splitting N; the dot products go to a buffer and a second pass runs the
  epilogue (and the row statistics) over whole rows, vectorised.
"""

from __future__ import annotations

import types
from pathlib import Path

from mlir import ir

from braze.codegen.analysis import type_name
from braze.codegen.cpp.emitter import CppRenderer
from braze.codegen.gemm import GemmAnalysis
from braze.codegen.renderer import CStyleRenderer
from braze.errors import BrazeError
from braze.machine import cpu_flags, l2_cache_bytes

PANEL_COLUMNS = 1024
MIN_PANEL_COLUMNS = 64
GEMV_ROWS = 16
# The Ms at which a bf16/f16 product of half weights takes the GEMV, which
# widens each element in registers and multiplies in 256-bit f32 vectors.
# Measured (benchmarks/cpu/gemv.py, 1 thread, K x N of 4096 x 4096,
# 4096 x 11008, 11008 x 4096, SiLU or LayerNorm epilogue): at M = 1 the
# library's half GEMM on panels read 1.1-1.2x faster (88-97% of torch.mv's
# read), at M = 2 the GEMV 1.3-1.5x faster, at M = 4 the library again
# (the GEMV: 8-9 GB/s at 4096 x 4096, the panels 12).
GEMV_HALF_ROWS = range(2, 3)
# ... and where both matrices are bf16 and the CPU has AVX512-BF16 (the GEMV
# multiplies pairs of bf16 neighbours, `bz_dot_bf16_pairs`). Measured at the
# same shapes, 1 thread, GB/s of weight read against the library's half
# GEMM: M = 1 0.93-1.46x, M = 2 1.63-1.95x, M = 4 1.27-1.52x (73-91% of
# torch.mv's f32 read), M = 8 0.66-0.82x (x's 8 rows outgrow L1).
GEMV_BF16_PAIRS_ROWS = range(1, 5)
# ... and where the weight is stored [K, N] (GPT-2's Conv1D; `_gemv_row_major`,
# each element widened in registers). Measured on AMD Zen 4 (2 threads,
# weights from memory, 768 x 3072, 3072 x 768, 4096 x 11008): the GEMV
# 12.4-25.5 GB/s at M = 1-4, the pairs panels 3.4-5.7, eager 8.5-10.4; above
# M = 4 no fused case to compare (a lone GEMM is not fused there).
GEMV_HALF_ROW_MAJOR_ROWS = range(1, 5)
# bf16 products on a CPU with AVX512-BF16 and no AMX multiply in braze's
# `bz_gemm_bf16_pairs`: MKL's bf16 GEMM there ran at its f32 speed (AMD
# Zen 4, 2 threads, 128 x 4096 x 4096: 27.7 ms, torch.mm's bf16 10.5 ms,
# MKL's sgemm 26.5 ms; docs/cpu.md). Tiles of PAIRS_COLUMNS of B's columns
# by 32 rows (16 where a panel has at most PAIRS_SMALL_ROWS), blocks of
# PAIRS_DEPTH of K. Measured in a standalone copy at the same shape: 9.9
# ms with tiles of 8 or 6 columns, 11.1 ms with 12, 15.6 with 16 rows by 12
# columns; blocks of 1024 of K 11.0 ms; 16 rows by 8 columns at M = 16 1.74
# ms (32 rows: 2.53, torch.mm 2.36).
PAIRS_COLUMNS = 8
PAIRS_SMALL_ROWS = 16
PAIRS_DEPTH = 4096
# The depth of the blocks a narrow operand is widened in for an f32/f64
# product (panels form): measured on int8_linear (128x4096x4096, int8
# weight, f32 activations), blocks of 128 ran 0.85-0.91x the time of
# widening all of K per panel, 256 0.87-1.04x, 512 and more no better; for a
# bf16/f16 product (MKL's half GEMM, AMX) any blocking was slower (0.76-1.5x
# more time at 128-1024), so those widen all of K.
WIDEN_DEPTH = 128
# The lanes of a GEMV's dot products. A 1-byte weight (int8, fp8) is bound
# by its widening, not by memory: 64 lanes (more independent FMA chains)
# measured 1.7-2x faster than 16 for int8 x f32/bf16 at 4096 x 4096 on one
# thread, while 16 stays best for f32 weights (benchmarks/RESULTS.md).
GEMV_LANES = 16
GEMV_NARROW_LANES = 64
# A GEMV over W [N, K] takes up to GEMV_GROUP weight rows per step, as many
# as keep its accumulators (M x rows x lanes floats) within
# GEMV_ACCUMULATORS vectors of 16 floats: the 32 registers of AVX-512 (gcc
# spills a few at M = 4). The group's rows are the streams a thread reads
# from memory at once, and more of them kept more reads in flight. Measured
# on AMD Zen 4, 2 threads, silu(linear) with weights from memory (96 MB of
# copies), group 8 / budget 32 against 4 / 16: bf16 M = 4 18.2-19.9 ->
# 21.0-26.4 GB/s, f32 M = 4 16.9-21.2 -> 19.1-24.2, f32 M = 8 13.7 -> 18.3,
# M = 16 4.6 -> 7.0, int8 M = 1 18.4 -> 21.5 (torch.sum: 27-33). Earlier, at
# 1 thread, a budget of 16 against 8 read 27 against 23.5 GB/s at M = 4.
GEMV_GROUP = 8
GEMV_ACCUMULATORS = 32
# A GEMV (`bz_dot_bf16_pairs`, and the loops over f32 or widened weights)
# reads a group's weight rows side by side only from rows of this many
# bytes (a page); shorter rows are read whole, one after another. Measured
# on AMD Zen 4 (a standalone copy, 48 MB of bf16 weights, caches flushed, 1
# and 2 threads, M = 1, 2, 4, three runs each), one after another against
# side by side: K = 768 1.39-2.11x,
# K = 1536 1.12-1.37x, K = 2048 0.82-1.15x, K = 4096 0.57-1.07x; f32 and
# int8 at an LM head's 768 x 32000 1.25-2.3x (docs/cpu.md).
GEMV_INTERLEAVED_ROW_BYTES = 4096
# A GEMV over B [K, N] (GPT-2's Conv1D) steps GEMV_ROW_MAJOR_STEP rows of K
# at a time over a block of columns whose rows x columns f32 sums fit in
# GEMV_SUMS_FLOATS, in slices of K of at least GEMV_SLICE_DEPTH rows, as
# many as make about GEMV_TASKS tasks.
GEMV_ROW_MAJOR_STEP = 8
GEMV_SUMS_FLOATS = 16384
GEMV_SLICE_DEPTH = 64
GEMV_TASKS = 16
# Below this many multiply-adds a fused GEMM runs on one thread.
PARALLEL_WORK = 1 << 20
# Below this many weight elements a GEMV runs on one thread. A GEMV streams
# its weight from memory, and one core reads about half what two do: with
# the threshold at PARALLEL_WORK multiply-adds, a decode layer's 768 x 768
# and 768 x 256 projections ran on one thread, at 15 and 10 GB/s against
# 19 and 12 on two (caches flushed before each call, 2 threads).
GEMV_PARALLEL_WEIGHTS = 1 << 15
SUM_BLOCK = 1024
# 8-bit float storage -> the prelude's exact conversion to float.
FLOAT8_DECODERS = {"f8E4M3FN": "bz_e4m3fn_to_f32", "f8E5M2": "bz_e5m2_to_f32"}

# The C++ the fused GEMM's functions call (the BLAS wrappers, panels, the
# widening, the bf16 dot products and pairs GEMM), after the constants it
# takes from here.
GEMM_PRELUDE = (f"#define BZ_PAIRS_COLUMNS {PAIRS_COLUMNS}\n#define BZ_PAIRS_SMALL_ROWS {PAIRS_SMALL_ROWS}\n"
                f"#define BZ_PAIRS_DEPTH {PAIRS_DEPTH}\n"
                f"#define BZ_GEMV_INTERLEAVED_ROW_BYTES {GEMV_INTERLEAVED_ROW_BYTES}\n"
                + Path(__file__).with_name("gemm_prelude.h").read_text())


def panel_floats() -> int:
    """The most f32 elements a thread's panel holds: its core's L2 cache
    (read from the machine when a fused GEMM is first rendered)."""
    return l2_cache_bytes() // 4


def pairs_gemm_wins() -> bool:
    """Whether bf16 products take `bz_gemm_bf16_pairs` rather than MKL's
    half GEMM: a CPU with AVX512-BF16 and no AMX (see PAIRS_COLUMNS)."""
    flags = cpu_flags()
    return "avx512_bf16" in flags and "amx_bf16" not in flags


class EpilogueRenderer(CppRenderer):
    """The scalar ops of an epilogue, spelled as a kernel body's (the
    renderer's tables and rules; no loops, loads or stores of its own)."""

    def __init__(self, name: str):
        CStyleRenderer.__init__(self, types.SimpleNamespace(name=name))
        self.divides = False


class GemmRenderer:
    def __init__(self, analysis: GemmAnalysis):
        self.a = analysis
        self.epilogue = EpilogueRenderer(analysis.name)

    def storage(self, type_: ir.Type) -> str:
        return "uint8_t" if type_name(type_) in FLOAT8_DECODERS else self.epilogue.storage_type(type_)

    def _matrix_load(self, number: int, expression: str) -> str:
        """Element `expression` of matrix `number` (0: lhs, 1: rhs) as a
        float (a double for f64)."""
        element = type_name(self.a.inputs[number].type.element_type)
        if element in FLOAT8_DECODERS:
            return f"{FLOAT8_DECODERS[element]}({expression})"
        if element == "i8":
            return f"(float)({expression})"
        half = CStyleRenderer.half_load.get(element)
        return f"{half}({expression})" if half else expression

    def _narrow_weight(self) -> bool:
        """Whether the weight (matrix 1) is stored in one byte (int8, fp8)."""
        return self.storage(self.a.inputs[1].type.element_type) in ("int8_t", "uint8_t")

    def _bf16_pairs(self) -> bool:
        """Whether a GEMV over W [N, K] may multiply pairs of bf16 neighbours
        (`bz_dot_bf16_pairs`): both matrices bf16, x's rows contiguous in K."""
        return self.a.transpose_rhs and not self.a.transpose_lhs and all(
            type_name(self.a.inputs[number].type.element_type) == "bf16" for number in (0, 1))

    def _widened(self, number: int) -> bool:
        """Whether matrix `number` is widened to the product's type before the BLAS."""
        return type_name(self.a.inputs[number].type.element_type) != self.a.product_type

    def _in_product_type(self, number: int, expression: str) -> str:
        """Element `expression` of matrix `number` in the product's type (bf16
        and f16 as their bits)."""
        if not self._widened(number):
            return expression
        value = self._matrix_load(number, expression)
        # Every int8 and 8-bit float is exact in bf16, f16, f32 and f64: no rounding.
        return {"bf16": f"(uint16_t)(bz_bits({value}) >> 16)", "f16": f"bz_f32_to_f16({value})",
                "f32": value, "f64": f"(double){value}"}[self.a.product_type]

    def _widen_call(self, number: int, source: str, ld: str, rows: str, cols: str) -> str:
        """Widens a block of matrix `number` into its thread's buffer `wide<number>`."""
        storage = self.storage(self.a.inputs[number].type.element_type)
        convert = self._in_product_type(number, "v")
        return f"bz_widen({source}, {ld}, {rows}, {cols}, wide{number}, [&]({storage} v) {{ return {convert}; }});"

    def _pairs_panels(self) -> bool:
        """Whether the panels multiply with `bz_gemm_bf16_pairs` rather than
        the library: a bf16 product where `pairs_gemm_wins()`."""
        return self.a.product_type == "bf16" and pairs_gemm_wins()

    def _pairs_product(self, k: str) -> tuple[list[str], list[str], list[str]]:
        """The panel's product by `bz_gemm_bf16_pairs`: its buffers'
        allocations, the lines computing `acc`, and the frees."""
        a = self.a
        lhs = "in0[base0 + kk * lda + m0 + r]" if a.transpose_lhs else "in0[base0 + (m0 + r) * lda + kk]"
        rhs = "in1[base1 + (c0 + col) * ldb + kk]" if a.transpose_rhs else "in1[base1 + kk * ldb + c0 + col]"
        # B's rows of K are read in place where it is stored bf16 along K.
        in_place = a.transpose_rhs and not self._widened(1)
        alloc = [f"    uint32_t* pairs_lhs = (uint32_t*)std::malloc(sizeof(uint32_t) * bz_pairs_lhs_words(panel_rows, {k}));",
                 f"    uint16_t* pairs_rhs = (uint16_t*)std::malloc(sizeof(uint16_t) * bz_pairs_rhs_halves({k}));"]
        calls = [f"const auto lhs_bits = [&](int64_t r, int64_t kk) -> uint16_t {{ return {self._in_product_type(0, lhs)}; }};",
                 f"const auto rhs_bits = [&](int64_t kk, int64_t col) -> uint16_t {{ return {self._in_product_type(1, rhs)}; }};",
                 f"const uint16_t* rhs_rows = {'in1 + base1 + c0 * ldb' if in_place else 'nullptr'};"]
        along_n = "false" if a.transpose_rhs else "true"
        calls.append(f"bz_gemm_bf16_pairs<{along_n}>(rows, cols, {k}, lhs_bits, rhs_bits, rhs_rows, ldb, acc, cols, "
                     "pairs_lhs, pairs_rhs);")
        return alloc, calls, ["    std::free(pairs_lhs);", "    std::free(pairs_rhs);"]

    # -- pieces ---------------------------------------------------------
    def _head(self) -> list[str]:
        a = self.a
        # Wide vectors pay for transcendental epilogues only (a GEMV with
        # 512-bit vectors measured 1.3x slower: it is bound by memory).
        wide = "BZ_WIDE_VECTORS " if any(op.operation.name.startswith("math.") for op in a.ops) else ""
        lines = [f'extern "C" {wide}int {a.name}(void* const* buffers, const int64_t* sizes) {{']
        for operand in a.operands:
            c_type = self.storage(operand.value.type.element_type)
            lines.append(f"  const {c_type}* __restrict in{operand.number} = (const {c_type}*)buffers[{operand.number}];")
        for number, result in enumerate(a.results):
            c_type = self.storage(result.type.element_type)
            lines.append(f"  {c_type}* __restrict out{number} = ({c_type}*)buffers[{len(a.inputs) + number}];")
        for dim, size in enumerate(a.domain):
            lines.append(f"  const int64_t n{dim} = {size if size is not None else f'sizes[{dim}]'};")
        offset = len(a.domain)
        for operand in a.operands:
            rank = operand.value.type.rank
            for dim in range(rank - 1):
                lines.append(f"  const int64_t stride{operand.number}_{dim} = sizes[{offset + dim}];")
            offset += rank
        b = a.batch
        m, n, k = f"n{a.m}", f"n{a.n}", f"n{a.k}"
        # The BLAS wants a row stride at least the row's length and at least
        # 1 (a size-1 dim carries stride 0 here; an empty K has rows of 0).
        lines.append(f"  const int64_t lda = std::max<int64_t>({{stride0_{b}, {m if a.transpose_lhs else k}, 1}});")
        lines.append(f"  const int64_t ldb = std::max<int64_t>({{stride1_{b}, {k if a.transpose_rhs else n}, 1}});")
        lines.append("  int failed = 0;")
        lines.append("  (void)sizes;")
        return lines

    def _batch_offsets(self) -> list[str]:
        """`base<i>`: the offset of the current batch index in input i."""
        a = self.a
        lines = []
        for operand in a.operands:
            rank = operand.value.type.rank
            if operand.role in ("lhs", "rhs") or (operand.indexing == "mn" and rank == a.rank):
                terms = [f"i{d} * stride{operand.number}_{d}" for d in range(a.batch)]
                lines.append(f"const int64_t base{operand.number} = {' + '.join(terms) or '0'};")
        batch = "0"
        for d in range(a.batch):
            batch = f"({batch}) * n{d} + i{d}"
        lines.append(f"const int64_t batch = {batch};")
        return lines

    def _load(self, operand) -> str:
        a = self.a
        i_m, i_n = f"i{a.m}", f"i{a.n}"
        number = operand.number
        if operand.indexing == "mn":
            rank = operand.value.type.rank
            base = f"base{number} + " if rank == a.rank else ""
            index = f"{base}{i_m} * stride{number}_{rank - 2} + {i_n}"
        elif operand.indexing == "n":
            index = i_n
        elif operand.indexing == "m":
            index = i_m
        else:
            index = "0"
        load = f"in{number}[{index}]"
        element = type_name(operand.value.type.element_type)
        half = CStyleRenderer.half_load.get(element)
        return f"{half}({load})" if half else load

    def _element(self, accumulator: str) -> tuple[list[str], list[str]]:
        """The epilogue at element (i_m, i_n) of the current batch, from the
        accumulator's expression: its lines, and the expression of each
        yielded value."""
        a, r = self.a, self.epilogue
        lines = []
        value = accumulator
        acc_type = r.compute_type(a.accumulator)
        for operand in a.operands:
            if operand.role == "lhs_scale":
                value = f"{value} * ({acc_type}){self._load(operand)}"
            elif operand.role == "rhs_scale":
                value = f"{value} * ({acc_type}){self._load(operand)}"
        arguments = list(a.block.arguments)
        r.names[arguments[0]] = "acc_value"
        lines.append(f"const {acc_type} acc_value = {value};")
        for argument, operand in zip(arguments[1:], [o for o in a.operands if o.role == "extra"]):
            name = r.fresh()
            r.names[argument] = name
            lines.append(f"const {r.compute_type(argument.type)} {name} = {self._load(operand)};")
        for op in a.ops[:-1]:
            r.define(op, lines)
        yielded = [r.names[v] for v in a.ops[-1].operation.operands]
        return lines, yielded

    def _stores(self, yielded: list[str]) -> list[str]:
        a = self.a
        lines = []
        for number in range(a.output_count):
            element = type_name(a.results[number].type.element_type)
            value = yielded[number]
            if element in CStyleRenderer.half_store:
                value = f"{CStyleRenderer.half_store[element]}({value})"
            lines.append(f"out{number}[(batch * n{a.m} + i{a.m}) * n{a.n} + i{a.n}] = {value};")
        return lines

    def _statistics(self, yielded: list[str]) -> tuple[list, list, list, list]:
        """Per row statistic: its declarations (before the row), the lines
        taking one element, its SIMD reduction clauses, and its store."""
        a, r = self.a, self.epilogue
        declarations, updates, clauses, finals = [], [], [], []
        for s, kind in enumerate(a.kinds):
            number = a.output_count + s
            value = yielded[number]
            value_type = r.compute_type(a.ops[-1].operation.operands[number].type)
            if kind == "add":
                # 1024-element blocks summed in float lanes, added in double (as kernels do).
                declarations.append(f"double stat{s} = 0;")
                updates.append(f"part{s} += {value};")
                clauses.append(f"reduction(+:part{s})")
                final = f"({value_type})stat{s}"
            else:  # max, NaN-propagating (an int flag keeps the loop vectorized)
                declarations += [f"{value_type} stat{s} = -std::numeric_limits<{value_type}>::infinity();",
                                 f"int nan{s} = 0;"]
                updates += [f"stat{s} = {value} > stat{s} ? {value} : stat{s};", f"nan{s} |= {value} != {value};"]
                clauses += [f"reduction(max:stat{s})", f"reduction(|:nan{s})"]
                final = f"nan{s} ? std::numeric_limits<{value_type}>::quiet_NaN() : stat{s}"
            element = type_name(a.results[number].type.element_type)
            if element in CStyleRenderer.half_store:
                final = f"{CStyleRenderer.half_store[element]}({final})"
            finals.append(f"out{number}[batch * n{a.m} + i{a.m}] = {final};")
        return declarations, updates, clauses, finals

    def _row(self, body: list[str], yielded: list[str]) -> list[str]:
        """The epilogue over the `cols` columns `c` of one row: `body` the
        lines of one element; with row statistics, summed in blocks of
        SUM_BLOCK and stored after the row."""
        a = self.a
        if not a.kinds:
            return ["#pragma omp simd", "for (int64_t c = 0; c < cols; ++c) {", *["  " + line for line in body], "}"]
        declarations, updates, clauses, finals = self._statistics(yielded)
        sums = [s for s, kind in enumerate(a.kinds) if kind == "add"]
        out = list(declarations)
        out.append(f"for (int64_t block = 0; block < cols; block += {SUM_BLOCK}) {{")
        out += [f"  float part{s} = 0;" for s in sums]
        out.append(f"  const int64_t end = std::min<int64_t>(cols, block + {SUM_BLOCK});")
        out.append(f"  #pragma omp simd {' '.join(clauses)}")
        out.append("  for (int64_t c = block; c < end; ++c) {")
        out += ["    " + line for line in body + updates]
        out.append("  }")
        out += [f"  stat{s} += part{s};" for s in sums]
        out.append("}")
        return out + finals

    # -- forms ----------------------------------------------------------
    def render(self) -> str:
        a = self.a
        m = a.static_m
        half_weights = a.product_type in ("bf16", "f16") and not self._narrow_weight()
        if not a.transpose_rhs:
            half_rows = GEMV_HALF_ROW_MAJOR_ROWS
        elif self._bf16_pairs() and "avx512_bf16" in cpu_flags():
            half_rows = GEMV_BF16_PAIRS_ROWS
        else:
            half_rows = GEMV_HALF_ROWS
        decode = m in half_rows if half_weights else m is not None and m <= GEMV_ROWS
        gemv = decode and a.product_type != "f64"
        head = self._head()
        body = self._gemv(m) if gemv else self._panels()
        failed = " reduction(|:failed)" if self.epilogue.divides else ""
        body = [line.replace("@FAILED@", failed) for line in body]
        return "\n".join(head + body + ["  return failed;", "}"])

    def _panels(self) -> list[str]:
        a = self.a
        acc_c = "double" if type_name(a.accumulator) == "f64" else "float"
        m, n, k = f"n{a.m}", f"n{a.n}", f"n{a.k}"
        batches = " * ".join(f"n{d}" for d in range(a.batch)) or "1"
        lines, yielded = self._element("acc[r * cols + c]")
        stores = self._stores(yielded)
        alloc, product_lines, frees = self._library_product(k)
        if self._pairs_panels():
            # Under the prelude's #if: a compiler not targeting AVX512-BF16 builds the library's form.
            pairs = self._pairs_product(k)
            alloc, product_lines, frees = (["#if defined(__AVX512BF16__)", *ours, "#else", *library, "#endif"]
                                           for ours, library in zip(pairs, (alloc, product_lines, frees)))
        out = [
            f"  const int64_t batches = {batches};",
            "  const int64_t threads = std::max<int64_t>(1, omp_get_max_threads());",
        ]
        whole_rows = "true" if a.kinds else "false"  # row statistics need whole rows in a panel
        out += [
            f"  const bz_panels plan = bz_plan_panels(batches, {m}, {n}, threads, {whole_rows}, {PANEL_COLUMNS}, "
            f"{MIN_PANEL_COLUMNS}, {panel_floats()});",
            "  const int64_t col_panels = plan.col_panels, panel_cols = plan.cols, row_panels = plan.row_panels;",
            "  const int64_t panel_rows = plan.rows, tasks = plan.tasks;",
            f"  failed |= bz_parallel(tasks > 1 && {m} * {n} * {k} >= {PARALLEL_WORK}, [&]() -> int {{",
            "    int failed = 0;",
            f"    {acc_c}* acc = ({acc_c}*)std::malloc(sizeof({acc_c}) * panel_rows * panel_cols);",
            *alloc,
            "    #pragma omp for schedule(static)",
            "    for (int64_t task = 0; task < tasks; ++task) {",
            "      int64_t rest = task;",
            "      const int64_t pc = rest % col_panels; rest /= col_panels;",
            "      const int64_t pr = rest % row_panels; rest /= row_panels;",
        ]
        out += [f"      const int64_t i{d} = rest % n{d}; rest /= n{d};" for d in reversed(range(a.batch))]
        out += ["      " + line for line in self._batch_offsets()]
        out += [
            "      int64_t m0, rows;",
            f"      bz_panel_rows(pr, {m}, row_panels, &m0, &rows);",
            f"      const int64_t c0 = pc * panel_cols, cols = std::min<int64_t>(panel_cols, {n} - c0);",
            *["      " + line for line in product_lines],
            "      for (int64_t r = 0; r < rows; ++r) {",
            f"        const int64_t i{a.m} = m0 + r;",
        ]
        body = [f"const int64_t i{a.n} = c0 + c;"] + lines + stores
        out += ["        " + line for line in self._row(body, yielded)]
        out += ["      }", "    }", "    std::free(acc);", *frees, "    return failed;", "  });"]
        return out

    def _library_product(self, k: str) -> tuple[list[str], list[str], list[str]]:
        """The panel's product by the BLAS: its buffers' allocations, the
        lines computing `acc`, and the frees."""
        a = self.a
        product = a.product_type
        lhs_offset = "m0" if a.transpose_lhs else "m0 * lda"
        rhs_offset = "c0 * ldb" if a.transpose_rhs else "c0"
        # A widened matrix (a narrow operand, see GemmAnalysis.product_type)
        # is converted into the thread's buffer before the BLAS reads it: its
        # block of the panel, all of K for a half product; for an f32/f64
        # product the panel's product runs over blocks of WIDEN_DEPTH of K
        # (each widened block stays in cache for the BLAS), summed into the
        # panel's accumulator.
        widened = self._widened(0) or self._widened(1)
        blocked = widened and product in ("f32", "f64")
        depth = "kc" if blocked else k
        beta = ", k0 == 0 ? 0 : 1" if blocked else ""
        transposes = f"{str(a.transpose_lhs).lower()}, {str(a.transpose_rhs).lower()}"
        if product in ("bf16", "f16"):
            call = (f"bz_gemm_half(bz_gemm_{product}, {transposes}, rows, cols, {depth}, lhs, lhs_ld, rhs, rhs_ld, "
                    f"acc, cols{beta});")
        else:
            call = f"bz_gemm({transposes}, rows, cols, {depth}, lhs, lhs_ld, rhs, rhs_ld, acc, cols{beta});"
        product_c = self.epilogue.storage_type(a.product_element)
        widen_alloc, matrices = [], []
        for number, (name, offset, ld, transposed, block, depth_offset) in enumerate([
                ("lhs", lhs_offset, "lda", a.transpose_lhs, ("rows", depth), "k0 * lda" if a.transpose_lhs else "k0"),
                ("rhs", rhs_offset, "ldb", a.transpose_rhs, (depth, "cols"), "k0" if a.transpose_rhs else "k0 * ldb")]):
            stored = f"in{number} + base{number} + {offset}" + (f" + {depth_offset}" if blocked else "")
            if not self._widened(number):
                matrices += [f"const auto* {name} = {stored};", f"const int64_t {name}_ld = {ld};"]
                continue
            rows, cols = block[::-1] if transposed else block
            block_depth = WIDEN_DEPTH if blocked else k
            largest = f"panel_rows * {block_depth}" if number == 0 else f"{block_depth} * panel_cols"
            widen_alloc.append(f"    {product_c}* wide{number} = ({product_c}*)std::malloc(sizeof({product_c}) * {largest});")
            matrices += [self._widen_call(number, stored, ld, rows, cols),
                         f"const auto* {name} = wide{number};",
                         f"const int64_t {name}_ld = std::max<int64_t>({cols}, 1);"]  # the BLAS wants 1 or more
        if blocked:
            # One block at least: with K = 0 the BLAS still writes the zeros.
            product_lines = [f"for (int64_t k0 = 0; k0 < std::max<int64_t>({k}, 1); k0 += {WIDEN_DEPTH}) {{",
                             f"  const int64_t kc = std::min<int64_t>({WIDEN_DEPTH}, {k} - k0);",
                             *["  " + line for line in matrices], f"  {call}", "}"]
        else:
            product_lines = matrices + [call]
        frees = [f"    std::free(wide{number});" for number in (0, 1) if self._widened(number)]
        return widen_alloc, product_lines, frees

    def _gemv(self, rows: int) -> list[str]:
        """Decode shapes: every weight element read once, for all `rows` rows.
        The dot products (rows x N floats per batch) go to a buffer, and a
        second pass runs the epilogue over whole rows, vectorised: run on
        each dot product as it was made, it stayed scalar, and a SiLU or
        GELU epilogue cost 0.1-0.2 ms of a 1.1 ms bf16 GEMV (5632 x 2048,
        M = 4, 2 threads); the buffer costs a few microseconds."""
        a = self.a
        n = f"n{a.n}"
        load_a = self._matrix_load(0, "lhs[kk * lda + row]" if a.transpose_lhs else "lhs[row * lda + kk]")
        dot = "sums[g][row]" if a.transpose_rhs else "total"
        finish = [f"acc[(batch * {rows} + i{a.m}) * {n} + i{a.n}] = {dot};"]
        batches = " * ".join(f"n{d}" for d in range(a.batch)) or "1"
        size = f"std::max<int64_t>(1, batches * {rows} * {n})"
        out = [f"  const int64_t batches = {batches};",
               f"  float* acc = (float*)std::malloc(sizeof(float) * {size});"]
        products = self._gemv_transposed if a.transpose_rhs else self._gemv_row_major
        out += products(rows, load_a, finish)
        return out + self._gemv_rows(rows)

    def _gemv_rows(self, rows: int) -> list[str]:
        """The second pass of a GEMV: the epilogue over each row of the
        buffer `acc`, a row per task."""
        a = self.a
        n = f"n{a.n}"
        lines, yielded = self._element(f"acc[(batch * {rows} + i{a.m}) * {n} + c]")
        body = [f"const int64_t i{a.n} = c;"] + lines + self._stores(yielded)
        out = [
            f"  #pragma omp parallel for schedule(static) if(batches * {rows} * {n} >= {PARALLEL_WORK})@FAILED@",
            f"  for (int64_t point = 0; point < batches * {rows}; ++point) {{",
            "    int64_t rest = point;",
            f"    const int64_t i{a.m} = rest % {rows}; rest /= {rows};",
        ]
        out += [f"    const int64_t i{d} = rest % n{d}; rest /= n{d};" for d in reversed(range(a.batch))]
        out += ["    " + line for line in self._batch_offsets()]
        out.append(f"    const int64_t cols = {n};")
        out += ["    " + line for line in self._row(body, yielded)]
        return out + ["  }", "  std::free(acc);"]

    def _gemv_transposed(self, rows: int, load_a: str, finish: list[str]) -> list[str]:
        """W [N, K]: `group` weight rows at a time, each one's dot product
        with every input row in `lanes` lanes: the group's rows share the
        reads of x (re-read for every group, from L2 once M x K floats pass
        L1) and are independent streams. One row at a time read 14-17 GB/s
        at M = 4, 4096 x 4096, 1 thread, four 27 (torch.mv: 31); rows
        shorter than GEMV_INTERLEAVED_ROW_BYTES are read one after another.
        `finish` runs at each (row, column)."""
        a = self.a
        n, k = f"n{a.n}", f"n{a.k}"
        lanes = GEMV_NARROW_LANES if self._narrow_weight() else GEMV_LANES
        vectors_per_weight_row = max(1, rows * lanes // GEMV_LANES)
        group = max(1, min(GEMV_GROUP, GEMV_ACCUMULATORS // vectors_per_weight_row))
        load_w = self._matrix_load(1, "w[g][kk]")
        weight_bytes = f"{k} * (int64_t)sizeof(*w[0])"
        widening = [
            "int64_t kb = 0;",
            # As bz_dot_bf16_pairs: rows shorter than a page are read whole, one after another.
            f"if ({weight_bytes} < {GEMV_INTERLEAVED_ROW_BYTES}) {{",
            f"  for (int64_t g = 0; g < {group}; ++g) {{",
            f"    float part[{rows}][{lanes}] = {{}};",
            "    kb = 0;",
            f"    for (; kb + {lanes} <= {k}; kb += {lanes})",
            f"      #pragma GCC unroll {rows}",
            f"      for (int64_t row = 0; row < {rows}; ++row) {{",
            "        #pragma omp simd",
            f"        for (int64_t l = 0; l < {lanes}; ++l) {{",
            "          const int64_t kk = kb + l;",
            f"          part[row][l] += {load_a} * {load_w};",
            "        }",
            "      }",
            f"    for (int64_t row = 0; row < {rows}; ++row) {{",
            "      float total = 0;",
            f"      for (int64_t l = 0; l < {lanes}; ++l) total += part[row][l];",
            "      sums[g][row] = total;",
            "    }",
            "  }",
            "} else {",
            f"float part[{rows}][{group}][{lanes}] = {{}};",
            f"for (; kb + {lanes} <= {k}; kb += {lanes})",
            "  // Unrolled, so that the accumulators live in registers (gcc kept them on the stack otherwise).",
            f"  #pragma GCC unroll {rows}",
            f"  for (int64_t row = 0; row < {rows}; ++row)",
            f"    #pragma GCC unroll {group}",
            f"    for (int64_t g = 0; g < {group}; ++g) {{",
            "      #pragma omp simd",
            f"      for (int64_t l = 0; l < {lanes}; ++l) {{",
            "        const int64_t kk = kb + l;",
            f"        part[row][g][l] += {load_a} * {load_w};",
            "      }",
            "    }",
            f"for (int64_t row = 0; row < {rows}; ++row)",
            f"  for (int64_t g = 0; g < {group}; ++g) {{",
            "    float total = 0;",
            f"    for (int64_t l = 0; l < {lanes}; ++l) total += part[row][g][l];",
            "    sums[g][row] = total;",
            "  }",
            "}",
        ]
        if self._bf16_pairs():
            widening = (["#if defined(__AVX512BF16__)",
                         f"const int64_t kb = bz_dot_bf16_pairs<{rows}, {group}>(lhs, lda, w, {k}, sums);",
                         "#else"] + widening + ["#endif"])
        inner = [
            f"const {self.storage(a.inputs[1].type.element_type)}* w[{group}];",
            "// A short last group repeats the last weight row (its sums are not stored).",
            f"for (int64_t g = 0; g < {group}; ++g) w[g] = in1 + base1 + std::min<int64_t>(j0 + g, {n} - 1) * ldb;",
            f"float sums[{group}][{rows}];",
            *widening,
            f"for (int64_t kk = kb; kk < {k}; ++kk)",
            f"  for (int64_t row = 0; row < {rows}; ++row)",
            f"    for (int64_t g = 0; g < {group}; ++g) sums[g][row] += {load_a} * {load_w};",
        ]
        out = [
            f"  const int64_t groups = ({n} + {group - 1}) / {group};",
            f"  #pragma omp parallel for schedule(static) if(batches * {n} * {k} >= {GEMV_PARALLEL_WEIGHTS})@FAILED@",
            "  for (int64_t point = 0; point < batches * groups; ++point) {",
            "    int64_t rest = point;",
            f"    const int64_t j0 = rest % groups * {group}; rest /= groups;",
        ]
        out += [f"    const int64_t i{d} = rest % n{d}; rest /= n{d};" for d in reversed(range(a.batch))]
        out += ["    " + line for line in self._batch_offsets()]
        out += ["    const auto* lhs = in0 + base0;"]
        out += ["    " + line for line in inner]
        out += [f"    for (int64_t g = 0; g < {group} && j0 + g < {n}; ++g) {{",
                f"      const int64_t i{a.n} = j0 + g;",
                f"      for (int64_t row = 0; row < {rows}; ++row) {{",
                f"        const int64_t i{a.m} = row;"]
        out += ["        " + line for line in finish] + ["      }", "    }", "  }"]
        return out

    def _gemv_row_major(self, rows: int, load_a: str, finish: list[str]) -> list[str]:
        """B [K, N]: tasks of a slice of K by a block of columns. A task reads
        GEMV_ROW_MAJOR_STEP of its weight rows at a time, each along its
        block's columns (contiguous), into rows x columns partial sums that
        stay in cache; the slices' sums are added in slice order afterwards,
        where `finish` runs at each (row, column). Slices exist so that a
        narrow B (GPT-2's 3072 x 768 projection) still has work for every
        thread; their number depends on the shape only, not on the threads,
        so results do not change with the thread count."""
        a = self.a
        n, k = f"n{a.n}", f"n{a.k}"
        step = GEMV_ROW_MAJOR_STEP
        widest = max(GEMV_LANES, GEMV_SUMS_FLOATS // max(rows, 1) // GEMV_LANES * GEMV_LANES)
        out = [
            f"  const int64_t col_blocks = std::max<int64_t>(1, ({n} + {widest - 1}) / {widest});",
            # Balanced blocks, whole vectors wide.
            f"  const int64_t width = (({n} + col_blocks - 1) / col_blocks + {GEMV_LANES - 1})"
            f" / {GEMV_LANES} * {GEMV_LANES};",
            f"  const int64_t slices = std::max<int64_t>(1, std::min<int64_t>(",
            f"      ({k} + {GEMV_SLICE_DEPTH - 1}) / {GEMV_SLICE_DEPTH}, ({GEMV_TASKS} + col_blocks - 1) / col_blocks));",
            f"  const int64_t depth = ({k} + slices - 1) / slices;",
            "  float* partial = (float*)std::malloc(sizeof(float) * "
            f"std::max<int64_t>(1, batches * slices * {rows} * {n}));",
            f"  #pragma omp parallel for schedule(static) if(batches * {n} * {k} >= {GEMV_PARALLEL_WEIGHTS})",
            "  for (int64_t point = 0; point < batches * col_blocks * slices; ++point) {",
            "    int64_t rest = point;",
            "    const int64_t slice = rest % slices; rest /= slices;",
            "    const int64_t c0 = rest % col_blocks * width; rest /= col_blocks;",
        ]
        out += [f"    const int64_t i{d} = rest % n{d}; rest /= n{d};" for d in reversed(range(a.batch))]
        out += ["    " + line for line in self._batch_offsets()]
        body = [
            "const auto* lhs = in0 + base0;",
            "const auto* rhs = in1 + base1;",
            f"const int64_t cols = std::max<int64_t>(0, std::min<int64_t>(width, {n} - c0));",
            f"const int64_t k0 = std::min<int64_t>({k}, slice * depth), k1 = std::min<int64_t>({k}, k0 + depth);",
            # Rows of sums a line longer than a block: rows 4 KiB apart made
            # each store stall the next row's load (4K aliasing), at half speed.
            f"alignas(64) float sums[{rows}][{widest + GEMV_LANES}];",
            f"for (int64_t row = 0; row < {rows}; ++row) std::fill(sums[row], sums[row] + cols, 0.0f);",
            "int64_t kb = k0;",
            *self._row_major_steps(rows, step, f"kb + {step} <= k1", load_a),
            *self._row_major_steps(rows, 1, "kb < k1", load_a),
            f"float* slice_sums = partial + (batch * slices + slice) * {rows} * {n} + c0;",
            f"for (int64_t row = 0; row < {rows}; ++row) std::copy(sums[row], sums[row] + cols, slice_sums + row * {n});",
        ]
        out += ["    " + line for line in body] + ["  }"]
        out += [
            f"  #pragma omp parallel for schedule(static) if(batches * {rows} * {n} >= {PARALLEL_WORK})",
            f"  for (int64_t point = 0; point < batches * {rows}; ++point) {{",
            f"    const int64_t batch = point / {rows}, row = point % {rows};",
            f"    const float* first = partial + (batch * slices * {rows} + row) * {n};",
            f"    for (int64_t c = 0; c < {n}; ++c) {{",
            "      float total = first[c];",
            f"      for (int64_t s = 1; s < slices; ++s) total += first[s * {rows} * {n} + c];",
            f"      const int64_t i{a.m} = row, i{a.n} = c;",
        ]
        out += ["      " + line for line in finish] + ["    }", "  }", "  std::free(partial);"]
        return out

    def _row_major_steps(self, rows: int, step: int, condition: str, load_a: str) -> list[str]:
        """The loop of `_gemv_row_major` over `step` weight rows at a time
        from row kb while `condition` holds: each row's x broadcast, each
        column's `step` weights loaded once for all `rows` rows."""
        load_b = self._matrix_load(1, "b[u][c]")
        return [
            f"for (; {condition}; kb += {step}) {{",
            f"  const {self.storage(self.a.inputs[1].type.element_type)}* b[{step}];",
            f"  float x[{rows}][{step}];",
            f"  for (int64_t u = 0; u < {step}; ++u) {{",
            "    const int64_t kk = kb + u;",
            "    b[u] = rhs + kk * ldb + c0;",
            f"    for (int64_t row = 0; row < {rows}; ++row) x[row][u] = {load_a};",
            "  }",
            "  #pragma omp simd",
            "  for (int64_t c = 0; c < cols; ++c) {",
            f"    float w[{step}];",
            f"    #pragma GCC unroll {step}",
            f"    for (int64_t u = 0; u < {step}; ++u) w[u] = {load_b};",
            f"    #pragma GCC unroll {rows}",
            f"    for (int64_t row = 0; row < {rows}; ++row) {{",
            "      float total = sums[row][c];",
            f"      #pragma GCC unroll {step}",
            f"      for (int64_t u = 0; u < {step}; ++u) total += x[row][u] * w[u];",
            "      sums[row][c] = total;",
            "    }",
            "  }",
            "}",
        ]


def render(op: ir.OpView, name: str) -> tuple[str, object]:
    """The function of fused GEMM `op` named `name`, and its KernelSpec."""
    analysis = GemmAnalysis(op, name)
    if analysis.product_type not in ("f32", "f64", "bf16", "f16"):
        raise BrazeError(f"fused GEMM {name}: the CPU has no BLAS product of {analysis.element}")
    return GemmRenderer(analysis).render(), analysis.spec()
