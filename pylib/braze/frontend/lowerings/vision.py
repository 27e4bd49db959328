"""Convolutions, inference batch norm, group norm, max and average pooling."""

from __future__ import annotations

import functools
import itertools
import operator

import numpy as np
import torch
from mlir import ir
from mlir.dialects import arith

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import dtype_of, shape_of
from braze.frontend.lowerings import lowers
from braze.frontend.lowerings.layout import padded
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


def _sizes(result: ir.RankedTensorType) -> list[int | None]:
    return [None if result.is_dynamic_dim(d) else result.shape[d] for d in range(result.rank)]


def _windows(b, x, kernel, stride, padding, dilation, out_shape, fill: float):
    """The strided slices of `x`, one per offset of a pooling window, over
    its last len(kernel) dims, `x` padded with `fill` (every window fits the
    padded input: ceil_mode's last window may need more than the padding on
    the right; it still starts inside)."""
    rank = len(shape_of(x))
    spatial = list(range(rank - len(kernel), rank))
    if any(out_shape[d] is None or shape_of(x)[d] is None for d in spatial):
        raise BrazeError("pooling over dynamic spatial sizes")
    for d, k, s, p, r in zip(spatial, kernel, stride, padding, dilation):
        reach = (out_shape[d] - 1) * s + r * (k - 1) + 1
        x = padded(b, x, d, p, max(0, reach - shape_of(x)[d] - p), fill)
    windows = []
    for offsets in itertools.product(*(range(k) for k in kernel)):
        window = x
        for d, offset, step, r in zip(spatial, offsets, stride, dilation):
            start = offset * r
            shape = list(shape_of(window))
            shape[d] = out_shape[d]
            sliced = ir.RankedTensorType.get(
                [ir.ShapedType.get_dynamic_size() if s is None else s for s in shape],
                ir.RankedTensorType(window.type).element_type)
            window = b.slice(window, d, start, start + (out_shape[d] - 1) * step + 1, step, sliced)
        windows.append(window)
    return windows


def _pool_arguments(kernel_size, stride, padding, dilation, spatial: int):
    kernel = _per_dim(kernel_size, spatial)
    return kernel, _per_dim(stride or kernel, spatial), _per_dim(padding, spatial), _per_dim(dilation, spatial)


@lowers(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(b, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """The maximum of the window's strided slices of `x` padded with -inf:
    pointwise maximums that fuse with what follows (the window is small)."""
    if any(user.target is not operator.getitem or user.args[1] != 0 for user in b.node.users):
        raise BrazeError("max pooling's indices are used (only its values are lowered)")
    if not dtype_of(x).is_floating_point:
        raise BrazeError(f"max pooling of {dtype_of(x)} (floating point only)")
    windows = _windows(b, x, *_pool_arguments(kernel_size, stride, padding, dilation, 2),
                       _sizes(b.out_type(0)), float("-inf"))
    return functools.reduce(lambda result, window: bz.MaximumOp(result, window).result, windows), None


def _average_divisors(in_shape, out_shape, kernel, stride, padding, count_include_pad, divisor_override):
    """What each output point of an average pooling divides its window's sum
    by, as PyTorch's CPU kernel counts it: the window within the padded input
    (count_include_pad) or within the input, or the override; [out spatial]."""
    if divisor_override:
        return np.full(out_shape, float(divisor_override))
    per_dim = []
    for size, out, k, s, p in zip(in_shape, out_shape, kernel, stride, padding):
        start = np.arange(out) * s - p
        end = np.minimum(start + k, size + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, size)
        per_dim.append((end - start).astype(np.float64))
    return functools.reduce(np.multiply.outer, per_dim)


def _average_pool(b, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, spatial):
    """The sum of the window's strided slices of `x` padded with zeros,
    divided by PyTorch's count per point; summed in float32 for halves, as
    PyTorch's CPU kernel does."""
    if not dtype_of(x).is_floating_point:
        raise BrazeError(f"average pooling of {dtype_of(x)} (floating point only)")
    kernel, stride, padding, dilation = _pool_arguments(kernel_size, stride, padding, 1, spatial)
    out_shape = _sizes(b.out_type())
    dtype = _compute_dtype(dtype_of(x))
    windows = _windows(b, b.cast(x, dtype), kernel, stride, padding, dilation, out_shape, 0.0)
    total = functools.reduce(lambda result, window: bz.AddOp(result, window).result, windows)
    divisors = _average_divisors(shape_of(x)[-spatial:], out_shape[-spatial:], kernel, stride, padding,
                                 count_include_pad, divisor_override)
    if np.all(divisors == divisors.flat[0]):
        divisor = b.constant(float(divisors.flat[0]), dtype)
    else:
        table = ir.RankedTensorType.get(list(divisors.shape), element_type(dtype))
        divisor = bz.ConstantOp(ir.DenseElementsAttr.get(
            divisors.astype(np.float64 if dtype == torch.float64 else np.float32), type=table)).result
    return b.cast(bz.DivOp(total, divisor, results=[ir.RankedTensorType(total.type)]).result, b.out_dtype())


@lowers(aten.avg_pool2d.default)
def avg_pool2d(b, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _average_pool(b, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2)


@lowers(aten.avg_pool3d.default)
def avg_pool3d(b, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _average_pool(b, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3)
