"""Layout ops: reshape, permute, expand, slice, concat, take, iota.

Dynamic result dims take their sizes from `index` operands (Python ints here)
in the order the op's description gives. Each handler reads the op's
record (attributes and types, `record.OpRecord`) once (`prepares`).
"""

from __future__ import annotations

import torch

from braze.hostops.dtypes import is_dynamic, torch_dtype
from braze.hostops.table import op_error, prepares


def _result_shape(op) -> list[int | None]:
    """The first result's dims, dynamic ones as None."""
    return list(op.result_types[0].shape)


def _take_sizes(op, sizes: list[int], needed: int) -> list[int]:
    if len(sizes) != needed:
        raise op_error(op, f"has {len(sizes)} size operand(s) for {needed} dynamic dim(s)")
    for size in sizes:
        if size < 0:
            raise op_error(op, f"size operand {size} is negative")
    return sizes


@prepares("braze.reshape")
def reshape(op):
    result_shape = _result_shape(op)
    dynamic = [i for i, size in enumerate(result_shape) if is_dynamic(size)]
    static_count = 1
    for size in result_shape:
        static_count *= 1 if is_dynamic(size) else size
    # A single dynamic dim without a size operand follows from the element count.
    inferred = len(dynamic) == 1 and len(op.operand_types) == 1
    if inferred:
        result_shape[dynamic[0]] = -1

    def run(operands, context):
        input_, *sizes = operands
        shape = list(result_shape)
        if inferred:
            if static_count == 0 or input_.numel() % static_count:
                raise op_error(op, f"cannot reshape {list(input_.shape)} to {shape}")
            return [input_.reshape(shape)]
        count = static_count
        for i, size in zip(dynamic, _take_sizes(op, sizes, len(dynamic))):
            shape[i] = size
            count *= size
        if count != input_.numel():
            raise op_error(op, f"cannot reshape {list(input_.shape)} ({input_.numel()} elements) to {shape}")
        return [input_.reshape(shape)]

    return run


@prepares("braze.permute")
def permute(op):
    permutation = list(op.attributes["permutation"])

    def run(operands, context):
        (input_,) = operands
        return [input_.permute(permutation)]

    return run


@prepares("braze.expand")
def expand(op):
    input_shape = list(op.operand_types[0].shape)
    result_shape = _result_shape(op)
    offset = len(result_shape) - len(input_shape)  # input dims align with the last result dims

    def run(operands, context):
        input_, *sizes = operands
        shape = list(result_shape)
        pending = list(sizes)
        for i, size in enumerate(shape):
            if not is_dynamic(size):
                continue
            input_dim = i - offset
            if input_dim >= 0 and is_dynamic(input_shape[input_dim]):
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

    return run


_DYNAMIC = -(2**63)  # ShapedType::kDynamic in a static bounds array


@prepares("braze.slice")
def slice_(op):
    dim = op.attributes["dim"]
    bounds = list(op.attributes["static_bounds"])
    symbolic_end = bounds[1] == _DYNAMIC
    leading = (slice(None),) * dim
    if _DYNAMIC not in bounds:
        # Constant bounds clamp `end` to the dim's size, as Python slicing does.
        index = leading + (slice(*bounds),)
        return lambda operands, context: [operands[0][index]]

    def run(operands, context):
        input_, *symbolic = operands
        size = input_.shape[dim]
        pending = iter(symbolic)
        start, end, step = [next(pending) if bound == _DYNAMIC else bound for bound in bounds]
        # Symbolic bounds are checked, never clamped: a bound outside the dim
        # is a run-time error (the model asked for elements that are not there).
        if step < 1:
            raise op_error(op, f"step {step} must be at least 1")
        if not 0 <= start <= (end if symbolic_end else min(end, size)) or (symbolic_end and end > size):
            raise op_error(op, f"bounds [{start} : {end}] are out of range for dim {dim} of size {size}")
        # A constant `end` is clamped to the dim's size, as Python slicing does.
        return [input_[leading + (slice(start, end, step),)]]

    return run


@prepares("braze.concat")
def concat(op):
    dim = op.attributes["dim"]
    return lambda operands, context: [torch.cat(operands, dim=dim)]


@prepares("braze.take")
def take(op):
    dim = op.attributes["dim"]

    def out_of_range(table, indices):
        limit = table.shape[dim]
        outside = (indices < 0) | (indices >= limit)
        if indices.numel() and bool(outside.any()):
            bad = indices[outside].flatten()[0].item()
            return op_error(op, f"index {bad} is out of range [0, {limit}) along dim {dim}")
        return None

    # An embedding lookup on the CPU: torch's embedding checks the indices
    # itself (2.5 us for one token's row, against 9.6 to check them here and
    # then index); its error is made precise. (On a GPU a bad index would be
    # a device-side assert: the indices are checked first.)
    lookup = dim == 0 and len(op.operand_types[0].shape) == 2 and torch_dtype(
        op.operand_types[1].element_type) in (torch.int64, torch.int32)

    def run(operands, context):
        table, indices = operands
        if lookup and table.device.type == "cpu":
            try:
                return [torch.embedding(table, indices)]
            except IndexError:
                error = out_of_range(table, indices)
                if error is None:
                    raise
                raise error from None
        error = out_of_range(table, indices)
        if error is not None:
            raise error
        # Advanced indexing reads strided (e.g. expanded) indices in place,
        # where flattening them for index_select would copy.
        return [table[(slice(None),) * dim + (indices,)]]

    return run


def _integral_as_int(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


@prepares("braze.iota")
def iota(op):
    # Which of size, start and step are operands (in that order); the others
    # are the result's static length and the op's attributes.
    has_size, has_start, has_step = op.attributes["operandSegmentSizes"]
    length = None if has_size else _result_shape(op)[0]
    start = None if has_start else _integral_as_int(op.attributes.get("start", 0.0))
    step = None if has_step else _integral_as_int(op.attributes.get("step", 1.0))
    dtype = torch_dtype(op.result_types[0].element_type)
    integral = dtype in (torch.int64, torch.int32)

    def run(operands, context):
        pending = iter(operands)
        size = next(pending) if length is None else length
        first = next(pending) if start is None else start
        stride = next(pending) if step is None else step
        if size < 0:
            raise op_error(op, f"size {size} is negative")
        if integral and isinstance(first, int) and isinstance(stride, int) and stride:
            # Exact in integers: one arange (2 against 9 us for a decode
            # step's position).
            return [torch.arange(first, first + size * stride, stride, dtype=dtype, device=context.device)]
        # Element i is start + i*step, computed in f64 and then converted.
        values = first + torch.arange(size, dtype=torch.float64, device=context.device) * stride
        return [values.to(dtype)]

    return run
