"""Elementwise aten ops, with PyTorch's type promotion made explicit as casts."""

from __future__ import annotations

import math

import torch

from braze.dialects import braze as bz
from braze.errors import BrazeError
from braze.frontend.builder import dtype_of, is_tensor, shape_of
from braze.frontend.lowerings import lowers

aten = torch.ops.aten


def promoted_dtype(lhs, rhs) -> torch.dtype:
    """torch.result_type of two operands; a tensor stands in by its dtype and
    whether it is rank 0 (which is all promotion looks at)."""

    def stand_in(x):
        if is_tensor(x):
            return torch.empty((1,) if shape_of(x) else (), dtype=dtype_of(x))
        return x

    return torch.result_type(stand_in(lhs), stand_in(rhs))


# On booleans PyTorch's add and maximum are "or", mul and minimum "and".
_ON_BOOLS = {bz.AddOp: bz.OrOp, bz.MaximumOp: bz.OrOp, bz.MulOp: bz.AndOp, bz.MinimumOp: bz.AndOp}


def _binary(op_class):
    """Both operands cast to the result dtype, then the op."""

    def lower(b, lhs, rhs):
        dtype = b.out_dtype()
        op = _ON_BOOLS.get(op_class, op_class) if dtype == torch.bool else op_class
        return op(b.tensor(lhs, dtype), b.tensor(rhs, dtype), results=[b.out_type()]).result

    return lower


def _unary(op_class):
    def lower(b, x):
        return op_class(b.tensor(x, b.out_dtype())).result

    return lower


def _with_alpha(op_class):
    """add/sub(a, b, alpha): a op alpha * b."""

    def lower(b, lhs, rhs, alpha=1):
        dtype = b.out_dtype()
        rhs = b.tensor(rhs, dtype)
        op = op_class
        if dtype == torch.bool:  # alpha is a bool too; torch forbids sub on bools
            op = _ON_BOOLS[op_class]
            if not alpha:
                return b.tensor(lhs, dtype)
        elif alpha != 1:
            rhs = bz.MulOp(rhs, b.constant(alpha, dtype)).result
        return op(b.tensor(lhs, dtype), rhs, results=[b.out_type()]).result

    return lower


lowers(aten.add.Tensor, aten.add.Scalar)(_with_alpha(bz.AddOp))
lowers(aten.sub.Tensor, aten.sub.Scalar)(_with_alpha(bz.SubOp))
lowers(aten.mul.Tensor, aten.mul.Scalar)(_binary(bz.MulOp))
lowers(aten.div.Tensor, aten.div.Scalar)(_binary(bz.DivOp))
lowers(aten.maximum.default)(_binary(bz.MaximumOp))
lowers(aten.minimum.default)(_binary(bz.MinimumOp))

for _target, _op in [
    (aten.neg.default, bz.NegOp), (aten.abs.default, bz.AbsOp), (aten.exp.default, bz.ExpOp),
    (aten.log.default, bz.LogOp), (aten.tanh.default, bz.TanhOp),
    (aten.sigmoid.default, bz.SigmoidOp), (aten.relu.default, bz.ReluOp),
    (aten.silu.default, bz.SiluOp), (aten.sqrt.default, bz.SqrtOp),
    (aten.rsqrt.default, bz.RsqrtOp), (aten.erf.default, bz.ErfOp),
    (aten.expm1.default, bz.Expm1Op), (aten.exp2.default, bz.Exp2Op),
    (aten.log1p.default, bz.Log1pOp), (aten.log2.default, bz.Log2Op),
    (aten.sin.default, bz.SinOp), (aten.cos.default, bz.CosOp), (aten.tan.default, bz.TanOp),
    (aten.asin.default, bz.AsinOp), (aten.acos.default, bz.AcosOp), (aten.atan.default, bz.AtanOp),
    (aten.sinh.default, bz.SinhOp), (aten.cosh.default, bz.CoshOp),
]:
    lowers(_target)(_unary(_op))

lowers(aten.atan2.default)(_binary(bz.Atan2Op))
lowers(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)(_binary(bz.RemainderOp))
lowers(aten.fmod.Tensor, aten.fmod.Scalar)(_binary(bz.FmodOp))


def _rounding(op_class):
    """Integers are whole already: torch returns them unchanged."""

    def lower(b, x):
        dtype = b.out_dtype()
        x = b.tensor(x, dtype)
        return op_class(x).result if dtype.is_floating_point else x

    return lower


for _target, _op in [(aten.floor.default, bz.FloorOp), (aten.ceil.default, bz.CeilOp),
                     (aten.trunc.default, bz.TruncOp), (aten.round.default, bz.RoundOp)]:
    lowers(_target)(_rounding(_op))


@lowers(aten.round.decimals)
def round_decimals(b, x, decimals=0):
    """torch's formula: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d for d < 0
    (10^|d| rounded to the dtype, as torch does)."""
    dtype = b.out_dtype()
    if not dtype.is_floating_point:
        raise BrazeError(f"round with decimals on {dtype} is not supported")
    x = b.tensor(x, dtype)
    scale = b.constant(10.0 ** abs(decimals), dtype)
    if decimals < 0:
        return bz.MulOp(bz.RoundOp(bz.DivOp(x, scale).result).result, scale, results=[b.out_type()]).result
    return bz.DivOp(bz.RoundOp(bz.MulOp(x, scale).result).result, scale, results=[b.out_type()]).result


@lowers(aten.sign.default)
def sign(b, x):
    dtype = b.out_dtype()
    x = b.tensor(x, dtype)
    return x if dtype == torch.bool else bz.SignOp(x).result


@lowers(aten.isnan.default)
def isnan(b, x):
    # NaN is the one value unequal to itself; an integer never is.
    return bz.NeOp(x, x, results=[b.out_type()]).result


@lowers(aten.isinf.default)
def isinf(b, x):
    dtype = dtype_of(x)
    if not dtype.is_floating_point:  # never infinite: false everywhere, as isnan
        return isnan(b, x)
    infinity = b.constant(math.inf, dtype)
    return bz.EqOp(bz.AbsOp(x).result, infinity, results=[b.out_type()]).result


@lowers(aten.leaky_relu.default)
def leaky_relu(b, x, negative_slope=0.01):
    """x > 0 ? x : x * negative_slope (NaN stays NaN)."""
    dtype = b.out_dtype()
    x = b.tensor(x, dtype)
    positive = bz.GtOp(x, b.constant(0, dtype)).result
    scaled = bz.MulOp(x, b.constant(negative_slope, dtype)).result
    return bz.WhereOp(positive, x, scaled, results=[b.out_type()]).result


@lowers(aten.elu.default)
def elu(b, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """x > 0 ? scale x : alpha scale expm1(input_scale x), as torch computes it
    (SELU arrives as this too)."""
    dtype = b.out_dtype()
    x = b.tensor(x, dtype)

    def times(value, factor):
        return value if factor == 1 else bz.MulOp(value, b.constant(factor, dtype)).result

    positive = bz.GtOp(x, b.constant(0, dtype)).result
    negative = times(bz.Expm1Op(times(x, input_scale)).result, alpha * scale)
    return bz.WhereOp(positive, times(x, scale), negative, results=[b.out_type()]).result


@lowers(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(b, lhs, rhs, rounding_mode=None):
    dtype = b.out_dtype()
    if rounding_mode is not None and (dtype.is_floating_point or rounding_mode != "trunc"):
        raise BrazeError(f"division with rounding_mode={rounding_mode!r} on {dtype} is not supported")
    return bz.DivOp(b.tensor(lhs, dtype), b.tensor(rhs, dtype), results=[b.out_type()]).result


@lowers(aten.reciprocal.default)
def reciprocal(b, x):
    dtype = b.out_dtype()
    return bz.DivOp(b.constant(1, dtype), b.tensor(x, dtype), results=[b.out_type()]).result


@lowers(aten.gelu.default)
def gelu(b, x, approximate="none"):
    return bz.GeluOp(b.tensor(x, b.out_dtype()), approximate=approximate).result


def _reciprocal_of(b, x, dtype):
    return bz.DivOp(b.constant(1, dtype), x, results=[b.out_type()]).result


_POW_BY_EXPONENT = {
    3.0: lambda b, x, dtype: bz.MulOp(bz.MulOp(x, x).result, x).result,
    1.0: lambda b, x, dtype: x,
    0.5: lambda b, x, dtype: bz.SqrtOp(x).result,
    -0.5: lambda b, x, dtype: bz.RsqrtOp(x).result,
    -1.0: lambda b, x, dtype: _reciprocal_of(b, x, dtype),
    -2.0: lambda b, x, dtype: _reciprocal_of(b, bz.MulOp(x, x).result, dtype),
}


@lowers(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar)
def pow_(b, base, exponent):
    dtype = b.out_dtype()
    if exponent == 2 and not is_tensor(exponent):
        x = b.tensor(base, dtype)
        return bz.MulOp(x, x).result
    if dtype.is_floating_point and is_tensor(base) and not is_tensor(exponent):
        # ATen computes these exponents without pow (x*x*x, sqrt, 1/x, ...):
        # the same operations give the same bits, and run at multiply speed
        # (GPT-2's tanh GELU cubes its input).
        special = _POW_BY_EXPONENT.get(float(exponent))
        if special is not None:
            return special(b, b.tensor(base, dtype), dtype)
    if not dtype.is_floating_point:
        raise BrazeError(f"pow on {dtype} is supported for exponent 2 only")
    return bz.PowOp(b.tensor(base, dtype), b.tensor(exponent, dtype), results=[b.out_type()]).result


@lowers(aten.clamp.default, aten.clamp.Tensor, aten.hardtanh.default)
def clamp(b, x, min=None, max=None):
    dtype = b.out_dtype()
    result = b.tensor(x, dtype)
    if min is not None:
        result = bz.MaximumOp(result, b.tensor(min, dtype), results=[b.out_type()]).result
    if max is not None:
        result = bz.MinimumOp(result, b.tensor(max, dtype), results=[b.out_type()]).result
    return result


@lowers(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(b, condition, a, other):
    dtype = b.out_dtype()
    condition = b.tensor(condition, torch.bool)
    return bz.WhereOp(condition, b.tensor(a, dtype), b.tensor(other, dtype), results=[b.out_type()]).result


@lowers(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(b, x, mask, value):
    dtype = b.out_dtype()
    return bz.WhereOp(b.tensor(mask, torch.bool), b.tensor(value, dtype), b.tensor(x, dtype),
                      results=[b.out_type()]).result


def _compare(op_class):
    def lower(b, lhs, rhs):
        dtype = promoted_dtype(lhs, rhs)
        return op_class(b.tensor(lhs, dtype), b.tensor(rhs, dtype), results=[b.out_type()]).result

    return lower


for _name, _op in [("eq", bz.EqOp), ("ne", bz.NeOp), ("lt", bz.LtOp), ("le", bz.LeOp),
                   ("gt", bz.GtOp), ("ge", bz.GeOp)]:
    _packet = getattr(aten, _name)
    lowers(_packet.Tensor, _packet.Scalar)(_compare(_op))


def _logical(op_class):
    def lower(b, lhs, rhs):
        result = op_class(b.tensor(lhs, torch.bool), b.tensor(rhs, torch.bool)).result
        return b.cast(result, b.out_dtype())

    return lower


lowers(aten.logical_and.default)(_logical(bz.AndOp))
lowers(aten.logical_or.default)(_logical(bz.OrOp))
lowers(aten.logical_xor.default)(_logical(bz.XorOp))


@lowers(aten.logical_not.default)
def logical_not(b, x):
    return b.cast(bz.NotOp(b.tensor(x, torch.bool)).result, b.out_dtype())


@lowers(aten._to_copy.default, aten.to.dtype, torch.ops.prims.convert_element_type.default)
def to_dtype(b, x, dtype=None, **_ignored_layout_and_device):
    return b.cast(x, b.out_dtype())


@lowers(aten.clone.default, aten.alias.default, aten.detach.default,
        aten.lift_fresh_copy.default, aten.contiguous.default)
def identity(b, x, **_ignored_memory_format):
    return x


@lowers(aten.dropout.default)
def dropout(b, x, p, train):
    if train and p > 0:
        raise BrazeError("dropout in training mode (random) is not supported; call model.eval()")
    return x


def _bool_only(b, what: str):
    if b.out_dtype() != torch.bool:
        raise BrazeError(f"{what} on {b.out_dtype()} is not supported (booleans only)")


@lowers(aten.bitwise_not.default)
def bitwise_not(b, x):
    _bool_only(b, "bitwise_not")
    return bz.NotOp(x).result


def _bitwise(op_class, what):
    def lower(b, lhs, rhs):
        _bool_only(b, what)
        return op_class(b.tensor(lhs, torch.bool), b.tensor(rhs, torch.bool)).result

    return lower


lowers(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar)(_bitwise(bz.AndOp, "bitwise_and"))
lowers(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar)(_bitwise(bz.OrOp, "bitwise_or"))
lowers(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar)(_bitwise(bz.XorOp, "bitwise_xor"))
