"""Matrix products: matmul, bmm, addmm."""

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
