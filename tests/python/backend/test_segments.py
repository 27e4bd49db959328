"""Index-set splitting (codegen/segments.py): a pointwise kernel reading a
concatenation or a padding gets one loop per range of the concatenated
innermost dim (and, for outer dims, one for the box of their longest
ranges), where every select is decided and every clamp is the identity.
The ranges' analysis is checked on the kernel form; the C++ is compared
with eager PyTorch."""

import pytest
import torch
import torch.nn.functional as F

import braze
from braze.codegen.analysis import KernelAnalysis
from braze.codegen.segments import MAX_SEGMENTS, segments
from braze.testing.kernels import kernel_form


def _kernel_of(text: str):
    module, kernels = kernel_form(
        braze.parse(text), "func.func(braze-fuse-pointwise,braze-lower-kernels,braze-fold-layouts,braze-inline-kernels)")
    assert len(kernels) == 1, kernels
    return module, KernelAnalysis(kernels[0], "k")


CONCAT = """
func.func @cat(%a: tensor<2x4x32xf32>, %b: tensor<2x4x16xf32>, %c: tensor<2x4x8xf32>) -> tensor<2x4x56xf32> {
  %x = braze.concat %a, %b, %c dim DIM : tensor<2x4x32xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32> -> tensor<2x4x56xf32>
  %y = braze.relu %x : tensor<2x4x56xf32>
  return %y : tensor<2x4x56xf32>
}
"""


def test_a_concatenation_splits_at_its_inputs_offsets():
    module, analysis = _kernel_of(CONCAT.replace("DIM", "2"))
    plan = segments(analysis)
    assert plan is not None and plan.inner_dim == 2 and not plan.interior and not plan.outside
    assert [(s.start, s.end) for s in plan.inside] == [(0, 32), (32, 48), (48, None)]
    for number, segment in enumerate(plan.inside):
        names = [op.operation.name for op in segment.ops]
        # One load (of input `number`), the relu, the store: no select, no clamp.
        assert names.count("tensor.extract") == 1, names
        assert "arith.select" not in names and "arith.maxsi" not in names and "arith.minsi" not in names, names
        (load,) = [op for op in segment.ops if op.operation.name == "tensor.extract"]
        assert analysis.input_number(load.operation.operands[0]) == number


def test_a_kernel_without_comparisons_has_no_ranges():
    module, analysis = _kernel_of("""
func.func @f(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %y = braze.exp %a : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}""")
    assert segments(analysis) is None


def test_a_comparison_with_a_value_is_no_split_point():
    """`x > y` of loaded values decides nothing about an index."""
    module, analysis = _kernel_of("""
func.func @f(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %y = braze.maximum %a, %b : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}""")
    assert segments(analysis) is None


def test_too_many_ranges_are_not_split():
    inputs = ", ".join(f"%a{i}: tensor<2x1xf32>" for i in range(MAX_SEGMENTS + 1))
    values = ", ".join(f"%a{i}" for i in range(MAX_SEGMENTS + 1))
    types = ", ".join("tensor<2x1xf32>" for _ in range(MAX_SEGMENTS + 1))
    width = MAX_SEGMENTS + 1
    module, analysis = _kernel_of(f"""
func.func @f({inputs}) -> tensor<2x{width}xf32> {{
  %x = braze.concat {values} dim 1 : {types} -> tensor<2x{width}xf32>
  %y = braze.exp %x : tensor<2x{width}xf32>
  return %y : tensor<2x{width}xf32>
}}""")
    assert segments(analysis) is None


class Concat(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, *xs):
        return torch.relu(torch.cat(xs, dim=self.dim)) * 2 + 1


@pytest.mark.parametrize("dim", [1, 3], ids=["outer", "innermost"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_concatenations_match_eager(dim, dtype):
    """20 inputs of 1-5 channels (DenseNet's growing concatenation), along
    an outer dim (the largest input's range takes its own loop) and the
    innermost one (one loop per range of the block), NaN included."""
    torch.manual_seed(0)
    shapes = [[2, 3, 5, 7] for _ in range(20)]
    for number, shape in enumerate(shapes):
        shape[dim] = 1 + number % 5
    xs = [(torch.randn(shape) * 10).to(dtype) for shape in shapes]
    if dtype != torch.int64:
        xs[4][0, 0, 0, 0] = float("nan")
    model = Concat(dim)
    program = braze.compile(model, tuple(xs))
    source = program.stats["source"].read_text()
    kernels = source[source.index('extern "C"'):]
    # Innermost: one loop per input's range; outer: the largest input's
    # range of dim 1 takes its own loop.
    assert "first = std::max" in kernels if dim == 3 else "if (i1 >= " in kernels
    if dim == 3:  # each input is read in its own range only (before: every point read all 20)
        assert all(kernels.count(f"in{number}[") == 1 for number in range(len(xs))), kernels
    torch.testing.assert_close(program(*xs), model(*xs), rtol=0, atol=0, equal_nan=True)


class Padded(torch.nn.Module):
    def forward(self, x):
        return F.pad(x, (3, 2), value=-1.5).sigmoid()


def test_a_padding_of_the_innermost_dim_matches_eager():
    x = torch.randn(2, 3, 4, 9)
    program = braze.compile(Padded(), (x,))
    source = program.stats["source"].read_text()
    assert source.count("first = std::max") == 3  # left padding, the input, right padding
    torch.testing.assert_close(program(x), Padded()(x), rtol=1e-6, atol=1e-6)


class Pair(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(torch.cat([a, b], dim=1)) * 2 + 1


def test_a_dynamic_innermost_dim_keeps_its_last_range_open():
    model = Pair()
    xs = (torch.randn(3, 4), torch.randn(3, 5))
    program = braze.compile(model, xs, dynamic_shapes=(None, {1: torch.export.Dim("k", min=2, max=64)}))
    kernels = program.stats["source"].read_text()
    kernels = kernels[kernels.index('extern "C"'):]
    assert "const int64_t stop = end;" in kernels
    for width in (2, 37):
        xs = (torch.randn(3, 4), torch.randn(3, width))
        torch.testing.assert_close(program(*xs), model(*xs), rtol=0, atol=0)
