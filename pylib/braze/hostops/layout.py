"""Layout ops: reshape, permute, expand, slice, concat, take, iota.

Dynamic result dims take their sizes from `index` operands (Python ints here)
in the order the op's description gives.
"""

from __future__ import annotations

import torch

from braze.hostops.dtypes import is_dynamic, result_dtype
from braze.hostops.table import handles, op_error


def _result_shape(op) -> list[int]:
    """The first result's dims, dynamic ones as MLIR's dynamic-size marker."""
    return list(op.operation.results[0].type.shape)


def _take_sizes(op, sizes: list[int], needed: int) -> list[int]:
    if len(sizes) != needed:
        raise op_error(op, f"has {len(sizes)} size operand(s) for {needed} dynamic dim(s)")
    for size in sizes:
        if size < 0:
            raise op_error(op, f"size operand {size} is negative")
    return sizes


@handles("braze.reshape")
def reshape(op, operands, context):
    input_, *sizes = operands
    shape = _result_shape(op)
    dynamic = [i for i, size in enumerate(shape) if is_dynamic(size)]
    if len(dynamic) == 1 and not sizes:
        # A single dynamic dim follows from the element count.
        shape[dynamic[0]] = -1
    else:
        for i, size in zip(dynamic, _take_sizes(op, sizes, len(dynamic))):
            shape[i] = size
    known = [s for s in shape if s != -1]
    known_count = 1
    for s in known:
        known_count *= s
    if -1 in shape and (known_count == 0 or input_.numel() % known_count):
        raise op_error(op, f"cannot reshape {list(input_.shape)} to {shape}")
    if -1 not in shape and known_count != input_.numel():
        raise op_error(op, f"cannot reshape {list(input_.shape)} ({input_.numel()} elements) to {shape}")
    return [input_.reshape(shape)]


@handles("braze.permute")
def permute(op, operands, context):
    (input_,) = operands
    return [input_.permute(list(op.permutation))]


@handles("braze.expand")
def expand(op, operands, context):
    input_, *sizes = operands
    input_type = op.operation.operands[0].type
    shape = _result_shape(op)
    offset = len(shape) - input_.dim()  # input dims align with the last result dims
    pending = list(sizes)
    for i, size in enumerate(shape):
        if not is_dynamic(size):
            continue
        input_dim = i - offset
        if input_dim >= 0 and is_dynamic(input_type.shape[input_dim]):
            shape[i] = input_.shape[input_dim]
        elif pending:
            shape[i] = pending.pop(0)
        else:
            raise op_error(op, f"has no size operand for dynamic result dim {i}")
    if pending:
        raise op_error(op, f"has {len(pending)} size operand(s) left over")
    for i in range(input_.dim()):
        if input_.shape[i] not in (1, shape[i + offset]):
            raise op_error(op, f"cannot expand {list(input_.shape)} to {shape}")
    return [torch.broadcast_to(input_, shape)]


_DYNAMIC = -(2**63)  # ShapedType::kDynamic in a static bounds array


@handles("braze.slice")
def slice_(op, operands, context):
    input_, *symbolic = operands
    dim = op.dim.value
    size = input_.shape[dim]
    pending = iter(symbolic)
    start, end, step = (next(pending) if bound == _DYNAMIC else bound for bound in op.static_bounds)
    if symbolic:
        # Symbolic bounds are checked, never clamped: a bound outside the dim
        # is a run-time error (the model asked for elements that are not there).
        if step < 1:
            raise op_error(op, f"step {step} must be at least 1")
        symbolic_end = op.static_bounds[1] == _DYNAMIC
        if not 0 <= start <= (end if symbolic_end else min(end, size)) or (symbolic_end and end > size):
            raise op_error(op, f"bounds [{start} : {end}] are out of range for dim {dim} of size {size}")
    # Constant bounds clamp `end` to the dim's size, as Python slicing does.
    index = (slice(None),) * dim + (slice(start, end, step),)
    return [input_[index]]


@handles("braze.concat")
def concat(op, operands, context):
    return [torch.cat(operands, dim=op.dim.value)]


@handles("braze.take")
def take(op, operands, context):
    table, indices = operands
    dim = op.dim.value
    limit = table.shape[dim]
    if indices.numel():
        out_of_range = (indices < 0) | (indices >= limit)
        if bool(out_of_range.any()):
            bad = indices[out_of_range].flatten()[0].item()
            raise op_error(op, f"index {bad} is out of range [0, {limit}) along dim {dim}")
    picked = torch.index_select(table, dim, indices.reshape(-1).to(torch.int64))
    shape = [*table.shape[:dim], *indices.shape, *table.shape[dim + 1 :]]
    return [picked.reshape(shape)]


@handles("braze.iota")
def iota(op, operands, context):
    pending = iter(operands)
    length = next(pending) if op.size is not None else _result_shape(op)[0]
    start = next(pending) if op.dynamic_start is not None else op.start.value
    step = next(pending) if op.dynamic_step is not None else op.step.value
    if length < 0:
        raise op_error(op, f"size {length} is negative")
    # Element i is start + i*step, computed in f64 and then converted.
    values = start + torch.arange(length, dtype=torch.float64, device=context.device) * step
    return [values.to(result_dtype(op))]
