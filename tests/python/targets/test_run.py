"""The targets that run here, against eager: opencl (on PoCL), metal (in
the C++ shim on the CPU) and triton (in Triton's interpreter on CPU
tensors). The capture suite, dynamic sizes from one compile, and the
kernels' edge cases, on each."""

import pytest
import torch
from conftest import need
from test_models import MODELS, _inputs, _model, assert_close

import braze
from braze import target as targets
from braze.testing.modules import Apply

# Per target: options that keep its runs quick (the shim starts a thread per
# Metal thread).
RUNNING = {"opencl": {}, "metal": {"threads": 32}, "triton": {}}
# Per target: the environment it runs in here.
ENVIRONMENT = {"triton": {"TRITON_INTERPRET": "1"}}
EXTENSIONS = {"opencl": ".cl", "metal": ".metal", "triton": ".py"}


@pytest.fixture(params=sorted(RUNNING))
def target(request, monkeypatch):
    for name, value in ENVIRONMENT.get(request.param, {}).items():
        monkeypatch.setenv(name, value)
    need(f"the {request.param} target", targets.get(request.param).compiler_missing())
    return request.param


def _compile(model, args, target, **kwargs):
    return braze.compile(model, args, target=target, options=RUNNING[target], **kwargs)


def _compile_mlir(text, target):
    return braze.compile_mlir(text, target=target, options=RUNNING[target])


@pytest.mark.parametrize("name", MODELS)
def test_models_match_eager(name, target):
    model, args = _model(name), _inputs(name)
    compiled = _compile(model, args, target)
    assert compiled.stats["target"] == target and compiled.stats["kernels"] >= 1
    assert compiled.stats["source"].suffix == EXTENSIONS[target]
    with torch.no_grad():
        assert_close(compiled(*args), model(*args))


def test_dynamic_batch_three_sizes_one_compile(target):
    model = _model("prenorm_block")
    batch = torch.export.Dim("batch", min=1, max=64)
    compiled = _compile(model, (torch.randn(2, 8, 32),), target, dynamic_shapes=({0: batch},))
    for size in (1, 5, 33):
        x = torch.randn(size, 8, 32)
        with torch.no_grad():
            assert_close(compiled(x), model(x))


def test_symbolic_slices_one_compile(target):
    from test_symbolic_slicing import WINDOW, CacheWindow, LastSteps

    model = CacheWindow()
    steps = torch.export.Dim("steps", min=1, max=4)
    compiled = _compile(model, (torch.randn(2, 6, 8), torch.randn(3)), target, dynamic_shapes=({1: WINDOW}, {0: steps}))
    for s, n in [(4, 1), (9, 2), (32, 4)]:
        args = (torch.randn(2, s, 8), torch.randn(n))
        assert_close(compiled(*args), model(*args))
    last = _compile(LastSteps(), (torch.randn(2, 6, 8), torch.randn(3)), target,
                    dynamic_shapes=({1: WINDOW}, {0: torch.export.Dim("steps", min=1, max=8)}))
    with pytest.raises(braze.BrazeError, match="out of range for dim 1 of size 5"):
        last(torch.randn(2, 5, 8), torch.randn(7))


def test_indexing_and_gather_one_compile(target):
    """Advanced indexing with broadcast, negative and dynamic-size indices,
    and gather: their position arithmetic runs in the target's kernels."""
    from test_indexing import Gather, Index

    model = Index(lambda x, i, j: x[i[:, None], :, j[None, :]])
    rows, columns = torch.export.Dim("rows", min=2, max=32), torch.export.Dim("columns", min=2, max=32)
    compiled = _compile(model, (torch.randn(5, 3, 6), torch.tensor([0, -1]), torch.tensor([1, 2, -3])), target,
                        dynamic_shapes=(None, {0: rows}, {0: columns}))
    for r, c in ((2, 3), (7, 4)):
        args = (torch.randn(5, 3, 6), torch.randint(-5, 5, (r,)), torch.randint(-6, 6, (c,)))
        assert_close(compiled(*args), model(*args))
    with pytest.raises(braze.BrazeError, match="index -1 is out of range"):
        compiled(torch.randn(5, 3, 6), torch.tensor([0, 5]), torch.tensor([1, 2]))
    gather = Gather(1)
    x, index = torch.randn(3, 7), torch.randint(0, 7, (3, 4))
    assert_close(_compile(gather, (x, index), target)(x, index), gather(x, index))


def test_max_pool_one_compile(target):
    from test_pooling import Pool

    model = Pool(kernel_size=3, stride=2, padding=1)
    x = torch.randn(2, 3, 9, 8)
    assert_close(_compile(model, (x,), target)(x), model(x))


def test_integer_division_by_zero_is_an_error(target):
    program = _compile_mlir("""
    func.func @f(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
      %q = braze.div %a, %b : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
      return %q : tensor<4xi64>
    }""", target)
    a = torch.tensor([7, -7, 9, -2**63])
    (q,) = program(a, torch.tensor([2, 2, -1, -1]))
    assert q.tolist() == [3, -3, -9, -2**63]
    with pytest.raises(braze.BrazeError, match="integer division by zero"):
        program(a, torch.tensor([1, 0, 1, 1]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_row_reductions_and_argmax_match_eager(dtype, target):
    if target == "metal" and dtype == torch.float64:
        pytest.skip("Metal has no double")

    def f(x):
        return x.sum(-1), x.amax(-1), x.amin(0), x.argmax(-1), torch.softmax(x.float(), -1).to(dtype)

    x = torch.randn(7, 300).to(dtype)
    x[2, 17] = float("nan")
    x[3, :] = 1.0  # ties: the first index wins
    compiled = _compile(Apply(f), (x,), target)
    for actual, expected in zip(compiled(x), f(x)):
        assert actual.dtype == expected.dtype
        tolerance = {torch.bfloat16: 2e-2, torch.float16: 2e-3}.get(dtype, 1e-5)
        torch.testing.assert_close(actual, expected, rtol=tolerance, atol=tolerance, equal_nan=True)


def test_reduction_over_a_leading_dim_and_broadcast_input(target):
    def f(x, b):
        return (x * b).sum(0), torch.relu(x + b).mean(-1, keepdim=True)

    x, b = torch.randn(33, 5, 70), torch.randn(70)
    compiled = _compile(Apply(f), (x, b), target)
    for actual, expected in zip(compiled(x, b), f(x, b)):
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_strided_view_inputs_and_empty_results(target):
    program = _compile_mlir("""
    func.func @f(%x: tensor<?x8xf32>) -> tensor<?xf32> {
      %s = braze.sum %x dims [1] : tensor<?x8xf32> -> tensor<?xf32>
      return %s : tensor<?xf32>
    }""", target)
    x = torch.randn(8, 5).t()  # a transposed view: inner stride 5
    torch.testing.assert_close(program(x.contiguous())[0], x.sum(1))
    torch.testing.assert_close(program(x)[0], x.sum(1))
    assert program(torch.empty(0, 8))[0].shape == (0,)


def test_control_flow_runs(target):
    """braze.switch (3 branches, kernels inside) and braze.while (zero and
    several iterations) from IR, chosen per call from tensors."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "backend"))
    from test_control_flow_runtime import LOOP, SWITCH, _loop_eager, _switch_eager

    switch = _compile_mlir(SWITCH, target)
    x = torch.randn(4, 8)
    for index in (0, 1, 2, 3):
        torch.testing.assert_close(switch(torch.tensor(index), x)[0], _switch_eager(index, x))
    loop = _compile_mlir(LOOP, target)
    x = torch.randn(3, 4)
    for count in (0, 4):
        k, y = loop(torch.tensor(0), x, torch.tensor(count))
        assert int(k) == count
        torch.testing.assert_close(y, _loop_eager(x, count))
