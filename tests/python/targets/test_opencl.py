"""The OpenCL target runs here on PoCL: the capture-suite models against
eager, dynamic sizes from one compile, and the edge cases of the kernels."""

import pytest
import torch
from conftest import need
from test_models import MODELS, _inputs, _model, assert_close

import braze
from braze import target as targets


@pytest.fixture(autouse=True)
def opencl():
    need("the opencl target", targets.get("opencl").compiler_missing())


@pytest.mark.parametrize("name", MODELS)
def test_models_match_eager(name):
    model, args = _model(name), _inputs(name)
    compiled = braze.compile(model, args, target="opencl")
    assert compiled.stats["target"] == "opencl" and compiled.stats["kernels"] >= 1
    assert compiled.stats["source"].name == "source.cl"
    with torch.no_grad():
        assert_close(compiled(*args), model(*args))


def test_dynamic_batch_three_sizes_one_compile():
    model = _model("prenorm_block")
    batch = torch.export.Dim("batch", min=1, max=64)
    compiled = braze.compile(model, (torch.randn(2, 8, 32),), dynamic_shapes=({0: batch},), target="opencl")
    for size in (1, 5, 33):
        x = torch.randn(size, 8, 32)
        with torch.no_grad():
            assert_close(compiled(x), model(x))


class _Function(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *args):
        return self.function(*args)


def test_integer_division_by_zero_is_an_error():
    program = braze.compile_mlir("""
    func.func @f(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
      %q = braze.div %a, %b : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
      return %q : tensor<4xi64>
    }""", target="opencl")
    a = torch.tensor([7, -7, 9, -2**63])
    (q,) = program(a, torch.tensor([2, 2, -1, -1]))
    assert q.tolist() == [3, -3, -9, -2**63]
    with pytest.raises(braze.BrazeError, match="integer division by zero"):
        program(a, torch.tensor([1, 0, 1, 1]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_row_reductions_and_argmax_match_eager(dtype):
    def f(x):
        return x.sum(-1), x.amax(-1), x.amin(0), x.argmax(-1), torch.softmax(x.float(), -1).to(dtype)

    x = torch.randn(7, 300).to(dtype)
    x[2, 17] = float("nan")
    x[3, :] = 1.0  # ties: the first index wins
    compiled = braze.compile(_Function(f), (x,), target="opencl")
    for actual, expected in zip(compiled(x), f(x)):
        assert actual.dtype == expected.dtype
        tolerance = {torch.bfloat16: 2e-2, torch.float16: 2e-3}.get(dtype, 1e-5)
        torch.testing.assert_close(actual, expected, rtol=tolerance, atol=tolerance, equal_nan=True)


def test_reduction_over_a_leading_dim_and_broadcast_input():
    def f(x, b):
        return (x * b).sum(0), torch.relu(x + b).mean(-1, keepdim=True)

    x, b = torch.randn(33, 5, 70), torch.randn(70)
    compiled = braze.compile(_Function(f), (x, b), target="opencl")
    for actual, expected in zip(compiled(x, b), f(x, b)):
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_strided_view_inputs_and_empty_results():
    program = braze.compile_mlir("""
    func.func @f(%x: tensor<?x8xf32>) -> tensor<?xf32> {
      %s = braze.sum %x dims [1] : tensor<?x8xf32> -> tensor<?xf32>
      return %s : tensor<?xf32>
    }""", target="opencl")
    x = torch.randn(8, 5).t()  # a transposed view: inner stride 5
    torch.testing.assert_close(program(x.contiguous())[0], x.sum(1))
    torch.testing.assert_close(program(x)[0], x.sum(1))
    assert program(torch.empty(0, 8))[0].shape == (0,)


def test_second_compile_hits_the_cache():
    text = """
    func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
      %y = braze.exp %x : tensor<16xf32>
      return %y : tensor<16xf32>
    }"""
    first = braze.compile_mlir(text, target="opencl", options={"threads": 64})
    second = braze.compile_mlir(text, target="opencl", options={"threads": 64})
    assert second.stats["cache_hit"] and second.stats["source"] == first.stats["source"]
    x = torch.randn(16)
    torch.testing.assert_close(second(x)[0], torch.exp(x))
    with pytest.raises(braze.BrazeError, match="power of two"):
        braze.compile_mlir(text, target="opencl", options={"threads": 100})


def test_opinfo_samples_run_on_pocl():
    """One OpInfo sample per op in float32 and bfloat16 (benchmarks/opinfo_report.py
    style; the whole set, 2 samples x 4 dtypes, passed on PoCL when this was written)."""
    pytest.importorskip("expecttest", reason="OpInfo's database needs expecttest")
    from braze.testing.opinfo import opinfos, run_op, summarize

    bad, passed = [], 0
    for name, info in sorted(opinfos().items()):
        results = run_op(info, (torch.float32, torch.bfloat16), 1, "opencl")
        bad += [f"{r.op} {r.dtype} {r.outcome}: {r.detail}" for r in results if r.outcome in ("mismatch", "error")]
        passed += summarize(results)["pass"]
    assert not bad, "\n".join(bad)
    assert passed >= 150
