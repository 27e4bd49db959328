"""Helpers that lowerings use to emit braze ops for one FX node.

A lowering receives a `Builder` and the node's arguments with every FX value
already replaced by its MLIR value: tensors by `tensor` values, SymInts by
`index` values; Python scalars and lists stay as they are.
"""

from __future__ import annotations

from typing import Sequence

import torch
from mlir import ir
from mlir.dialects import arith, tensor as tensor_d

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.types import element_type, tensor_type
from braze.hostops.dtypes import torch_dtype

Scalar = bool | int | float
Operand = ir.Value | Scalar


def dtype_of(value: ir.Value) -> torch.dtype:
    return torch_dtype(ir.RankedTensorType(value.type).element_type)


def shape_of(value: ir.Value) -> list[int | None]:
    """Static dims as ints, dynamic ones as None."""
    t = ir.RankedTensorType(value.type)
    return [None if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank)]


def is_tensor(x) -> bool:
    return isinstance(x, ir.Value) and isinstance(x.type, ir.RankedTensorType)


def is_index(x) -> bool:
    return isinstance(x, ir.Value) and isinstance(x.type, ir.IndexType)


class Builder:
    """Emits ops at the current insertion point for the node being lowered."""

    def __init__(self, node):
        self.node = node

    # -- the node's results -------------------------------------------------

    @property
    def meta(self):
        return self.node.meta["val"]

    def out_type(self, index: int | None = None) -> ir.RankedTensorType:
        meta = self.meta if index is None else self.meta[index]
        return tensor_type(meta)

    def out_dtype(self, index: int | None = None) -> torch.dtype:
        meta = self.meta if index is None else self.meta[index]
        return meta.dtype

    # -- values ---------------------------------------------------------------

    def constant(self, value: Scalar, dtype: torch.dtype, shape: Sequence[int] = ()) -> ir.Value:
        """A splat constant of `dtype`; `value` is converted as torch would."""
        element = element_type(dtype)
        ttype = ir.RankedTensorType.get(list(shape), element)
        if dtype.is_floating_point:
            attr = ir.FloatAttr.get(element, float(value))
        elif dtype == torch.bool:
            attr = ir.IntegerAttr.get(element, int(bool(value)))
        else:
            attr = ir.IntegerAttr.get(element, int(value))
        return bz.ConstantOp(ir.DenseElementsAttr.get_splat(ttype, attr)).result

    def cast(self, value: ir.Value, dtype: torch.dtype) -> ir.Value:
        if dtype_of(value) == dtype:
            return value
        t = ir.RankedTensorType(value.type)
        result = ir.RankedTensorType.get(t.shape, element_type(dtype))
        return bz.CastOp(result, value).result

    def tensor(self, x: Operand, dtype: torch.dtype) -> ir.Value:
        """A tensor operand of `dtype`: numbers become rank-0 constants, and
        a SymInt (an `index` value, e.g. a KV cache's past length added to
        positions) a rank-0 tensor holding it."""
        if is_tensor(x):
            return self.cast(x, dtype)
        if isinstance(x, (bool, int, float)):
            return self.constant(x, dtype)
        if is_index(x):
            # The one element of a one-step iota starting at the value, as rank 0.
            single = bz.IotaOp(ir.RankedTensorType.get([1], element_type(dtype)), dynamic_start=x).result
            return bz.ReshapeOp(ir.RankedTensorType.get([], element_type(dtype)), single, []).result
        raise BrazeError(f"expected a tensor, a number or a SymInt, got {type(x).__name__}")

    # -- index arithmetic ------------------------------------------------------

    def index(self, x) -> ir.Value:
        if is_index(x):
            return x
        if isinstance(x, int):
            return arith.ConstantOp(ir.IndexType.get(), x).result
        raise BrazeError(f"expected a size (int or SymInt), got {type(x).__name__}")

    def dim(self, value: ir.Value, d: int) -> ir.Value:
        return tensor_d.DimOp(value, self.index(d)).result

    def size(self, value: ir.Value, d: int):
        """Dim `d` of `value` as an int when static, else as an index value."""
        static = shape_of(value)[d]
        return static if static is not None else self.dim(value, d)

    def symbol_range(self, position: int, name: str) -> tuple[int | float, int | float]:
        """The inclusive range torch knows for the node's SymInt argument at
        `position` (or keyword `name`), from the shape symbols' ranges and
        the expression."""
        argument = self.node.args[position] if position < len(self.node.args) else self.node.kwargs[name]
        value = argument.meta["val"]
        if not isinstance(value, torch.SymInt):
            value = int(value)
            return value, value
        node = value.node
        ranges = node.shape_env.bound_sympy(node.expr)
        return ranges.lower, ranges.upper

    # -- shapes ---------------------------------------------------------------

    def slice(self, value: ir.Value, dim: int, start, end, step, result: ir.RankedTensorType) -> ir.Value:
        """`braze.slice`; each bound an int or an `index` value (an operand)."""
        bounds = [start, end, step]
        dynamic = [bound for bound in bounds if is_index(bound)]
        static = [ir.ShapedType.get_dynamic_size() if is_index(bound) else bound for bound in bounds]
        return bz.SliceOp(value, dim, dynamic, static, results=[result]).result

    def sized_op(self, op_class, value: ir.Value, result: ir.RankedTensorType, sizes) -> ir.Value:
        """reshape/expand: `sizes[i]` gives result dim i (int, index value or None)."""
        dynamic = [i for i in range(result.rank) if result.is_dynamic_dim(i)]
        needed = [i for i in dynamic if op_class is bz.ReshapeOp or self._expand_needs(value, result, i)]
        if op_class is bz.ReshapeOp and len(dynamic) <= 1:
            needed = []
        operands = []
        for i in needed:
            if sizes[i] is None:
                raise BrazeError(f"cannot tell the size of dynamic dim {i} of the result")
            operands.append(self.index(sizes[i]))
        return op_class(result, value, operands).result

    @staticmethod
    def _expand_needs(value: ir.Value, result: ir.RankedTensorType, i: int) -> bool:
        shape = shape_of(value)
        j = i - (result.rank - len(shape))
        return j < 0 or shape[j] is not None

    def reshape(self, value: ir.Value, result: ir.RankedTensorType, sizes) -> ir.Value:
        if value.type == result and sum(result.is_dynamic_dim(i) for i in range(result.rank)) <= 1:
            return value
        return self.sized_op(bz.ReshapeOp, value, result, sizes)

    def expand(self, value: ir.Value, result: ir.RankedTensorType, sizes) -> ir.Value:
        return self.sized_op(bz.ExpandOp, value, result, sizes)
