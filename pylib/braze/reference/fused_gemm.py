"""`braze.fused_gemm`: the product in its accumulator type, the scales,
then the epilogue region evaluated on whole tensors (each scalar op of the
region applied elementwise to the product and the extras, broadcast as
their indexing says), the outputs and the row statistics."""

from __future__ import annotations

import torch
from mlir import ir

from braze.hostops import op_error
from braze.hostops.dtypes import torch_dtype
from braze.reference.registry import handles

_UNARY = {
    "arith.negf": torch.neg, "math.exp": torch.exp, "math.expm1": torch.expm1, "math.exp2": torch.exp2,
    "math.log": torch.log, "math.log1p": torch.log1p, "math.log2": torch.log2, "math.tanh": torch.tanh,
    "math.erf": torch.erf, "math.sin": torch.sin, "math.cos": torch.cos, "math.tan": torch.tan,
    "math.asin": torch.asin, "math.acos": torch.acos, "math.atan": torch.atan, "math.sinh": torch.sinh,
    "math.cosh": torch.cosh, "math.sqrt": torch.sqrt, "math.rsqrt": torch.rsqrt, "math.absf": torch.abs,
    "math.absi": torch.abs, "math.floor": torch.floor, "math.ceil": torch.ceil, "math.trunc": torch.trunc,
    "math.roundeven": torch.round,
}
_BINARY = {
    "arith.addf": torch.add, "arith.subf": torch.sub, "arith.mulf": torch.mul, "arith.divf": torch.div,
    "arith.addi": torch.add, "arith.subi": torch.sub, "arith.muli": torch.mul,
    "arith.maximumf": torch.maximum, "arith.minimumf": torch.minimum,
    "arith.maxsi": torch.maximum, "arith.minsi": torch.minimum,
    "arith.andi": torch.bitwise_and, "arith.ori": torch.bitwise_or, "arith.xori": torch.bitwise_xor,
    "math.powf": torch.pow, "math.atan2": torch.atan2, "arith.remf": torch.fmod, "arith.remsi": torch.fmod,
}
_CASTS = ("arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.extsi", "arith.extui",
          "arith.trunci", "arith.fptosi")
# arith.cmpf / arith.cmpi predicate numbers -> comparisons.
_CMPF = {1: torch.eq, 2: torch.gt, 3: torch.ge, 4: torch.lt, 5: torch.le, 13: torch.ne}
_CMPI = {0: torch.eq, 1: torch.ne, 2: torch.lt, 3: torch.le, 4: torch.gt, 5: torch.ge,
         6: torch.lt, 7: torch.le, 8: torch.gt, 9: torch.ge}


def _dtype(type_: ir.Type) -> torch.dtype:
    return torch_dtype(type_)


def _scalar(op, values: list):
    """The value of one scalar op of the epilogue, elementwise on tensors."""
    name = op.operation.name
    result_type = op.operation.results[0].type
    if name == "arith.constant":
        attribute = op.attributes["value"]
        value = attribute.value if not isinstance(attribute, ir.BoolAttr) else bool(attribute.value)
        return torch.tensor(value, dtype=_dtype(result_type))
    if name in _UNARY:
        return _UNARY[name](values[0])
    if name in _BINARY:
        if name == "arith.remsi" and bool((values[1] == 0).any()):
            raise op_error(op, "integer remainder by zero")
        return _BINARY[name](*values)
    if name == "arith.divsi":
        if bool((values[1] == 0).any()):
            raise op_error(op, "integer division by zero")
        return torch.div(values[0], values[1], rounding_mode="trunc")
    if name in _CASTS:
        return values[0].to(_dtype(result_type))
    if name == "arith.cmpf":
        return _CMPF[op.attributes["predicate"].value](*values)
    if name == "arith.cmpi":
        return _CMPI[op.attributes["predicate"].value](*values)
    if name == "arith.select":
        return torch.where(*values)
    raise op_error(op, f"'{name}' has no reference form in a fused GEMM's epilogue")


@handles("braze.fused_gemm")
def fused_gemm(op, operands, interpreter):
    attributes = op.attributes
    segments = list(ir.DenseI32ArrayAttr(attributes["operandSegmentSizes"]))
    lhs, rhs = operands[0], operands[1]
    lhs_scale = operands[2] if segments[2] else None
    rhs_scale = operands[2 + segments[2]] if segments[3] else None
    extras = operands[2 + segments[2] + segments[3]:]
    accumulator = _dtype(ir.TypeAttr(attributes["accumulator"]).value)
    a = lhs.to(accumulator)
    b = rhs.to(accumulator)
    if "transpose_lhs" in attributes:
        a = a.transpose(-1, -2)
    if "transpose_rhs" in attributes:
        b = b.transpose(-1, -2)
    product = torch.matmul(a, b)
    if lhs_scale is not None:
        product = product * (lhs_scale.unsqueeze(-1) if lhs_scale.dim() else lhs_scale).to(accumulator)
    if rhs_scale is not None:
        product = product * rhs_scale.to(accumulator)
    arguments = [product]
    for extra, indexing in zip(extras, attributes["indexing"]):
        arguments.append(extra.unsqueeze(-1) if ir.StringAttr(indexing).value == "m" else extra)
    block = op.regions[0].blocks[0]
    values = dict(zip(block.arguments, arguments))
    for inner in block.operations:
        operands_ = [values[v] for v in inner.operation.operands]
        if inner.operation.name == "braze.gemm_yield":
            yielded = operands_
            break
        values[inner.operation.results[0]] = _scalar(inner, operands_)
    kinds = [ir.StringAttr(kind).value for kind in attributes["reductions"]] if "reductions" in attributes else []
    results = []
    output_count = len(op.operation.results) - len(kinds)
    for number, (value, result) in enumerate(zip(yielded, op.operation.results)):
        dtype = _dtype(result.type.element_type)
        value = value.broadcast_to(product.shape)
        if number >= output_count:
            kind = kinds[number - output_count]
            value = value.sum(-1) if kind == "add" else value.amax(-1)
        results.append(value.to(dtype).contiguous())
    return results
