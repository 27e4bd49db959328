"""torch dtypes and FX shapes as MLIR types (the importer's type converter)."""

from __future__ import annotations

import torch
from mlir import ir

from braze.errors import BrazeError

_ELEMENT_TYPES = {
    torch.float16: ir.F16Type.get,
    torch.bfloat16: ir.BF16Type.get,
    torch.float32: ir.F32Type.get,
    torch.float64: ir.F64Type.get,
    torch.bool: lambda: ir.IntegerType.get_signless(1),
    torch.int8: lambda: ir.IntegerType.get_signless(8),
    torch.int16: lambda: ir.IntegerType.get_signless(16),
    torch.int32: lambda: ir.IntegerType.get_signless(32),
    torch.int64: lambda: ir.IntegerType.get_signless(64),
    torch.float8_e4m3fn: ir.Float8E4M3FNType.get,
    torch.float8_e5m2: ir.Float8E5M2Type.get,
}


def element_type(dtype: torch.dtype) -> ir.Type:
    try:
        return _ELEMENT_TYPES[dtype]()
    except KeyError:
        supported = ", ".join(str(d).removeprefix("torch.") for d in _ELEMENT_TYPES)
        raise BrazeError(f"dtype {dtype} is not supported (supported: {supported})") from None


def static_size(size) -> int | None:
    """An int for a static dim, None for a symbolic one."""
    if isinstance(size, int):
        return size
    if isinstance(size, torch.SymInt):
        expr = size.node.expr
        return int(expr) if expr.is_number else None
    raise BrazeError(f"unexpected dim {size!r} of type {type(size).__name__}")


def tensor_type(meta: torch.Tensor) -> ir.RankedTensorType:
    """The MLIR type of an FX value's meta tensor; symbolic dims become `?`."""
    shape = [
        ir.ShapedType.get_dynamic_size() if (s := static_size(d)) is None else s
        for d in meta.shape
    ]
    return ir.RankedTensorType.get(shape, element_type(meta.dtype))
