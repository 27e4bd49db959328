"""The op-by-op walk: choosing the entry function, checking the arguments,
dispatching each op to its handler, and checking what every handler returns
against the op's declared result types."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from mlir import ir

from braze import symbolic
from braze.errors import BrazeError, format_location
from braze.reference.dtypes import is_dynamic, mlir_name, torch_dtype, type_mismatch
from braze.reference.registry import HANDLERS, op_error

# Torch raises these for bad shapes, dtypes or values; inside a handler they
# mean the program cannot run on these inputs, which we report against the op.
_TORCH_FAILURES = (RuntimeError, ValueError, IndexError, TypeError, ZeroDivisionError)


def module_operation(module) -> ir.Operation:
    """The `builtin.module` op of a braze.Module, an ir.Module or the op itself."""
    from braze.ir import Module  # braze.ir loads the native dialect; import lazily

    if isinstance(module, (Module, ir.Module)):
        return module.operation
    if isinstance(module, (ir.Operation, ir.OpView)) and module.operation.name == "builtin.module":
        return module.operation
    raise TypeError(f"braze.reference.run expects a braze.Module, got {type(module).__name__}")


def _functions(module_op: ir.Operation) -> dict[str, ir.OpView]:
    functions = {}
    for op in module_op.regions[0].blocks[0].operations:
        if op.operation.name == "func.func":
            functions[op.attributes["sym_name"].value] = op
    return functions


def _is_public(func_op) -> bool:
    attributes = func_op.operation.attributes
    return "sym_visibility" not in attributes or attributes["sym_visibility"].value == "public"


def _has_body(func_op) -> bool:
    return len(func_op.regions[0].blocks) > 0


def select_entry(functions: dict[str, ir.OpView], entry: str | None) -> ir.OpView:
    """The function named `entry`, or else the module's only public one."""
    if entry is not None:
        if entry not in functions:
            known = ", ".join(f"@{name}" for name in functions) or "none"
            raise BrazeError(f"the module has no function @{entry} (it has {known})")
        return functions[entry]
    public = [name for name, func in functions.items() if _is_public(func) and _has_body(func)]
    if len(public) != 1:
        listed = ", ".join(f"@{name}" for name in public) or "none"
        raise BrazeError(
            f"the module has {len(public)} public functions with a body ({listed}); "
            "pass entry= to choose one"
        )
    return functions[public[0]]


def _as_input(value):
    """User inputs as torch CPU tensors (tensors) or Python ints (index)."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return value.cpu()
    return value


def check_arguments(func_name: str, types: list[ir.Type], arguments: list) -> None:
    """Count, kind, rank, element type and static dims of each argument."""
    if len(arguments) != len(types):
        raise BrazeError(
            f"@{func_name} takes {len(types)} argument(s) but {len(arguments)} were given"
        )
    for number, (value, type_) in enumerate(zip(arguments, types)):
        where = f"argument #{number}"
        if isinstance(type_, ir.RankedTensorType):
            if not isinstance(value, torch.Tensor):
                raise BrazeError(f"{where} must be a tensor of type {type_}, got {type(value).__name__}")
            if value.dim() != type_.rank:
                raise BrazeError(
                    f"{where} has rank {value.dim()} but the function expects rank {type_.rank} ({type_})"
                )
            expected_dtype = torch_dtype(type_.element_type)
            if value.dtype != expected_dtype:
                raise BrazeError(
                    f"{where} has element type {mlir_name(value.dtype)} ({value.dtype}) but the "
                    f"function expects {type_.element_type} ({expected_dtype})"
                )
            for dim, (actual, expected) in enumerate(zip(value.shape, type_.shape)):
                if not is_dynamic(expected) and actual != expected:
                    raise BrazeError(f"{where} dim {dim} is {actual} but the function expects {expected}")
        elif isinstance(type_, ir.IndexType):
            if isinstance(value, bool) or not isinstance(value, int):
                raise BrazeError(f"{where} must be an int (index), got {type(value).__name__}")
        else:
            problem = type_mismatch(value, type_)
            if problem is not None:
                raise BrazeError(f"{where} {problem}")


class Interpreter:
    """Runs the functions of one module with torch CPU ops."""

    def __init__(self, module_op: ir.Operation, parameters: dict[str, Any] | None):
        self.module_op = module_op
        self.functions = _functions(module_op)
        self.parameters = dict(parameters or {})

    @staticmethod
    def result_dtype(op) -> torch.dtype:
        """The torch dtype of an op's first result (a tensor)."""
        return torch_dtype(op.operation.results[0].type.element_type)

    def run_entry(self, entry: str | None, inputs: tuple) -> list:
        func = select_entry(self.functions, entry)
        if not _has_body(func):
            raise BrazeError(f"@{func.attributes['sym_name'].value} is a declaration without a body")
        arguments = [_as_input(value) for value in inputs]
        name = func.attributes["sym_name"].value
        check_arguments(name, list(func.type.inputs), arguments)
        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in arguments]
        symbolic.bind_function_symbols(func.operation, self.module_op, shapes)
        results = self.run_function(func, arguments)
        # Outputs never alias inputs or parameters, so callers may modify them.
        return [r.clone() if isinstance(r, torch.Tensor) else r for r in results]

    def call(self, callee: str, arguments: list, caller) -> list:
        """`func.call`: runs another function of the module."""
        if callee not in self.functions or not _has_body(self.functions[callee]):
            raise op_error(caller, f"calls @{callee}, which has no body in this module")
        func = self.functions[callee]
        try:
            check_arguments(callee, list(func.type.inputs), arguments)
        except BrazeError as error:
            raise op_error(caller, error.message) from None
        return self.run_function(func, arguments)

    def run_function(self, func, arguments: list) -> list:
        return self.run_region(func, arguments, "func.return")

    def run_region(self, op, arguments: list, terminator: str) -> list:
        """Runs the single-block region of `op` (a function or a braze.group)
        and returns the operands of its terminator."""
        blocks = op.regions[0].blocks
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
        name = op.operation.name
        handler = HANDLERS.get(name)
        if handler is None:
            raise BrazeError(
                f"the reference interpreter does not support '{name}' "
                f"(at {format_location(op.operation.location)})"
            )
        try:
            results = handler(op, operands, self)
        except BrazeError:
            raise
        except _TORCH_FAILURES as error:
            raise op_error(op, f"cannot run on these operands: {error}") from None
        declared = list(op.operation.results)
        if len(results) != len(declared):
            raise op_error(op, f"produced {len(results)} result(s) for {len(declared)}")
        for number, (value, result) in enumerate(zip(results, declared)):
            problem = type_mismatch(value, result.type)
            if problem is not None:
                # The computation follows the op's semantics, so the declared
                # type must be wrong: the IR claims something it does not do.
                raise op_error(op, f"result #{number} {problem}")
        return results
