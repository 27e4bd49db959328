"""The op-by-op walk: the entry function and its argument checks (from
braze.hostops.signature, which the runtime uses too), then each op
dispatched to its handler, whose results are checked against the op's
declared result types (braze.hostops.run_op)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from mlir import ir

from braze import symbolic
from braze.errors import BrazeError
from braze.hostops import HostContext, op_error, run_op
from braze.hostops.record import type_record
from braze.hostops.signature import check_arguments, functions, has_body, select_entry
from braze.reference.registry import HANDLERS


def module_operation(module) -> ir.Operation:
    """The `builtin.module` op of a braze.Module, an ir.Module or the op itself."""
    from braze.ir import Module  # braze.ir loads the native dialect; import lazily

    if isinstance(module, (Module, ir.Module)):
        return module.operation
    if isinstance(module, (ir.Operation, ir.OpView)) and module.operation.name == "builtin.module":
        return module.operation
    raise TypeError(f"braze.reference.run expects a braze.Module, got {type(module).__name__}")


def _as_input(value):
    """User inputs as torch CPU tensors (tensors) or Python ints (index)."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return value.cpu()
    return value


class Interpreter(HostContext):
    """Runs the functions of one module with torch CPU ops."""

    def __init__(self, module_op: ir.Operation, parameters: dict[str, Any] | None):
        super().__init__(parameters, "cpu")
        self.module_op = module_op
        self.functions = functions(module_op)

    def run_entry(self, entry: str | None, inputs: tuple) -> list:
        func = select_entry(self.functions, entry)
        if not has_body(func):
            raise BrazeError(f"@{func.attributes['sym_name'].value} is a declaration without a body")
        arguments = [_as_input(value) for value in inputs]
        name = func.attributes["sym_name"].value
        check_arguments(name, [type_record(t) for t in func.type.inputs], arguments)
        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in arguments]
        symbolic.bind_function_symbols(func.operation, self.module_op, shapes)
        results = self.run_function(func, arguments)
        # Outputs never alias inputs or parameters, so callers may modify them.
        return [r.clone() if isinstance(r, torch.Tensor) else r for r in results]

    def call(self, callee: str, arguments: list, caller) -> list:
        """`func.call`: runs another function of the module."""
        if callee not in self.functions or not has_body(self.functions[callee]):
            raise op_error(caller, f"calls @{callee}, which has no body in this module")
        func = self.functions[callee]
        try:
            check_arguments(callee, [type_record(t) for t in func.type.inputs], arguments)
        except BrazeError as error:
            raise op_error(caller, error.message) from None
        return self.run_function(func, arguments)

    def run_function(self, func, arguments: list) -> list:
        return self.run_region(func, arguments, "func.return")

    def run_region(self, op, arguments: list, terminator: str, region: int = 0) -> list:
        """Runs the single-block region number `region` of `op` (a function,
        a braze.group, a branch of a braze.switch, a braze.while's condition
        or body) and returns the operands of its terminator."""
        blocks = op.regions[region].blocks
        if len(blocks) != 1:
            raise op_error(op, "has several blocks; the reference interpreter runs one block")
        block = blocks[0]
        # ir.Value hashes and compares by the underlying SSA value.
        values: dict[ir.Value, Any] = dict(zip(block.arguments, arguments))
        for inner in block.operations:
            name = inner.operation.name
            operands = [values[operand] for operand in inner.operation.operands]
            if name == terminator:
                return operands
            values.update(zip(inner.operation.results, self.run_op(inner, operands)))
        raise op_error(op, f"ends without {terminator}")

    def run_op(self, op, operands: list) -> list:
        return run_op(op, operands, self, HANDLERS, "the reference interpreter")
