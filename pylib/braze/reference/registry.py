"""The handler table: op name -> function computing the op's results.

A handler receives the op, the runtime values of its operands (torch tensors,
Python ints and floats, in operand order) and the `Interpreter` running it
(for parameters and calls), and returns the list of its result values. The
interpreter checks those results against the op's declared types afterwards,
so handlers only compute.
"""

from __future__ import annotations

from typing import Any, Callable

from mlir import ir

from braze.dispatch import DispatchTable
from braze.errors import BrazeError, format_location

Handler = Callable[[ir.OpView, list[Any], Any], list[Any]]

HANDLERS = DispatchTable("reference handlers")
handles = HANDLERS.register


def op_error(op: ir.OpView | ir.Operation, message: str) -> BrazeError:
    """A BrazeError naming the op and where it is in the source."""
    operation = op.operation
    return BrazeError(f"'{operation.name}' at {format_location(operation.location)}: {message}")
