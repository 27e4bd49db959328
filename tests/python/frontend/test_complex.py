"""Complex tensors: decomposed at capture into real arithmetic on their
parts, so the compiled program has real tensors only; complex inputs and
outputs cross the boundary as complex tensors. Numerics against eager."""

import warnings

import pytest
import torch

import braze


def _close(actual, expected, tolerance=1e-5):
    actual, expected = torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
        torch.testing.assert_close(a, e, rtol=tolerance, atol=tolerance)


def _randn(*shape, dtype=torch.complex64):
    return torch.randn(*shape, dtype=dtype)


class Arithmetic(torch.nn.Module):
    def forward(self, a, b, r):
        y = a * b + a / b - a.conj() * 2 - (-a) + r * a - 0.5j
        z = torch.exp(y * 0.1) + torch.abs(a) + torch.angle(b) * 1j
        s = a.sum(1, keepdim=True) + b.mean(0)
        t = torch.view_as_complex(torch.stack([r, r * 2], dim=-1)) * a.real + a.imag
        return z, s, torch.view_as_real(t), y.real, y.imag, torch.abs(a), torch.angle(a), a.transpose(0, 1)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_arithmetic_matches_eager(dtype):
    torch.manual_seed(0)
    a, b = _randn(3, 4, dtype=dtype), _randn(3, 4, dtype=dtype)
    r = torch.randn(3, 4, dtype=torch.float32 if dtype == torch.complex64 else torch.float64)
    compiled = braze.compile(Arithmetic(), (a, b, r))
    assert "complex" not in str(compiled.module)
    assert compiled.stats["externs"] == 0
    expected = Arithmetic()(a, b, r)
    _close(compiled(a, b, r), expected)
    _close(compiled.exported(a, b, r), expected)
    a2, b2, r2 = _randn(3, 4, dtype=dtype), _randn(3, 4, dtype=dtype), r * 3
    _close(compiled(a2, b2, r2), Arithmetic()(a2, b2, r2))


class Product(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(6, 5, dtype=torch.complex64))

    def forward(self, x, y):
        return x @ self.weight, torch.bmm(y, y.transpose(1, 2).conj()), (x @ self.weight).sum()


def test_complex_matmul_matches_eager():
    torch.manual_seed(1)
    model = Product()
    x, y = _randn(4, 6), _randn(2, 3, 4)
    compiled = braze.compile(model, (x, y))
    # Real GEMMs (at these decode shapes, M <= 4, the CPU's fused GEMMs).
    assert compiled.stats["gemms"] + compiled.stats["fused_gemms"] >= 4
    with torch.no_grad():
        expected = model(x, y)
    _close(compiled(x, y), expected, 1e-4)


def test_dynamic_dims():
    def f(a, b, w):
        # (A mean of a complex product over the dynamic dim makes torch.export
        # specialise it; a mean over the static dim does not.)
        return torch.exp(a * b * 0.1) + a.conj() / (b + 2.0), (a @ w).mean(1), torch.abs(a).sum(1)

    dim = torch.export.Dim("n", min=2, max=16)
    w = _randn(4, 3)
    compiled = braze.compile(f, (_randn(5, 4), _randn(5, 4), w), dynamic_shapes=({0: dim}, {0: dim}, None))
    assert "?x4x2xf32" in str(compiled.exported.module)
    for n in (2, 9, 16):
        a, b = _randn(n, 4), _randn(n, 4)
        _close(compiled(a, b, w), f(a, b, w), 1e-4)


def test_unsupported_complex_op_is_named():
    def f(x):
        return torch.sin(x)

    with pytest.raises(braze.BrazeError, match="complex op aten.sin.default is not supported"):
        braze.export(f, (_randn(3),))


def test_torch_compile_complex():
    torch._dynamo.reset()
    model = Arithmetic()
    compiled = torch.compile(model, backend="braze")
    a, b, r = _randn(3, 4), _randn(3, 4), torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        _close(compiled(a, b, r), model(a, b, r))


def test_torch_compile_unsupported_complex_is_eager_with_one_warning():
    torch._dynamo.reset()

    def f(x):
        return torch.sin(x) * 2

    compiled = torch.compile(f, backend="braze")
    x = _randn(3)
    with pytest.warns(UserWarning, match="aten.sin.default") as record:
        _close(compiled(x), f(x))
        _close(compiled(x), f(x))
    assert sum("braze" in str(w.message) for w in record) == 1


def test_complex_across_control_flow_is_refused():
    def f(x, p):
        return torch.cond(p.sum() > 0, lambda x: x * 2, lambda x: x * 1j, (x,))

    with pytest.raises(braze.BrazeError, match="complex tensor; complex tensors cannot cross a control-flow"):
        braze.export(f, (_randn(3), torch.ones(2)))
