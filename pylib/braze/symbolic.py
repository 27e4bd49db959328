"""Symbolic dims: binding named sizes from input shapes and checking them.

A dynamic dim (`?`) of a function argument may be given a name so that the
runtime can check that sizes which must agree do agree, and stay in range.
This module holds that logic without depending on torch, so the reference
interpreter and a compiled executor share it; it only needs shapes.

Attribute format (what the frontend emits):

* Function argument attribute `braze.dims`: an ArrayAttr with one entry per
  dim of the argument. A StringAttr entry is a dim expression; an
  IntegerAttr entry is a static size::

      func.func @f(%x: tensor<?x64xf32> {braze.dims = ["s0", 64]},
                   %y: tensor<?xf32> {braze.dims = ["2*s0 + 1"]})

  An expression is built from non-negative integers, symbol names
  (`[A-Za-z_][A-Za-z0-9_]*`), `+`, `-`, `*`, `//` (floor division) and
  parentheses, with the usual precedence. A dim that is just a symbol name
  binds that symbol; any other expression is evaluated once all symbols are
  bound and checked against the actual size. Every symbol in a derived
  expression must also appear alone as some argument's dim.

* Module attribute `braze.symbols`: a DictionaryAttr mapping each symbol name
  to an ArrayAttr `[min, max]` of i64 integers, both inclusive; `max = -1`
  means unbounded (a one-element array `[min]` means the same). A third
  entry, when present, is a divisor the value must be a multiple of (from
  `braze.ShapeVar(..., multiple_of=8)`)::

      module attributes {braze.symbols = {s0 = [2, 64], s1 = [1, -1], S = [8, 512, 8]}} { ... }

  A function may carry its own `braze.symbols`; its entries override the
  module's. A symbol without a range is only required to be consistent.

Errors are `BrazeError`s whose messages name the argument and dim, e.g.
"argument #1 dim 0 is 7 but s0 = 8 from argument #0 dim 1" or
"s0 = 100 is outside its range [2, 64] (argument #0 dim 0)" or
"argument #0 dim 1 is 30, but S must be a multiple of 8".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from braze.errors import BrazeError

if TYPE_CHECKING:
    from mlir import ir

DIMS_ATTRIBUTE = "braze.dims"
SYMBOLS_ATTRIBUTE = "braze.symbols"
UNBOUNDED = -1

# ---------------------------------------------------------------------------
# Dim expressions
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Constant:
    value: int

    def evaluate(self, bindings: dict[str, int]) -> int:
        return self.value

    def symbols(self) -> set[str]:
        return set()

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Symbol:
    name: str

    def evaluate(self, bindings: dict[str, int]) -> int:
        return bindings[self.name]

    def symbols(self) -> set[str]:
        return {self.name}

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Negate:
    operand: DimExpr

    def evaluate(self, bindings: dict[str, int]) -> int:
        return -self.operand.evaluate(bindings)

    def symbols(self) -> set[str]:
        return self.operand.symbols()

    def __str__(self) -> str:
        return f"-{_parenthesize(self.operand, _precedence(self))}"


@dataclass(frozen=True)
class BinaryOp:
    operator: str  # one of + - * //
    lhs: DimExpr
    rhs: DimExpr

    def evaluate(self, bindings: dict[str, int]) -> int:
        lhs, rhs = self.lhs.evaluate(bindings), self.rhs.evaluate(bindings)
        if self.operator == "+":
            return lhs + rhs
        if self.operator == "-":
            return lhs - rhs
        if self.operator == "*":
            return lhs * rhs
        if rhs == 0:
            raise BrazeError(f"division by zero in dim expression '{self}'")
        return lhs // rhs

    def symbols(self) -> set[str]:
        return self.lhs.symbols() | self.rhs.symbols()

    def __str__(self) -> str:
        # Minimal parentheses, so errors show the expression as a person writes it.
        precedence = _precedence(self)
        lhs = _parenthesize(self.lhs, precedence)
        rhs = _parenthesize(self.rhs, precedence + 1)  # left-associative operators
        separator = f" {self.operator} " if self.operator in "+-" else self.operator
        return f"{lhs}{separator}{rhs}"


def _precedence(expression) -> int:
    if isinstance(expression, BinaryOp):
        return 1 if expression.operator in ("+", "-") else 2
    return 3 if isinstance(expression, Negate) else 4


def _parenthesize(expression, minimum_precedence: int) -> str:
    text = str(expression)
    return f"({text})" if _precedence(expression) < minimum_precedence else text


DimExpr = Constant | Symbol | Negate | BinaryOp

_TOKEN = re.compile(r"\s*(?:(?P<number>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>//|[-+*()]))")


def _tokenize(text: str) -> list[str]:
    tokens, position = [], 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match:
            raise BrazeError(f"cannot parse dim expression {text!r} at character {position}")
        tokens.append(match.group(match.lastgroup))
        position = match.end()
    return tokens


class _Parser:
    """Recursive descent over: sum := product (('+'|'-') product)*;
    product := unary (('*'|'//') unary)*; unary := '-' unary | atom;
    atom := number | name | '(' sum ')'."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.position = 0

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self) -> str:
        token = self._peek()
        if token is None:
            raise BrazeError(f"dim expression {self.text!r} ends unexpectedly")
        self.position += 1
        return token

    def parse(self) -> DimExpr:
        expression = self._sum()
        if self._peek() is not None:
            raise BrazeError(f"unexpected {self._peek()!r} in dim expression {self.text!r}")
        return expression

    def _sum(self) -> DimExpr:
        expression = self._product()
        while self._peek() in ("+", "-"):
            expression = BinaryOp(self._take(), expression, self._product())
        return expression

    def _product(self) -> DimExpr:
        expression = self._unary()
        while self._peek() in ("*", "//"):
            expression = BinaryOp(self._take(), expression, self._unary())
        return expression

    def _unary(self) -> DimExpr:
        if self._peek() == "-":
            self._take()
            return Negate(self._unary())
        return self._atom()

    def _atom(self) -> DimExpr:
        token = self._take()
        if token == "(":
            expression = self._sum()
            if self._take() != ")":
                raise BrazeError(f"missing ')' in dim expression {self.text!r}")
            return expression
        if token.isdigit():
            return Constant(int(token))
        if token[0].isalpha() or token[0] == "_":
            return Symbol(token)
        raise BrazeError(f"unexpected {token!r} in dim expression {self.text!r}")


def parse_dim_expression(text: str) -> DimExpr:
    """`"2*s0 + 1"` as an expression tree (no `eval`: only the grammar above)."""
    return _Parser(text).parse()


# ---------------------------------------------------------------------------
# Ranges and binding
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SymbolRange:
    minimum: int
    maximum: int | None  # None: unbounded
    multiple_of: int = 1

    def contains(self, value: int) -> bool:
        return value >= self.minimum and (self.maximum is None or value <= self.maximum)

    def __str__(self) -> str:
        upper = "unbounded" if self.maximum is None else str(self.maximum)
        return f"[{self.minimum}, {upper}]"


# One entry per dim of an argument: a static size, an expression, or None
# (a dim with no name: nothing to bind or check beyond the type).
DimSpec = int | DimExpr | None


def _where(argument: int, dim: int) -> str:
    return f"argument #{argument} dim {dim}"


def bind_symbols(
    dim_specs: list[list[DimSpec] | None],
    shapes: list[tuple[int, ...] | None],
    ranges: dict[str, SymbolRange],
) -> dict[str, int]:
    """Binds every symbol from `shapes` and checks all constraints.

    `dim_specs[i]` describes argument `i` (None: no `braze.dims`), `shapes[i]`
    is its actual shape (None for non-tensor arguments). Returns the bindings.
    """
    bindings: dict[str, int] = {}
    bound_at: dict[str, tuple[int, int]] = {}
    derived: list[tuple[int, int, DimExpr, int]] = []
    for argument, (specs, shape) in enumerate(zip(dim_specs, shapes)):
        if specs is None or shape is None:
            continue
        if len(specs) != len(shape):
            raise BrazeError(
                f"argument #{argument} has {len(shape)} dim(s) but its {DIMS_ATTRIBUTE} "
                f"lists {len(specs)}"
            )
        for dim, (spec, actual) in enumerate(zip(specs, shape)):
            if spec is None:
                continue
            if isinstance(spec, int):
                if actual != spec:
                    raise BrazeError(
                        f"{_where(argument, dim)} is {actual} but the function expects {spec}"
                    )
            elif isinstance(spec, Symbol):
                if spec.name in bindings and bindings[spec.name] != actual:
                    first_argument, first_dim = bound_at[spec.name]
                    raise BrazeError(
                        f"{_where(argument, dim)} is {actual} but {spec.name} = "
                        f"{bindings[spec.name]} from {_where(first_argument, first_dim)}"
                    )
                if spec.name not in bindings:
                    bindings[spec.name] = actual
                    bound_at[spec.name] = (argument, dim)
            else:
                derived.append((argument, dim, spec, actual))

    for name, value in bindings.items():
        symbol_range = ranges.get(name)
        if symbol_range is not None and not symbol_range.contains(value):
            argument, dim = bound_at[name]
            raise BrazeError(
                f"{name} = {value} is outside its range {symbol_range} ({_where(argument, dim)})"
            )
        if symbol_range is not None and value % symbol_range.multiple_of:
            argument, dim = bound_at[name]
            raise BrazeError(
                f"{_where(argument, dim)} is {value}, but {name} must be a multiple of {symbol_range.multiple_of}"
            )

    for argument, dim, expression, actual in derived:
        unbound = sorted(expression.symbols() - bindings.keys())
        if unbound:
            raise BrazeError(
                f"{_where(argument, dim)} is '{expression}' but {', '.join(unbound)} "
                "is not bound by any argument dim that is just the symbol"
            )
        expected = expression.evaluate(bindings)
        if actual != expected:
            raise BrazeError(f"{_where(argument, dim)} is {actual} but {expression} = {expected}")
    return bindings


# ---------------------------------------------------------------------------
# Reading the attributes
# ---------------------------------------------------------------------------


def dim_specs_from_attribute(attribute: ir.Attribute) -> list[DimSpec]:
    """A `braze.dims` ArrayAttr as a list of static sizes and expressions."""
    from mlir import ir  # only reading the attributes needs MLIR; binding does not

    if not isinstance(attribute, ir.ArrayAttr):
        raise BrazeError(f"{DIMS_ATTRIBUTE} must be an array, got {attribute}")
    specs: list[DimSpec] = []
    for entry in attribute:
        if isinstance(entry, ir.StringAttr):
            specs.append(parse_dim_expression(entry.value))
        elif isinstance(entry, ir.IntegerAttr):
            specs.append(entry.value)
        else:
            raise BrazeError(f"{DIMS_ATTRIBUTE} entries must be strings or integers, got {entry}")
    return specs


def symbol_ranges_from_attribute(attribute: ir.Attribute) -> dict[str, SymbolRange]:
    """A `braze.symbols` DictionaryAttr as {name: SymbolRange}."""
    from mlir import ir

    if not isinstance(attribute, ir.DictAttr):
        raise BrazeError(f"{SYMBOLS_ATTRIBUTE} must be a dictionary, got {attribute}")
    ranges = {}
    for named in attribute:
        bounds = named.attr
        if not isinstance(bounds, ir.ArrayAttr) or not 1 <= len(bounds) <= 3 or not all(
            isinstance(b, ir.IntegerAttr) for b in bounds
        ):
            raise BrazeError(
                f"{SYMBOLS_ATTRIBUTE} entry {named.name} must be [min, max] or [min, max, multiple_of] "
                f"integers, got {bounds}"
            )
        values = [b.value for b in bounds]
        maximum = values[1] if len(values) >= 2 and values[1] != UNBOUNDED else None
        multiple_of = values[2] if len(values) == 3 else 1
        if multiple_of < 1:
            raise BrazeError(f"{SYMBOLS_ATTRIBUTE} entry {named.name} has multiple_of {multiple_of}; it must be >= 1")
        ranges[named.name] = SymbolRange(values[0], maximum, multiple_of)
    return ranges


def function_symbol_ranges(func_op: ir.Operation, module_op: ir.Operation | None) -> dict[str, SymbolRange]:
    """The module's `braze.symbols`, overridden by the function's own."""
    ranges: dict[str, SymbolRange] = {}
    for owner in (module_op, func_op):
        if owner is not None and SYMBOLS_ATTRIBUTE in owner.attributes:
            ranges.update(symbol_ranges_from_attribute(owner.attributes[SYMBOLS_ATTRIBUTE]))
    return ranges


def function_dim_specs(func_op: ir.Operation) -> list[list[DimSpec] | None]:
    """Each argument's `braze.dims` (None where it has none)."""
    argument_count = len(func_op.regions[0].blocks[0].arguments) if func_op.regions[0].blocks else 0
    specs: list[list[DimSpec] | None] = [None] * argument_count
    if "arg_attrs" not in func_op.attributes:
        return specs
    for argument, attributes in enumerate(func_op.attributes["arg_attrs"]):
        if DIMS_ATTRIBUTE in attributes:
            specs[argument] = dim_specs_from_attribute(attributes[DIMS_ATTRIBUTE])
    return specs


def bind_function_symbols(
    func_op: ir.Operation, module_op: ir.Operation | None, shapes: list[tuple[int, ...] | None]
) -> dict[str, int]:
    """Reads a function's dim attributes and checks `shapes` against them."""
    return bind_symbols(function_dim_specs(func_op), shapes, function_symbol_ranges(func_op, module_op))
