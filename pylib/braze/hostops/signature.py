"""A module's functions and the entry checks of one: choosing the entry
function, and checking the arguments a caller passes against its types
(records, `record.TensorType` and `record.ScalarType`: the checks need no
MLIR)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from braze.errors import BrazeError
from braze.hostops.dtypes import mlir_name, torch_dtype
from braze.hostops.record import ScalarType, TensorType

if TYPE_CHECKING:
    from mlir import ir


def functions(module_op: ir.Operation) -> dict[str, ir.OpView]:
    """The module's `func.func` ops by name."""
    found = {}
    for op in module_op.regions[0].blocks[0].operations:
        if op.operation.name == "func.func":
            found[op.attributes["sym_name"].value] = op
    return found


def _is_public(func_op) -> bool:
    attributes = func_op.operation.attributes
    return "sym_visibility" not in attributes or attributes["sym_visibility"].value == "public"


def has_body(func_op) -> bool:
    return len(func_op.regions[0].blocks) > 0


def select_entry(functions: dict[str, ir.OpView], entry: str | None) -> ir.OpView:
    """The function named `entry`, or else the module's only public one."""
    if entry is not None:
        if entry not in functions:
            known = ", ".join(f"@{name}" for name in functions) or "none"
            raise BrazeError(f"the module has no function @{entry} (it has {known})")
        return functions[entry]
    public = [name for name, func in functions.items() if _is_public(func) and has_body(func)]
    if len(public) != 1:
        listed = ", ".join(f"@{name}" for name in public) or "none"
        raise BrazeError(
            f"the module has {len(public)} public functions with a body ({listed}); "
            "pass entry= to choose one"
        )
    return functions[public[0]]


def check_arguments(func_name: str, types: list[TensorType | ScalarType], arguments: list) -> None:
    """Count, kind, rank, element type and static dims of each argument
    (`types`: the function's argument types as records)."""
    if len(arguments) != len(types):
        raise BrazeError(
            f"@{func_name} takes {len(types)} argument(s) but {len(arguments)} were given"
        )
    for number, (value, type_) in enumerate(zip(arguments, types)):
        where = f"argument #{number}"
        if isinstance(type_, TensorType):
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
                if expected is not None and actual != expected:
                    raise BrazeError(f"{where} dim {dim} is {actual} but the function expects {expected}")
        elif type_.name == "index":
            if isinstance(value, bool) or not isinstance(value, int):
                raise BrazeError(f"{where} must be an int (index), got {type(value).__name__}")
        elif type_.name.startswith("i"):
            if isinstance(value, bool) and type_.name != "i1":
                raise BrazeError(f"{where} is a bool, not an {type_}")
            if not isinstance(value, int):
                raise BrazeError(f"{where} is a {type(value).__name__}, not an {type_}")
        elif type_.name.startswith(("f", "bf")):
            if not isinstance(value, float):
                raise BrazeError(f"{where} is a {type(value).__name__}, not a {type_}")
        else:
            raise BrazeError(f"{where} has type {type_}, which braze does not support as a value")
