"""The math ops on the CPU backend against eager PyTorch: every dtype they
take, NaN, infinities and signed zeros, integer remainders, the activations
that arrive as aten ops, and a fused rotary embedding."""

import re
import warnings

import pytest
import torch
import torch.nn.functional as F

import braze
from braze.testing.modules import Apply


def compiled(function, *args):
    return braze.compile(Apply(function), args)


SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30, 1e30]
# Where each function is defined and not saturated; eager's float32 sinh and
# cosh overflow from 88.72 (the exact result does from 89.4), so stay below.
RANGES = {torch.sin: 1e4, torch.cos: 1e4, torch.tan: 10, torch.asin: 1, torch.acos: 1, torch.atan: 50,
          torch.sinh: 80, torch.cosh: 80, torch.expm1: 80, torch.exp2: 120, torch.log1p: 100, torch.log2: 100,
          torch.floor: 100, torch.ceil: 100, torch.trunc: 100, torch.round: 100, torch.sign: 100}
# Half an ulp of braze's float32 results plus eager's own error (~1 ulp); half
# types are rounded from the same float results, so at most an ulp apart.
TOLERANCE = {torch.float32: dict(rtol=3e-7, atol=1e-37), torch.float64: dict(rtol=5e-16, atol=1e-300),
             torch.bfloat16: dict(rtol=8e-3, atol=1e-37), torch.float16: dict(rtol=1e-3, atol=6e-8)}


def samples(scale, dtype, count=5000):
    x = (torch.rand(count, dtype=torch.float64) * 2 - 1) * scale
    x[: len(SPECIALS)] = torch.tensor(SPECIALS)
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("function", list(RANGES), ids=lambda f: f.__name__)
def test_unary_math_matches_eager(function, dtype):
    x = samples(RANGES[function], dtype).reshape(50, 100)
    (got,) = compiled(lambda x: (function(x),), x)(x)
    want = function(x)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, equal_nan=True, **TOLERANCE[dtype])
    signed = (want == 0) | want.isinf()
    assert torch.equal(got[signed].signbit(), want[signed].signbit())


@pytest.mark.parametrize("function", [torch.floor, torch.ceil, torch.trunc, torch.round, torch.sign],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_rounding_and_sign_of_integers_match_eager(function, dtype):
    x = torch.randint(-1000, 1000, (64,), dtype=dtype)
    x[:3] = torch.tensor([0, torch.iinfo(dtype).max, torch.iinfo(dtype).min])
    (got,) = compiled(lambda x: (function(x),), x)(x)
    assert torch.equal(got, function(x))


def test_sign_of_booleans_and_round_with_decimals():
    flags = torch.tensor([True, False, True])
    x = samples(1000, torch.float32, 1000)
    program = compiled(lambda b, x: (torch.sign(b), torch.round(x, decimals=2), torch.round(x, decimals=-2)),
                       flags, x)
    sign, hundredths, hundreds = program(flags, x)
    assert torch.equal(sign, flags)
    torch.testing.assert_close(hundredths, torch.round(x, decimals=2), rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(hundreds, torch.round(x, decimals=-2), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("function", [torch.atan2, torch.remainder, torch.fmod], ids=lambda f: f.__name__)
def test_binary_math_matches_eager(function, dtype):
    grid_a, grid_b = torch.meshgrid(torch.tensor(SPECIALS), torch.tensor(SPECIALS), indexing="ij")
    a = torch.cat([grid_a.flatten(), torch.randn(3000) * 100]).to(dtype)
    b = torch.cat([grid_b.flatten(), torch.randn(3000) * 10]).to(dtype)
    (got,) = compiled(lambda a, b: (function(a, b),), a, b)(a, b)
    want = function(a, b)
    # eager's vectorized float32 fmod gives NaN where a / b overflows; the exact
    # remainder (float64's, braze's) is finite there
    exact = function(a.double(), b.double()).to(dtype)
    want = torch.where(want.isnan() & ~exact.isnan(), exact, want)
    torch.testing.assert_close(got, want, equal_nan=True, **TOLERANCE[dtype])
    signed = want == 0
    assert torch.equal(got[signed].signbit(), want[signed].signbit())


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_remainder_and_fmod_take_pythons_and_cs_signs(dtype):
    info = torch.iinfo(dtype)
    a = torch.tensor([7, -7, 7, -7, 0, info.min, info.max, info.min, 5], dtype=dtype)
    b = torch.tensor([3, 3, -3, -3, -5, -1, info.min, info.max, 1], dtype=dtype)
    program = compiled(lambda a, b: (torch.remainder(a, b), torch.fmod(a, b)), a, b)
    remainder, fmod = program(a, b)
    assert remainder.tolist() == [1, 2, -2, -1, 0, 0, -1, info.max - 1, 0]
    assert fmod.tolist() == [1, -1, 1, -1, 0, 0, info.max, -1, 0]
    with pytest.raises(braze.BrazeError, match="integer division by zero"):
        program(a, torch.ones_like(b).index_fill_(0, torch.tensor([4]), 0))


def test_isnan_isinf_of_floats_and_integers():
    x = torch.tensor(SPECIALS, dtype=torch.bfloat16)
    n = torch.arange(5)
    program = compiled(lambda x, n: (torch.isnan(x), torch.isinf(x), torch.isnan(n), torch.isinf(n)), x, n)
    for got, want in zip(program(x, n), (torch.isnan(x), torch.isinf(x), torch.isnan(n), torch.isinf(n))):
        assert torch.equal(got, want)


ACTIVATIONS = [F.leaky_relu, F.elu, F.selu, F.mish, F.softplus, F.hardswish, F.hardsigmoid, F.hardtanh,
               lambda x: F.leaky_relu(x, 0.2), lambda x: F.elu(x, alpha=0.5)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda f: getattr(f, "__name__", "with_arguments"))
def test_activations_match_eager(activation, dtype):
    x = samples(30, dtype)
    (got,) = compiled(lambda x: (activation(x),), x)(x)
    want = activation(x)
    # mish/softplus/elu go through exp, log1p, tanh: a few float ulps each
    tolerance = dict(rtol=2e-6, atol=1e-6) if dtype == torch.float32 else TOLERANCE[dtype]
    torch.testing.assert_close(got, want, equal_nan=True, **tolerance)


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def rotary(q, positions, inverse_frequencies):
    angles = torch.outer(positions, inverse_frequencies)
    angles = torch.cat((angles, angles), dim=-1)[None]  # at q's rank: a kernel has one
    return q * angles.cos() + rotate_half(q) * angles.sin()


def test_rotary_embedding_fuses_sin_and_cos_into_one_kernel():
    sequence, dim = 4096, 64
    q = torch.randn(2, sequence, dim)
    positions = torch.arange(sequence, dtype=torch.float32) * 37  # long contexts: angles up to ~1.5e5
    inverse_frequencies = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    program = compiled(rotary, q, positions, inverse_frequencies)
    torch.testing.assert_close(program(q, positions, inverse_frequencies), rotary(q, positions, inverse_frequencies),
                               rtol=1e-5, atol=1e-5)
    source = program.stats["source"].read_text()
    kernels = re.split(r'\n(?:extern "C"|static) int ', source)[1:]  # combo sub-kernels are static
    assert any("bz_sin(" in kernel and "bz_cos(" in kernel for kernel in kernels)


def test_torch_compile_keeps_the_math_ops_on_braze():
    def block(x, y):
        return torch.remainder(x, y) + torch.atan2(x, y) * F.mish(x) + torch.round(x).sin()

    x, y = torch.randn(16, 32), torch.randn(16, 32) + 3
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to eager warns
        got = torch.compile(block, backend="braze")(x, y)
    torch.testing.assert_close(got, block(x, y), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("exponent", [3.0, 1.0, -0.5, -1.0, -2.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pow_by_small_exponents_is_eagers_arithmetic(exponent, dtype):
    """ATen computes these powers by multiplying and dividing (pow(x, 3) is
    x*x*x); braze does the same, so the bits agree, specials included, and
    no pow is called (GPT-2's tanh GELU cubes its input)."""
    x = torch.cat([torch.randn(1000, dtype=dtype) * 10, torch.tensor(SPECIALS, dtype=dtype)])
    program = compiled(lambda v: torch.pow(v, exponent), x)
    source = program.stats["source"]  # none for pow(x, 1): the input itself
    assert source is None or "bz_pow" not in source.read_text().split("braze_kernel_0")[-1]
    torch.testing.assert_close(program(x), torch.pow(x, exponent), rtol=0, atol=0, equal_nan=True)
