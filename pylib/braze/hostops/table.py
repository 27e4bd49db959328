"""The host-op table: op name -> function computing the op's results.

A handler receives the op, the runtime values of its operands (torch
tensors, Python ints and floats, in operand order) and a `HostContext`, and
returns the list of its result values. It computes with torch on whatever
device its operands live; what it creates (constants, parameters, iotas)
goes to the context's device.

A handler registered with `prepares` is written in two stages: it reads the
op's `OpRecord` (its attributes and types as plain data, see `record`) once
and returns a function of the operands and context alone. `prepare_record`
gives that function, which the runtime keeps for each step of a program, so
that a call runs only the torch work; calling the handler itself (as the
reference interpreter does) prepares and runs in one go. Records need no
MLIR, so neither do the prepared handlers: an AOT package (braze.aot) keeps
the records of its steps and prepares them again when it is loaded.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from braze.dispatch import DispatchTable
from braze.errors import BrazeError, format_location
from braze.hostops.dtypes import type_mismatch
from braze.hostops.record import OpRecord, op_record

Handler = Callable[[Any, list[Any], "HostContext"], list[Any]]
Prepared = Callable[[list[Any], "HostContext"], list[Any]]

HOST_OPS = DispatchTable("host-op handlers")
handles = HOST_OPS.register

# Torch raises these for bad shapes, dtypes or values; inside a handler they
# mean the program cannot run on these inputs, which we report against the op.
TORCH_FAILURES = (RuntimeError, ValueError, IndexError, TypeError, ZeroDivisionError)


class HostContext:
    """What a handler may ask of whoever runs it: the values of
    `braze.parameter` ops by name, the device new tensors go to, and the
    memory of a library op's result (`result`: `empty(shape, dtype)` where
    the runner gave one, the runtime's choice between its caching allocator
    and torch's; else torch's)."""

    def __init__(self, parameters: dict[str, Any] | None = None, device: str | torch.device = "cpu",
                 empty: Callable[[tuple, torch.dtype], torch.Tensor] | None = None):
        self.parameters = dict(parameters or {})
        self.device = torch.device(device)
        self.empty = empty

    def result(self, shape, dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised contiguous tensor for a result a library op
        writes (`out=`)."""
        if self.empty is not None:
            return self.empty(tuple(shape), dtype)
        return torch.empty(shape, dtype=dtype, device=self.device)


def prepares(*names: str) -> Callable[[Callable[[OpRecord], Prepared]], Handler]:
    """Decorator: registers `prepare(record) -> run(operands, context)` as
    the handler of every op in `names` (see the module's description)."""

    def decorate(prepare: Callable[[OpRecord], Prepared]) -> Handler:
        @functools.wraps(prepare)
        def handler(op, operands, context):
            return prepare(op_record(op))(operands, context)

        handler.prepare = prepare
        return handles(*names)(handler)

    return decorate


def prepare_record(record: OpRecord) -> Prepared | None:
    """The prepared handler of the op `record` describes: a function of its
    operands and a `HostContext`; None when it is not a prepared host op."""
    prepare = getattr(HOST_OPS.get(record.name), "prepare", None)
    return prepare(record) if prepare is not None else None


def prepare_op(op) -> Prepared | None:
    """`op`'s host-op handler with the op's attributes and types read now:
    a function of its operands and a `HostContext`; None when `op` is not a
    host op."""
    handler = HOST_OPS.get(op.operation.name)
    if handler is None:
        return None
    prepare = getattr(handler, "prepare", None)
    return prepare(op_record(op)) if prepare is not None else functools.partial(handler, op)


def op_error(op, message: str) -> BrazeError:
    """A BrazeError naming the op (an MLIR op or an `OpRecord`) and where it
    is in the source."""
    if isinstance(op, OpRecord):
        return BrazeError(f"'{op.name}' at {op.location}: {message}")
    operation = op.operation
    return BrazeError(f"'{operation.name}' at {format_location(operation.location)}: {message}")


def run_op(op, operands: list, context: HostContext, table: dict = HOST_OPS,
           runner: str = "braze's runtime") -> list:
    """Runs `op` through its handler in `table` and checks what it returns
    against the op's declared result types; every failure is a BrazeError
    naming the op (`runner` names who could not run an op it has no
    handler for)."""
    name = op.operation.name
    handler = table.get(name)
    if handler is None:
        raise BrazeError(f"{runner} does not support '{name}' (at {format_location(op.operation.location)})")
    try:
        results = handler(op, operands, context)
    except BrazeError:
        raise
    except TORCH_FAILURES as error:
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
