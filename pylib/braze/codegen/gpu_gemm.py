"""A `braze.fused_gemm` in the C-like GPU renderers (CUDA, HIP, OpenCL C,
Metal): a shared-memory tiled GEMM whose epilogue runs on each accumulator
element in registers.

The kernel's `braze.schedule` (braze-gpu-schedule) gives the tile
`[TM, TN, TK]` and the strategy; the block is 16 x 16 threads (thread
`tid`: column `tx = tid % 16`, row `ty = tid / 16`), and each thread
computes a TM/16 x TN/16 register tile: rows `m_start + ty + 16 i`, columns
`n_start + tx + 16 j` (neighbouring threads read neighbouring shared-memory
columns and store neighbouring output columns).

* `tiled_gemm`: one block per output tile of one batch (blocks numbered
  tile-major within a batch, tiles row-major); `tiled_gemm_rows` (the op
  has row statistics): one block per TM whole rows, which walks the row's
  tiles along N, so a row's statistic is the block's alone.
* K is walked in blocks of TK: the block's threads stage the TM x TK slice
  of `lhs` and the TK x TN slice of `rhs` through shared memory (each
  element read once per block, in the order its memory runs: along K for a
  row-major `lhs`, along M for a transposed one), widened to the type the
  product is computed in; elements past M, N or K read as 0, so no extent
  needs to be a multiple of a tile and an empty K gives a product of 0.
  Two barriers per block of K (staged; consumed). A tile's rows are
  padded by one element, so that staging along K (a column of the tile)
  does not write one shared-memory bank 16 times.
* Accumulation: f32 for f32/f16/bf16 operands (an i8 weight and 8-bit
  floats are widened to f32, exactly), f64 for f64.
* Then per element of the register tile inside the product: the scales
  multiplied in, the extras read at (m, n), n, m or once, the epilogue
  region spelled by the target renderer's own scalar rules
  (codegen/renderer.py), the outputs stored (contiguous `[B..., M, N]`).
* Row statistics: each thread folds its elements of a row into an f32
  (f64 for f64) partial per row; after the last tile the 16 partials of a
  row meet in shared memory and thread `tx == 0` folds them in column
  order (NaN-keeping for max) and stores the row's value.

The ABI is the kernels' (codegen/gpu.py): inputs, results, `sizes`
(extents [B..., M, N, K], every input's strides, result dims), `failed`;
extents, strides and offsets are `int` where the schedule says
`index_bits = 32`, else `int64_t`.
"""

from __future__ import annotations

from mlir import ir

from braze.codegen.analysis import type_name
from braze.codegen.gemm import GemmAnalysis
from braze.codegen.gpu import GpuRenderer, sizes_lines
from braze.codegen.renderer import CStyleRenderer
from braze.errors import BrazeError

# The block's side in threads (braze-gpu-schedule's kGemmThreadSide).
THREAD_SIDE = 16
# What braze-gpu-schedule writes by default, for a fused GEMM emitted
# without the schedule (a hand-written one through codegen.emit).
DEFAULT_TILE = (64, 64, 16)
STRATEGIES = ("tiled_gemm", "tiled_gemm_rows")
# 8-bit float operands (scaled_mm): stored as bytes, widened exactly by the
# GPU prelude's decoders.
FLOAT8_LOAD = {"f8E4M3FN": "bz_f8e4m3fn_to_f32", "f8E5M2": "bz_f8e5m2_to_f32"}
MULTIPLIED = ("f32", "f16", "bf16", "f64")


def scalar_renderer(renderer_type, analysis: GemmAnalysis) -> GpuRenderer:
    """The target renderer's spellings (types, scalar ops, address spaces,
    thread ids) without a kernel's structure, which a GEMM's epilogue has
    none of: `GpuRenderer.__init__` reads a kernel's schedule and domain."""
    renderer = renderer_type.__new__(renderer_type)
    CStyleRenderer.__init__(renderer, analysis)
    renderer.storage_types = {**renderer.storage_types, **dict.fromkeys(FLOAT8_LOAD, "uint8_t")}
    renderer.index = "int64_t"  # the caller narrows it where its schedule proves 32 bits
    return renderer


class GpuGemmRenderer:
    def __init__(self, renderer_type, analysis: GemmAnalysis):
        self.a = analysis
        self.r = scalar_renderer(renderer_type, analysis)
        schedule = analysis.op.attributes["braze.schedule"] if "braze.schedule" in analysis.op.attributes else None
        self.strategy = "tiled_gemm_rows" if analysis.kinds else "tiled_gemm"
        self.tile = DEFAULT_TILE
        self.index = "int64_t"  # the C type of extents, strides and offsets
        if schedule is not None:
            self.strategy = ir.StringAttr(schedule["strategy"]).value
            self.tile = tuple(ir.DenseI64ArrayAttr(schedule["tile"]))
            if "index_bits" in schedule:
                index_bits = ir.IntegerAttr(schedule["index_bits"]).value
                if index_bits not in (32, 64):
                    raise BrazeError(f"fused GEMM {analysis.name}: schedule index_bits must be 32 or 64, "
                                     f"got {index_bits}")
                self.index = "int" if index_bits == 32 else "int64_t"
        self.r.index = self.index
        if self.strategy not in STRATEGIES or (self.strategy == "tiled_gemm_rows") != bool(analysis.kinds):
            raise BrazeError(f"fused GEMM {analysis.name}: schedule strategy {self.strategy!r} does not fit a GEMM "
                             f"{'with' if analysis.kinds else 'without'} row statistics "
                             "(tiled_gemm_rows is for one with)")
        tm, tn, tk = self.tile
        if any(side < THREAD_SIDE or side % THREAD_SIDE for side in (tm, tn)) or tk < 1:
            raise BrazeError(f"fused GEMM {analysis.name}: schedule tile {list(self.tile)} must have M and N sides "
                             f"that are multiples of {THREAD_SIDE} and a K side of at least 1")
        self.threads = THREAD_SIDE * THREAD_SIDE
        self.rows, self.columns = tm // THREAD_SIDE, tn // THREAD_SIDE  # the register tile
        lhs, rhs = type_name(analysis.element), type_name(analysis.rhs.type.element_type)
        pair_ok = (lhs == rhs and lhs in MULTIPLIED) or (lhs in FLOAT8_LOAD and rhs in FLOAT8_LOAD) or (
            lhs in MULTIPLIED and rhs == "i8")
        if not pair_ok:
            raise BrazeError(f"fused GEMM {analysis.name}: the {self.r.language} renderer multiplies no "
                             f"{lhs} x {rhs} operands (it spells f32, f16, bf16 and f64 pairs, an 8-bit float "
                             "pair or an i8 weight with float activations, widened to f32)")
        # The type the tiles hold and the product accumulates in.
        self.multiply = self.r.compute_type(analysis.accumulator)
        self.stored = (lhs, rhs)  # the operands' element types in memory

    # -- pieces ---------------------------------------------------------
    def _widened(self, element: str, load: str) -> str:
        """An operand element `load` in the type the product multiplies in."""
        if element in FLOAT8_LOAD:
            return f"{FLOAT8_LOAD[element]}({load})"
        if element in self.r.half_load:
            return f"{self.r.half_load[element]}({load})"
        return f"({self.multiply}){load}" if element == "i8" else load

    def _read(self, operand, indices: list[str]) -> str:
        """Input `operand` at `indices`, in the type it computes in."""
        number = operand.number
        load = f"in{number}[{self.r.offset('input', number, indices)}]"
        element = type_name(operand.value.type.element_type)
        return f"{self.r.half_load[element]}({load})" if element in self.r.half_load else load

    def _epilogue_indices(self, operand) -> list[str]:
        a = self.a
        if operand.indexing == "mn":
            batch = [f"i{d}" for d in range(a.batch)] if operand.value.type.rank == a.rank else []
            return batch + ["m", "n"]
        return {"n": ["n"], "m": ["m"], "scalar": []}[operand.indexing]

    def _stage(self, number: int, tile_side: int, outer: str, transposed: bool) -> list[str]:
        """The lines that stage operand `number`'s TK x `tile_side` slice
        (`outer` is "m" or "n") into `<a|b>_tile[kk * (side + 1) + o]`,
        read in the order its memory runs."""
        a, r = self.a, self.r
        tk = self.tile[2]
        name, extent, first = ("a", f"n{a.m}", "m_start") if outer == "m" else ("b", f"n{a.n}", "n_start")
        # lhs is [.., M, K] (K contiguous) unless transposed; rhs [.., K, N] unless transposed.
        along_k = transposed != (number == 0)
        if along_k:
            decode = [f"const int kk = e % {tk};", f"const int o = e / {tk};"]
        else:
            decode = [f"const int o = e % {tile_side};", f"const int kk = e / {tile_side};"]
        batch = [f"i{d}" for d in range(a.batch)]
        row, k = f"{first} + o", "k0 + kk"
        indices = batch + ([row, k] if (number == 0) != transposed else [k, row])
        load = f"in{number}[{r.offset('input', number, [f'({i})' if '+' in i else i for i in indices])}]"
        value = self._widened(self.stored[number], load)
        return [f"  for (int e = tid; e < {tk * tile_side}; e += {self.threads}) {{",
                *[f"    {line}" for line in decode],
                f"    {name}_tile[kk * {tile_side + 1} + o] = ({first} + o < {extent} && k0 + kk < n{a.k}) ? {value} "
                f": ({self.multiply})0;",
                "  }"]

    def _product(self, indent: str) -> list[str]:
        """`acc[i][j]`: this thread's register tile of the product."""
        a, r = self.a, self.r
        tm, tn, tk = self.tile
        lines = [f"{self.multiply} acc[{self.rows}][{self.columns}];",
                 f"for (int i = 0; i < {self.rows}; ++i)",
                 f"  for (int j = 0; j < {self.columns}; ++j) acc[i][j] = ({self.multiply})0;",
                 f"for ({self.index} k0 = 0; k0 < n{a.k}; k0 += {tk}) {{",
                 *self._stage(0, tm, "m", a.transpose_lhs),
                 *self._stage(1, tn, "n", a.transpose_rhs),
                 f"  {r.barrier};",
                 f"  for (int kk = 0; kk < {tk}; ++kk) {{",
                 f"    {self.multiply} a_reg[{self.rows}], b_reg[{self.columns}];",
                 f"    for (int i = 0; i < {self.rows}; ++i) "
                 f"a_reg[i] = a_tile[kk * {tm + 1} + ty + {THREAD_SIDE} * i];",
                 f"    for (int j = 0; j < {self.columns}; ++j) "
                 f"b_reg[j] = b_tile[kk * {tn + 1} + tx + {THREAD_SIDE} * j];",
                 f"    for (int i = 0; i < {self.rows}; ++i)",
                 f"      for (int j = 0; j < {self.columns}; ++j) acc[i][j] += a_reg[i] * b_reg[j];",
                 "  }",
                 f"  {r.barrier};  // every thread has read the tiles before they are staged again",
                 "}"]
        return [indent + line for line in lines]

    def _element(self, indent: str) -> list[str]:
        """Per element of the register tile inside the product: the
        epilogue, the stores and the statistics' folds."""
        a, r = self.a, self.r
        inner = indent + "    "
        body = [f"{inner}const {self.index} m = m_start + ty + {THREAD_SIDE} * i;",
                f"{inner}const {self.index} n = n_start + tx + {THREAD_SIDE} * j;",
                f"{inner}if (m >= n{a.m} || n >= n{a.n}) continue;"]
        scaled = "acc[i][j]"
        for operand in a.operands:
            if operand.role in ("lhs_scale", "rhs_scale"):
                scaled += f" * {self._read(operand, self._epilogue_indices(operand))}"
        arguments = list(a.block.arguments)
        r.names[arguments[0]] = "product"
        body.append(f"{inner}const {r.compute_type(arguments[0].type)} product = {scaled};")
        for argument, operand in zip(arguments[1:], [o for o in a.operands if o.role == "extra"]):
            name = r.names[argument] = r.fresh()
            body.append(f"{inner}const {r.compute_type(argument.type)} {name} = "
                        f"{self._read(operand, self._epilogue_indices(operand))};")
        for op in a.ops[:-1]:
            r.define(op, body, inner)
        yielded = list(a.ops[-1].operation.operands)
        batch = f"batch * n{a.m} * n{a.n} + " if a.batch else ""
        for number in range(a.output_count):
            value, element = r.names[yielded[number]], type_name(yielded[number].type)
            if element in r.half_store:
                value = f"{r.half_store[element]}({value})"
            body.append(f"{inner}out{number}[{batch}m * n{a.n} + n] = {value};")
        for s, kind in enumerate(a.kinds):
            value = f"({self._statistic_type(s)}){r.names[yielded[a.output_count + s]]}"
            body.append(f"{inner}stat{s}_mine[i] = {self._fold(kind, f'stat{s}_mine[i]', value)};")
        return [f"{indent}for (int i = 0; i < {self.rows}; ++i) {{",
                f"{indent}  for (int j = 0; j < {self.columns}; ++j) {{", *body, f"{indent}  }}", f"{indent}}}"]

    # -- row statistics -------------------------------------------------
    def _statistic_type(self, s: int) -> str:
        value = self.a.ops[-1].operation.operands[self.a.output_count + s]
        return "double" if type_name(value.type) == "f64" else "float"

    def _fold(self, kind: str, total: str, value: str) -> str:
        return f"{total} + {value}" if kind == "add" else f"{self.r.nan_max}({total}, {value})"

    def _statistics_start(self) -> list[str]:
        lines = []
        for s, kind in enumerate(self.a.kinds):
            c_type = self._statistic_type(s)
            start = f"({c_type})0" if kind == "add" else f"-{self.r.special_float('inf', c_type)}"
            lines += [f"  {c_type} stat{s}_mine[{self.rows}];",
                      f"  for (int i = 0; i < {self.rows}; ++i) stat{s}_mine[i] = {start};"]
        return lines

    def _statistics_store(self) -> list[str]:
        """The 16 partials of each row through shared memory, folded and
        stored by the row's thread tx == 0."""
        a, r = self.a, self.r
        lines = []
        for s in range(len(a.kinds)):
            lines.append(f"  for (int i = 0; i < {self.rows}; ++i) "
                         f"stat{s}_part[(ty + {THREAD_SIDE} * i) * {THREAD_SIDE} + tx] = stat{s}_mine[i];")
        lines += [f"  {r.barrier};", "  if (tx == 0) {", f"    for (int i = 0; i < {self.rows}; ++i) {{",
                  f"      const {self.index} m = m_start + ty + {THREAD_SIDE} * i;",
                  f"      if (m >= n{a.m}) continue;"]
        batch = f"batch * n{a.m} + " if a.batch else ""
        for s, kind in enumerate(a.kinds):
            c_type = self._statistic_type(s)
            row = f"stat{s}_part[(ty + {THREAD_SIDE} * i) * {THREAD_SIDE}"
            lines += [f"      {c_type} total{s} = {row}];",
                      f"      for (int c = 1; c < {THREAD_SIDE}; ++c) {{ const {c_type} part = {row} + c]; "
                      f"total{s} = {self._fold(kind, f'total{s}', 'part')}; }}"]
            number = a.output_count + s
            element = type_name(a.results[number].type.element_type)
            value = f"{r.half_store[element]}(total{s})" if element in r.half_store else f"total{s}"
            lines.append(f"      out{number}[{batch}m] = {value};")
        return lines + ["    }", "  }"]

    # -- the kernel -----------------------------------------------------
    def shared(self) -> list[tuple[str, str, int]]:
        """(C type, name, elements) of each shared array."""
        tm, tn, tk = self.tile
        # A row of TK slices is padded by one element: staging along K
        # writes a column, which would fall in one bank at a pitch of 64.
        arrays = [(self.multiply, "a_tile", tk * (tm + 1)), (self.multiply, "b_tile", tk * (tn + 1))]
        arrays += [(self._statistic_type(s), f"stat{s}_part", tm * THREAD_SIDE) for s in range(len(self.a.kinds))]
        return arrays

    def render(self) -> str:
        a, r = self.a, self.r
        tm, tn, _ = self.tile
        params = r.launch_parameters(GpuRenderer.parameters(r))
        lines = [f"{r.launch_prefix(self.threads)} {a.name}({', '.join(params)}) {{"] + sizes_lines(a, self.index)
        lines += [f"  {r.shared_space} {c_type} {name}[{count}];" for c_type, name, count in self.shared()]
        lines += [f"  const int tid = (int){r.local_id};",
                  f"  const int tx = tid % {THREAD_SIDE}, ty = tid / {THREAD_SIDE};",
                  f"  const {self.index} tiles_m = (n{a.m} + {tm - 1}) / {tm};"]
        index = self.index
        lines.append(f"  const {index} block = ({index}){r.block_id};")
        if a.kinds:
            lines += [f"  const {index} tiles = tiles_m;", f"  const {index} m_start = block % tiles * {tm};"]
        else:
            lines += [f"  const {index} tiles_n = (n{a.n} + {tn - 1}) / {tn};",
                      f"  const {index} tiles = tiles_m * tiles_n;",
                      f"  const {index} m_start = block % tiles / tiles_n * {tm};",
                      f"  const {index} n_start = block % tiles % tiles_n * {tn};"]
        if a.batch:
            lines.append(f"  const {self.index} batch = block / tiles;")
            lines += r._decode("batch", list(range(a.batch)), "  ")
        if a.kinds:
            lines += self._statistics_start()
            lines.append(f"  for ({self.index} n_start = 0; n_start < n{a.n}; n_start += {tn}) {{")
            lines += self._product("    ") + self._element("    ")
            lines.append("  }")
            lines += self._statistics_store()
        else:
            lines += self._product("  ") + self._element("  ")
        return "\n".join(lines + ["}"])


def render(renderer_type, op: ir.OpView, name: str) -> tuple[str, object]:
    """The launch function of fused GEMM `op`, named `name`, and its
    KernelSpec."""
    analysis = GemmAnalysis(op, name)
    renderer = GpuGemmRenderer(renderer_type, analysis)
    source = renderer.render()
    spec = analysis.spec()
    spec.threads, spec.strategy, spec.tile = renderer.threads, renderer.strategy, renderer.tile
    spec.index_bits = 32 if renderer.index == "int" else 64
    return source, spec
