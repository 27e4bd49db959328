"""Rewrite helpers for Python passes that refuse, instead of crash.

MLIR aborts the whole process when an op whose results are still used is
erased; these helpers check first and raise BrazeError naming the users.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from braze.errors import BrazeError, format_location


def _describe(op: ir.Operation) -> str:
    return f"'{op.name}' at {format_location(op.location)}"


def erase_op(op: ir.Operation | ir.OpView) -> None:
    """Erases `op`, or raises BrazeError if any of its results is still used."""
    op = op.operation
    users = [use.owner for result in op.results for use in result.uses]
    if users:
        names = ", ".join(_describe(u.operation) for u in users)
        raise BrazeError(f"cannot erase {_describe(op)}: its results are still used by {names}")
    op.erase()


def replace_op(op: ir.Operation | ir.OpView, values: Sequence[ir.Value]) -> None:
    """Replaces every use of `op`'s results with `values`, then erases `op`."""
    op = op.operation
    values = list(values)
    if len(values) != len(op.results):
        raise BrazeError(
            f"cannot replace {_describe(op)}: it has {len(op.results)} result(s) "
            f"but {len(values)} replacement value(s) were given"
        )
    for result, value in zip(op.results, values):
        if result.type != value.type:
            raise BrazeError(
                f"cannot replace {_describe(op)}: result of type {result.type} "
                f"would be replaced by a value of type {value.type}"
            )
        result.replace_all_uses_with(value)
    op.erase()
