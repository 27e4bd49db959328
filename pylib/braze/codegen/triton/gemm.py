"""A `braze.fused_gemm` in Triton: one `@triton.jit` function, a tiled GEMM
whose epilogue runs on the accumulator tile in registers.

A program takes a BLOCK_M x BLOCK_N tile of one batch's product (grid
axis 0: the tiles, row-major; axis 1: the batch), accumulates it over K in
blocks of BLOCK_K with `tl.dot` (masked loads, so no extent needs to be a
multiple of a block; f32 accumulation for f16/bf16/f32 operands, which
`tl.dot` reads natively, f64 for f64; f32 products in IEEE precision, as
eager's default, not TF32), multiplies the scales in, then runs the
epilogue region on the tile (the ops spelled by the kernel emitter's rules,
codegen/triton/emitter.py) with every extra read at the tile's (m, n), n,
m or once, and stores the outputs. The operands are read through their
strides, which also spell the transposes.

With row statistics (`reductions`), a program takes BLOCK_M whole rows
instead: it walks the row's tiles along N (each its own loop over K),
folding each tile's epilogue value into a per-row running sum (f32, f64
for f64) or NaN-keeping max, stored after the last tile.

The unfused alternative the autotuner weighs against this one (the way
Inductor benchmarks fused against unfused GEMMs) is the same function with
`PRODUCT_GIVEN`: the launcher computes the product with torch's GEMM (the
vendor library) into `product` (`[B..., M, N]`, contiguous, of the
accumulator's type for f32/f64 operands or the operands' for halves, which
the epilogue rounds to anyway), and the kernel reads its tile from there
instead of computing it: a separate epilogue kernel.

Parameters, in order: the kernel ABI's (codegen/triton/emitter.py: inputs,
results, `failed`, dynamic extents `n<d>` of the domain [B..., M, N, K],
every input's strides), `product`, then BLOCK_M, BLOCK_N, BLOCK_K and
PRODUCT_GIVEN as `tl.constexpr`.
"""

from __future__ import annotations

from mlir import ir

from braze.codegen.analysis import type_name
from braze.codegen.gemm import GemmAnalysis
from braze.codegen.triton.emitter import HALF, TYPES, TritonRenderer, abi_parameters, kernel_title, source_lines
from braze.errors import BrazeError

# Operand element types `tl.dot` takes here (f32 accumulation; f64 for f64).
DOT_TYPES = ("f32", "f16", "bf16", "f64")
# Operands stored narrower than they multiply: 8-bit floats (scaled_mm)
# are widened exactly to bf16, an int8 weight to the activations' type.
FLOAT8 = ("f8E4M3FN", "f8E5M2")


def batch_indices(dims: int) -> list[str]:
    """The lines naming the program's `batch` (grid axis 1) and its indices
    `i<d>` along the first `dims` domain dims, row-major."""
    lines = ["    batch = tl.program_id(1).to(tl.int64)"]
    rest = "batch"
    for d in reversed(range(dims)):
        lines.append(f"    i{d} = {rest} % n{d}" if d else f"    i{d} = {rest}")
        rest = f"{rest} // n{d}" if d == dims - 1 else f"({rest}) // n{d}"
    return lines


class EpilogueRenderer(TritonRenderer):
    """The scalar ops of an epilogue spelled by the kernel renderer's tables
    and rules, on tiles: every value spans the tile (`tile_mask`) unless it
    is a constant."""

    def __init__(self):
        # The kernel renderer's naming state only: an epilogue has no domain,
        # loads or stores of its own (TritonRenderer.__init__ reads a kernel's).
        self.names: dict[ir.Value, str] = {}
        self.axes: dict[ir.Value, frozenset] = {}
        self.helpers: set[str] = set()
        self.rounded: set[ir.Value] = set()
        self.counter = 0

    @staticmethod
    def mask(axes) -> str | None:
        return "tile_mask" if axes else None


class GemmRenderer:
    def __init__(self, analysis: GemmAnalysis):
        self.a = analysis
        self.epilogue = EpilogueRenderer()
        element = type_name(analysis.element)
        stored = (element, type_name(analysis.rhs.type.element_type))
        # The type both operands multiply in; a narrower one is widened (exactly) as it is loaded.
        element = "bf16" if element in FLOAT8 else element
        if element not in DOT_TYPES or any(t != element and t not in FLOAT8 + ("i8",) for t in stored):
            raise BrazeError(f"fused GEMM {analysis.name}: the Triton renderer has no tl.dot of "
                             f"{' x '.join(stored)} operands (it spells {', '.join(DOT_TYPES)}, an 8-bit float "
                             f"pair widened to bf16, or an i8 weight widened to the activations' type)")
        self.widen = [f".to({TYPES[element]})" if t != element else "" for t in stored]
        self.zero = ["0" if t == "i8" else "0.0" for t in stored]  # what a masked load reads
        self.accumulator = "tl.float64" if element == "f64" else "tl.float32"
        # f32 products in IEEE f32, as eager's (TF32 is an opt-in there).
        self.precision = ', input_precision="ieee"' if element in ("f32", "f64") else ""

    @property
    def helpers(self) -> set[str]:
        return self.epilogue.helpers

    def parameters(self) -> list[str]:
        a = self.a
        tiles = [f"{name}: tl.constexpr" for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "PRODUCT_GIVEN")]
        return abi_parameters(a.inputs, len(a.results), a.can_fail, a.domain) + ["product"] + tiles

    # -- pieces ---------------------------------------------------------
    def _batch_base(self, number: int) -> str:
        """Input `number`'s offset of the program's batch, as terms to
        prefix (`i0 * s1_0 + `; none without a batch)."""
        return "".join(f"i{d} * s{number}_{d} + " for d in range(self.a.batch))

    def _load(self, operand) -> str:
        """The tile (or row, column, scalar) of a scale or an extra, in the
        type it computes in."""
        a = self.a
        number, rank = operand.number, operand.value.type.rank
        if operand.indexing == "mn":
            base = self._batch_base(number) if rank == a.rank else ""
            load = f"tl.load(in{number} + {base}m * s{number}_{rank - 2} + n * s{number}_{rank - 1}, mask=tile_mask)"
        elif operand.indexing == "n":
            load = f"tl.load(in{number} + n * s{number}_0, mask=mask_n)"
        elif operand.indexing == "m":
            load = f"tl.load(in{number} + m * s{number}_0, mask=mask_m)"
        else:
            load = f"tl.load(in{number})"
        element = type_name(operand.value.type.element_type)
        return f"{load}.to(tl.float32)" if element in HALF else load

    def _product(self, indent: str) -> list[str]:
        """The accumulator tile `acc` at rows m, columns n of the batch."""
        a = self.a
        b = a.batch
        lhs_m, lhs_k = (b + 1, b) if a.transpose_lhs else (b, b + 1)
        rhs_k, rhs_n = (b + 1, b) if a.transpose_rhs else (b, b + 1)
        m, n, k = f"n{a.m}", f"n{a.n}", f"n{a.k}"
        batch = "batch * " + m + " * " + n + " + " if b else ""
        return [
            f"{indent}if PRODUCT_GIVEN:  # the unfused alternative: the library's product, read back",
            f"{indent}    acc = tl.load(product + {batch}m * {n} + n, mask=tile_mask).to({self.accumulator})",
            f"{indent}else:",
            f"{indent}    acc = tl.zeros([BLOCK_M, BLOCK_N], {self.accumulator})",
            f"{indent}    lhs = in0 + {self._batch_base(0)}m * s0_{lhs_m}",
            f"{indent}    rhs = in1 + {self._batch_base(1)}n * s1_{rhs_n}",
            f"{indent}    for k0 in range(0, {k}, BLOCK_K):",
            f"{indent}        k = k0 + tl.arange(0, BLOCK_K)",
            f"{indent}        a = tl.load(lhs + k[None, :] * s0_{lhs_k}, mask=mask_m & (k[None, :] < {k}), other={self.zero[0]})"
            f"{self.widen[0]}",
            f"{indent}        b = tl.load(rhs + k[:, None] * s1_{rhs_k}, mask=(k[:, None] < {k}) & mask_n, other={self.zero[1]})"
            f"{self.widen[1]}",
            f"{indent}        acc = tl.dot(a, b, acc{self.precision})",
        ]

    def _epilogue(self, indent: str) -> tuple[list[str], list]:
        """The scaled accumulator through the epilogue region: its lines and
        the yielded values."""
        a, r = self.a, self.epilogue
        lines = []
        for operand in a.operands:
            if operand.role in ("lhs_scale", "rhs_scale"):
                lines.append(f"{indent}acc = acc * {self._load(operand)}")
        arguments = list(a.block.arguments)
        r.names[arguments[0]] = "acc"
        r.axes[arguments[0]] = frozenset("t")
        for argument, operand in zip(arguments[1:], [o for o in a.operands if o.role == "extra"]):
            name = r.fresh()
            r.names[argument], r.axes[argument] = name, frozenset("t")
            if type_name(argument.type) in HALF:
                r.rounded.add(argument)
            lines.append(f"{indent}{name} = {self._load(operand)}")
        body: list[str] = []
        for op in a.ops[:-1]:
            r._define(op, body, indent)
        return lines + body, list(a.ops[-1].operation.operands)

    def _stored(self, value) -> str:
        """A yielded value as stored: a bf16 value not yet rounded is rounded
        to nearest even (Triton's store conversion truncates)."""
        r = self.epilogue
        if type_name(value.type) == "bf16" and value not in r.rounded:
            r.helpers.add("_round_bf16")
            return f"_round_bf16({r.names[value]})"
        return r.names[value]

    def _stores(self, yielded: list, indent: str) -> list[str]:
        a = self.a
        batch = f"batch * n{a.m} * n{a.n} + " if a.batch else ""
        return [f"{indent}tl.store(out{number} + {batch}m * n{a.n} + n, {self._stored(yielded[number])}, "
                "mask=tile_mask)" for number in range(a.output_count)]

    # -- the kernel -----------------------------------------------------
    def render(self) -> str:
        a = self.a
        shape = ", ".join("?" if s is None else str(s) for s in a.domain)
        layout = [word for word, on in (("lhs transposed", a.transpose_lhs), ("rhs transposed", a.transpose_rhs)) if on]
        lines = [f"    # {source_lines(a.op.operation.location)}: fused GEMM [{shape}] ([B..., M, N, K])"
                 + "".join(f", {word}" for word in layout)
                 + (f", row statistics {', '.join(a.kinds)} along N" if a.kinds else "")]
        for dim, size in enumerate(a.domain):
            if size is not None:
                lines.append(f"    n{dim} = tl.full([], {size}, tl.int64)")
        if a.batch:
            lines += batch_indices(a.batch)
        m_dim, n_dim = f"n{a.m}", f"n{a.n}"
        if a.kinds:
            lines += ["    m = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]",
                      f"    mask_m = m < {m_dim}"]
            lines += [self._statistic_start(s, kind) for s, kind in enumerate(a.kinds)]
            lines += [f"    for n_start in range(0, {n_dim}, BLOCK_N):",
                      "        n = n_start + tl.arange(0, BLOCK_N)[None, :]",
                      f"        mask_n = n < {n_dim}",
                      "        tile_mask = mask_m & mask_n"]
            indent = "        "
        else:
            lines += [f"    tiles_n = tl.cdiv({n_dim}, BLOCK_N)",
                      "    tile = tl.program_id(0).to(tl.int64)",
                      "    m = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]",
                      "    n = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]",
                      f"    mask_m = m < {m_dim}",
                      f"    mask_n = n < {n_dim}",
                      "    tile_mask = mask_m & mask_n"]
            indent = "    "
        lines += self._product(indent)
        epilogue, yielded = self._epilogue(indent)
        lines += epilogue + self._stores(yielded, indent)
        for s, kind in enumerate(a.kinds):
            lines += self._statistic_update(s, kind, yielded[a.output_count + s], indent)
        for s in range(len(a.kinds)):
            lines.append(self._statistic_store(s))
        signature = f"def {a.name}({', '.join(self.parameters())}):"
        return "\n".join(["@triton.jit", signature] + lines)

    # -- row statistics -------------------------------------------------
    def _statistic_type(self, s: int) -> str:
        return TYPES["f64"] if type_name(self.a.ops[-1].operation.operands[self.a.output_count + s].type) == "f64" \
            else TYPES["f32"]

    def _statistic_start(self, s: int, kind: str) -> str:
        identity = "0.0" if kind == "add" else 'float("-inf")'
        return f"    stat{s} = tl.full([BLOCK_M, 1], {identity}, {self._statistic_type(s)})"

    def _statistic_update(self, s: int, kind: str, value, indent: str) -> list[str]:
        name = self.epilogue.names[value]
        if kind == "add":
            return [f"{indent}stat{s} += tl.sum(tl.where(tile_mask, {name}, 0.0), axis=1, keep_dims=True)"]
        self.helpers.add("_max_keep_nan")
        return [f'{indent}stat{s} = tl.maximum(stat{s}, _max_keep_nan(tl.where(tile_mask, {name}, float("-inf")), 1), '
                "propagate_nan=tl.PropagateNan.ALL)"]

    def _statistic_store(self, s: int) -> str:
        a = self.a
        number = a.output_count + s
        value = f"stat{s}"
        if type_name(a.results[number].type.element_type) == "bf16":
            self.helpers.add("_round_bf16")
            value = f"_round_bf16({value})"
        batch = f"batch * n{a.m} + " if a.batch else ""
        return f"    tl.store(out{number} + {batch}m, {value}, mask=mask_m)"


def render(op: ir.OpView, number: int) -> tuple[str, object, set]:
    """The function of fused GEMM `op` (the `number`-th kernel of its
    module), its KernelSpec and the prelude helpers it calls."""
    analysis = GemmAnalysis(op, f"gemm_{number}")
    title = kernel_title(analysis)
    if title != "copy":
        analysis.name = f"gemm_{title}_{number}"
    renderer = GemmRenderer(analysis)
    source = renderer.render()
    spec = analysis.spec()
    spec.strategy = "gemm"
    return source, spec, renderer.helpers
