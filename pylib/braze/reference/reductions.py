"""Reductions over a list of dims, with or without `keepdim`."""

from __future__ import annotations

import torch

from braze.hostops import op_error
from braze.reference.registry import handles


def _reduce_sum(input_, dims, keepdim):
    # dtype= keeps integer sums in their own type (torch would widen to i64).
    return torch.sum(input_, dim=dims, keepdim=keepdim, dtype=input_.dtype)


def _reduce_mean(input_, dims, keepdim):
    return torch.mean(input_, dim=dims, keepdim=keepdim)


def _reduce_max(input_, dims, keepdim):
    return torch.amax(input_, dim=dims, keepdim=keepdim)


def _reduce_min(input_, dims, keepdim):
    return torch.amin(input_, dim=dims, keepdim=keepdim)


def _reduce_any(input_, dims, keepdim):
    return torch.any(input_, dim=dims, keepdim=keepdim)


def _reduce_all(input_, dims, keepdim):
    return torch.all(input_, dim=dims, keepdim=keepdim)


def _reduce_argmax(input_, dims, keepdim):
    """Index of the first maximum, counted row-major over the reduced dims.

    Moving the reduced dims last (in their order) and flattening them makes the
    flat index exactly the row-major position within the reduced dims; torch's
    argmax over one dim returns the first maximum.
    """
    kept = [d for d in range(input_.dim()) if d not in dims]
    moved = input_.permute(*kept, *dims)
    kept_shape = [input_.shape[d] for d in kept]
    flat = moved.reshape(*kept_shape, -1)
    indices = torch.argmax(flat, dim=-1)
    if keepdim:
        indices = indices.reshape([1 if d in dims else input_.shape[d] for d in range(input_.dim())])
    return indices


_REDUCTIONS = {
    "braze.sum": _reduce_sum,
    "braze.mean": _reduce_mean,
    "braze.max": _reduce_max,
    "braze.min": _reduce_min,
    "braze.any": _reduce_any,
    "braze.all": _reduce_all,
    "braze.argmax": _reduce_argmax,
}


@handles(*_REDUCTIONS)
def reduction(op, operands, interpreter):
    (input_,) = operands
    dims = list(op.dims)
    keepdim = bool(op.keepdim)
    name = op.operation.name
    if not dims:
        # Reducing no dims leaves every element alone (torch would reduce all
        # dims for an empty list). The first maximum of a single element is 0.
        if name == "braze.argmax":
            return [torch.zeros(input_.shape, dtype=torch.int64)]
        return [input_.clone()]
    for dim in dims:
        if input_.shape[dim] == 0 and name in ("braze.max", "braze.min", "braze.argmax"):
            raise op_error(op, f"reduces dim {dim} of size 0, which has no {name.split('.')[1]}")
    return [_REDUCTIONS[name](input_, dims, keepdim)]
