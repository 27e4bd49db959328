"""What every emitter needs to know about a `braze.fused_gemm`, free of any
target's spelling: its operands (the matrices, the scales, the extras and
how each is indexed), its outputs and row statistics, the epilogue's ops,
and the launch ABI (a `KernelSpec`, so the executor runs it as a kernel).

The domain of the spec is `[B..., M, N, K]` (K the reduced dim): `sizes`
holds those extents, then every input's strides, then every result's
dims, as for a kernel. Dynamic extents are read from the matrices
(`KernelSpec.extent_inputs`), which the BLAS reads in place when their
rows have unit stride and a row stride it accepts (`blas_inputs`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from braze.codegen.analysis import KERNEL_BODY_OPS, KernelSpec, may_divide_by_zero
from braze.errors import BrazeError, format_location

# The scalar ops an epilogue may hold: a kernel body's, without loads,
# reductions and stores (the extras arrive as block arguments).
EPILOGUE_OPS = KERNEL_BODY_OPS - {"tensor.extract", "braze.reduce", "braze.store"}


@dataclass(frozen=True)
class Operand:
    """One input of the fused GEMM: its number, its role ("lhs", "rhs",
    "lhs_scale", "rhs_scale", "extra") and, for extras and scales, how the
    epilogue indexes it ("mn", "n", "m" or "scalar")."""

    number: int
    role: str
    indexing: str
    value: ir.Value


class GemmAnalysis:
    def __init__(self, op: ir.OpView, name: str):
        self.op = op
        self.name = name
        attributes = op.attributes
        segments = list(ir.DenseI32ArrayAttr(attributes["operandSegmentSizes"]))
        operands = list(op.operation.operands)
        self.transpose_lhs = "transpose_lhs" in attributes
        self.transpose_rhs = "transpose_rhs" in attributes
        self.accumulator = ir.TypeAttr(attributes["accumulator"]).value
        self.kinds = [ir.StringAttr(k).value for k in attributes["reductions"]] if "reductions" in attributes else []
        self.results = list(op.operation.results)
        self.output_count = len(self.results) - len(self.kinds)
        self.lhs, self.rhs = operands[0], operands[1]
        self.rank = self.lhs.type.rank
        self.batch = self.rank - 2
        roles = [("lhs", ""), ("rhs", "")]
        position = 2
        self.lhs_scale = self.rhs_scale = None
        if segments[2]:
            self.lhs_scale = operands[position]
            roles.append(("lhs_scale", "m" if self.lhs_scale.type.rank else "scalar"))
            position += 1
        if segments[3]:
            self.rhs_scale = operands[position]
            roles.append(("rhs_scale", "n" if self.rhs_scale.type.rank else "scalar"))
            position += 1
        self.extras = operands[position:]
        roles += [("extra", ir.StringAttr(entry).value) for entry in attributes["indexing"]]
        self.inputs = operands
        self.operands = [Operand(number, role, indexing, value)
                         for number, ((role, indexing), value) in enumerate(zip(roles, operands))]
        self.block = op.regions[0].blocks[0]
        self.ops = list(self.block.operations)
        self.can_fail = False
        for inner in self.ops[:-1]:
            if inner.operation.name not in EPILOGUE_OPS:
                raise BrazeError(f"fused GEMM {name}: '{inner.operation.name}' at "
                                 f"{format_location(inner.operation.location)} is not an epilogue op")
            self.can_fail |= may_divide_by_zero(inner)
        self.element = self.lhs.type.element_type
        # The type the library multiplies in: the operands' own, or where
        # they are stored narrower (8-bit floats; an int8 weight) one that
        # holds each of their values exactly: bf16 for 8-bit floats (the
        # library's bf16 product accumulates in f32), the activations' type
        # for an int8 weight. The kernel widens a block at a time.
        if str(self.element).startswith("f8"):
            self.product_element = ir.BF16Type.get(context=op.context)
        else:
            self.product_element = self.element
        self.product_type = str(self.product_element)
        dynamic = ir.ShapedType.get_dynamic_size()
        lhs_shape, rhs_shape = list(self.lhs.type.shape), list(self.rhs.type.shape)
        b = self.batch
        m_dim, k_dim = (b + 1, b) if self.transpose_lhs else (b, b + 1)
        k_rhs, n_dim = (b + 1, b) if self.transpose_rhs else (b, b + 1)
        # Domain dim -> (input, dim) that holds it.
        self.extent_inputs = [(0, d) for d in range(b)] + [(0, m_dim), (1, n_dim), (0, k_dim)]
        sizes = [lhs_shape[d] for d in range(b)] + [lhs_shape[m_dim], rhs_shape[n_dim], lhs_shape[k_dim]]
        self.domain = [None if s == dynamic else s for s in sizes]
        self.m, self.n, self.k = b, b + 1, b + 2  # their domain dims
        checks = [(0, d, d) for d in range(b)] + [(0, m_dim, self.m), (0, k_dim, self.k)]
        checks += [(1, d, d) for d in range(b)] + [(1, k_rhs, self.k), (1, n_dim, self.n)]
        for operand in self.operands[2:]:
            rank = operand.value.type.rank
            if operand.indexing == "mn":
                checks += [(operand.number, d, d + b + 2 - rank) for d in range(rank)]
            elif operand.indexing in ("m", "n"):
                checks.append((operand.number, 0, self.m if operand.indexing == "m" else self.n))
        self.input_checks = sorted(checks)

    def spec(self) -> KernelSpec:
        spec = KernelSpec(self.name, self.domain, [self.k], [v.type for v in self.inputs],
                          [v.type for v in self.results], can_fail=self.can_fail)
        outputs = [("extent", d) if self.domain[d] is None else self.domain[d] for d in range(self.batch + 2)]
        spec.result_shapes = [outputs] * self.output_count + [outputs[:-1]] * len(self.kinds)
        spec.input_checks = self.input_checks
        spec.extent_inputs = self.extent_inputs
        spec.blas_inputs = [0, 1]
        return spec

    @property
    def static_m(self) -> int | None:
        return self.domain[self.m]
