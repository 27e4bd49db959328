"""`braze.dynamic_spec`: dynamic dims declared once, by name.

```python
S = braze.ShapeVar("S", min=8, max=512, multiple_of=8)
spec = braze.dynamic_spec(x={1: S}, cache={0: 2 * S})
program = braze.export(model, (x, cache), dynamic_spec=spec)
```

A `ShapeVar` is a named size with an inclusive range and a divisor; derived
dims (`2*S`, `S + 1`, `S//2`) are integer expressions of one ShapeVar. A spec
is checked against the example inputs before tracing, translated to
torch.export's `Dim`s (`translate`), and written into the captured module
(`annotate`): `braze.symbols = {S = [8, 512, 8]}` and each marked dim's
`braze.dims` entry in the user's names (`"S"`, `"2*S"`), so the runtime
refuses a violating input with a message in those names (`braze.symbolic`).

What torch can express: an affine expression `c*K + b` of one root `Dim`.
A ShapeVar with `multiple_of=m` is `m*K` for a root `K` torch ranges over
`[ceil(min/m), max//m]`; `S//k` is that expression divided exactly, so it is
refused at declaration unless `k` divides it for every allowed S.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from mlir import ir

from braze.errors import BrazeError
from braze.symbolic import DIMS_ATTRIBUTE, SYMBOLS_ATTRIBUTE, UNBOUNDED, BinaryOp, Constant, DimExpr, Symbol

__all__ = ["DynamicSpec", "ShapeVar", "dynamic_spec"]

# Where the decorator form leaves a spec for `braze.export` and `braze.compile`.
SPEC_ATTRIBUTE = "__braze_dynamic_spec__"


class _ShapeExpr:
    """An integer expression `coefficient*K + offset` of one ShapeVar's root
    K (the ShapeVar is `multiple_of*K`), with the user's spelling of it."""

    def __init__(self, var: ShapeVar, coefficient: int, offset: int, expression: DimExpr):
        self.var = var
        self.coefficient = coefficient
        self.offset = offset
        self.expression = expression

    def __str__(self) -> str:
        return str(self.expression)

    def __repr__(self) -> str:
        return f"<dim {self}>"

    def value(self, size: int) -> int:
        """The expression's value where the ShapeVar is `size`."""
        return self.coefficient * (size // self.var.multiple_of) + self.offset

    def _operand(self, other, operator: str) -> int:
        if isinstance(other, bool) or not isinstance(other, int):
            raise BrazeError(f"dim expression {self} {operator} {other!r}: only integer constants combine "
                             "with a ShapeVar (derived dims are expressions of one ShapeVar)")
        return other

    def __add__(self, other) -> _ShapeExpr:
        other = self._operand(other, "+")
        return _ShapeExpr(self.var, self.coefficient, self.offset + other,
                          BinaryOp("+" if other >= 0 else "-", self.expression, Constant(abs(other))))

    __radd__ = __add__

    def __sub__(self, other) -> _ShapeExpr:
        return self + -self._operand(other, "-")

    def __mul__(self, other) -> _ShapeExpr:
        if self._operand(other, "*") < 1:
            raise BrazeError(f"dim expression {self}*{other}: the factor must be a positive integer")
        return _ShapeExpr(self.var, self.coefficient * other, self.offset * other,
                          BinaryOp("*", Constant(other), self.expression))

    __rmul__ = __mul__

    def __floordiv__(self, other) -> _ShapeExpr:
        if self._operand(other, "//") < 1:
            raise BrazeError(f"dim expression {self}//{other}: the divisor must be a positive integer")
        if self.coefficient % other or self.offset % other:
            raise BrazeError(
                f"dim expression ({self})//{other} is not exact for every allowed {self.var.name} "
                f"({self.var.name} is declared a multiple of {self.var.multiple_of}); a derived dim must "
                f"divide exactly: declare {self.var.name} with a multiple_of that makes it so")
        return _ShapeExpr(self.var, self.coefficient // other, self.offset // other,
                          BinaryOp("//", self.expression, Constant(other)))

    def torch_dim(self, roots: dict[str, torch.export.Dim]):
        """torch.export's Dim for the expression, over the ShapeVar's root."""
        dim = roots[self.var.name]
        if self.coefficient != 1:
            dim = dim * self.coefficient
        return dim + self.offset if self.offset else dim


class ShapeVar(_ShapeExpr):
    """A named dynamic size: `min <= S <= max` (max None: unbounded) and
    `S % multiple_of == 0`. Arithmetic with integers makes derived dims."""

    def __init__(self, name: str, min: int = 1, max: int | None = None, multiple_of: int = 1):
        if not isinstance(name, str) or not name.isidentifier():
            raise BrazeError(f"ShapeVar name {name!r} must be an identifier")
        for label, value in (("min", min), ("max", max), ("multiple_of", multiple_of)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise BrazeError(f"ShapeVar {name}: {label} must be an int, got {value!r}")
        if min < 0:
            raise BrazeError(f"ShapeVar {name}: min is {min}; a size is at least 0")
        if max is not None and min > max:
            raise BrazeError(f"ShapeVar {name}: min {min} is greater than max {max}")
        if multiple_of < 1:
            raise BrazeError(f"ShapeVar {name}: multiple_of is {multiple_of}; it must be at least 1")
        if max is not None and -(-min // multiple_of) > max // multiple_of:
            raise BrazeError(f"ShapeVar {name}: no multiple of {multiple_of} lies in [{min}, {max}]")
        if max is not None and -(-min // multiple_of) == max // multiple_of:
            raise BrazeError(f"ShapeVar {name} allows one size only ({max // multiple_of * multiple_of}): that dim "
                             "is static; leave it out of the spec")
        self.name = name
        self.min = min
        self.max = max
        self.multiple_of = multiple_of
        super().__init__(self, multiple_of, 0, Symbol(name))

    def declaration(self) -> tuple:
        return (self.min, self.max, self.multiple_of)

    def describe(self) -> str:
        upper = "unbounded" if self.max is None else str(self.max)
        divisor = f", a multiple of {self.multiple_of}" if self.multiple_of > 1 else ""
        return f"{self.name} in [{self.min}, {upper}]{divisor}"

    def __repr__(self) -> str:
        return f"ShapeVar({self.describe()})"

    def check(self, size: int, where: str) -> None:
        """Refuses a size outside the declaration, naming `where` it is."""
        if size < self.min or (self.max is not None and size > self.max):
            upper = "unbounded" if self.max is None else self.max
            raise BrazeError(f"{where} is {size}, but {self.name} must be in [{self.min}, {upper}]")
        if size % self.multiple_of:
            raise BrazeError(f"{where} is {size}, but {self.name} must be a multiple of {self.multiple_of}")

    def root(self) -> torch.export.Dim:
        """torch.export's Dim for K (S = multiple_of*K). Named apart from the
        ShapeVar: torch sympifies Dim names, and `S` is sympy's registry."""
        if self.multiple_of == 1:
            return torch.export.Dim(f"dim_{self.name}", min=self.min, max=self.max)
        upper = None if self.max is None else self.max // self.multiple_of
        return torch.export.Dim(f"dim_{self.name}_div{self.multiple_of}",
                                min=-(-self.min // self.multiple_of), max=upper)


@dataclass(frozen=True)
class _Marked:
    """One marked dim: the argument's name and flat input number, where to
    say it is, the dim and its expression."""

    argument: str
    flat: int
    where: str
    dim: int
    size: _ShapeExpr


class DynamicSpec:
    """Dims of a model's arguments bound to ShapeVars and derived dims.
    Call it on a function, a module class or a module to attach it (the
    decorator form); `braze.export` and `braze.compile` then use it."""

    def __init__(self, positional: tuple, named: dict):
        self.arguments: dict[int | str, dict[int, _ShapeExpr]] = {}
        for key, dims in [*enumerate(positional), *named.items()]:
            if dims is None:
                continue
            if not isinstance(dims, dict):
                raise BrazeError(f"dynamic_spec: argument {_label(key)} must map dims to ShapeVars "
                                 f"({{1: S}}), got {dims!r}")
            for dim, size in dims.items():
                if isinstance(dim, bool) or not isinstance(dim, int):
                    raise BrazeError(f"dynamic_spec: argument {_label(key)} has dim {dim!r}; dims are ints")
                if not isinstance(size, _ShapeExpr):
                    raise BrazeError(f"dynamic_spec: argument {_label(key)} dim {dim} is {size!r}, not a "
                                     "ShapeVar or an expression of one")
            self.arguments[key] = dict(dims)
        declared: dict[str, ShapeVar] = {}
        for dims in self.arguments.values():
            for size in dims.values():
                first = declared.setdefault(size.var.name, size.var)
                if first.declaration() != size.var.declaration():
                    raise BrazeError(f"dynamic_spec: two ShapeVars are named {first.name} "
                                     f"({first.describe()}; {size.var.describe()})")
        self.vars = declared

    def __call__(self, target):
        setattr(target, SPEC_ATTRIBUTE, self)
        return target

    def __repr__(self) -> str:
        entries = ", ".join(f"{_label(key)}: {{{', '.join(f'{d}: {s}' for d, s in dims.items())}}}"
                            for key, dims in self.arguments.items())
        return f"dynamic_spec({entries})"

    def mark(self, model, args: tuple, kwargs: dict) -> list[_Marked]:
        """The marked dims of this call, after checking the spec against it:
        the arguments exist and are tensors of enough rank, and the example
        sizes satisfy every ShapeVar and agree with each other."""
        function = model.forward if isinstance(model, torch.nn.Module) else model
        signature = inspect.signature(function)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise BrazeError(f"dynamic_spec: the example inputs do not fit {_named(function, signature)}: "
                             f"{error}") from None
        positional = [name for name, p in signature.parameters.items()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        marked, seen = [], {}
        for key, dims in self.arguments.items():
            if isinstance(key, int):
                if key >= len(args) or key >= len(positional):
                    raise BrazeError(f"dynamic_spec marks argument #{key}, but {_named(function, signature)} "
                                     f"is called with {len(args)} positional argument(s)")
                name = positional[key]
            else:
                name = key
                if name not in signature.parameters:
                    raise BrazeError(f"dynamic_spec marks argument '{name}', but "
                                     f"{_named(function, signature)} has no such argument")
                if name not in bound.arguments:
                    raise BrazeError(f"dynamic_spec marks argument '{name}', which this call does not pass")
            if name in seen:
                raise BrazeError(f"dynamic_spec marks argument '{name}' twice (as {_label(seen[name])} "
                                 f"and as {_label(key)})")
            seen[name] = key
            value = bound.arguments[name]
            if not isinstance(value, torch.Tensor):
                raise BrazeError(f"dynamic_spec marks argument '{name}', which is a {type(value).__name__}, "
                                 "not a tensor")
            flat = _flat_number(name, args, kwargs, positional)
            rank = value.dim()
            for dim, size in dims.items():
                if not -rank <= dim < rank:
                    raise BrazeError(f"dynamic_spec marks dim {dim} of argument '{name}', which has rank {rank}")
                where = f"argument '{name}' dim {dim % rank}"
                if any(m.flat == flat and m.dim == dim % rank for m in marked):
                    raise BrazeError(f"dynamic_spec marks {where} twice")
                marked.append(_Marked(name, flat, where, dim % rank, size))
        self._check_example(marked, pytree.tree_leaves((args, kwargs)))
        return marked

    def _check_example(self, marked: list[_Marked], leaves: list) -> None:
        bound: dict[str, tuple[int, str]] = {}
        for m in marked:
            if m.size is m.size.var:
                actual = leaves[m.flat].shape[m.dim]
                name = m.size.var.name
                if name in bound and bound[name][0] != actual:
                    raise BrazeError(f"the example {m.where} is {actual}, but {name} = {bound[name][0]} "
                                     f"from {bound[name][1]}")
                m.size.var.check(actual, f"the example {m.where}")
                bound[name] = (actual, m.where)
        for m in marked:
            name = m.size.var.name
            if name not in bound:
                raise BrazeError(f"dynamic_spec uses {name} only in derived dims ({m.size} for {m.where}); "
                                 f"mark some dim as {name} itself, so that a call binds it")
            expected = m.size.value(bound[name][0])
            actual = leaves[m.flat].shape[m.dim]
            if actual != expected:
                raise BrazeError(f"the example {m.where} is {actual}, but {m.size} = {expected} "
                                 f"({name} = {bound[name][0]} from {bound[name][1]})")

    def translate(self, model, args: tuple, kwargs: dict, marked: list[_Marked]) -> dict:
        """torch.export's `dynamic_shapes`, by argument name."""
        function = model.forward if isinstance(model, torch.nn.Module) else model
        signature = inspect.signature(function)
        bound = signature.bind(*args, **kwargs)
        roots = {name: var.root() for name, var in self.vars.items()}
        return {name: {m.dim: m.size.torch_dim(roots) for m in marked if m.argument == name} or None
                for name in bound.arguments}

    def annotate(self, module, none_inputs: list[int], marked: list[_Marked]) -> None:
        """Writes the spec into the captured module: `braze.symbols` holds
        the ShapeVars (range and divisor), each marked dim's `braze.dims`
        entry its expression in the ShapeVars' names."""
        with module.context:
            i64 = ir.IntegerType.get_signless(64)
            forward = next(op for op in module.mlir_module.body.operations
                           if op.operation.name == "func.func")
            arg_attrs = [dict((a.name, a.attr) for a in attributes) for attributes in forward.attributes["arg_attrs"]]
            for m in marked:
                argument = m.flat - sum(1 for number in none_inputs if number < m.flat)
                dims = list(arg_attrs[argument][DIMS_ATTRIBUTE])
                if not isinstance(dims[m.dim], ir.StringAttr):
                    raise BrazeError(f"torch specialised {m.where} ({m.size}) to {dims[m.dim]} while tracing; "
                                     "the model does not treat it as dynamic")
                dims[m.dim] = ir.StringAttr.get(str(m.size))
                arg_attrs[argument][DIMS_ATTRIBUTE] = ir.ArrayAttr.get(dims)
            forward.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in arg_attrs])
            symbols = {}
            for name, var in sorted(self.vars.items()):
                bounds = [var.min, UNBOUNDED if var.max is None else var.max]
                if var.multiple_of > 1:
                    bounds.append(var.multiple_of)
                symbols[name] = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, b) for b in bounds])
            module.operation.attributes[SYMBOLS_ATTRIBUTE] = ir.DictAttr.get(symbols)


def _flat_number(name: str, args: tuple, kwargs: dict, positional: list[str]) -> int:
    """The number of argument `name` among the flat inputs, the leaves of
    `(args, kwargs)` as braze.export flattens them."""
    if name in kwargs:
        before = list(kwargs.values())[:list(kwargs).index(name)]
        return len(pytree.tree_leaves(args)) + len(pytree.tree_leaves(before))
    return len(pytree.tree_leaves(args[:positional.index(name)]))


def _label(key) -> str:
    return f"#{key}" if isinstance(key, int) else f"'{key}'"


def _named(function, signature) -> str:
    return f"{getattr(function, '__name__', 'the model')}{signature}"


def dynamic_spec(*positional, **named) -> DynamicSpec:
    """Dims of the model's arguments, by position or name, each a dict
    `{dim: ShapeVar or derived dim}`: `dynamic_spec(x={0: B, 1: S})`."""
    return DynamicSpec(positional, named)


def spec_of(model) -> DynamicSpec | None:
    """The spec attached by the decorator form, on the model or its forward."""
    for owner in (model, getattr(model, "forward", None)):
        spec = getattr(owner, SPEC_ATTRIBUTE, None)
        if isinstance(spec, DynamicSpec):
            return spec
    return None
