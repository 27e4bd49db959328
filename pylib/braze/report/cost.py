"""Cost estimates of kernel-form ops for the report: the bytes an op moves,
the flops it computes, the bytes a collective sends over each rank's link,
and the time a `braze.machine.Machine` takes for them (a roofline: the slower of memory
and arithmetic; a collective's latency plus its bytes over the link).

Dynamic dims: the kernel table shows no estimate for them (None); the
collective timeline counts each as `dynamic` (1, as braze-overlap's memory
model does), so a schedule can always be drawn.
"""

from __future__ import annotations

import math

from mlir import ir


# Body ops of a braze.kernel that move or index data rather than compute on it.
_NOT_ARITHMETIC = {"arith.constant", "arith.index_cast", "arith.index_castui", "tensor.extract", "braze.store",
                   "braze.yield"}
# Ops that cost nothing in the estimate: views (the executor makes them
# from strides) and what holds constants, parameters and sizes.
FREE = {"braze.reshape", "braze.permute", "braze.slice", "braze.expand", "braze.constant", "braze.parameter",
        "arith.constant", "tensor.dim", "braze.dim"}
COLLECTIVE_STARTS = {"braze.all_reduce_start", "braze.all_gather_start", "braze.reduce_scatter_start",
                     "braze.all_to_all_start", "braze.broadcast_start"}


def _element_bytes(element: ir.Type) -> int:
    if isinstance(element, ir.ComplexType):
        return 2 * _element_bytes(element.element_type)
    if isinstance(element, ir.IndexType):
        return 8
    return max(1, math.ceil(element.width / 8))  # i1 lives in a byte


def _shape(type_: ir.Type, dynamic: int | None) -> list[int] | None:
    """The dims of a ranked tensor, a dynamic one as `dynamic` (None: no
    shape then); [] for a scalar."""
    if not isinstance(type_, ir.RankedTensorType):
        return []
    if not type_.has_static_shape and dynamic is None:
        return None
    return [dynamic if type_.is_dynamic_dim(d) else size for d, size in enumerate(type_.shape)]


def tensor_bytes(type_: ir.Type, dynamic: int | None = None) -> int | None:
    """A value's bytes (0 for one that is not a tensor, such as a work
    handle or a size)."""
    if not isinstance(type_, ir.RankedTensorType):
        return 0
    shape = _shape(type_, dynamic)
    return None if shape is None else math.prod(shape) * _element_bytes(type_.element_type)


def _sum(values) -> int | None:
    values = list(values)
    return None if None in values else sum(values)


def kernel_inputs(kernel_op) -> list[ir.Value]:
    """A braze.kernel's tensor inputs (its operands less the trailing
    dynamic extents)."""
    dynamic = sum(ir.ShapedType.is_dynamic_size(s) for s in kernel_op.attributes["static_domain"])
    operands = list(kernel_op.operation.operands)
    return operands[:len(operands) - dynamic]


def kernel_bytes(kernel_op, dynamic: int | None = None) -> int | None:
    """Each input read once and each result written once (a lower bound on
    the traffic: broadcast operands are counted at their own size)."""
    values = kernel_inputs(kernel_op) + list(kernel_op.operation.results)
    return _sum(tensor_bytes(v.type, dynamic) for v in values)


def kernel_flops(kernel_op, dynamic: int | None = None) -> int | None:
    """Arithmetic ops of the scalar body (index arithmetic excluded) times
    the points of the kernel's domain."""
    domain = [dynamic if ir.ShapedType.is_dynamic_size(s) else s for s in kernel_op.attributes["static_domain"]]
    if None in domain:
        return None
    per_point = 0
    for op in kernel_op.regions[0].blocks[0].operations:
        name = op.operation.name
        if name in _NOT_ARITHMETIC or not name.startswith(("arith.", "math.", "braze.reduce")):
            continue
        if any(isinstance(r.type, ir.IndexType) for r in op.operation.results):
            continue
        per_point += 1
    return per_point * math.prod(domain)


def _product_flops(op, dynamic: int | None) -> int | None:
    """2 flops per multiply-add of a library call or a library-backed
    kernel: matrix products, convolutions, attention (their own arithmetic,
    none for other ops)."""
    name = op.operation.name
    operands = [_shape(v.type, dynamic) for v in op.operation.operands]
    result = _shape(op.operation.results[0].type, dynamic) if op.operation.results else []
    if None in operands or result is None:
        return None
    points = math.prod(result)
    if name in ("braze.matmul", "braze.bmm"):
        return 2 * points * operands[0][-1]
    if name == "braze.addmm":  # bias, lhs, rhs
        return 2 * points * operands[1][-1]
    if name == "braze.fused_gemm":
        lhs = operands[0]
        return 2 * points * (lhs[-2] if "transpose_lhs" in op.attributes else lhs[-1])
    if name == "braze.convolution":  # per output (input, when transposed) point: a weight slice
        weight = math.prod(operands[1][1:])
        return 2 * weight * (math.prod(operands[0]) if "transposed" in op.attributes else points)
    if name in ("braze.attention", "braze.flash_attention"):  # scores (L x S x E), weighted sum (L x S x Ev)
        query, key = operands[0], operands[1]
        return 2 * (points // max(result[-1], 1)) * key[-2] * (query[-1] + result[-1])
    return 0


def op_estimate(op, dynamic: int | None = None) -> tuple[int | None, int | None]:
    """(bytes, flops) of one top-level op of the kernel form: a kernel, a
    combo (its sub-kernels'), a library call or another op run through
    torch (its operands read and results written once)."""
    name = op.operation.name
    if name in FREE:
        return 0, 0
    if name == "braze.kernel":
        return kernel_bytes(op, dynamic), kernel_flops(op, dynamic)
    if name == "braze.combo":
        kernels = [region.blocks[0].operations[0] for region in op.regions]
        return (_sum(kernel_bytes(k, dynamic) for k in kernels), _sum(kernel_flops(k, dynamic) for k in kernels))
    values = list(op.operation.operands) + list(op.operation.results)
    return _sum(tensor_bytes(v.type, dynamic) for v in values), _product_flops(op, dynamic)


def wire_bytes(start_op, dynamic: int | None = None) -> int | None:
    """The bytes each rank sends for a collective, as ring algorithms do
    over a group of n: an all-reduce 2(n-1)/n of its buffer, an all-gather
    (n-1) inputs, a reduce-scatter and an all-to-all (n-1)/n of the input,
    a broadcast the buffer once."""
    name = start_op.operation.name
    size = tensor_bytes(start_op.operation.operands[0].type, dynamic)
    if size is None:
        return None
    members = len(ir.DenseI64ArrayAttr(start_op.attributes["ranks"]))
    if name == "braze.all_reduce_start":
        return 2 * (members - 1) * size // members
    if name == "braze.all_gather_start":
        return (members - 1) * size
    if name == "braze.broadcast_start":
        return size if members > 1 else 0
    return (members - 1) * size // members  # reduce-scatter, all-to-all
