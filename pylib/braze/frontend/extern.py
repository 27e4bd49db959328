"""`braze.extern`: an aten call braze has no lowering for, kept in the graph.

The importer emits one when a node's target has no lowering, or when its
lowering refuses the node's form (a symbolic slice bound, an unsupported
dtype): the op then runs through PyTorch while the rest of the graph is
still fused and compiled. The call's arguments become attributes (see the
op's documentation in dialects/BrazeHostOps.td); `braze.reference.extern`
turns them back into a call.
"""

from __future__ import annotations

import torch
from mlir import ir

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.types import element_type, tensor_type

_OBJECT_KINDS = {torch.device: "device", torch.layout: "layout", torch.memory_format: "memory_format"}


class _Encoder:
    """Turns a call's arguments into attributes; each MLIR value becomes an
    operand, referred to by an `index`-typed integer."""

    def __init__(self):
        self.operands: list[ir.Value] = []

    def encode(self, value) -> ir.Attribute:
        if isinstance(value, ir.Value):
            self.operands.append(value)
            return ir.IntegerAttr.get(ir.IndexType.get(), len(self.operands) - 1)
        if value is None:
            return ir.UnitAttr.get()
        if isinstance(value, bool):
            return ir.BoolAttr.get(value)
        if isinstance(value, int):
            return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
        if isinstance(value, float):
            return ir.FloatAttr.get_f64(value)
        if isinstance(value, str):
            return ir.StringAttr.get(value)
        if isinstance(value, (list, tuple)):
            return ir.ArrayAttr.get([self.encode(v) for v in value])
        if isinstance(value, torch.dtype):
            return ir.TypeAttr.get(element_type(value))
        kind = _OBJECT_KINDS.get(type(value))
        if kind is not None:
            text = str(value).removeprefix("torch.")
            return ir.DictAttr.get({kind: ir.StringAttr.get(text)})
        raise BrazeError(f"an argument of type {type(value).__name__} cannot be passed to an extern call")


def _result_types(meta) -> tuple[list[ir.Type], list[int | None]]:
    """The op's result types, and for each returned item its result number
    (None for a `None` the overload returns)."""
    items = list(meta) if isinstance(meta, (tuple, list)) else [meta]
    types, numbers = [], []
    for item in items:
        if isinstance(item, torch.Tensor):
            types.append(tensor_type(item))
        elif isinstance(item, (int, torch.SymInt)):
            types.append(ir.IndexType.get())
        elif item is None:
            numbers.append(None)
            continue
        else:
            raise BrazeError(f"an extern call returning {type(item).__name__} is not supported")
        numbers.append(len(types) - 1)
    return types, numbers


def _is_pure(target: torch._ops.OpOverload) -> bool:
    """Whether the overload mutates nothing (no argument its schema writes)
    and draws no random numbers: the same inputs give the same results,
    with no effect besides them."""
    return not target._schema.is_mutable and torch.Tag.nondeterministic_seeded not in target.tags


def emit_extern(target, meta, args: tuple, kwargs: dict):
    """Emits `braze.extern` for `target(*args, **kwargs)` whose result is
    described by `meta` (the node's meta value); returns what the importer
    records for the node: one value, or a tuple for a tuple-returning
    overload (None where it returns None)."""
    if not isinstance(target, torch._ops.OpOverload):
        raise BrazeError(f"{target} is not an aten overload, so it cannot run as an extern call")
    encoder = _Encoder()
    arguments = ir.ArrayAttr.get([encoder.encode(a) for a in args])
    keywords = {name: encoder.encode(v) for name, v in kwargs.items()}
    types, numbers = _result_types(meta)
    op = bz.ExternOp(types, encoder.operands, str(target), arguments,
                     keywords=ir.DictAttr.get(keywords) if keywords else None, pure=_is_pure(target))
    results = list(op.results)
    if not isinstance(meta, (tuple, list)):
        return results[0]
    return tuple(None if n is None else results[n] for n in numbers)
