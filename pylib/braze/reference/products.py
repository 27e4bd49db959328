"""Matrix products (matmul, bmm, addmm) and convolutions: the library ops."""

from __future__ import annotations

import torch

from braze.reference.registry import handles, op_error


@handles("braze.matmul")
def matmul(op, operands, interpreter):
    lhs, rhs = operands
    return [torch.mm(lhs, rhs)]


@handles("braze.bmm")
def bmm(op, operands, interpreter):
    lhs, rhs = operands
    return [torch.bmm(lhs, rhs)]


@handles("braze.addmm")
def addmm(op, operands, interpreter):
    bias, lhs, rhs = operands
    beta, alpha = op.beta.value, op.alpha.value
    if not lhs.dtype.is_floating_point:
        if beta != int(beta) or alpha != int(alpha):
            raise op_error(op, f"beta = {beta} and alpha = {alpha} must be integers for {lhs.dtype}")
        beta, alpha = int(beta), int(alpha)
    # torch.addmm scales and adds in its accumulator before the one rounding
    # to the element type, exactly as eager PyTorch (and nn.Linear) does.
    return [torch.addmm(bias, lhs, rhs, beta=beta, alpha=alpha)]


@handles("braze.convolution")
def convolution(op, operands, interpreter):
    input_, weight, *bias = operands
    transposed = "transposed" in op.attributes
    output_padding = list(op.output_padding) if transposed else [0] * (input_.dim() - 2)
    return [torch.ops.aten.convolution.default(
        input_, weight, bias[0] if bias else None, list(op.stride), list(op.padding), list(op.dilation),
        transposed, output_padding, op.groups.value)]
