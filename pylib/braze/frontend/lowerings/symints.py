"""Sizes: `sym_size` and Python arithmetic on SymInts, as `index` values."""

import operator

import torch
from mlir.dialects import arith

from braze.frontend.builder import shape_of
from braze.frontend.lowerings import lowers

aten = torch.ops.aten


@lowers(aten.sym_size.int)
def sym_size(b, x, dim):
    return b.size(x, dim % len(shape_of(x)))


def _index_binary(op_class):
    def lower(b, lhs, rhs):
        return op_class(b.index(lhs), b.index(rhs)).result

    return lower


lowers(operator.add)(_index_binary(arith.AddIOp))
lowers(operator.sub)(_index_binary(arith.SubIOp))
lowers(operator.mul)(_index_binary(arith.MulIOp))
lowers(operator.floordiv)(_index_binary(arith.FloorDivSIOp))
lowers(operator.mod)(_index_binary(arith.RemSIOp))


@lowers(operator.neg)
def neg(b, x):
    return arith.SubIOp(b.index(0), b.index(x)).result


@lowers(operator.getitem)
def getitem(b, values, i):
    return values[i]
