"""Library calls on constant weights reordered once, at build time, into
the blocked layouts oneDNN computes on (aten.convolution, torch.mm and
addmm reorder them on every call). Each is checked against the library's
own call on a probe drawn from its own generator (not the user's random
state); None where it does not apply or the check fails, and the caller
runs the library's call."""

from __future__ import annotations

from typing import Callable

import torch


# The types a call runs prepacked in (a product: the halves only), and how
# close its probe must come to the library's own call (a few of the type's
# roundings: oneDNN may add in another order on the blocked layout).
PREPACKED_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def _probe(shape, dtype, numbers: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=numbers).to(dtype)


def _agrees(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Whether a prepacked call's result on a probe is the library's own
    (to within PREPACKED_TOLERANCE of the type, relative to its largest)."""
    tolerance = PREPACKED_TOLERANCE[want.dtype]
    return got.shape == want.shape and torch.allclose(
        got, want, rtol=tolerance, atol=tolerance * float(want.abs().max()))


def prepacked_convolution(record, weight, arguments, layout) -> Callable | None:
    """(input, bias) -> result through oneDNN's convolution on `weight`
    reordered once into its blocked layout, where that applies: a 2-D,
    not transposed, float32, bf16 or f16 convolution on the CPU,
    channels-last, with a constant weight and static sizes (the layout
    depends on the input's size). Checked here against aten.convolution on
    one input (to within a rounding of the type); None where it does not
    apply or the check fails (then aten.convolution runs)."""
    stride, padding, dilation, transposed, _, groups = arguments
    input_type = record.operand_types[0]
    if (weight is None or layout is not torch.channels_last or transposed or weight.device.type != "cpu"
            or weight.dtype not in PREPACKED_TOLERANCE or None in input_type.shape
            or not torch.backends.mkldnn.is_available()):
        return None
    try:
        packed = torch.ops.mkldnn._reorder_convolution_weight(
            weight, padding, stride, dilation, groups, list(input_type.shape))

        def run(x, bias):
            return torch.ops.mkldnn._convolution_pointwise(
                x, packed, bias, padding, stride, dilation, groups, "none", [], "")

        numbers = torch.Generator().manual_seed(0)  # not the user's random state
        probe = _probe(input_type.shape, weight.dtype, numbers).contiguous(memory_format=layout)
        bias = _probe(weight.shape[0], weight.dtype, numbers) if len(record.operand_types) > 2 else None
        got = run(probe, bias)
        want = torch.ops.aten.convolution.default(probe, weight, bias, *arguments)
    except RuntimeError:  # this torch's oneDNN does not run it
        return None
    if not got.is_contiguous(memory_format=layout) or not _agrees(got, want):
        return None
    return run


def prepacked_linear(record, rhs) -> Callable | None:
    """(lhs, bias) -> lhs @ rhs (+ bias) through oneDNN's linear on `rhs`
    reordered once, where that applies: an f16 or bf16 product on the CPU
    of a static [M, K] lhs and a constant [K, N] rhs, with no bias or a
    bias of [N] and alpha = beta = 1. Checked here against torch.mm or
    addmm on one input (to within a rounding of the type); None where it
    does not apply or the check fails."""
    lhs_type = record.operand_types[-2]
    addmm = len(record.operand_types) == 3
    if (rhs is None or rhs.dim() != 2 or rhs.device.type != "cpu"
            or rhs.dtype not in (torch.bfloat16, torch.float16) or len(lhs_type.shape) != 2
            or None in lhs_type.shape or not torch.backends.mkldnn.is_available()):
        return None
    if addmm and (list(record.operand_types[0].shape) != [rhs.shape[1]]
                  or record.attributes["alpha"] != 1 or record.attributes["beta"] != 1):
        return None
    rows = lhs_type.shape[0]
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(rhs.t().contiguous(), rows)

        def run(lhs, bias):
            return torch.ops.mkldnn._linear_pointwise(lhs, packed, bias, "none", [], "")

        numbers = torch.Generator().manual_seed(0)  # not the user's random state
        probe = _probe(lhs_type.shape, rhs.dtype, numbers)
        bias = _probe(rhs.shape[1], rhs.dtype, numbers) if addmm else None
        got = run(probe, bias)
        want = torch.addmm(bias, probe, rhs) if addmm else torch.mm(probe, rhs)
    except RuntimeError:  # this torch's oneDNN does not run it
        return None
    return run if _agrees(got, want) else None
