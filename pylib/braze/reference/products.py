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
    if beta == 1.0 and alpha == 1.0:
        # torch.addmm rounds exactly as an eager nn.Linear does.
        return [torch.addmm(bias, lhs, rhs)]
    if not lhs.dtype.is_floating_point:
        if beta != int(beta) or alpha != int(alpha):
            raise op_error(op, f"beta = {beta} and alpha = {alpha} must be integers for {lhs.dtype}")
        # Python ints keep the computation in the tensors' integer type.
        beta, alpha = int(beta), int(alpha)
    # A Python scalar times a tensor stays in the tensor's dtype.
    return [beta * bias + alpha * torch.mm(lhs, rhs)]
