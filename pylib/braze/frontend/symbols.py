"""Symbolic shapes as module attributes.

What torch knows about dynamic dims is kept in two attributes, documented in
`braze.symbolic` (which checks them at run time):

- on the module, `braze.symbols = {s0 = [min, max]}`, each shape symbol's
  inclusive range (max -1: unbounded);
- on each function argument, `braze.dims = ["s0", 64, "2*s0"]`, per dim a
  static size or the expression (a symbol, or a derived dim such as `2*s0`
  or `s0 + 1`) its size equals. Two inputs naming one symbol must agree.

Expressions are sympy's printing of torch's symbolic sizes; derived dims that
are not affine in the symbols are kept as printed and checked as such.
"""

from __future__ import annotations

import sympy
import torch
from torch.utils._sympy.numbers import int_oo
from mlir import ir

from braze.frontend.types import static_size

_UNBOUNDED = -1


def _bound(value) -> int:
    """A range end as an int; torch's infinities (int_oo, oo) as unbounded."""
    if value in (int_oo, -int_oo, sympy.oo, -sympy.oo):
        return _UNBOUNDED
    number = int(value)
    return number if abs(number) < 2**62 else _UNBOUNDED


def free_symbols(metas) -> set[str]:
    """The shape symbols the arguments' sizes mention."""
    names = set()
    for meta in metas:
        sizes = meta.shape if isinstance(meta, torch.Tensor) else [meta]
        for size in sizes:
            if isinstance(size, torch.SymInt):
                names |= {str(s) for s in size.node.expr.free_symbols}
    return names


def symbols_attr(range_constraints: dict, used: set[str]) -> ir.DictAttr:
    """`{s0 = [2, 64]}` from torch's {sympy symbol: ValueRanges}, for the
    symbols in `used` (a ShapeEnv also ranges its internal helpers)."""
    i64 = ir.IntegerType.get_signless(64)
    entries = {}
    for symbol, ranges in sorted(range_constraints.items(), key=lambda kv: str(kv[0])):
        if not isinstance(symbol, sympy.Symbol) or str(symbol) not in used:
            continue
        entries[str(symbol)] = ir.ArrayAttr.get([
            ir.IntegerAttr.get(i64, _bound(ranges.lower)),
            ir.IntegerAttr.get(i64, _bound(ranges.upper)),
        ])
    return ir.DictAttr.get(entries)


def dim_attr(size) -> ir.Attribute:
    static = static_size(size)
    if static is not None:
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), static)
    return ir.StringAttr.get(str(size.node.expr))


def arg_dims_attr(meta) -> ir.DictAttr:
    """The argument attribute dictionary: `{braze.dims = [...]}` for tensors,
    `{braze.dims = ["s0"]}` for a size argument that carries symbol s0."""
    if isinstance(meta, torch.Tensor):
        # A complex tensor is passed in its view_as_real form: one more dim, of 2.
        shape = list(meta.shape) + ([2] if meta.is_complex() else [])
        return ir.DictAttr.get({"braze.dims": ir.ArrayAttr.get([dim_attr(d) for d in shape])})
    if isinstance(meta, torch.SymInt):
        return ir.DictAttr.get({"braze.dims": ir.ArrayAttr.get([dim_attr(meta)])})
    return ir.DictAttr.get({})
