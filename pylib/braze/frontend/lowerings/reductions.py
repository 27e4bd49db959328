"""Reductions: sum, mean, amax/amin, max.dim, argmax, any/all."""

from __future__ import annotations

import torch

from braze.dialects import braze as bz
from braze.frontend.builder import dtype_of, shape_of
from braze.frontend.lowerings import lowers

aten = torch.ops.aten


def normalized_dims(x, dims) -> list[int]:
    """Sorted non-negative dims; None or [] means every dim (PyTorch's rule)."""
    rank = len(shape_of(x))
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % rank for d in dims})


def reduce(b, op_class, x, dims, keepdim, result_index=None):
    if not shape_of(x):  # a 0-d input reduces to itself; its only index is 0
        if op_class is bz.ArgmaxOp:
            return b.constant(0, torch.int64)
        return x
    dims = normalized_dims(x, dims)
    return op_class(x, dims, keepdim=bool(keepdim), results=[b.out_type(result_index)]).result


@lowers(aten.sum.dim_IntList, aten.sum.default)
def sum_(b, x, dims=None, keepdim=False, dtype=None):
    return reduce(b, bz.SumOp, b.cast(x, b.out_dtype()), dims, keepdim)


@lowers(aten.mean.dim, aten.mean.default)
def mean(b, x, dims=None, keepdim=False, dtype=None):
    return reduce(b, bz.MeanOp, b.cast(x, b.out_dtype()), dims, keepdim)


def _is_bool(x) -> bool:
    return dtype_of(x) == torch.bool


@lowers(aten.amax.default)
def amax(b, x, dims=(), keepdim=False):
    return reduce(b, bz.AnyOp if _is_bool(x) else bz.MaxOp, x, dims, keepdim)


@lowers(aten.amin.default)
def amin(b, x, dims=(), keepdim=False):
    return reduce(b, bz.AllOp if _is_bool(x) else bz.MinOp, x, dims, keepdim)


@lowers(aten.max.dim)
def max_dim(b, x, dim, keepdim=False):
    values = reduce(b, bz.AnyOp if _is_bool(x) else bz.MaxOp, x, dim, keepdim, 0)
    return values, argmax(b, x, dim, keepdim, result_index=1)


@lowers(aten.argmax.default)
def argmax(b, x, dim=None, keepdim=False, result_index=None):
    if _is_bool(x):  # the first true is the first maximum of 0/1 bytes
        x = b.cast(x, torch.int8)
    return reduce(b, bz.ArgmaxOp, x, dim, keepdim, result_index)


@lowers(aten.any.dim, aten.any.dims, aten.any.default)
def any_(b, x, dims=None, keepdim=False):
    return reduce(b, bz.AnyOp, b.cast(x, torch.bool), dims, keepdim)


@lowers(aten.all.dim, aten.all.dims, aten.all.default)
def all_(b, x, dims=None, keepdim=False):
    return reduce(b, bz.AllOp, b.cast(x, torch.bool), dims, keepdim)
