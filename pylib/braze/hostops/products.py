"""Matrix products (matmul, bmm, addmm), attention and convolutions: the
library ops, run by torch through the vendor library of the operands'
device (a BLAS and oneDNN on the CPU, cuBLAS and cuDNN on CUDA)."""

from __future__ import annotations

import itertools

import torch

from braze.hostops.dtypes import torch_dtype
from braze.hostops.table import op_error, prepares


def _product_result(lhs: torch.Tensor, rhs: torch.Tensor, context) -> torch.Tensor:
    """The memory of lhs @ rhs ([B..., M, K] x [B..., K, N]), from the context."""
    return context.result((*lhs.shape[:-1], rhs.shape[-1]), lhs.dtype)


def records_grad(operands) -> bool:
    """Whether autograd records a call on `operands` (it records none with
    `out=`, nor through a prepacked weight)."""
    return torch.is_grad_enabled() and any(operand.requires_grad for operand in operands)


def _product(function, *operands: torch.Tensor, context, **scales) -> torch.Tensor:
    """`function(*operands)` (torch.mm, bmm or addmm; the last two operands
    the product's) written into memory from the context, or into torch's
    where autograd records the call."""
    if records_grad(operands):
        return function(*operands, **scales)
    return function(*operands, **scales, out=_product_result(*operands[-2:], context))


@prepares("braze.matmul")
def matmul(op):
    return lambda operands, context: [_product(torch.mm, *operands, context=context)]


@prepares("braze.bmm")
def bmm(op):
    def run(operands, context):
        lhs, rhs = operands
        if lhs.dim() == 3:
            return [_product(torch.bmm, lhs, rhs, context=context)]
        return [batched_product(lhs, rhs, _product_result(lhs, rhs, context))]

    return run


def _merged_from(tensor: torch.Tensor, batch_rank: int) -> int:
    """The first of the trailing batch dims that one stride steps through."""
    first = batch_rank - 1
    while first > 0 and tensor.stride(first - 1) == tensor.stride(first) * tensor.shape[first]:
        first -= 1
    return first


def batched_product(lhs: torch.Tensor, rhs: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """[B..., M, K] x [B..., K, N] over several batch dims into `out`,
    reading strided views in place (torch.matmul would copy a batch no one
    stride steps through): one torch.bmm over the trailing batch dims that
    one stride steps through in every tensor, per index of the others."""
    batch = lhs.shape[:-2]
    first = max(_merged_from(t, len(batch)) for t in (lhs, rhs, out))
    for index in itertools.product(*(range(size) for size in batch[:first])):
        torch.bmm(lhs[index].flatten(0, -3), rhs[index].flatten(0, -3), out=out[index].flatten(0, -3))
    return out


@prepares("braze.addmm")
def addmm(op):
    beta, alpha = op.attributes["beta"], op.attributes["alpha"]

    def run(operands, context):
        bias, lhs, rhs = operands
        if lhs.dtype.is_floating_point:
            scales = {"beta": beta, "alpha": alpha}
        elif beta != int(beta) or alpha != int(alpha):
            raise op_error(op, f"beta = {beta} and alpha = {alpha} must be integers for {lhs.dtype}")
        else:
            scales = {"beta": int(beta), "alpha": int(alpha)}
        # torch.addmm scales and adds in its accumulator before the one rounding
        # to the element type, exactly as eager PyTorch (and nn.Linear) does.
        return [_product(torch.addmm, bias, lhs, rhs, context=context, **scales)]

    return run


@prepares("braze.scaled_mm")
def scaled_mm(op):
    """torch._scaled_mm, whose CUDA form wants a row-major lhs and a
    column-major rhs: either is copied into that layout only when a view
    arrives in another."""
    segments = list(op.attributes["operandSegmentSizes"])
    out_dtype = torch_dtype(op.result_types[0].element_type)
    fast_accum = "fast_accum" in op.attributes

    def run(operands, context):
        lhs, rhs, lhs_scale, rhs_scale = operands[:4]
        bias = operands[4] if segments[4] else None
        scale_result = operands[4 + segments[4]] if segments[5] else None
        if lhs.stride(1) != 1:
            lhs = lhs.contiguous()
        if rhs.stride(0) != 1:
            rhs = rhs.t().contiguous().t()
        return [torch._scaled_mm(lhs, rhs, lhs_scale, rhs_scale, bias=bias, scale_result=scale_result,
                                 out_dtype=out_dtype, use_fast_accum=fast_accum)]

    return run


def convolution_arguments(op) -> tuple:
    """aten.convolution's arguments after input, weight and bias, from a
    `braze.convolution` op's record."""
    attributes = op.attributes
    transposed = "transposed" in attributes
    spatial = op.operand_types[0].rank - 2
    output_padding = list(attributes["output_padding"]) if transposed else [0] * spatial
    return (list(attributes["stride"]), list(attributes["padding"]), list(attributes["dilation"]), transposed,
            output_padding, attributes["groups"])


def convolution_layout(op) -> torch.memory_format:
    """The channels-last memory format of a convolution's rank (from its record)."""
    return torch.channels_last if op.operand_types[0].rank == 4 else torch.channels_last_3d


@prepares("braze.attention", "braze.flash_attention")
def attention(op):
    """PyTorch's scaled_dot_product_attention (its fused CPU kernel). The
    runtime runs braze.flash_attention as a generated kernel; the reference
    interpreter, through this table, as the attention it computes (its
    schedule changes no result). SDPA has no soft cap: a soft-capped
    attention is spelled out here (`_capped_attention`)."""
    attributes = op.attributes
    scale = attributes.get("scale")
    causal, gqa = "causal" in attributes, "gqa" in attributes
    softcap = attributes.get("softcap")
    masked_rows_nan = "masked_rows_nan" in attributes
    # The value permuted (made contiguous: free where SDPA's output memory
    # is in that order already, as its fused kernel's for a transposed query).
    order = attributes.get("result_order")

    def run(operands, context):
        output = _attention(operands)
        return [output.permute(*order).contiguous() if order is not None else output]

    def _attention(operands):
        query, key, value, *mask = operands
        mask = mask[0] if mask else None
        if softcap is not None:
            return _capped_attention(query, key, value, mask, scale, softcap, causal, gqa, masked_rows_nan)
        rows = query.shape[:-1]  # [*batch, H, L]
        if query.dim() > 4:
            query, key, value, mask = _four_dims(query, key, value, mask)
        # SDPA's fused CPU kernel reads rows of E: a key written transposed
        # ([.., E, S] memory, as a product q @ k^T had it) took it 9.2 ms
        # for Swin's [2, 192, 49, 32] in bf16, 2.0 with this copy.
        query, key, value = (t if t.stride(-1) == 1 else t.contiguous() for t in (query, key, value))
        output = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale,
                                                                  is_causal=causal, enable_gqa=gqa)
        if masked_rows_nan and mask is not None:
            # SDPA gives a row with every key masked zeros; softmax of a row
            # of minus infinity is NaN.
            masked = ~mask.any(-1) if mask.dtype == torch.bool else (mask == float("-inf")).all(-1)
            output = output.masked_fill(masked.unsqueeze(-1), float("nan"))
        return output.reshape(*rows, output.shape[-1])

    return run


def _four_dims(query, key, value, mask):
    """[B, W, ..., H, L, E] operands as SDPA's fused CPU kernel takes them,
    [B, W * ... * H, L, E]: the dims between the first and the heads join
    the heads (a view; a grouped query's heads still meet their key's, as
    W * H heads over W * Hk). Of five or more dims SDPA runs its math path
    (Swin's shifted windows, [2, 64, 3, 49, 32] in bf16: 5.1 ms, as four
    1.7 ms). The mask joins its dims alike, kept of size 1 along the first
    where it broadcasts there (copied only where a joined dim broadcasts)."""
    def join(t):
        return t.reshape(t.shape[0], -1, *t.shape[-2:])

    if mask is not None:
        mask = mask.expand(*query.shape[:-2], *mask.shape[-2:])
        mask = join(mask[:1] if mask.stride(0) == 0 else mask)
    return join(query), join(key), join(value), mask


def _capped_attention(query, key, value, mask, scale, softcap, causal, gqa, masked_rows_nan):
    """`softmax(softcap * tanh(q k^T * scale / softcap) + mask) v`, in f32
    for halves (as the flash kernels accumulate), rounded once; a row with
    no key kept is 0, or NaN with `masked_rows_nan`."""
    compute = torch.promote_types(query.dtype, torch.float32)
    if gqa and key.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        group = query.shape[-3] // key.shape[-3]
        key, value = (t.repeat_interleave(group, dim=-3) for t in (key, value))
    scale = 1 / query.shape[-1] ** 0.5 if scale is None else scale
    scores = query.to(compute) @ key.to(compute).transpose(-2, -1)
    scores = softcap * torch.tanh(scores * (scale / softcap))
    if causal:
        rows, keys = scores.shape[-2:]
        mask = torch.ones(rows, keys, dtype=torch.bool, device=scores.device).tril()
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        scores = scores + mask.to(compute)
    empty = (scores == float("-inf")).all(-1, keepdim=True)
    weights = torch.softmax(scores, -1).masked_fill(empty, float("nan") if masked_rows_nan else 0.0)
    return (weights @ value.to(compute)).to(query.dtype)


@prepares("braze.convolution")
def convolution(op):
    """`memory_format` only changes how fast the library runs: ignored here."""
    arguments = convolution_arguments(op)

    def run(operands, context):
        input_, weight, *bias = operands
        return [torch.ops.aten.convolution.default(input_, weight, bias[0] if bias else None, *arguments)]

    return run
