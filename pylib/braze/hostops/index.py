"""Index arithmetic: `tensor.dim` and `arith` integer arithmetic on `index`
(and iN) scalars held as Python ints."""

from __future__ import annotations

from braze.hostops.table import op_error, prepares


def _wrap(value: int, bits: int) -> int:
    """Two's-complement wrap-around to `bits`, as the hardware op would do."""
    if bits == 1:
        return value & 1
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _truncating_divide(lhs: int, rhs: int) -> int:
    quotient = abs(lhs) // abs(rhs)
    return quotient if (lhs < 0) == (rhs < 0) else -quotient


def _ceiling_divide(lhs: int, rhs: int) -> int:
    return -((-lhs) // rhs)


def _signed_remainder(lhs: int, rhs: int) -> int:
    # The remainder takes the dividend's sign, as in C.
    return lhs - rhs * _truncating_divide(lhs, rhs)


_INTEGER_BINARY = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.floordivsi": lambda a, b: a // b,
    "arith.divsi": _truncating_divide,
    "arith.ceildivsi": _ceiling_divide,
    "arith.remsi": _signed_remainder,
    "arith.maxsi": max,
    "arith.minsi": min,
}
_DIVISIONS = {"arith.floordivsi", "arith.divsi", "arith.ceildivsi", "arith.remsi"}


@prepares(*_INTEGER_BINARY)
def integer_binary(op):
    compute = _INTEGER_BINARY[op.name]
    divides = op.name in _DIVISIONS
    bits = op.result_types[0].bit_width

    def run(operands, context):
        lhs, rhs = (int(v) for v in operands)
        if divides and rhs == 0:
            raise op_error(op, "division by zero")
        return [_wrap(compute(lhs, rhs), bits)]

    return run


@prepares("arith.index_cast")
def index_cast(op):
    bits = op.result_types[0].bit_width
    # Narrowing truncates; widening sign-extends, which a Python int already is.
    return lambda operands, context: [_wrap(int(operands[0]), bits)]


@prepares("tensor.dim")
def tensor_dim(op):
    def run(operands, context):
        tensor, dim = operands
        if not 0 <= dim < tensor.dim():
            raise op_error(op, f"dim {dim} is out of range for a tensor of rank {tensor.dim()}")
        return [int(tensor.shape[dim])]

    return run
