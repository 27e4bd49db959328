"""Reductions: sum, mean, amax/amin, max.dim, argmax, any/all."""

from __future__ import annotations

import torch

from braze.dialects import braze as bz
from braze.frontend.builder import shape_of
from braze.frontend.lowerings import lowers

aten = torch.ops.aten


def normalized_dims(x, dims) -> list[int]:
    """Sorted non-negative dims; None or [] means every dim (PyTorch's rule)."""
    rank = len(shape_of(x))
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % max(rank, 1) for d in dims})


def reduce(b, op_class, x, dims, keepdim, result_index=None):
    dims = normalized_dims(x, dims)
    if not dims:  # a rank-0 input: nothing to reduce
        return x
    return op_class(x, dims, keepdim=bool(keepdim), results=[b.out_type(result_index)]).result


@lowers(aten.sum.dim_IntList, aten.sum.default)
def sum_(b, x, dims=None, keepdim=False, dtype=None):
    return reduce(b, bz.SumOp, b.cast(x, b.out_dtype()), dims, keepdim)


@lowers(aten.mean.dim, aten.mean.default)
def mean(b, x, dims=None, keepdim=False, dtype=None):
    return reduce(b, bz.MeanOp, b.cast(x, b.out_dtype()), dims, keepdim)


@lowers(aten.amax.default)
def amax(b, x, dims=(), keepdim=False):
    return reduce(b, bz.MaxOp, x, dims, keepdim)


@lowers(aten.amin.default)
def amin(b, x, dims=(), keepdim=False):
    return reduce(b, bz.MinOp, x, dims, keepdim)


@lowers(aten.max.dim)
def max_dim(b, x, dim, keepdim=False):
    values = reduce(b, bz.MaxOp, x, dim, keepdim, 0)
    return values, reduce(b, bz.ArgmaxOp, x, dim, keepdim, 1)


@lowers(aten.argmax.default)
def argmax(b, x, dim=None, keepdim=False):
    if not shape_of(x):
        return b.constant(0, torch.int64)
    return reduce(b, bz.ArgmaxOp, x, dim, keepdim)


@lowers(aten.any.dim, aten.any.dims, aten.any.default)
def any_(b, x, dims=None, keepdim=False):
    return reduce(b, bz.AnyOp, b.cast(x, torch.bool), dims, keepdim)


@lowers(aten.all.dim, aten.all.dims, aten.all.default)
def all_(b, x, dims=None, keepdim=False):
    return reduce(b, bz.AllOp, b.cast(x, torch.bool), dims, keepdim)
