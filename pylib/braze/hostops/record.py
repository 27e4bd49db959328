"""An op as plain data: what every host-op handler reads of it.

`OpRecord` holds an op's name, location, operand and result types and its
attributes as plain Python values, so that a handler prepared from it (see
`table.prepares`) needs no MLIR: the runtime can keep records, write them
into an AOT package (braze.aot) and prepare them again in a process
without a compiler. `op_record(op)` reads one from an MLIR op; it is the
only function here that touches MLIR.

Types: a ranked tensor is a `TensorType` (dims, None where dynamic, and the
element type's MLIR name: `f32`, `i64`, ...); any other type is a
`ScalarType` with its MLIR name (`index`, `i1`, `f64`, ...).

Attributes (`attribute_value`): bool, int, float and string attributes as
those Python values, arrays (and dense arrays) as lists, a unit attribute as
None (a flag: its presence is what counts); an integer of type `index` as `IndexValue`, a type attribute as
`TypeValue`, a dictionary as a dict of name -> value. Others (dense
elements, affine maps, ...) are kept as their printed text (a `str`), which
no host op reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# MLIR's marker of a dynamic dim (ShapedType::kDynamic).
DYNAMIC_SIZE = -(2**63)


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int | None, ...]
    element_type: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = "".join(f"{'?' if d is None else d}x" for d in self.shape)
        return f"tensor<{dims}{self.element_type}>"


@dataclass(frozen=True)
class ScalarType:
    name: str

    @property
    def bit_width(self) -> int:
        """`index` is 64 bits wide on every target braze compiles for."""
        return 64 if self.name == "index" else int(re.sub(r"^\D+", "", self.name))

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class IndexValue:
    """An integer attribute of type `index` (extern ops name operands so)."""

    value: int


@dataclass(frozen=True)
class TypeValue:
    """A type attribute, by its MLIR name."""

    name: str


@dataclass
class OpRecord:
    name: str
    location: str
    operand_types: list = field(default_factory=list)
    result_types: list = field(default_factory=list)
    attributes: dict = field(default_factory=dict)


def type_record(type_) -> TensorType | ScalarType:
    """An MLIR type as a `TensorType` or `ScalarType`."""
    from mlir import ir

    if isinstance(type_, ir.RankedTensorType):
        return TensorType(tuple(None if d == DYNAMIC_SIZE else d for d in type_.shape), str(type_.element_type))
    return ScalarType(str(type_))


def attribute_value(attribute):
    """An MLIR attribute as a plain value (see the module's description)."""
    from mlir import ir

    if isinstance(attribute, ir.BoolAttr):
        return attribute.value
    if isinstance(attribute, ir.IntegerAttr):
        return IndexValue(attribute.value) if isinstance(attribute.type, ir.IndexType) else attribute.value
    if isinstance(attribute, ir.FloatAttr):
        return attribute.value
    if isinstance(attribute, ir.StringAttr):
        return attribute.value
    if isinstance(attribute, ir.UnitAttr):
        return None
    if isinstance(attribute, ir.TypeAttr):
        return TypeValue(str(attribute.value))
    if isinstance(attribute, ir.ArrayAttr):
        return [attribute_value(element) for element in attribute]
    if isinstance(attribute, (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr, ir.DenseBoolArrayAttr,
                              ir.DenseF32ArrayAttr, ir.DenseF64ArrayAttr)):
        return list(attribute)
    if isinstance(attribute, ir.DictAttr):
        return {named.name: attribute_value(named.attr) for named in attribute}
    return str(attribute)


def op_record(op) -> OpRecord:
    """The record of an MLIR op (an `OpView` or `Operation`)."""
    from braze.errors import format_location

    operation = op.operation
    return OpRecord(
        name=operation.name,
        location=format_location(operation.location),
        operand_types=[type_record(v.type) for v in operation.operands],
        result_types=[type_record(v.type) for v in operation.results],
        attributes={name: attribute_value(operation.attributes[name]) for name in operation.attributes},
    )
