"""braze.reference.run: every op against a direct torch/numpy computation,
argument and symbol checks, parameters, and pass before/after equality."""

import math

import numpy as np
import pytest
import torch

import braze
from braze import reference, symbolic
from braze.hostops.dtypes import TORCH_DTYPES

FLOAT_TYPES = ["f32", "f64", "f16", "bf16"]
INT_TYPES = ["i8", "i32", "i64"]


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)
    np.random.seed(0)


def random_tensor(shape, element, low=-3, high=4):
    dtype = TORCH_DTYPES[element]
    if dtype == torch.bool:
        return torch.rand(shape) < 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=torch.float32).to(dtype)
    return torch.randint(low, high, shape, dtype=dtype)


def tensor_type(shape, element):
    return f"tensor<{'x'.join(str(d) for d in shape) + 'x' if shape else ''}{element}>"


def run_single_op(op_text, arg_types, result_type, *inputs, **kwargs):
    """Runs `%r = <op_text> : ...` in a function with arguments %a0, %a1, ..."""
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(arg_types))
    module = braze.parse(
        f"func.func @f({args}) -> {result_type} {{\n"
        f"  %r = {op_text}\n"
        f"  return %r : {result_type}\n}}"
    )
    (result,) = reference.run(module, *inputs, **kwargs)
    return result


def assert_same(actual, expected):
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------------------
# Pointwise
# ---------------------------------------------------------------------------

UNARY_FLOAT = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "silu": torch.nn.functional.silu, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "erf": torch.erf, "gelu": torch.nn.functional.gelu, "expm1": torch.expm1, "exp2": torch.exp2,
    "log1p": torch.log1p, "log2": torch.log2, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
    "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "round": torch.round, "sign": torch.sign,
}


@pytest.mark.parametrize("element", FLOAT_TYPES)
@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
def test_unary_float(name, element):
    x = random_tensor((3, 4), element)
    if name in ("log", "sqrt", "rsqrt"):
        x = x.abs() + 0.5
    t = tensor_type((3, 4), element)
    result = run_single_op(f"braze.{name} %a0 : {t}", [t], t, x)
    assert_same(result, UNARY_FLOAT[name](x))


def test_gelu_tanh_matches_the_formula():
    x = torch.randn(16, dtype=torch.float64)
    t = tensor_type((16,), "f64")
    result = run_single_op(f'braze.gelu %a0 approximate "tanh" : {t}', [t], t, x)
    formula = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    torch.testing.assert_close(result, formula)
    exact = run_single_op(f"braze.gelu %a0 : {t}", [t], t, x)
    torch.testing.assert_close(exact, x * 0.5 * (1 + torch.erf(x / math.sqrt(2))))


@pytest.mark.parametrize("element", INT_TYPES)
@pytest.mark.parametrize("name", ["neg", "abs", "relu", "sign"])
def test_unary_int(name, element):
    x = random_tensor((5,), element)
    t = tensor_type((5,), element)
    result = run_single_op(f"braze.{name} %a0 : {t}", [t], t, x)
    assert_same(result, {"neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "sign": torch.sign}[name](x))


def test_not():
    x = random_tensor((6,), "i1")
    result = run_single_op("braze.not %a0 : tensor<6xi1>", ["tensor<6xi1>"], "tensor<6xi1>", x)
    assert_same(result, ~x)


BINARY_NUMERIC = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply,
    "maximum": np.maximum, "minimum": np.minimum,
}


def binary_ir(name, element, lhs_shape=(3, 1, 4), rhs_shape=(5, 1), out_shape=(3, 5, 4), out=None):
    lt, rt = tensor_type(lhs_shape, element), tensor_type(rhs_shape, element)
    ot = tensor_type(out_shape, out or element)
    return f"braze.{name} %a0, %a1 : {lt}, {rt} -> {ot}", [lt, rt], ot


@pytest.mark.parametrize("element", ["f32", "f64", "i32", "i64"])
@pytest.mark.parametrize("name", sorted(BINARY_NUMERIC))
def test_binary_broadcasts_like_numpy(name, element):
    lhs, rhs = random_tensor((3, 1, 4), element), random_tensor((5, 1), element)
    result = run_single_op(*binary_ir(name, element), lhs, rhs)
    expected = BINARY_NUMERIC[name](lhs.numpy(), rhs.numpy())
    assert result.dtype == lhs.dtype and result.shape == (3, 5, 4)
    np.testing.assert_array_equal(result.numpy(), expected)


@pytest.mark.parametrize("element", ["f16", "bf16"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_binary_low_precision_computes_in_its_own_type(name, element):
    lhs, rhs = random_tensor((3, 1, 4), element).abs() + 0.1, random_tensor((5, 1), element)
    result = run_single_op(*binary_ir(name, element), lhs, rhs)
    torch_op = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
                "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum}[name]
    assert_same(result, torch_op(lhs, rhs))


def test_float_division_is_true_division():
    lhs, rhs = torch.tensor([7.0, -7.0, 1.0]), torch.tensor([2.0, 2.0, 0.0])
    result = run_single_op(*binary_ir("div", "f32", (3,), (3,), (3,)), lhs, rhs)
    assert result.tolist() == [3.5, -3.5, math.inf]


@pytest.mark.parametrize("element", INT_TYPES)
def test_integer_division_truncates_toward_zero(element):
    lhs = torch.tensor([7, -7, 7, -7, 0, 6], dtype=TORCH_DTYPES[element])
    rhs = torch.tensor([2, 2, -2, -2, 3, 3], dtype=TORCH_DTYPES[element])
    result = run_single_op(*binary_ir("div", element, (6,), (6,), (6,)), lhs, rhs)
    assert result.dtype == lhs.dtype
    assert result.tolist() == [3, -3, -3, 3, 0, 2]


@pytest.mark.parametrize("name", ["div", "remainder", "fmod"])
def test_integer_division_by_zero_is_an_error(name):
    ops = binary_ir(name, "i32", (2,), (2,), (2,))
    with pytest.raises(braze.BrazeError, match=f"'braze.{name}' at <string>:2:8: integer division by zero"):
        run_single_op(*ops, torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1, 0], dtype=torch.int32))


@pytest.mark.parametrize("element", ["f32", "i64"])
def test_remainder_takes_the_divisors_sign_and_fmod_the_dividends(element):
    lhs = torch.tensor([7, -7, 7, -7], dtype=TORCH_DTYPES[element])
    rhs = torch.tensor([3, 3, -3, -3], dtype=TORCH_DTYPES[element])
    remainder = run_single_op(*binary_ir("remainder", element, (4,), (4,), (4,)), lhs, rhs)
    fmod = run_single_op(*binary_ir("fmod", element, (4,), (4,), (4,)), lhs, rhs)
    assert remainder.tolist() == [1, 2, -2, -1] and fmod.tolist() == [1, -1, 1, -1]


def test_pow_and_nan_propagating_maximum():
    lhs = torch.tensor([2.0, math.nan, 1.0, 4.0])
    rhs = torch.tensor([3.0, 1.0, math.nan, 0.5])
    powered = run_single_op(*binary_ir("pow", "f32", (4,), (4,), (4,)), lhs, rhs)
    np.testing.assert_array_equal(powered.numpy(), np.power(lhs.numpy(), rhs.numpy()))
    for name in ("maximum", "minimum"):
        result = run_single_op(*binary_ir(name, "f32", (4,), (4,), (4,)), lhs, rhs)
        assert math.isnan(result[1]) and math.isnan(result[2])


@pytest.mark.parametrize("name", ["and", "or", "xor"])
def test_logical_binary(name):
    lhs, rhs = random_tensor((4, 3), "i1"), random_tensor((3,), "i1")
    result = run_single_op(*binary_ir(name, "i1", (4, 3), (3,), (4, 3)), lhs, rhs)
    expected = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[name]
    np.testing.assert_array_equal(result.numpy(), expected(lhs.numpy(), rhs.numpy()))


COMPARISONS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
               "gt": np.greater, "ge": np.greater_equal}


@pytest.mark.parametrize("element", ["f32", "i32"])
@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_comparisons_broadcast_and_follow_nan_rules(name, element):
    lhs, rhs = random_tensor((3, 1, 4), element, 0, 3), random_tensor((5, 1), element, 0, 3)
    if element == "f32":
        lhs[0, 0, 0] = math.nan
        rhs[1, 0] = lhs[1, 0, 1]
    result = run_single_op(*binary_ir(name, element, out="i1"), lhs, rhs)
    assert result.dtype == torch.bool
    np.testing.assert_array_equal(result.numpy(), COMPARISONS[name](lhs.numpy(), rhs.numpy()))


def test_where_broadcasts_three_ways():
    condition = random_tensor((4, 1), "i1")
    a, b = random_tensor((4, 8), "f32"), random_tensor((8,), "f32")
    result = run_single_op(
        "braze.where %a0, %a1, %a2 : tensor<4x1xi1>, tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>",
        ["tensor<4x1xi1>", "tensor<4x8xf32>", "tensor<8xf32>"], "tensor<4x8xf32>", condition, a, b)
    np.testing.assert_array_equal(result.numpy(), np.where(condition.numpy(), a.numpy(), b.numpy()))


@pytest.mark.parametrize("source, target, values, expected", [
    ("f32", "i32", [2.7, -2.7, 0.5, -0.5], [2, -2, 0, 0]),  # truncates toward zero
    ("f32", "i1", [0.0, -0.0, 0.1, math.nan], [False, False, True, True]),
    ("i64", "i1", [0, 3, -1, 0], [False, True, True, False]),
    ("i1", "f32", [True, False, True, True], [1.0, 0.0, 1.0, 1.0]),
    ("f32", "f16", [1.0, 65504.0, 1e-8, -2.5], [1.0, 65504.0, 0.0, -2.5]),
    ("i32", "bf16", [1, -3, 256, 257], [1.0, -3.0, 256.0, 256.0]),
])
def test_cast(source, target, values, expected):
    x = torch.tensor(values, dtype=TORCH_DTYPES[source])
    result = run_single_op(f"braze.cast %a0 : tensor<4x{source}> to tensor<4x{target}>",
                           [f"tensor<4x{source}>"], f"tensor<4x{target}>", x)
    assert result.dtype == TORCH_DTYPES[target]
    assert result.tolist() == expected


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------

def reduced_shape(shape, dims, keepdim):
    return tuple(1 if d in dims else s for d, s in enumerate(shape) if keepdim or d not in dims)


def run_reduction(name, x, element, dims, keepdim, result_element=None):
    shape = tuple(x.shape)
    it = tensor_type(shape, element)
    ot = tensor_type(reduced_shape(shape, dims, keepdim), result_element or element)
    op = f"braze.{name} %a0 dims [{', '.join(map(str, dims))}]{' keepdim' if keepdim else ''} : {it} -> {ot}"
    return run_single_op(op, [it], ot, x)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", [[1], [0, 2], [0, 1, 2]])
@pytest.mark.parametrize("name, element", [
    ("sum", "f32"), ("sum", "i32"), ("sum", "f64"), ("mean", "f32"), ("mean", "bf16"),
    ("max", "f32"), ("max", "i8"), ("min", "f64"), ("min", "i64"),
])
def test_numeric_reductions(name, element, dims, keepdim):
    x = random_tensor((3, 4, 5), element)
    result = run_reduction(name, x, element, dims, keepdim)
    if name in ("sum", "max", "min") and element != "bf16":
        numpy_op = {"sum": np.sum, "max": np.max, "min": np.min}[name]
        expected = numpy_op(x.numpy(), axis=tuple(dims), keepdims=keepdim).astype(x.numpy().dtype)
        assert result.dtype == x.dtype
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)
    else:
        assert_same(result, torch.mean(x, dim=dims, keepdim=keepdim))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["any", "all"])
def test_logical_reductions(name, keepdim):
    x = random_tensor((3, 4, 2), "i1")
    result = run_reduction(name, x, "i1", [0, 2], keepdim)
    numpy_op = np.any if name == "any" else np.all
    np.testing.assert_array_equal(result.numpy(), numpy_op(x.numpy(), axis=(0, 2), keepdims=keepdim))


def first_max_row_major(array, dims):
    """Independent argmax: loops over kept positions, scanning reduced ones in order."""
    kept = [d for d in range(array.ndim) if d not in dims]
    out = np.zeros([array.shape[d] for d in kept], dtype=np.int64)
    for kept_index in np.ndindex(*out.shape):
        best, best_flat = None, 0
        for flat, reduced_index in enumerate(np.ndindex(*[array.shape[d] for d in dims])):
            full = [0] * array.ndim
            for d, i in zip(kept, kept_index):
                full[d] = i
            for d, i in zip(dims, reduced_index):
                full[d] = i
            value = array[tuple(full)]
            if best is None or value > best:
                best, best_flat = value, flat
        out[kept_index] = best_flat
    return out


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", [[1], [0, 2], [1, 2], [0, 1, 2]])
@pytest.mark.parametrize("element", ["f32", "i32"])
def test_argmax_first_maximum_in_row_major_order(element, dims, keepdim):
    x = random_tensor((3, 4, 5), element, 0, 3)  # small ints: many ties
    result = run_reduction("argmax", x, element, dims, keepdim, result_element="i64")
    expected = first_max_row_major(x.numpy(), dims)
    if keepdim:
        expected = expected.reshape(reduced_shape(x.shape, dims, True))
    assert result.dtype == torch.int64
    np.testing.assert_array_equal(result.numpy(), expected)


# ---------------------------------------------------------------------------
# Matrix products
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("element", ["f32", "f64", "bf16", "i64"])
def test_matmul_and_bmm(element):
    a, b = random_tensor((5, 6), element), random_tensor((6, 3), element)
    result = run_single_op(f"braze.matmul %a0, %a1 : tensor<?x6x{element}>, tensor<6x3x{element}> -> tensor<?x3x{element}>",
                           [f"tensor<?x6x{element}>", f"tensor<6x3x{element}>"], f"tensor<?x3x{element}>", a, b)
    assert_same(result, a @ b)
    x, y = random_tensor((2, 5, 6), element), random_tensor((2, 6, 3), element)
    batched = run_single_op(f"braze.bmm %a0, %a1 : tensor<2x5x6x{element}>, tensor<2x6x3x{element}> -> tensor<2x5x3x{element}>",
                            [f"tensor<2x5x6x{element}>", f"tensor<2x6x3x{element}>"], f"tensor<2x5x3x{element}>", x, y)
    assert_same(batched, torch.bmm(x, y))
    if element in ("f32", "f64"):
        np.testing.assert_allclose(batched.numpy(), np.matmul(x.numpy(), y.numpy()), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attributes, beta, alpha", [("", 1.0, 1.0), ("{alpha = 2.0 : f64, beta = 0.5 : f64}", 0.5, 2.0)])
@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_addmm(element, attributes, beta, alpha):
    bias, lhs, rhs = (random_tensor(s, element) for s in [(3,), (4, 5), (5, 3)])
    types = [f"tensor<3x{element}>", f"tensor<?x5x{element}>", f"tensor<5x3x{element}>"]
    result = run_single_op(f"braze.addmm %a0, %a1, %a2 {attributes} : {', '.join(types)} -> tensor<?x3x{element}>",
                           types, f"tensor<?x3x{element}>", bias, lhs, rhs)
    # Eager rounds once after scaling and adding (torch.addmm), not per step.
    assert_same(result, torch.addmm(bias, lhs, rhs, beta=beta, alpha=alpha))
    if beta == 1.0 and alpha == 1.0:
        assert_same(result, torch.nn.functional.linear(lhs, rhs.T, bias))
    exact = beta * bias.double() + alpha * (lhs.double() @ rhs.double())
    torch.testing.assert_close(result.double(), exact, rtol=2e-2 if element == "bf16" else 1e-5, atol=1e-2)


def test_integer_addmm_with_integral_scales():
    bias, lhs, rhs = (random_tensor(s, "i32") for s in [(3,), (4, 5), (5, 3)])
    types = ["tensor<3xi32>", "tensor<4x5xi32>", "tensor<5x3xi32>"]
    result = run_single_op(f"braze.addmm %a0, %a1, %a2 {{alpha = 3.0 : f64, beta = 2.0 : f64}} : {', '.join(types)} -> tensor<4x3xi32>",
                           types, "tensor<4x3xi32>", bias, lhs, rhs)
    np.testing.assert_array_equal(result.numpy(), 2 * bias.numpy() + 3 * (lhs.numpy() @ rhs.numpy()))


# ---------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------

LAYOUT = """
func.func @f(%x: tensor<?x8xf32>, %r: tensor<1x8xf32>, %ids: tensor<?x?xi64>, %cols: tensor<3xi32>)
    -> (tensor<?x2x4xf32>, tensor<?x?x8xf32>, tensor<8x?xf32>, tensor<4x8xf32>, tensor<2x?x8xf32>,
        tensor<3x?x8xf32>, tensor<?x4xf32>, tensor<?x5xf32>, tensor<?x8xf32>, tensor<?x?x8xf32>,
        tensor<?x3xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %half = arith.divsi %n, %c2 : index
  %0 = braze.reshape %x : tensor<?x8xf32> -> tensor<?x2x4xf32>
  %1 = braze.reshape %x sizes [%half, %c2] : tensor<?x8xf32> -> tensor<?x?x8xf32>
  %2 = braze.permute %x [1, 0] : tensor<?x8xf32> -> tensor<8x?xf32>
  %3 = braze.expand %r : tensor<1x8xf32> -> tensor<4x8xf32>
  %4 = braze.expand %r sizes [%n] : tensor<1x8xf32> -> tensor<2x?x8xf32>
  %5 = braze.expand %x : tensor<?x8xf32> -> tensor<3x?x8xf32>
  %6 = braze.slice %x dim 1 [1 : 8 : 2] : tensor<?x8xf32> -> tensor<?x4xf32>
  %7 = braze.slice %x dim 1 [3 : 100 : 1] : tensor<?x8xf32> -> tensor<?x5xf32>
  %8 = braze.concat %x, %r, %x dim 0 : tensor<?x8xf32>, tensor<1x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
  %9 = braze.take %x, %ids dim 0 : tensor<?x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %10 = braze.take %x, %cols dim 1 : tensor<?x8xf32>, tensor<3xi32> -> tensor<?x3xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : tensor<?x2x4xf32>, tensor<?x?x8xf32>, tensor<8x?xf32>,
      tensor<4x8xf32>, tensor<2x?x8xf32>, tensor<3x?x8xf32>, tensor<?x4xf32>, tensor<?x5xf32>, tensor<?x8xf32>,
      tensor<?x?x8xf32>, tensor<?x3xf32>
}
"""


@pytest.mark.parametrize("rows", [2, 6])
def test_layout_ops_with_dynamic_dims(rows):
    module = braze.parse(LAYOUT)
    x, r = random_tensor((rows, 8), "f32"), random_tensor((1, 8), "f32")
    ids = torch.randint(0, rows, (rows + 1, 3))
    cols = torch.tensor([7, 0, 7], dtype=torch.int32)
    results = reference.run(module, x, r, ids, cols)
    a, b = x.numpy(), r.numpy()
    expected = [
        a.reshape(rows, 2, 4), a.reshape(rows // 2, 2, 8), a.T, np.broadcast_to(b, (4, 8)),
        np.broadcast_to(b, (2, rows, 8)), np.broadcast_to(a, (3, rows, 8)), a[:, 1:8:2], a[:, 3:],
        np.concatenate([a, b, a], axis=0), np.take(a, ids.numpy(), axis=0), np.take(a, cols.numpy(), axis=1),
    ]
    assert len(results) == len(expected)
    for actual, wanted in zip(results, expected):
        assert actual.dtype == torch.float32
        np.testing.assert_array_equal(actual.numpy(), wanted)


def test_take_out_of_range_is_an_error():
    module = braze.parse("""
func.func @f(%t: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %r = braze.take %t, %i dim 0 : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}""", "take.mlir")
    with pytest.raises(braze.BrazeError, match=r"'braze.take' at take.mlir:3:8: index 10 is out of range \[0, 10\) along dim 0"):
        reference.run(module, torch.zeros(10, 4), torch.tensor([1, 10, -1]))
    with pytest.raises(braze.BrazeError, match="index -1 is out of range"):
        reference.run(module, torch.zeros(10, 4), torch.tensor([1, 2, -1]))


SYMBOLIC_SLICES = """
func.func @f(%x: tensor<?x8xf32>, %s: index, %e: index, %k: index) -> (tensor<?x8xf32>, tensor<?x?xf32>, tensor<1x8xf32>) {
  %0 = braze.slice %x dim 0 [0 : %e : 1] : tensor<?x8xf32> -> tensor<?x8xf32>
  %1 = braze.slice %x dim 1 [%s : 9223372036854775807 : %k] : tensor<?x8xf32> -> tensor<?x?xf32>
  %2 = braze.slice %x dim 0 [%s : %e : 100] : tensor<?x8xf32> -> tensor<1x8xf32>
  return %0, %1, %2 : tensor<?x8xf32>, tensor<?x?xf32>, tensor<1x8xf32>
}"""


def test_symbolic_slices():
    module = braze.parse(SYMBOLIC_SLICES, "slices.mlir")
    x = random_tensor((6, 8), "f32")
    rows, columns, one = reference.run(module, x, 3, 6, 2)
    assert_same(rows, x[:6])
    assert_same(columns, x[:, 3::2])
    assert_same(one, x[3:4])


@pytest.mark.parametrize("start, end, step, message", [
    (0, 7, 1, r"bounds \[0 : 7\] are out of range for dim 0 of size 6"),
    (-1, 2, 1, r"bounds \[-1 : 9223372036854775807\] are out of range for dim 1 of size 8"),
    (4, 3, 1, r"bounds \[4 : 3\] are out of range"),
    (9, 6, 1, r"bounds \[9 : 9223372036854775807\] are out of range for dim 1"),
    (0, 6, 0, r"step 0 must be at least 1"),
])
def test_symbolic_slice_bounds_outside_the_dim_are_errors(start, end, step, message):
    module = braze.parse(SYMBOLIC_SLICES, "slices.mlir")
    with pytest.raises(braze.BrazeError, match=r"'braze.slice' at slices.mlir:\d+:\d+: " + message):
        reference.run(module, random_tensor((6, 8), "f32"), start, end, step)


def test_iota_with_symbolic_start_and_step():
    module = braze.parse("""
func.func @f(%n: index, %s: index, %k: index) -> (tensor<?xi64>, tensor<3xf32>) {
  %0 = braze.iota start %s step %k sizes [%n] : tensor<?xi64>
  %1 = braze.iota start %s step 0.5 : tensor<3xf32>
  return %0, %1 : tensor<?xi64>, tensor<3xf32>
}""")
    ints, floats = reference.run(module, 4, 7, -2)
    assert ints.tolist() == [7, 5, 3, 1]
    assert floats.tolist() == [7.0, 7.5, 8.0]


def test_iota():
    module = braze.parse("""
func.func @f(%n: index) -> (tensor<5xi64>, tensor<?xf32>, tensor<4xi32>) {
  %0 = braze.iota start 0.0 step 1.0 : tensor<5xi64>
  %1 = braze.iota start 1.0 step 0.1 sizes [%n] : tensor<?xf32>
  %2 = braze.iota start 0.5 step -0.75 : tensor<4xi32>
  return %0, %1, %2 : tensor<5xi64>, tensor<?xf32>, tensor<4xi32>
}""")
    ints, floats, truncated = reference.run(module, 7)
    assert ints.tolist() == [0, 1, 2, 3, 4] and ints.dtype == torch.int64
    assert_same(floats, torch.tensor([1.0 + i * 0.1 for i in range(7)], dtype=torch.float64).float())
    assert truncated.tolist() == [0, 0, -1, -1]  # 0.5, -0.25, -1.0, -1.75 toward zero


def test_reshape_with_the_wrong_element_count_is_an_error():
    module = braze.parse("""
func.func @f(%x: tensor<?x8xf32>, %n: index) -> tensor<?x?xf32> {
  %r = braze.reshape %x sizes [%n, %n] : tensor<?x8xf32> -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}""")
    assert reference.run(module, torch.zeros(2, 8), 4)[0].shape == (4, 4)
    with pytest.raises(braze.BrazeError, match=r"'braze.reshape' at <string>:3:8: cannot reshape \[2, 8\]"):
        reference.run(module, torch.zeros(2, 8), 3)


# ---------------------------------------------------------------------------
# Constants and parameters
# ---------------------------------------------------------------------------

def test_constants_of_every_kind():
    module = braze.parse("""
func.func @f() -> (tensor<2x2xf32>, tensor<3xi64>, tensor<4xbf16>, tensor<2xbf16>, tensor<3xf16>,
                   tensor<3xi1>, tensor<2xi1>, tensor<i8>, index, tensor<2xf64>) {
  %0 = braze.constant dense<1.5> : tensor<2x2xf32>
  %1 = braze.constant dense<[1, -2, 3]> : tensor<3xi64>
  %2 = braze.constant dense<[1.5, -2.0, 3.25, 0x7FC0]> : tensor<4xbf16>
  %3 = braze.constant dense<-0.375> : tensor<2xbf16>
  %4 = braze.constant dense<[1.0, 65504.0, -0.5]> : tensor<3xf16>
  %5 = braze.constant dense<[true, false, true]> : tensor<3xi1>
  %6 = braze.constant dense<true> : tensor<2xi1>
  %7 = braze.constant dense<-7> : tensor<i8>
  %8 = arith.constant 42 : index
  %9 = arith.constant dense<[0.25, 2.0]> : tensor<2xf64>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<2x2xf32>, tensor<3xi64>, tensor<4xbf16>, tensor<2xbf16>,
      tensor<3xf16>, tensor<3xi1>, tensor<2xi1>, tensor<i8>, index, tensor<2xf64>
}""")
    r = reference.run(module)
    assert_same(r[0], torch.full((2, 2), 1.5))
    assert_same(r[1], torch.tensor([1, -2, 3]))
    assert r[2].dtype == torch.bfloat16 and r[2][:3].tolist() == [1.5, -2.0, 3.25] and math.isnan(r[2][3])
    assert_same(r[3], torch.full((2,), -0.375, dtype=torch.bfloat16))
    assert_same(r[4], torch.tensor([1.0, 65504.0, -0.5], dtype=torch.float16))
    assert_same(r[5], torch.tensor([True, False, True]))
    assert_same(r[6], torch.tensor([True, True]))
    assert_same(r[7], torch.tensor(-7, dtype=torch.int8))
    assert r[8] == 42 and type(r[8]) is int
    assert_same(r[9], torch.tensor([0.25, 2.0], dtype=torch.float64))


PARAMETER = """
func.func @f(%x: tensor<?x3xf32>) -> tensor<?x2xf32> {
  %w = braze.parameter "fc.weight" : tensor<3x2xf32>
  %y = braze.matmul %x, %w : tensor<?x3xf32>, tensor<3x2xf32> -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}"""


def test_parameters_are_looked_up_by_name():
    x, w = torch.randn(4, 3), torch.randn(3, 2)
    (result,) = reference.run(braze.parse(PARAMETER), x, parameters={"fc.weight": w})
    assert_same(result, x @ w)
    (from_numpy,) = reference.run(braze.parse(PARAMETER), x.numpy(), parameters={"fc.weight": w.numpy()})
    assert_same(from_numpy, x @ w)


@pytest.mark.parametrize("parameters, message", [
    (None, "'braze.parameter' at <string>:3:8: parameter 'fc.weight' is not among the parameters given"),
    ({"fc.weight": torch.zeros(2, 3)}, "parameter 'fc.weight' has shape \\[2, 3\\] but tensor<3x2xf32> has 3 at dim 0"),
    ({"fc.weight": torch.zeros(3, 2, dtype=torch.float64)}, "parameter 'fc.weight' has element type f64"),
    ({"fc.weight": torch.zeros(3)}, "parameter 'fc.weight' has rank 1"),
])
def test_parameter_errors(parameters, message):
    with pytest.raises(braze.BrazeError, match=message):
        reference.run(braze.parse(PARAMETER), torch.zeros(1, 3), parameters=parameters)


# ---------------------------------------------------------------------------
# Arguments, entry functions, calls, index arithmetic
# ---------------------------------------------------------------------------

ADD = """
func.func @f(%a: tensor<?x4xf32>, %b: tensor<4xf32>) -> tensor<?x4xf32> {
  %r = braze.add %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}"""


@pytest.mark.parametrize("rows", [1, 3, 17])
def test_dynamic_dims_accept_any_size(rows):
    a, b = torch.randn(rows, 4), torch.randn(4)
    (result,) = reference.run(braze.parse(ADD), a, b)
    assert_same(result, a + b)


@pytest.mark.parametrize("inputs, message", [
    ((torch.zeros(2, 4),), "@f takes 2 argument\\(s\\) but 1 were given"),
    ((torch.zeros(2, 5), torch.zeros(4)), "argument #0 dim 1 is 5 but the function expects 4"),
    ((torch.zeros(2, 4), torch.zeros(1, 4)), "argument #1 has rank 2 but the function expects rank 1"),
    ((torch.zeros(2, 4), torch.zeros(4, dtype=torch.float64)), "argument #1 has element type f64 .* expects f32"),
    ((torch.zeros(2, 4), 3), "argument #1 must be a tensor of type tensor<4xf32>, got int"),
])
def test_argument_errors(inputs, message):
    with pytest.raises(braze.BrazeError, match=message):
        reference.run(braze.parse(ADD), *inputs)


def test_outputs_never_alias_inputs():
    module = braze.parse("func.func @f(%a: tensor<3xf32>) -> tensor<3xf32> { return %a : tensor<3xf32> }")
    a = torch.zeros(3)
    (result,) = reference.run(module, a)
    result += 1
    assert a.tolist() == [0.0, 0.0, 0.0]


CALLS = """
func.func private @double(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = braze.add %x, %x : tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = func.call @double(%x) : (tensor<?xf32>) -> tensor<?xf32>
  %s = call @double(%r) : (tensor<?xf32>) -> tensor<?xf32>
  return %s : tensor<?xf32>
}
func.func @other(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
"""


def test_entry_selection_and_calls():
    module = braze.parse(CALLS)
    x = torch.randn(5)
    with pytest.raises(braze.BrazeError, match=r"2 public functions with a body \(@main, @other\); pass entry="):
        reference.run(module, x)
    assert_same(reference.run(module, x, entry="main")[0], 4 * x)
    assert_same(reference.run(module, x, entry="double")[0], 2 * x)
    with pytest.raises(braze.BrazeError, match="has no function @nope"):
        reference.run(module, x, entry="nope")


def test_index_arithmetic_follows_arith_semantics():
    module = braze.parse("""
func.func @f(%a: index, %b: index) -> (index, index, index, index, index, index, index, index, index, i32, index) {
  %0 = arith.addi %a, %b : index
  %1 = arith.subi %a, %b : index
  %2 = arith.muli %a, %b : index
  %3 = arith.floordivsi %a, %b : index
  %4 = arith.divsi %a, %b : index
  %5 = arith.ceildivsi %a, %b : index
  %6 = arith.remsi %a, %b : index
  %7 = arith.maxsi %a, %b : index
  %8 = arith.minsi %a, %b : index
  %9 = arith.index_cast %a : index to i32
  %10 = arith.index_cast %9 : i32 to index
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : index, index, index, index, index, index, index, index, index, i32, index
}""")
    for a, b in [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3)]:
        results = reference.run(module, a, b)
        truncated = int(a / b)
        assert results == [a + b, a - b, a * b, a // b, truncated, -(-a // b), a - b * truncated,
                           max(a, b), min(a, b), a, a]
    assert reference.run(module, 2**32 + 5, 1)[9] == 5  # index_cast to i32 truncates
    with pytest.raises(braze.BrazeError, match="'arith.floordivsi' at <string>:6:8: division by zero"):
        reference.run(module, 1, 0)


def test_unknown_op_is_rejected_with_its_location():
    module = braze.parse("""
func.func @f(%a: index) -> index {
  %0 = arith.xori %a, %a : index
  return %0 : index
}""", "model.mlir")
    with pytest.raises(braze.BrazeError, match=r"^the reference interpreter does not support 'arith.xori' \(at model.mlir:3:8\)$"):
        reference.run(module, 1)


def test_a_result_that_contradicts_its_declared_type_is_reported():
    # The declared 8x4 refines `?x4`; running with 3 rows shows the IR lied.
    module = braze.parse("""
func.func @f(%a: tensor<?x4xf32>) -> tensor<8x4xf32> {
  %r = braze.add %a, %a : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}""")
    assert reference.run(module, torch.zeros(8, 4))[0].shape == (8, 4)
    with pytest.raises(braze.BrazeError, match=r"'braze.add' at <string>:3:8: result #0 has shape \[3, 4\]"):
        reference.run(module, torch.zeros(3, 4))


def test_broadcasting_failure_at_run_time_names_the_op():
    with pytest.raises(braze.BrazeError, match="'braze.add' at <string>:3:8: cannot run on these operands"):
        reference.run(braze.parse(ADD.replace("tensor<4xf32>", "tensor<?xf32>")), torch.zeros(2, 4), torch.zeros(3))


# ---------------------------------------------------------------------------
# Symbolic dims
# ---------------------------------------------------------------------------

SYMBOLS = """
module attributes {braze.symbols = {s0 = [2, 64], s1 = [1, -1]}} {
func.func @f(%x: tensor<?x?xf32> {braze.dims = ["s1", "s0"]}, %y: tensor<?x4xf32> {braze.dims = ["s0", 4]},
             %z: tensor<?xf32> {braze.dims = ["2*s0 + 1"]}) -> tensor<?x?xf32> {
  return %x : tensor<?x?xf32>
}
}"""


def test_symbols_bind_and_check():
    module = braze.parse(SYMBOLS)
    assert reference.run(module, torch.zeros(1000, 8), torch.zeros(8, 4), torch.zeros(17))[0].shape == (1000, 8)
    cases = [
        ((torch.zeros(3, 8), torch.zeros(7, 4), torch.zeros(17)), "^argument #1 dim 0 is 7 but s0 = 8 from argument #0 dim 1$"),
        ((torch.zeros(3, 100), torch.zeros(100, 4), torch.zeros(201)), r"^s0 = 100 is outside its range \[2, 64\] \(argument #0 dim 1\)$"),
        ((torch.zeros(0, 8), torch.zeros(8, 4), torch.zeros(17)), r"^s1 = 0 is outside its range \[1, unbounded\] \(argument #0 dim 0\)$"),
        ((torch.zeros(3, 8), torch.zeros(8, 4), torch.zeros(16)), "^argument #2 dim 0 is 16 but 2\\*s0 \\+ 1 = 17$"),
    ]
    for inputs, message in cases:
        with pytest.raises(braze.BrazeError, match=message):
            reference.run(module, *inputs)


def test_function_symbols_override_the_module():
    module = braze.parse("""
module attributes {braze.symbols = {s0 = [2, 64]}} {
func.func @f(%x: tensor<?xf32> {braze.dims = ["s0"]}) -> tensor<?xf32> attributes {braze.symbols = {s0 = [1, 4]}} {
  return %x : tensor<?xf32>
}
}""")
    assert reference.run(module, torch.zeros(1))[0].shape == (1,)
    with pytest.raises(braze.BrazeError, match=r"s0 = 5 is outside its range \[1, 4\]"):
        reference.run(module, torch.zeros(5))


def test_a_symbol_with_a_divisor_must_be_a_multiple():
    """Tests the third entry of a braze.symbols range (multiple_of), and
    that a divisor below 1 is refused when the attribute is read."""
    text = """
module attributes {braze.symbols = {S = [8, 64, 8]}} {
func.func @f(%x: tensor<?xf32> {braze.dims = ["S"]}) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
}"""
    assert reference.run(braze.parse(text), torch.zeros(24))[0].shape == (24,)
    with pytest.raises(braze.BrazeError, match="^argument #0 dim 0 is 20, but S must be a multiple of 8$"):
        reference.run(braze.parse(text), torch.zeros(20))
    with pytest.raises(braze.BrazeError, match="has multiple_of 0; it must be >= 1"):
        reference.run(braze.parse(text.replace("[8, 64, 8]", "[8, 64, 0]")), torch.zeros(24))


@pytest.mark.parametrize("text, value", [
    ("s0", 6), ("2*s0 + 1", 13), ("s0 - (s1 - 2)", 5), ("(s0 + 1)*2", 14), ("s1 // 2 * 3", 3),
    ("-s0 + 10", 4), ("s0*s1 - s0//4", 17), ("  42 ", 42),
])
def test_dim_expression_grammar(text, value):
    expression = symbolic.parse_dim_expression(text)
    assert expression.evaluate({"s0": 6, "s1": 3}) == value
    assert symbolic.parse_dim_expression(str(expression)) == expression


@pytest.mark.parametrize("text", ["s0 +", "2**s0", "(s0", "s0 s1", "__import__('os')", "1.5", "s0 / 2"])
def test_dim_expression_rejects_anything_else(text):
    with pytest.raises(braze.BrazeError, match="dim expression"):
        symbolic.parse_dim_expression(text)


def test_a_derived_dim_needs_its_symbol_bound():
    specs = [[symbolic.parse_dim_expression("2*s0")]]
    with pytest.raises(braze.BrazeError, match="argument #0 dim 0 is '2\\*s0' but s0 is not bound"):
        symbolic.bind_symbols(specs, [(4,)], {})


# ---------------------------------------------------------------------------
# The oracle's purpose: a pass must not change results
# ---------------------------------------------------------------------------

SIMPLIFIABLE = """
func.func @f(%a: tensor<?x4xf32>, %b: tensor<4xf32>, %i: tensor<?x4xi32>) -> (tensor<?x4xf32>, tensor<4x?xf32>, tensor<?x4xi32>) {
  %n = braze.neg %b : tensor<4xf32>
  %r = braze.add %a, %n : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %nn = braze.neg %r : tensor<?x4xf32>
  %back = braze.neg %nn : tensor<?x4xf32>
  %t = braze.permute %back [1, 0] : tensor<?x4xf32> -> tensor<4x?xf32>
  %tt = braze.permute %t [1, 0] : tensor<4x?xf32> -> tensor<?x4xf32>
  %u = braze.permute %tt [1, 0] : tensor<?x4xf32> -> tensor<4x?xf32>
  %one = braze.constant dense<1> : tensor<4xi32>
  %q = braze.div %i, %one : tensor<?x4xi32>, tensor<4xi32> -> tensor<?x4xi32>
  %zero = braze.constant dense<0> : tensor<4xi32>
  %s = braze.add %q, %zero : tensor<?x4xi32>, tensor<4xi32> -> tensor<?x4xi32>
  %c = braze.cast %s : tensor<?x4xi32> to tensor<?x4xi32>
  return %r, %u, %c : tensor<?x4xf32>, tensor<4x?xf32>, tensor<?x4xi32>
}"""


def test_braze_simplify_preserves_results():
    module = braze.parse(SIMPLIFIABLE)
    inputs = [(random_tensor((rows, 4), "f32"), random_tensor((4,), "f32"), random_tensor((rows, 4), "i32"))
              for rows in (1, 3, 8)]
    before = [reference.run(module, *args) for args in inputs]
    ops_before = str(module).count("braze.")
    braze.run_pipeline(module, "braze-simplify")
    assert str(module).count("braze.") < ops_before  # the pass did change the program
    for args, expected in zip(inputs, before):
        for actual, wanted in zip(reference.run(module, *args), expected):
            assert_same(actual, wanted)
