"""View and layout ops: view/reshape, permute, expand, slice, cat, split, squeeze, constant padding."""

from __future__ import annotations

import torch
from mlir import ir
from mlir.dialects import arith

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import dtype_of, is_index, shape_of
from braze.frontend.types import element_type, static_size
from braze.frontend.lowerings import lowers

aten = torch.ops.aten
END = 9223372036854775807  # aten's "to the end" sentinel


def _element_count(b, x):
    count = b.index(1)
    for d in range(len(shape_of(x))):
        count = arith.MulIOp(count, b.index(b.size(x, d))).result
    return count


@lowers(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(b, x, shape):
    sizes = list(shape)
    if -1 in sizes and sum(1 for s in sizes if not isinstance(s, int) or s < 0) > 1:
        # Several unknown dims and an inferred one: compute it.
        known = b.index(1)
        for s in sizes:
            if s != -1:
                known = arith.MulIOp(known, b.index(s)).result
        sizes[sizes.index(-1)] = arith.DivSIOp(_element_count(b, x), known).result
    return b.reshape(x, b.out_type(), [None if s == -1 else s for s in sizes])


def _same_dims(b, x, out_rank: int, source_of) -> list:
    """Sizes of the result dims, each taken from an input dim (or 1)."""
    return [1 if source_of(i) is None else b.size(x, source_of(i)) for i in range(out_rank)]


@lowers(aten.squeeze.dims, aten.squeeze.dim, aten.squeeze.default)
def squeeze(b, x, dims=None):
    in_shape = b.node.args[0].meta["val"].shape
    rank = len(in_shape)
    if rank == 0:
        return x
    if dims is None:
        dims = range(rank)
    dims = {d % rank for d in ([dims] if isinstance(dims, int) else dims)
            if static_size(in_shape[d % rank]) == 1}
    kept = [d for d in range(rank) if d not in dims]
    out = b.out_type()
    return b.reshape(x, out, _same_dims(b, x, out.rank, lambda i: kept[i]))


@lowers(aten.unsqueeze.default)
def unsqueeze(b, x, dim):
    rank = len(shape_of(x)) + 1
    dim %= rank
    return b.reshape(x, b.out_type(), _same_dims(
        b, x, rank, lambda i: None if i == dim else (i if i < dim else i - 1)))


@lowers(aten.permute.default)
def permute(b, x, dims):
    rank = len(shape_of(x))
    return bz.PermuteOp(x, [d % rank for d in dims], results=[b.out_type()]).result


@lowers(aten.t.default)
def t(b, x):
    if len(shape_of(x)) < 2:
        return x
    return bz.PermuteOp(x, [1, 0], results=[b.out_type()]).result


@lowers(aten.transpose.int)
def transpose(b, x, dim0, dim1):
    rank = len(shape_of(x))
    perm = list(range(rank))
    perm[dim0 % rank], perm[dim1 % rank] = perm[dim1 % rank], perm[dim0 % rank]
    return bz.PermuteOp(x, perm, results=[b.out_type()]).result


@lowers(aten.expand.default)
def expand(b, x, sizes, implicit=False):
    out = b.out_type()
    offset = out.rank - len(shape_of(x))
    resolved = [b.size(x, i - offset) if s == -1 else s for i, s in enumerate(sizes)]
    if x.type == out and all(s == -1 or not is_index(s) for s in sizes):
        return x
    return b.expand(x, out, resolved)


def _bound(b, value, dim_size, position: int, what: str):
    """A slice bound as a non-negative int or `index` value. A negative one
    counts from the end; a symbolic one counts from the end when its range
    (torch's, from the graph) says it is negative, and is refused when its
    sign is unknown (it would decide which elements are read)."""
    if not is_index(value):
        if value >= 0:
            return value
        if not is_index(dim_size):
            return max(value + dim_size, 0)
        # A constant keeps Python's meaning on a dynamic dim too: clamped at 0.
        from_end = arith.AddIOp(dim_size, b.index(value)).result
        return arith.MaxSIOp(from_end, b.index(0)).result
    lower, upper = b.symbol_range(position, what)
    if lower >= 0:
        return value
    if upper < 0:
        return arith.AddIOp(b.index(dim_size), value).result
    raise BrazeError(f"slice with a symbolic {what} whose sign is unknown (range [{lower}, {upper}]): "
                     f"give the size a range that decides it (torch.export.Dim min/max)")


def _same_size(a, b) -> bool:
    """Whether two of torch's sizes are the same expression (no guard)."""
    expression = lambda size: size.node.expr if isinstance(size, torch.SymInt) else size  # noqa: E731
    return expression(a) == expression(b)


@lowers(aten.slice.Tensor)
def slice_(b, x, dim=0, start=None, end=None, step=1):
    shape = shape_of(x)
    dim %= len(shape)
    in_meta = b.node.args[0].meta["val"].shape[dim]
    out_meta = b.meta.shape[dim]
    from_first = start is None or (not is_index(start) and start == 0)
    to_last = end is None or is_index(end) or end >= END
    if from_first and not is_index(step) and step == 1 and to_last and _same_size(out_meta, in_meta):
        return x  # the whole dim (torch's sizes say so: a symbolic end equal to the size)
    size = b.size(x, dim)
    start = 0 if start is None else _bound(b, start, size, 2, "start")
    end = END if end is None or (not is_index(end) and end >= END) else _bound(b, end, size, 3, "end")
    if not is_index(start) and not is_index(end):
        end = max(end, start)
    if is_index(step):
        lower, _ = b.symbol_range(4, "step")
        if lower < 1:
            raise BrazeError("slice with a symbolic step needs a range that keeps it >= 1")
    return b.slice(x, dim, start, end, step, b.out_type())


@lowers(aten.select.int)
def select(b, x, dim, index):
    shape = shape_of(x)
    dim %= len(shape)
    index = _bound(b, index, b.size(x, dim), 2, "index")
    sliced_shape = list(shape)
    sliced_shape[dim] = 1
    sliced_type = ir.RankedTensorType.get(
        [ir.ShapedType.get_dynamic_size() if s is None else s for s in sliced_shape],
        ir.RankedTensorType(x.type).element_type)
    end = arith.AddIOp(index, b.index(1)).result if is_index(index) else index + 1
    row = b.slice(x, dim, index, end, 1, sliced_type)
    return squeeze_dim(b, row, dim)


def squeeze_dim(b, x, dim):
    out = b.out_type()
    kept = [d for d in range(len(shape_of(x))) if d != dim]
    return b.reshape(x, out, _same_dims(b, x, out.rank, lambda i: kept[i]))


@lowers(aten.cat.default)
def cat(b, tensors, dim=0):
    dtype = b.out_dtype()
    rank = b.out_type().rank
    inputs = [b.cast(t, dtype) for t in tensors if len(shape_of(t)) == rank]  # legacy empty 1-D
    if len(inputs) == 1:
        return inputs[0]
    return bz.ConcatOp(inputs, dim % rank, results=[b.out_type()]).result


def padded(b, x, dim: int, before: int, after: int, value: float):
    """`x` with `before`/`after` elements of `value` concatenated along `dim`."""
    if not before and not after:
        return x
    dtype, shape = dtype_of(x), shape_of(x)
    sizes = [b.size(x, d) for d in range(len(shape))]
    pieces = []
    for count in (before, after):
        if not count:
            pieces.append(None)
            continue
        block = ir.RankedTensorType.get(
            [count if d == dim else (ir.ShapedType.get_dynamic_size() if s is None else s)
             for d, s in enumerate(shape)], element_type(dtype))
        pieces.append(b.expand(b.constant(value, dtype), block, sizes[:dim] + [count] + sizes[dim + 1:]))
    inputs = [p for p in (pieces[0], x, pieces[1]) if p is not None]
    return bz.ConcatOp(inputs, dim).result


@lowers(aten.constant_pad_nd.default)
def constant_pad_nd(b, x, pad, value=0):
    """F.pad's constant mode: from the last dim back, a pair (before, after)
    per dim; a negative count crops (a slice), a positive one concatenates
    a block of `value`."""
    shape = shape_of(x)
    if len(pad) % 2 or len(pad) // 2 > len(shape):
        raise BrazeError(f"padding {list(pad)} for a tensor of rank {len(shape)}")
    if not all(isinstance(count, int) for count in pad):
        raise BrazeError("padding by a symbolic count")
    for i in range(len(pad) // 2):
        dim = len(shape) - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if before < 0 or after < 0:
            size = shape_of(x)[dim]
            if size is None:
                raise BrazeError("negative padding (cropping) of a dynamic dim")
            start, end = -min(before, 0), size + min(after, 0)
            sizes = list(shape_of(x))
            sizes[dim] = max(end - start, 0)
            cropped = ir.RankedTensorType.get(
                [ir.ShapedType.get_dynamic_size() if s is None else s for s in sizes], element_type(dtype_of(x)))
            x = b.slice(x, dim, start, max(end, start), 1, cropped)
        x = padded(b, x, dim, max(before, 0), max(after, 0), value)
    return x


@lowers(aten.split_with_sizes.default, aten.split.Tensor)
def split(b, x, sizes, dim=0):
    shape = shape_of(x)
    dim %= len(shape)
    pieces = []
    start = 0
    for i in range(len(b.meta)):
        length = static_size(b.meta[i].shape[dim])
        if length is None:
            raise BrazeError("split into pieces of symbolic size is not supported")
        end = start + length
        pieces.append(b.slice(x, dim, start, end, 1, b.out_type(i))
                      if (start, end) != (0, shape[dim]) else x)
        start = end
    return tuple(pieces)


def _row_major(shape, strides) -> bool:
    """Whether `strides` lay `shape` out contiguously in row-major order (a
    dim of size 1 is never stepped, so its stride does not matter)."""
    expected = 1
    for size, stride in reversed(list(zip(shape, strides))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


@lowers(aten.as_strided.default)
def as_strided(b, x, size, stride, storage_offset=None):
    """Only the form that reads a contiguous input's elements in order (a
    reshape; adaptive pooling to 1x1 decomposes to one): braze values have no
    storage to stride through."""
    source = b.node.args[0].meta["val"]
    static = all(isinstance(s, int) for s in [*size, *stride, *source.shape, *source.stride()])
    if (not static or storage_offset not in (None, 0) or source.storage_offset() != 0
            or source.numel() != torch.Size(size).numel()
            or not _row_major(source.shape, source.stride()) or not _row_major(size, stride)):
        raise BrazeError("as_strided is lowered only where it reads a contiguous input in order")
    return b.reshape(x, b.out_type(), list(size))
