"""Constants and parameters: `braze.constant`, `braze.parameter`,
`arith.constant`, and reading a DenseElementsAttr into a tensor.

Programs evaluate these ops once, when they are built (an AOT package keeps
their values), so only the compiler reads their attributes: MLIR is
imported where they are read, and the other host ops load without it."""

from __future__ import annotations

import re

import numpy as np
import torch

from braze.hostops.dtypes import torch_dtype, type_mismatch
from braze.hostops.table import handles, op_error

# `dense<...>` as MLIR prints it: a nested list, or hex bytes in quotes.
_DENSE_BODY = re.compile(r'^dense<(?P<body>.*)>\s*:\s*tensor<.*>$', re.S)


def _scalar_value(attribute):
    """A FloatAttr, IntegerAttr or BoolAttr as a Python number or bool."""
    from mlir import ir

    if isinstance(attribute, ir.BoolAttr):
        return attribute.value
    if isinstance(attribute, ir.FloatAttr):
        return attribute.value
    if isinstance(attribute, ir.IntegerAttr):
        return attribute.value
    raise ValueError(f"unsupported scalar attribute {attribute}")


def _bf16_from_printed(attribute, shape: list[int]) -> torch.Tensor:
    """bf16 elements, which the bindings cannot hand out, read from the text.

    MLIR prints every element so that it parses back exactly: decimal for
    finite values, `0xXXXX` bit patterns for others, or the whole payload as
    one hex string for large attributes.
    """
    match = _DENSE_BODY.match(str(attribute))
    if not match:
        raise ValueError(f"cannot read {attribute}")
    body = match["body"].strip()
    if body.startswith('"0x'):
        raw = bytes.fromhex(body.strip('"')[2:])
        bits = torch.frombuffer(bytearray(raw), dtype=torch.int16)
        return bits.view(torch.bfloat16).reshape(shape).clone()
    tokens = [t for t in re.split(r"[\[\],\s]+", body) if t]
    bit_patterns = []
    for token in tokens:
        if token.lower().startswith("0x"):
            bit_patterns.append(int(token, 16))
        else:
            # A decimal that MLIR printed from a bf16 is exactly representable.
            value = torch.tensor(float(token), dtype=torch.float32).to(torch.bfloat16)
            bit_patterns.append(int(value.view(torch.int16).item()) & 0xFFFF)
    signed = [(b ^ 0x8000) - 0x8000 for b in bit_patterns]  # uint16 bits as int16
    return torch.tensor(signed, dtype=torch.int16).view(torch.bfloat16).reshape(shape)


def tensor_from_elements(attribute) -> torch.Tensor:
    """A DenseElementsAttr as a fresh tensor of its type's dtype and shape."""
    from mlir import ir

    if not isinstance(attribute, ir.DenseElementsAttr):
        raise ValueError(f"only dense elements attributes are supported, got {type(attribute).__name__}")
    tensor_type = ir.RankedTensorType(attribute.type)
    dtype = torch_dtype(tensor_type.element_type)
    shape = list(tensor_type.shape)
    if attribute.is_splat:
        return torch.full(shape, _scalar_value(attribute.get_splat_value()), dtype=dtype)
    if dtype == torch.bfloat16:
        return _bf16_from_printed(attribute, shape)
    # The buffer protocol gives the elements in their own numpy dtype.
    array = np.array(attribute)
    return torch.from_numpy(array.copy()).reshape(shape).to(dtype)


@handles("braze.constant")
def constant(op, operands, context):
    try:
        return [tensor_from_elements(op.attributes["value"]).to(context.device)]
    except (ValueError, RuntimeError) as error:
        raise op_error(op, str(error)) from None


@handles("arith.constant")
def arith_constant(op, operands, context):
    from mlir import ir

    attribute = op.attributes["value"]
    result_type = op.operation.results[0].type
    try:
        if isinstance(result_type, ir.RankedTensorType):
            return [tensor_from_elements(attribute).to(context.device)]
        if isinstance(result_type, ir.IntegerType) and result_type.width == 1:
            return [bool(_scalar_value(attribute))]
        return [_scalar_value(attribute)]
    except (ValueError, RuntimeError) as error:
        raise op_error(op, str(error)) from None


@handles("braze.parameter")
def parameter(op, operands, context):
    name = op.attributes["name"].value
    if name not in context.parameters:
        raise op_error(op, f"parameter {name!r} is not among the parameters given")
    value = context.parameters[name]
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not isinstance(value, torch.Tensor):
        raise op_error(op, f"parameter {name!r} is a {type(value).__name__}, not a tensor")
    result_type = op.operation.results[0].type
    problem = type_mismatch(value, result_type)
    if problem is not None:
        raise op_error(op, f"parameter {name!r} {problem}")
    return [value.to(context.device)]

