"""Convolutions, inference batch norm, group norm and max pooling."""

from __future__ import annotations

import operator

import torch
from mlir import ir
from mlir.dialects import arith

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import dtype_of, shape_of
from braze.frontend.lowerings import lowers
from braze.frontend.lowerings.nn import _compute_dtype, normalized
from braze.frontend.types import element_type

aten = torch.ops.aten


def _per_dim(values, count: int) -> list[int]:
    """A stride/padding/dilation argument as one int per spatial dim."""
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if len(values) == 1:
        values = values * count
    if len(values) != count or not all(isinstance(v, int) for v in values):
        raise BrazeError(f"expected {count} static sizes, got {values}")
    return values


@lowers(aten.convolution.default)
def convolution(b, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    spatial = len(shape_of(x)) - 2
    if spatial < 1:
        raise BrazeError("an unbatched convolution input is not supported")
    if isinstance(padding, str):
        raise BrazeError(f"padding '{padding}' is not supported; give sizes")
    attributes = dict(stride=_per_dim(stride, spatial), padding=_per_dim(padding, spatial),
                      dilation=_per_dim(dilation, spatial), groups=int(groups))
    if transposed:
        attributes.update(transposed=True, output_padding=_per_dim(output_padding, spatial))
    elif any(_per_dim(output_padding, spatial)):
        raise BrazeError("output_padding is only for a transposed convolution")
    dtype = b.out_dtype()
    return bz.ConvolutionOp(b.out_type(), b.cast(x, dtype), b.cast(weight, dtype),
                            bias=None if bias is None else b.cast(bias, dtype), **attributes).result


def _per_channel(b, value, rank: int):
    """A [C] tensor shaped [C, 1, ...] to broadcast over `N x C x spatial`."""
    channels = shape_of(value)[0]
    shape = [channels] + [1] * (rank - 2)
    result = ir.RankedTensorType.get(shape, ir.RankedTensorType(value.type).element_type)
    return b.reshape(value, result, shape)


@lowers(aten._native_batch_norm_legit_no_training.default)
def batch_norm_inference(b, x, weight, bias, running_mean, running_var, momentum, eps):
    """(y, empty, empty): y = x * alpha + beta per channel, with
    alpha = weight / sqrt(var + eps) and beta = bias - mean * alpha, the
    form (and rounding) of PyTorch's CPU kernel. With weights as parameters,
    alpha and beta are computed once, when the program is built, and the
    multiply-add fuses with whatever follows the normalization."""
    out_dtype = dtype_of(x)
    dtype = _compute_dtype(out_dtype)
    rank = len(shape_of(x))
    if rank < 2:
        raise BrazeError("batch norm needs an N x C x ... input")
    alpha = bz.RsqrtOp(bz.AddOp(b.cast(running_var, dtype), b.constant(eps, dtype)).result).result
    if weight is not None:
        alpha = bz.MulOp(alpha, b.cast(weight, dtype)).result
    beta = bz.NegOp(bz.MulOp(b.cast(running_mean, dtype), alpha).result).result
    if bias is not None:
        beta = bz.AddOp(b.cast(bias, dtype), beta).result
    y = bz.AddOp(bz.MulOp(b.cast(x, dtype), _per_channel(b, alpha, rank)).result,
                 _per_channel(b, beta, rank)).result
    empty = [b.constant(0, b.out_dtype(i), shape=(0,)) for i in (1, 2)]
    return (b.cast(y, out_dtype), *empty)


@lowers(aten.native_group_norm.default)
def native_group_norm(b, x, weight, bias, batch, channels, spatial, groups, eps):
    """(y, mean, rstd): x viewed as [N, groups, C/groups * HxW], normalized
    over the last dim like a layer norm, then scaled and shifted per channel;
    mean and rstd are [N, groups]. Half precision normalizes in float32."""
    out_dtype = dtype_of(x)
    dtype = _compute_dtype(out_dtype)
    shape = shape_of(x)
    if not isinstance(channels, int) or not isinstance(groups, int) or channels % groups:
        raise BrazeError(f"group norm needs static channels divisible by groups, got {channels} and {groups}")
    element = element_type(dtype)
    dynamic = ir.ShapedType.get_dynamic_size()

    def static(size):
        return size if isinstance(size, int) else dynamic

    per_group = ((channels // groups) * spatial if isinstance(spatial, int)
                 else arith.MulIOp(b.index(channels // groups), b.index(spatial)).result)
    grouped_type = ir.RankedTensorType.get([static(batch), groups, static(per_group)], element)
    grouped = b.reshape(b.cast(x, dtype), grouped_type, [batch, groups, per_group])
    stats_type = ir.RankedTensorType.get([static(batch), groups, 1], element)
    y, mean, rstd = normalized(b, grouped, [2], stats_type, eps)
    y = b.reshape(y, ir.RankedTensorType.get([static(s) for s in shape], element),
                  [b.size(x, d) for d in range(len(shape))])
    if weight is not None:
        y = bz.MulOp(y, _per_channel(b, b.cast(weight, dtype), len(shape))).result
    if bias is not None:
        y = bz.AddOp(y, _per_channel(b, b.cast(bias, dtype), len(shape))).result
    stats = ir.RankedTensorType.get([static(batch), groups], element)
    return (b.cast(y, out_dtype), b.cast(b.reshape(mean, stats, [batch, groups]), b.out_dtype(1)),
            b.cast(b.reshape(rstd, stats, [batch, groups]), b.out_dtype(2)))


def _padded(b, x, dim: int, before: int, after: int, value: float):
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


@lowers(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(b, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """The maximum of the window's strided slices of `x` padded with -inf:
    pointwise maximums that fuse with what follows (the window is small)."""
    if any(user.target is not operator.getitem or user.args[1] != 0 for user in b.node.users):
        raise BrazeError("max pooling's indices are used (only its values are lowered)")
    if not dtype_of(x).is_floating_point:
        raise BrazeError(f"max pooling of {dtype_of(x)} (floating point only)")
    kernel = _per_dim(kernel_size, 2)
    stride = _per_dim(stride or kernel, 2)
    padding, dilation = _per_dim(padding, 2), _per_dim(dilation, 2)
    out = b.out_type(0)
    rank = out.rank
    spatial = list(range(rank - 2, rank))
    if any(out.is_dynamic_dim(d) or shape_of(x)[d] is None for d in spatial):
        raise BrazeError("max pooling over dynamic spatial sizes")
    for d, k, s, p, r in zip(spatial, kernel, stride, padding, dilation):
        # Every window fits the padded input (ceil_mode's last window may
        # need more than `p` on the right; it still starts inside).
        reach = (out.shape[d] - 1) * s + r * (k - 1) + 1
        x = _padded(b, x, d, p, max(0, reach - shape_of(x)[d] - p), float("-inf"))
    result = None
    for a in range(kernel[0]):
        for c in range(kernel[1]):
            window = x
            for d, offset in zip(spatial, (a * dilation[0], c * dilation[1])):
                step = stride[d - spatial[0]]
                shape = list(shape_of(window))
                shape[d] = out.shape[d]
                sliced = ir.RankedTensorType.get(
                    [ir.ShapedType.get_dynamic_size() if s is None else s for s in shape],
                    ir.RankedTensorType(window.type).element_type)
                window = b.slice(window, d, offset, offset + (out.shape[d] - 1) * step + 1, step, sliced)
            result = window if result is None else bz.MaximumOp(result, window).result
    return result, None
