"""MLIR types as torch dtypes, and checking values against declared types."""

from __future__ import annotations

import torch

from braze.errors import BrazeError
from braze.hostops.record import DYNAMIC_SIZE

TORCH_DTYPES: dict[str, torch.dtype] = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i1": torch.bool,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    # 8-bit floats: operands of braze.scaled_mm (and its fused GEMM) only.
    "f8E4M3FN": torch.float8_e4m3fn,
    "f8E5M2": torch.float8_e5m2,
}

_MLIR_NAMES = {dtype: name for name, dtype in TORCH_DTYPES.items()}


def torch_dtype(element_type) -> torch.dtype:
    """The torch dtype of an MLIR element type (or its name, as records
    hold it); BrazeError for others."""
    name = str(element_type)
    if name not in TORCH_DTYPES:
        raise BrazeError(f"braze has no torch dtype for element type {name}")
    return TORCH_DTYPES[name]


def mlir_name(dtype: torch.dtype) -> str:
    """`torch.float32` as `f32`, for messages; other dtypes as torch prints them."""
    return _MLIR_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def result_dtype(op) -> torch.dtype:
    """The torch dtype of an op's first result (a tensor)."""
    return torch_dtype(op.operation.results[0].type.element_type)


def is_dynamic(size: int | None) -> bool:
    """Whether a dim is dynamic: MLIR's marker, or None in a record."""
    return size is None or size == DYNAMIC_SIZE


def type_mismatch(value, type_) -> str | None:
    """Why `value` does not fit `type_`, or None when it does.

    Tensors must have the element dtype, the rank and every static dim of a
    ranked tensor type; `index` and integer scalars are Python ints (bool is
    accepted for i1), float scalars Python floats.
    """
    from mlir import ir  # the MLIR types of the compiler's and interpreter's checks

    if isinstance(type_, ir.RankedTensorType):
        if not isinstance(value, torch.Tensor):
            return f"is a {type(value).__name__}, not a tensor of type {type_}"
        expected_dtype = torch_dtype(type_.element_type)
        if value.dtype != expected_dtype:
            return f"has element type {mlir_name(value.dtype)} but {type_} has {type_.element_type}"
        if value.dim() != type_.rank:
            return f"has rank {value.dim()} (shape {list(value.shape)}) but {type_} has rank {type_.rank}"
        for dim, (actual, expected) in enumerate(zip(value.shape, type_.shape)):
            if not is_dynamic(expected) and actual != expected:
                return f"has shape {list(value.shape)} but {type_} has {expected} at dim {dim}"
        return None
    if isinstance(type_, (ir.IndexType, ir.IntegerType)):
        if isinstance(value, bool) and not (isinstance(type_, ir.IntegerType) and type_.width == 1):
            return f"is a bool, not an {type_}"
        return None if isinstance(value, int) else f"is a {type(value).__name__}, not an {type_}"
    if isinstance(type_, ir.FloatType):
        return None if isinstance(value, float) else f"is a {type(value).__name__}, not a {type_}"
    return f"has type {type_}, which braze does not support as a value"
