"""Advanced indexing (`x[i, :, j]`) and `gather` as one `braze.take` each.

Both read one element of `x` per result point at a position computed from
index tensors. The lowering flattens the dims read at computed positions
into one, computes the position in that flat dim with pointwise ops on the
index tensors (which fuse like any pointwise op) and picks with
`braze.take`, so the only data-dependent read is the take's, which checks
its index at run time. An index that is out of range in its own dim
becomes the flat position -1, so it is an error too (rather than a read of
some other row of the flattened dims); the take's message then names that
position.
"""

from __future__ import annotations

import math

import torch
from mlir import ir
from mlir.dialects import arith

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import dtype_of, is_index, shape_of
from braze.frontend.lowerings import lowers
from braze.frontend.types import element_type

aten = torch.ops.aten

_I64 = torch.int64


def _size_tensor(b, size) -> ir.Value:
    """A rank-0 int64 tensor holding `size` (an int or an `index` value)."""
    if not is_index(size):
        return b.constant(size, _I64)
    # A one-element iota that starts at the size holds it as data.
    one = ir.RankedTensorType.get([1], element_type(_I64))
    holding = bz.IotaOp(one, dynamic_start=size, step=1.0).result
    return b.reshape(holding, ir.RankedTensorType.get([], element_type(_I64)), [])


def _product(sizes):
    """The product of ints and `index` values: an int when all are ints."""
    static = math.prod(s for s in sizes if not is_index(s))
    dynamic = [s for s in sizes if is_index(s)]
    if not dynamic:
        return static
    total = arith.ConstantOp(ir.IndexType.get(), static).result
    for size in dynamic:
        total = arith.MulIOp(total, size).result
    return total


def _checked_position(b, indices, sizes, wrap_negative):
    """The row-major position of the point `indices` (int64 tensors that
    broadcast together) in dims of `sizes`, or -1 where an index is out of
    its dim's range. Negative indices count from the end when
    `wrap_negative`, as PyTorch's indexing does (gather does not)."""
    position = valid = None
    for index, size in zip(indices, sizes):
        limit = _size_tensor(b, size)
        zero = b.constant(0, _I64)
        if wrap_negative:
            negative = bz.LtOp(index, zero).result
            index = bz.WhereOp(negative, bz.AddOp(index, limit).result, index).result
        in_range = bz.AndOp(bz.GeOp(index, zero).result, bz.LtOp(index, limit).result).result
        valid = in_range if valid is None else bz.AndOp(valid, in_range).result
        position = index if position is None else bz.AddOp(bz.MulOp(position, limit).result, index).result
    return bz.WhereOp(valid, position, b.constant(-1, _I64)).result


def _flat_take(b, x, dims, position, result):
    """`x` with `dims` (in order) flattened into one leading dim, the other
    dims following in order, picked along it at `position`."""
    rank = len(shape_of(x))
    rest = [d for d in range(rank) if d not in dims]
    order = list(dims) + rest
    if order != list(range(rank)):
        x = bz.PermuteOp(x, order).result
    element = ir.RankedTensorType(x.type).element_type
    sizes = [b.size(x, d) for d in range(rank)]
    flat_sizes = [_product(sizes[: len(dims)])] + sizes[len(dims):]
    flat_type = ir.RankedTensorType.get(
        [ir.ShapedType.get_dynamic_size() if is_index(s) else s for s in flat_sizes], element)
    flat = b.reshape(x, flat_type, flat_sizes)
    return bz.TakeOp(flat, position, 0, results=[result] if result else None).result


@lowers(aten.index.Tensor)
def index(b, x, indices):
    rank = len(shape_of(x))
    slots = list(indices) + [None] * (rank - len(indices))
    dims = [d for d, index in enumerate(slots) if index is not None]
    if not dims:
        raise BrazeError("indexing with no index tensor")
    for index in slots:
        if index is not None and dtype_of(index) not in (torch.int32, torch.int64):
            raise BrazeError(f"indexing with a {dtype_of(index)} tensor (a mask gives a result "
                             "whose size depends on the data)")
    position = _checked_position(b, [b.cast(slots[d], _I64) for d in dims],
                                 [b.size(x, d) for d in dims], wrap_negative=True)
    out = b.out_type()
    # Indexed dims next to each other put the broadcast index dims where they
    # were; apart, first (PyTorch's rule).
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    if not adjacent or dims[0] == 0:
        return _flat_take(b, x, dims, position, out)
    taken = _flat_take(b, x, dims, position, None)
    picked = len(shape_of(position))
    order = list(range(picked, picked + dims[0])) + list(range(picked)) + \
        list(range(picked + dims[0], len(shape_of(taken))))
    return bz.PermuteOp(taken, order, results=[out]).result


@lowers(aten.gather.default)
def gather(b, x, dim, index, sparse_grad=False):
    rank = len(shape_of(x))
    if rank == 0 or len(shape_of(index)) != rank:
        raise BrazeError("gather of a 0-d tensor or with an index of another rank")
    dim %= rank
    index = b.cast(index, _I64)
    coordinates = []
    for d in range(rank):
        if d == dim:
            coordinates.append(index)
            continue
        # The point's own coordinate along d, broadcast over the other dims.
        size = b.size(index, d)
        along = ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size() if is_index(size) else size],
                                        element_type(_I64))
        iota = bz.IotaOp(along, size=size, start=0.0, step=1.0).result if is_index(size) else \
            bz.IotaOp(along, start=0.0, step=1.0).result
        shape = [1] * rank
        shape[d] = along.shape[0]
        coordinates.append(b.reshape(iota, ir.RankedTensorType.get(shape, along.element_type),
                                     [1] * d + [size] + [1] * (rank - d - 1)))
    position = _checked_position(b, coordinates, [b.size(x, d) for d in range(rank)],
                                 wrap_negative=False)
    return _flat_take(b, x, list(range(rank)), position, b.out_type())
