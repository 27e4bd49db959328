"""Elementwise ops: unary math, broadcasting binary ops, comparisons, logic,
select and cast.

Operands already carry the op's element type (the interpreter checks every
value against its declared type), so each torch call computes in that type.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from braze.hostops import op_error
from braze.hostops.dtypes import result_dtype
from braze.reference.registry import handles

_UNARY = {
    "braze.neg": torch.neg,
    "braze.abs": torch.abs,
    "braze.exp": torch.exp,
    "braze.log": torch.log,
    "braze.tanh": torch.tanh,
    "braze.sigmoid": torch.sigmoid,
    "braze.relu": torch.relu,
    "braze.silu": F.silu,
    "braze.sqrt": torch.sqrt,
    "braze.rsqrt": torch.rsqrt,
    "braze.erf": torch.erf,
    "braze.expm1": torch.expm1,
    "braze.exp2": torch.exp2,
    "braze.log1p": torch.log1p,
    "braze.log2": torch.log2,
    "braze.sin": torch.sin,
    "braze.cos": torch.cos,
    "braze.tan": torch.tan,
    "braze.asin": torch.asin,
    "braze.acos": torch.acos,
    "braze.atan": torch.atan,
    "braze.sinh": torch.sinh,
    "braze.cosh": torch.cosh,
    "braze.floor": torch.floor,
    "braze.ceil": torch.ceil,
    "braze.trunc": torch.trunc,
    "braze.round": torch.round,  # half to even
    "braze.sign": torch.sign,  # 0 for NaN
    "braze.not": torch.logical_not,
}


@handles(*_UNARY)
def unary(op, operands, interpreter):
    (input_,) = operands
    return [_UNARY[op.operation.name](input_)]


@handles("braze.gelu")
def gelu(op, operands, interpreter):
    (input_,) = operands
    approximate = op.approximate.value
    if approximate not in ("none", "tanh"):
        raise op_error(op, f"unknown approximate {approximate!r}")
    return [F.gelu(input_, approximate=approximate)]


def _divide(lhs, rhs):
    # Integer division truncates toward zero (C semantics), floats divide truly.
    if lhs.dtype.is_floating_point:
        return torch.div(lhs, rhs)
    return torch.div(lhs, rhs, rounding_mode="trunc")


# All of these broadcast NumPy-style, as torch does.
_BINARY = {
    "braze.add": torch.add,
    "braze.sub": torch.sub,
    "braze.mul": torch.mul,
    "braze.div": _divide,
    "braze.pow": torch.pow,
    "braze.atan2": torch.atan2,
    "braze.remainder": torch.remainder,  # the divisor's sign
    "braze.fmod": torch.fmod,  # the dividend's sign
    "braze.maximum": torch.maximum,  # propagates NaN
    "braze.minimum": torch.minimum,
    "braze.and": torch.logical_and,
    "braze.or": torch.logical_or,
    "braze.xor": torch.logical_xor,
    # NaN compares unequal and unordered, as IEEE and PyTorch say.
    "braze.eq": torch.eq,
    "braze.ne": torch.ne,
    "braze.lt": torch.lt,
    "braze.le": torch.le,
    "braze.gt": torch.gt,
    "braze.ge": torch.ge,
}


_DIVISIONS = {"braze.div", "braze.remainder", "braze.fmod"}


@handles(*_BINARY)
def binary(op, operands, interpreter):
    lhs, rhs = operands
    if not lhs.dtype.is_floating_point and op.operation.name in _DIVISIONS and bool((rhs == 0).any()):
        raise op_error(op, "integer division by zero")
    return [_BINARY[op.operation.name](lhs, rhs)]


@handles("braze.where")
def where(op, operands, interpreter):
    condition, true_value, false_value = operands
    return [torch.where(condition, true_value, false_value)]


@handles("braze.cast")
def cast(op, operands, interpreter):
    (input_,) = operands
    target = result_dtype(op)
    if target == torch.bool:
        # `.to(bool)` would do the same, but the rule is "non-zero", so say it.
        return [input_ != 0]
    # `.to` truncates floats toward zero when converting to integers.
    return [input_.to(target)]
