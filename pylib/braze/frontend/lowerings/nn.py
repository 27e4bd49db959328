"""Matrix products, attention and the composite nn ops core aten keeps:
layer norm, softmax, log-softmax, vector norms, embedding."""

from __future__ import annotations

import math
import operator

import torch
from mlir import ir

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import dtype_of, shape_of
from braze.frontend.lowerings import lowers
from braze.frontend.lowerings.reductions import normalized_dims
from braze.frontend.types import element_type

aten = torch.ops.aten


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half-precision normalizations accumulate in f32, as PyTorch's CPU kernels do."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


@lowers(aten.mm.default)
def mm(b, lhs, rhs):
    dtype = b.out_dtype()
    return bz.MatmulOp(b.cast(lhs, dtype), b.cast(rhs, dtype), results=[b.out_type()]).result


@lowers(aten.bmm.default)
def bmm(b, lhs, rhs):
    dtype = b.out_dtype()
    return bz.BmmOp(b.cast(lhs, dtype), b.cast(rhs, dtype), results=[b.out_type()]).result


@lowers(aten.addmm.default)
def addmm(b, bias, lhs, rhs, beta=1, alpha=1):
    dtype = b.out_dtype()
    return bz.AddmmOp(b.tensor(bias, dtype), b.cast(lhs, dtype), b.cast(rhs, dtype),
                      beta=float(beta), alpha=float(alpha), results=[b.out_type()]).result


@lowers(aten._scaled_mm.default)
def scaled_mm(b, lhs, rhs, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
    """torch._scaled_mm: the fp8 operands, their scales and the bias as
    they are; braze.scaled_mm's verifier checks the scale shapes."""
    return bz.ScaledMmOp(b.out_type(), lhs, rhs, scale_a, scale_b, bias=bias, scale_result=scale_result,
                         fast_accum=bool(use_fast_accum)).result


def _attention(b, result_type, dtype, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    if dropout_p:
        raise BrazeError(f"attention with dropout ({dropout_p}) is training; braze compiles inference")
    attributes = {}
    if scale is not None:
        attributes["scale"] = float(scale)
    if is_causal:
        attributes["causal"] = True
    if enable_gqa:
        attributes["gqa"] = True
    mask = None if attn_mask is None else b.tensor(attn_mask, dtype_of(attn_mask))
    return bz.AttentionOp(result_type, b.cast(query, dtype), b.cast(key, dtype), b.cast(value, dtype),
                          mask=mask, **attributes).result


@lowers(aten.scaled_dot_product_attention.default)
def scaled_dot_product_attention(b, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """One braze.attention (the frontend keeps this op out of the core aten
    decompositions, so it arrives whole)."""
    return _attention(b, b.out_type(), b.out_dtype(), query, key, value, attn_mask, dropout_p, is_causal,
                      scale, enable_gqa)


@lowers(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_for_cpu(b, query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None,
                            scale=None):
    """(output, logsumexp): attention as AOTAutograd traces it in inference
    (PyTorch's fused CPU kernel). braze computes the output; the logsumexp
    only a backward pass reads. The kernel has no `enable_gqa` argument:
    it shares key/value heads whenever the query has more heads, so that is
    what says the heads are grouped."""
    if any(user.target is not operator.getitem or user.args[1] != 0 for user in b.node.users):
        raise BrazeError("the attention's logsumexp is used (a backward pass); braze computes the output only")
    grouped = shape_of(query)[-3] != shape_of(key)[-3]
    output = _attention(b, b.out_type(0), b.out_dtype(0), query, key, value, attn_mask, dropout_p,
                        is_causal, scale, grouped)
    return output, None


def normalized(b, x, dims: list[int], stats_type: ir.RankedTensorType, eps):
    """((x - mean) * rstd, mean, rstd), the statistics over `dims` (kept as
    size 1, of `stats_type`): the core of layer and group norm."""
    mean = bz.MeanOp(x, dims, keepdim=True, results=[stats_type]).result
    centered = bz.SubOp(x, mean).result
    variance = bz.MeanOp(bz.MulOp(centered, centered).result, dims, keepdim=True,
                         results=[stats_type]).result
    rstd = bz.RsqrtOp(bz.AddOp(variance, b.constant(eps, dtype_of(x))).result).result
    return bz.MulOp(centered, rstd).result, mean, rstd


@lowers(aten.native_layer_norm.default)
def native_layer_norm(b, x, normalized_shape, weight, bias, eps):
    """(y, mean, rstd) with mean and rstd over the normalized (last) dims."""
    out_dtype = dtype_of(x)
    dtype = _compute_dtype(out_dtype)
    rank = len(shape_of(x))
    dims = list(range(rank - len(normalized_shape), rank))
    stats_type = ir.RankedTensorType.get(b.out_type(1).shape, element_type(dtype))
    y, mean, rstd = normalized(b, b.cast(x, dtype), dims, stats_type, eps)
    if weight is not None:
        y = bz.MulOp(y, b.cast(weight, dtype)).result
    if bias is not None:
        y = bz.AddOp(y, b.cast(bias, dtype)).result
    return b.cast(y, out_dtype), b.cast(mean, b.out_dtype(1)), b.cast(rstd, b.out_dtype(2))


def _shifted_exp_sum(b, x, dim):
    """x - max(x), its exp, and the sum of that exp over `dim` (kept as size 1)."""
    dtype = _compute_dtype(b.out_dtype())
    x = b.cast(x, dtype)
    if not shape_of(x):  # softmax of a scalar is 1
        zero = bz.SubOp(x, x).result
        return zero, bz.ExpOp(zero).result, b.constant(1.0, dtype)
    dim %= len(shape_of(x))
    shifted = bz.SubOp(x, bz.MaxOp(x, [dim], keepdim=True).result).result
    exp = bz.ExpOp(shifted).result
    return shifted, exp, bz.SumOp(exp, [dim], keepdim=True).result


@lowers(aten._softmax.default)
def softmax(b, x, dim, half_to_float=False):
    _, exp, total = _shifted_exp_sum(b, x, dim)
    return b.cast(bz.DivOp(exp, total).result, b.out_dtype())


@lowers(aten._log_softmax.default)
def log_softmax(b, x, dim, half_to_float=False):
    shifted, _, total = _shifted_exp_sum(b, x, dim)
    return b.cast(bz.SubOp(shifted, bz.LogOp(total).result).result, b.out_dtype())


@lowers(aten.linalg_vector_norm.default)
def linalg_vector_norm(b, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The p-norm over `dim` (every dim when None or empty): a sum of |x|^p
    and its p-th root, the maximum or minimum of |x| for p = +-inf, the
    count of non-zeros for p = 0; in float32 for halves, as PyTorch's CPU
    kernel accumulates."""
    out_dtype = b.out_dtype()
    if not out_dtype.is_floating_point or not dtype_of(x).is_floating_point:
        raise BrazeError(f"vector norm of {dtype_of(x)} (real floating point only)")
    compute = _compute_dtype(out_dtype)
    x = b.cast(x, compute)
    if not shape_of(x):
        x = b.reshape(x, ir.RankedTensorType.get([1], element_type(compute)), [1])
    dims = normalized_dims(x, dim)
    ord = float(ord)
    magnitude = bz.AbsOp(x).result
    if ord == math.inf or ord == -math.inf:
        reduced = (bz.MaxOp if ord > 0 else bz.MinOp)(magnitude, dims, keepdim=bool(keepdim)).result
    elif ord == 0:
        nonzero = b.cast(bz.NeOp(x, b.constant(0.0, compute)).result, compute)
        reduced = bz.SumOp(nonzero, dims, keepdim=bool(keepdim)).result
    elif ord == 1:
        reduced = bz.SumOp(magnitude, dims, keepdim=bool(keepdim)).result
    elif ord == 2:
        reduced = bz.SqrtOp(bz.SumOp(bz.MulOp(x, x).result, dims, keepdim=bool(keepdim)).result).result
    else:
        powered = bz.PowOp(magnitude, b.constant(ord, compute)).result
        total = bz.SumOp(powered, dims, keepdim=bool(keepdim)).result
        reduced = bz.PowOp(total, b.constant(1.0 / ord, compute)).result
    result = b.out_type()
    if ir.RankedTensorType(reduced.type).shape != result.shape:  # a 0-d input
        reduced = b.reshape(reduced, ir.RankedTensorType.get(result.shape, element_type(compute)), [])
    return b.cast(reduced, out_dtype)


@lowers(aten.embedding.default)
def embedding(b, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return bz.TakeOp(weight, indices, 0, results=[b.out_type()]).result


def _as_rank1(b, value):
    """A 0-d tensor as a 1-element 1-D one (index_select treats them alike)."""
    if shape_of(value):
        return value
    rank1 = ir.RankedTensorType.get([1], ir.RankedTensorType(value.type).element_type)
    return b.reshape(value, rank1, [1])


@lowers(aten.index_select.default)
def index_select(b, x, dim, index):
    table = _as_rank1(b, x)
    out = b.out_type()
    if out.rank != len(shape_of(table)):  # a 0-d x gives a 0-d result
        picked = ir.RankedTensorType.get([1], out.element_type)
        taken = bz.TakeOp(table, _as_rank1(b, index), 0, results=[picked]).result
        return b.reshape(taken, out, [])
    return bz.TakeOp(table, _as_rank1(b, index), dim % out.rank, results=[out]).result
