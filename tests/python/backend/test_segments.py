"""Index-set splitting (codegen/segments.py): a pointwise kernel reading a
concatenation or a padding gets one loop per range of the concatenated
innermost dim (and, for outer dims, one for the box of their longest
ranges), where every select is decided and every clamp is the identity; a
row reduction over a concatenation along its reduced dim gets one loop per
range in each pass over the row. The ranges' analysis is checked on the
kernel form; the C++ is compared with eager PyTorch."""

import pytest
import torch
import torch.nn.functional as F

import braze
from braze.codegen.analysis import KernelAnalysis
from braze.codegen.segments import MAX_SEGMENTS, reduction_segments, segments
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


def test_equal_pieces_split_by_their_quotient():
    """A concatenation of equal pieces reads piece `i / width` at `i %
    width`: within one piece's range that is one input at `i - offset`."""
    xs = [torch.randn(2, 3, 5, 8) for _ in range(4)]
    program = braze.compile(Concat(3), tuple(xs))
    kernels = _kernel_source(program)
    assert all(kernels.count(f"in{number}[") == 1 for number in range(4)), kernels
    assert "= i3 - 24;" in kernels and "(i3 %" not in kernels, kernels
    torch.testing.assert_close(program(*xs), Concat(3)(*xs), rtol=0, atol=0)


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


NORM_OF_CONCAT = """
func.func @norm(%a: tensor<6x32xf32>, %b: tensor<6x16xf32>, %c: tensor<6x8xf32>) -> tensor<6x56xf32> {
  %x = braze.concat %a, %b, %c dim 1 : tensor<6x32xf32>, tensor<6x16xf32>, tensor<6x8xf32> -> tensor<6x56xf32>
  %m = braze.max %x dims [1] keepdim : tensor<6x56xf32> -> tensor<6x1xf32>
  %d = braze.sub %x, %m : tensor<6x56xf32>, tensor<6x1xf32> -> tensor<6x56xf32>
  return %d : tensor<6x56xf32>
}
"""


def test_a_reduction_over_a_concatenation_splits_its_row_at_the_offsets():
    module, analysis = _kernel_of(NORM_OF_CONCAT)
    assert analysis.reduce == [1]
    ranges = reduction_segments(analysis)
    assert ranges is not None and [(r.start, r.end) for r in ranges] == [(0, 32), (32, 48), (48, None)]
    # In each range the row's value is one input's element: the selects
    # of the concatenation are decided there.
    for number, segment in enumerate(ranges):
        loads = [op for op in analysis.needed_full_ops(analysis.stages[0].roots, analysis.stages[0].before,
                                                       aliases=segment.aliases)
                 if op.operation.name == "tensor.extract"]
        assert [analysis.input_number(load.operation.operands[0]) for load in loads] == [number]
    assert segments(analysis) is None  # the pointwise split is for kernels without reductions


def test_a_reduction_without_comparisons_or_over_columns_is_not_split():
    module, analysis = _kernel_of("""
func.func @f(%a: tensor<8x16xf32>) -> tensor<8x1xf32> {
  %y = braze.sum %a dims [1] keepdim : tensor<8x16xf32> -> tensor<8x1xf32>
  return %y : tensor<8x1xf32>
}""")
    assert reduction_segments(analysis) is None
    # A concatenation along the parallel innermost dim of a column sum: its
    # lanes are SIMD lanes, not a loop to split.
    module, analysis = _kernel_of("""
func.func @g(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> tensor<1x32xf32> {
  %x = braze.concat %a, %b dim 1 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x32xf32>
  %y = braze.sum %x dims [0] keepdim : tensor<8x32xf32> -> tensor<1x32xf32>
  return %y : tensor<1x32xf32>
}""")
    assert analysis.lane_dim == 1 and reduction_segments(analysis) is None


class PatchMerging(torch.nn.Module):
    """torchvision's Swin patch merging: four strided views of the image
    joined along the channels, then a LayerNorm over them."""

    def __init__(self, channels):
        super().__init__()
        self.norm = torch.nn.LayerNorm(4 * channels)

    def forward(self, x):
        pieces = [x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]]
        return self.norm(torch.cat(pieces, dim=-1))


class RowReductionsOfConcat(torch.nn.Module):
    """Every reduction kind over a concatenation along the reduced dim: a
    softmax (its exp kept in a row buffer for the last pass), a max with
    NaN, an argmax, a sum of squares."""

    def forward(self, a, b, c):
        x = torch.cat([a, b, c], dim=-1)
        return x.softmax(-1), x.amax(-1), x.argmax(-1), (x * x).sum(-1)


def _kernel_source(program) -> str:
    """The generated kernels (combo sub-kernels are static functions before
    the first extern one)."""
    source = program.stats["source"].read_text()
    return source[source.index("braze_kernel_"):]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_patch_merging_reads_each_view_in_its_own_range(dtype):
    torch.manual_seed(0)
    model = PatchMerging(24).to(dtype)
    with torch.no_grad():
        model.norm.weight.normal_()
        model.norm.bias.normal_()
    x = torch.randn(2, 14, 14, 24, dtype=dtype)
    with torch.no_grad():
        program = braze.compile(model, (x,))
        expected = model(x)
    kernels = _kernel_source(program)
    # The mean, the variance and the normalisation: three passes over the
    # row, each a loop per view (channels [0, 24), [24, 48), ...).
    for start, end in ((0, 24), (24, 48), (48, 72)):
        assert kernels.count(f"= {start}; ") >= 3 and kernels.count(f"< {end}; ") >= 3, kernels
    # The channel within a view is the index minus the view's offset, not a remainder.
    assert kernels.count("= i3 - 24;") >= 3 and "(i3 %" not in kernels, kernels
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    torch.testing.assert_close(program(x), expected, **tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_row_reductions_of_a_concatenation_match_eager(dtype):
    torch.manual_seed(0)
    xs = [torch.randn(5, 7, width, dtype=dtype) * 3 for width in (40, 3, 17)]
    xs[1][2, 3, 1] = float("nan")
    xs[2][4, 6, 16] = 1e4  # the row's maximum in the last range
    model = RowReductionsOfConcat()
    program = braze.compile(model, tuple(xs))
    kernels = _kernel_source(program)
    # Every pass over a row: one loop per input's range (the second ends at 40 + 3).
    assert kernels.count("= 40; i2 < 43; ++i2)") >= 3, kernels
    for got, expected in zip(program(*xs), model(*xs)):
        if expected.is_floating_point():
            torch.testing.assert_close(got, expected, rtol=1e-5 if dtype == torch.float32 else 2e-2,
                                       atol=1e-5 if dtype == torch.float32 else 2e-2, equal_nan=True)
        else:
            torch.testing.assert_close(got, expected, rtol=0, atol=0)


class NormOfPair(torch.nn.Module):
    def forward(self, a, b):
        return torch.nn.functional.layer_norm(torch.cat([a, b], dim=1), (a.shape[1] + b.shape[1],))


def test_a_dynamic_reduced_dim_bounds_its_ranges_by_the_extent():
    model = NormOfPair()
    xs = (torch.randn(3, 4), torch.randn(3, 5))
    program = braze.compile(model, xs, dynamic_shapes=(None, {1: torch.export.Dim("k", min=2, max=64)}))
    assert "std::min<int64_t>(n1, 4)" in _kernel_source(program)
    for width in (2, 37):
        xs = (torch.randn(3, 4), torch.randn(3, width))
        torch.testing.assert_close(program(*xs), model(*xs), rtol=1e-5, atol=1e-5)
