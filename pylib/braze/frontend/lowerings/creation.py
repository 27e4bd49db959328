"""Tensor creation: full/zeros/ones (and their *_like), scalar_tensor, arange."""

from __future__ import annotations

import torch
from mlir.dialects import arith

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import is_index
from braze.frontend.lowerings import lowers

aten = torch.ops.aten


def filled(b, value, sizes):
    """A splat of `value` in the node's result type; dynamic dims from `sizes`."""
    out = b.out_type()
    dtype = b.out_dtype()
    if all(not out.is_dynamic_dim(i) for i in range(out.rank)):
        return b.constant(value, dtype, out.shape)
    return b.expand(b.constant(value, dtype), out, list(sizes))


@lowers(aten.full.default)
def full(b, size, fill_value, **_dtype_layout_device):
    return filled(b, fill_value, size)


@lowers(aten.zeros.default)
def zeros(b, size, **_dtype_layout_device):
    return filled(b, 0, size)


@lowers(aten.ones.default)
def ones(b, size, **_dtype_layout_device):
    return filled(b, 1, size)


def _like(value_of):
    def lower(b, x, *args, **_dtype_layout_device):
        sizes = [b.size(x, d) for d in range(b.out_type().rank)]
        return filled(b, value_of(*args), sizes)

    return lower


lowers(aten.full_like.default)(_like(lambda fill_value: fill_value))
lowers(aten.zeros_like.default)(_like(lambda: 0))
lowers(aten.ones_like.default)(_like(lambda: 1))


@lowers(aten.scalar_tensor.default)
def scalar_tensor(b, value, **_dtype_layout_device):
    return b.constant(value, b.out_dtype())


@lowers(aten.arange.start_step, aten.arange.start, aten.arange.default)
def arange(b, *args, **_dtype_layout_device):
    start, end, step = {1: lambda e: (0, e, 1), 2: lambda s, e: (s, e, 1),
                        3: lambda s, e, st: (s, e, st)}[len(args)](*args)
    out = b.out_type()
    # A symbolic start or step is an operand of the iota; a constant one an attribute.
    terms = {"dynamic_start" if is_index(start) else "start": start if is_index(start) else float(start),
             "dynamic_step" if is_index(step) else "step": step if is_index(step) else float(step)}
    if not out.is_dynamic_dim(0):
        return bz.IotaOp(out, **terms).result
    if not all(isinstance(v, int) or is_index(v) for v in (start, end, step)):
        raise BrazeError("arange with a symbolic length needs integer start, end and step, "
                         f"got start={start!r} end={end!r} step={step!r}")
    # length = max(ceil((end - start) / step), 0), in index arithmetic.
    span = arith.SubIOp(b.index(end), b.index(start)).result
    length = arith.MaxSIOp(arith.CeilDivSIOp(span, b.index(step)).result, b.index(0)).result
    return bz.IotaOp(out, size=length, **terms).result
