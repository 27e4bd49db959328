"""Complex tensors, decomposed at capture into real arithmetic on their real
and imaginary parts, so every pass and target sees real tensors only.

A complex FX value is imported as a `ComplexValue`: two real tensors of the
same shape (f32 parts for complex64, f64 for complex128). At the function's
boundary a complex tensor travels as its `torch.view_as_real` form (a real
tensor with a trailing dim of 2): `ImportedGraph.arguments` and `outputs`
convert, and the function splits or joins the parts. Layout ops (views,
permutes, slices, cat, ...) apply to each part through their real lowering;
the arithmetic below writes out each op's formula. Any other op on a
complex value is a BrazeError naming it: it never runs silently on one part.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx as fx
from mlir import ir
from mlir.dialects import arith, tensor as tensor_d

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import Builder, shape_of
from braze.frontend.lowerings import LOWERINGS, target_name
from braze.frontend.types import tensor_type

aten = torch.ops.aten

REAL_DTYPES = {torch.complex64: torch.float32, torch.complex128: torch.float64}


@dataclass(frozen=True)
class ComplexValue:
    """A complex tensor as its two real parts (MLIR values of one type)."""

    real: ir.Value
    imag: ir.Value


def is_complex_meta(meta) -> bool:
    return isinstance(meta, torch.Tensor) and meta.dtype in REAL_DTYPES


def boundary_type(meta: torch.Tensor) -> ir.RankedTensorType:
    """The function-boundary type of a complex tensor: its view_as_real form."""
    real = tensor_type(meta.real)
    return ir.RankedTensorType.get(list(real.shape) + [2], real.element_type)


class _RealNode:
    """The node as seen by a real lowering applied to one part: the same
    arguments, its value's real part as the meta."""

    def __init__(self, node: fx.Node):
        self._node = node
        value = node.meta["val"]
        real = tuple(v.real if is_complex_meta(v) else v for v in value) if isinstance(value, (tuple, list)) \
            else (value.real if is_complex_meta(value) else value)
        self.meta = {**node.meta, "val": real}

    def __getattr__(self, name):
        return getattr(self._node, name)


def _parts(b: Builder, value, part: int) -> ir.Value:
    """Part 0 (real) or 1 (imaginary) of a view_as_real-form tensor."""
    return LOWERINGS[aten.select.int](b, value, -1, part)


def split(node: fx.Node, value: ir.Value) -> ComplexValue:
    """A view_as_real-form tensor (an argument, a parameter) as its parts."""
    b = Builder(_RealNode(node))
    return ComplexValue(_parts(b, value, 0), _parts(b, value, 1))


def join(value: ComplexValue) -> ir.Value:
    """The view_as_real form of `value`: its parts side by side in a
    trailing dim of 2."""
    t = ir.RankedTensorType(value.real.type)
    column = ir.RankedTensorType.get(list(t.shape) + [1], t.element_type)
    halves = []
    for part in (value.real, value.imag):
        # A reshape infers one dynamic dim; with more it takes their sizes.
        dynamic = [_dim(part, i) for i, size in enumerate(shape_of(part)) if size is None]
        halves.append(bz.ReshapeOp(column, part, dynamic if len(dynamic) > 1 else []).result)
    joined = ir.RankedTensorType.get(list(t.shape) + [2], t.element_type)
    return bz.ConcatOp(halves, len(t.shape), results=[joined]).result


def _dim(value: ir.Value, d: int) -> ir.Value:
    return tensor_d.DimOp(value, arith.ConstantOp(ir.IndexType.get(), d).result).result


# -- arithmetic on parts; None stands for an imaginary part that is zero -----

def _add(x, y):
    if x is None or y is None:
        return y if x is None else x
    return bz.AddOp(x, y).result


def _sub(x, y):
    if y is None:
        return x
    if x is None:
        return bz.NegOp(y).result
    return bz.SubOp(x, y).result


def _mul(x, y):
    if x is None or y is None:
        return None
    return bz.MulOp(x, y).result


def _neg(x):
    return None if x is None else bz.NegOp(x).result


class _Lowering:
    """One node with complex values: its builder, the parts' dtype, and the
    operands as (real, imag-or-None) pairs."""

    def __init__(self, node: fx.Node):
        self.node = node
        self.b = Builder(_RealNode(node))
        metas = [a.meta.get("val") for a in node.all_input_nodes]
        dtypes = [m.dtype for m in metas + [node.meta["val"]] if is_complex_meta(m)]
        self.dtype = REAL_DTYPES[dtypes[0]]

    def pair(self, x) -> tuple[ir.Value, ir.Value | None]:
        if isinstance(x, ComplexValue):
            return x.real, x.imag
        if isinstance(x, complex):
            return self.b.constant(x.real, self.dtype), self.b.constant(x.imag, self.dtype)
        return self.b.tensor(x, self.dtype), None

    def result(self, real, imag) -> ComplexValue:
        """The node's complex result, each part broadcast to its shape (an
        absent imaginary part is zeros)."""
        target = self.b.out_type()
        reference = real if real is not None and real.type == target else imag
        return ComplexValue(self.fit(real, target, reference), self.fit(imag, target, reference))

    def fit(self, value, target: ir.RankedTensorType, reference) -> ir.Value:
        if value is None:
            value = self.b.constant(0, self.dtype)
        if value.type == target:
            return value
        sizes = [self.b.size(reference, d) if reference is not None and reference.type == target
                 else (None if target.is_dynamic_dim(d) else target.get_dim_size(d)) for d in range(target.rank)]
        return self.b.expand(value, target, sizes)


def _add_like(subtract: bool):
    def lower(low: _Lowering, x, y, alpha=1):
        (xr, xi), (yr, yi) = low.pair(x), low.pair(y)
        if alpha != 1:
            (yr, yi) = _complex_mul(low, (yr, yi), low.pair(alpha))
        combine = _sub if subtract else _add
        return low.result(combine(xr, yr), combine(xi, yi))

    return lower


def _complex_mul(low, x, y):
    (xr, xi), (yr, yi) = x, y
    return _sub(_mul(xr, yr), _mul(xi, yi)), _add(_mul(xr, yi), _mul(xi, yr))


def _mul_lowering(low: _Lowering, x, y):
    return low.result(*_complex_mul(low, low.pair(x), low.pair(y)))


def _div_lowering(low: _Lowering, x, y):
    (xr, xi), (yr, yi) = low.pair(x), low.pair(y)
    if yi is None:
        return low.result(bz.DivOp(xr, yr).result, None if xi is None else bz.DivOp(xi, yr).result)
    # (xr + i xi) / (yr + i yi) = ((xr yr + xi yi) + i (xi yr - xr yi)) / (yr^2 + yi^2)
    norm = _add(_mul(yr, yr), _mul(yi, yi))
    real = _add(_mul(xr, yr), _mul(xi, yi))
    imag = _sub(_mul(xi, yr), _mul(xr, yi))
    return low.result(bz.DivOp(real, norm).result, None if imag is None else bz.DivOp(imag, norm).result)


def _neg_lowering(low: _Lowering, x):
    real, imag = low.pair(x)
    return low.result(_neg(real), _neg(imag))


def _conj_lowering(low: _Lowering, x):
    real, imag = low.pair(x)
    return low.result(real, _neg(imag))


def _abs_lowering(low: _Lowering, x):
    real, imag = low.pair(x)
    return bz.SqrtOp(_add(_mul(real, real), _mul(imag, imag))).result


def _angle_lowering(low: _Lowering, x):
    real, imag = low.pair(x)
    if imag is None:
        imag = low.fit(None, ir.RankedTensorType(real.type), real)
    return bz.Atan2Op(imag, real).result


def _exp_lowering(low: _Lowering, x):
    real, imag = low.pair(x)
    scale = bz.ExpOp(real).result
    if imag is None:
        return low.result(scale, None)
    return low.result(bz.MulOp(scale, bz.CosOp(imag).result).result,
                      bz.MulOp(scale, bz.SinOp(imag).result).result)


def _product(op_class):
    """(A + iB)(C + iD) = (AC - BD) + i(AD + BC): four real products
    (fewer when a side is real)."""

    def lower(low: _Lowering, x, y):
        (xr, xi), (yr, yi) = low.pair(x), low.pair(y)

        def product(p, q):
            return None if p is None or q is None else op_class(p, q).result

        return low.result(_sub(product(xr, yr), product(xi, yi)), _add(product(xr, yi), product(xi, yr)))

    return lower


def _view_as_real(low: _Lowering, x):
    return join(ComplexValue(*low.pair(x)))


def _view_as_complex(low: _Lowering, x):
    return ComplexValue(_parts(low.b, x, 0), _parts(low.b, x, 1))


def _partwise(target):
    """A layout or linear op applied to each part through its real lowering."""

    def lower(low: _Lowering, *args, **kwargs):
        parts = []
        for part in (0, 1):
            def pick(x):
                if isinstance(x, ComplexValue):
                    return x.imag if part else x.real
                return x
            parts.append(LOWERINGS[target](low.b, *fx.node.map_aggregate(args, pick),
                                           **fx.node.map_aggregate(kwargs, pick)))
        real, imag = parts
        if isinstance(real, tuple):
            return tuple(ComplexValue(r, i) for r, i in zip(real, imag))
        return ComplexValue(real, imag)

    return lower


COMPLEX_LOWERINGS = {
    aten.add.Tensor: _add_like(False), aten.add.Scalar: _add_like(False),
    aten.sub.Tensor: _add_like(True), aten.sub.Scalar: _add_like(True),
    aten.mul.Tensor: _mul_lowering, aten.mul.Scalar: _mul_lowering,
    aten.div.Tensor: _div_lowering, aten.div.Scalar: _div_lowering,
    aten.neg.default: _neg_lowering,
    aten._conj.default: _conj_lowering, aten.conj_physical.default: _conj_lowering,
    aten.abs.default: _abs_lowering, aten.angle.default: _angle_lowering,
    aten.exp.default: _exp_lowering,
    aten.mm.default: _product(bz.MatmulOp), aten.bmm.default: _product(bz.BmmOp),
    aten.view_as_real.default: _view_as_real, aten.view_as_complex.default: _view_as_complex,
}
for _target in (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.squeeze.dims,
                aten.squeeze.dim, aten.squeeze.default, aten.unsqueeze.default, aten.permute.default,
                aten.t.default, aten.transpose.int, aten.expand.default, aten.slice.Tensor, aten.select.int,
                aten.cat.default, aten.split_with_sizes.default, aten.split.Tensor, aten.clone.default,
                aten.alias.default, aten.sum.dim_IntList, aten.sum.default, aten.mean.dim, aten.mean.default,
                operator.getitem):
    if _target in LOWERINGS:
        COMPLEX_LOWERINGS[_target] = _partwise(_target)
COMPLEX_LOWERINGS[operator.getitem] = lambda low, values, i: values[i]

SUPPORTED = sorted(target_name(t) for t in COMPLEX_LOWERINGS)


def involves_complex(node: fx.Node, args) -> bool:
    """Whether `node` reads or makes a complex tensor."""
    values = []
    fx.node.map_aggregate(args, values.append)
    metas = node.meta.get("val")
    metas = list(metas) if isinstance(metas, (list, tuple)) else [metas]
    return any(isinstance(v, ComplexValue) for v in values) or any(is_complex_meta(m) for m in metas)


def lower_complex(node: fx.Node, args, kwargs):
    """The node's value, with complex tensors as ComplexValues."""
    lowering = COMPLEX_LOWERINGS.get(node.target)
    if lowering is None:
        raise BrazeError(f"complex op {target_name(node.target) if callable(node.target) else node.target} "
                         f"is not supported (braze decomposes complex tensors into real arithmetic for: "
                         f"{', '.join(SUPPORTED)}; see docs/ops.md)")
    return lowering(_Lowering(node), *args, **kwargs)
