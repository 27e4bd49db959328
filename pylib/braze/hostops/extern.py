"""`braze.extern`: the aten call its attributes describe, through torch.

`prepare_extern(record)` decodes the op's attributes (from its `OpRecord`)
once and returns a function of the operands' runtime values; the handler below (which the reference
interpreter runs) and the runtime's prepared extern step both use it, so an
extern op has one meaning everywhere.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from braze.hostops.dtypes import torch_dtype
from braze.hostops.record import IndexValue, TypeValue
from braze.hostops.table import op_error, prepares

_OBJECTS = {
    "device": torch.device,
    "layout": lambda name: getattr(torch, name),
    "memory_format": lambda name: getattr(torch, name),
}


class _Operand:
    """Where operand `number`'s runtime value goes in the call."""

    def __init__(self, number: int):
        self.number = number


def _decode(value):
    """An argument attribute's record value as a Python value (operands as
    `_Operand`, dictionaries as the torch object they name)."""
    if isinstance(value, IndexValue):
        return _Operand(value.value)
    if isinstance(value, TypeValue):
        return torch_dtype(value.name)
    if isinstance(value, list):
        return [_decode(element) for element in value]
    if isinstance(value, dict):
        ((kind, name),) = value.items()
        return _OBJECTS[kind](name)
    return value  # None (a unit attribute), bool, int, float or str


def _has_operands(value) -> bool:
    if isinstance(value, _Operand):
        return True
    return isinstance(value, list) and any(_has_operands(v) for v in value)


def _filler(value) -> Callable[[list], Any]:
    """A function of the operand values that rebuilds `value`, copying only
    the lists that hold operands."""
    if isinstance(value, _Operand):
        number = value.number
        return lambda operands: operands[number]
    if isinstance(value, list) and _has_operands(value):
        parts = [_filler(v) for v in value]
        return lambda operands: [part(operands) for part in parts]
    return lambda operands: value


def extern_overload(op) -> torch._ops.OpOverload:
    """The aten overload a `braze.extern` op (its record) names."""
    target = op.attributes["target"]
    namespace, name, overload = target.split(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except (AttributeError, RuntimeError):
        raise op_error(op, f"torch has no op {target}") from None


def prepare_extern(op) -> Callable[[list], list]:
    """The call `op` describes, as a function from operand values to the
    list of its results."""
    overload = extern_overload(op)
    arguments = _filler([_decode(a) for a in op.attributes["arguments"]])
    keywords = {name: _filler(_decode(value)) for name, value in op.attributes.get("keywords", {}).items()}
    result_count = len(op.result_types)

    def call(operands: list) -> list:
        output = overload(*arguments(operands), **{k: fill(operands) for k, fill in keywords.items()})
        results = [r for r in output if r is not None] if isinstance(output, (tuple, list)) else [output]
        if len(results) != result_count:
            raise op_error(op, f"{overload} returned {len(results)} value(s) for {result_count} result(s)")
        return results

    return call


@prepares("braze.extern")
def extern(op):
    call = prepare_extern(op)
    return lambda operands, context: call(operands)
