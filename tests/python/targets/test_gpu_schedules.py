"""The GPU schedules beyond one block per row, run on OpenCL (PoCL) and
Metal (the C++ shim) against eager torch: split reductions
(braze-split-reductions: partial sums over chunks, then their combination)
of many points to one value and to a few rows, NaN inputs and argmax ties
across chunks; warp trees (one warp per row, shuffles) on Metal, whose
shim emulates SIMD-group shuffles with real threads (OpenCL takes block
trees: PoCL has no sub-groups). CUDA (NVRTC, nvcc) and HIP (hipcc) build
the same kernels; no GPU is needed."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import need, need_program

import braze
from braze import target as targets
from braze.codegen import function_operations
from braze.ir import parse
from braze.passes import run_pipeline

# The Metal shim runs a std::thread per Metal thread: fewer threads per
# block there, and fewer points (the smallest a split takes).
OPTIONS = {"opencl": {}, "metal": {"threads": 64}}
POINTS = {"opencl": 1 << 22, "metal": 1 << 17}


@pytest.fixture(params=sorted(OPTIONS))
def target(request):
    need(f"the {request.param} target", targets.get(request.param).compiler_missing())
    return request.param


def _program(text: str, target: str):
    return braze.compile_mlir(text, target=target, options=OPTIONS[target])


def _kernels(program) -> int:
    """Kernels in the program's source, standalone or in a combo."""
    return len(re.findall(r"void braze_kernel_\d+\(", program.stats["source"].read_text()))


def _reductions_to_one(points: int) -> str:
    return f"""
    func.func @f(%x: tensor<{points}xf32>) -> (tensor<f32>, tensor<f32>, tensor<i64>) {{
      %s = braze.sum %x dims [0] : tensor<{points}xf32> -> tensor<f32>
      %m = braze.max %x dims [0] : tensor<{points}xf32> -> tensor<f32>
      %a = braze.argmax %x dims [0] : tensor<{points}xf32> -> tensor<i64>
      return %s, %m, %a : tensor<f32>, tensor<f32>, tensor<i64>
    }}"""


def test_a_long_sum_max_and_argmax_to_one_value_split_in_two_kernels(target):
    points = POINTS[target]
    program = _program(_reductions_to_one(points), target)
    assert _kernels(program) == 6  # three reductions, each a partial and a combining kernel
    x = torch.randn(points)
    x[points // 3] = 10.0  # the first maximum, in a middle chunk
    x[points - 1] = 10.0  # a tie in the last chunk
    s, m, a = program(x)
    torch.testing.assert_close(s, x.sum(), rtol=1e-4, atol=1e-2)
    assert m.item() == 10.0 and a.item() == points // 3
    x[points // 2] = float("nan")
    x[points - 5] = float("nan")
    s, m, a = program(x)
    assert s.isnan() and m.isnan() and a.item() == points // 2


def test_rows_of_a_prime_length_mask_the_last_chunk(target):
    rows, length = 3, POINTS[target] // 2 + 3  # odd: the last chunk is short
    text = f"""
    func.func @f(%x: tensor<{rows}x{length}xf32>) -> (tensor<{rows}xf32>, tensor<{rows}xf32>, tensor<{rows}xi64>) {{
      %s = braze.sum %x dims [1] : tensor<{rows}x{length}xf32> -> tensor<{rows}xf32>
      %m = braze.min %x dims [1] : tensor<{rows}x{length}xf32> -> tensor<{rows}xf32>
      %a = braze.argmax %x dims [1] : tensor<{rows}x{length}xf32> -> tensor<{rows}xi64>
      return %s, %m, %a : tensor<{rows}xf32>, tensor<{rows}xf32>, tensor<{rows}xi64>
    }}"""
    program = _program(text, target)
    assert _kernels(program) == 6
    x = torch.randn(rows, length) - 5.0  # every value below 0: a masked point must not win
    x[1, length - 1] = float("nan")  # the very last point
    x[2] = -1.0  # all tied: the first index
    s, m, a = program(x)
    torch.testing.assert_close(s, x.sum(1), rtol=1e-4, atol=1e-2, equal_nan=True)
    torch.testing.assert_close(m, x.amin(1), equal_nan=True)
    assert a.tolist() == torch.argmax(x, 1).tolist() == [torch.argmax(x[0]).item(), length - 1, 0]


def test_a_softmax_and_a_dynamic_extent_stay_one_kernel(target):
    points = POINTS[target]
    text = """
    func.func @f(%x: tensor<2x65536xf32>, %y: tensor<?xf32>) -> (tensor<2x65536xf32>, tensor<f32>) {
      %m = braze.max %x dims [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
      %d = braze.sub %x, %m : tensor<2x65536xf32>, tensor<2x1xf32> -> tensor<2x65536xf32>
      %e = braze.exp %d : tensor<2x65536xf32>
      %z = braze.sum %e dims [1] keepdim : tensor<2x65536xf32> -> tensor<2x1xf32>
      %p = braze.div %e, %z : tensor<2x65536xf32>, tensor<2x1xf32> -> tensor<2x65536xf32>
      %s = braze.sum %y dims [0] : tensor<?xf32> -> tensor<f32>
      return %p, %s : tensor<2x65536xf32>, tensor<f32>
    }"""
    program = _program(text, target)
    x, y = torch.randn(2, 65536), torch.randn(points)
    p, s = program(x, y)
    torch.testing.assert_close(p, torch.softmax(x, 1))
    torch.testing.assert_close(s, y.sum(), rtol=1e-4, atol=1e-2)


# Rows of 40 and 100 (medium: warp trees on cuda, hip and metal): sums,
# maxima with NaN, argmax with ties, a softmax (two reductions, then a
# store per point), an "any" of a comparison and an integer sum.
WARP_ROWS = """
func.func @f(%x: tensor<37x40xf32>, %y: tensor<37x100xf32>, %k: tensor<37x40xi32>)
    -> (tensor<37xf32>, tensor<37xf32>, tensor<37xi64>, tensor<37x100xf32>, tensor<37xi1>, tensor<37xi32>) {
  %s = braze.sum %x dims [1] : tensor<37x40xf32> -> tensor<37xf32>
  %m = braze.max %x dims [1] : tensor<37x40xf32> -> tensor<37xf32>
  %a = braze.argmax %x dims [1] : tensor<37x40xf32> -> tensor<37xi64>
  %ym = braze.max %y dims [1] keepdim : tensor<37x100xf32> -> tensor<37x1xf32>
  %d = braze.sub %y, %ym : tensor<37x100xf32>, tensor<37x1xf32> -> tensor<37x100xf32>
  %e = braze.exp %d : tensor<37x100xf32>
  %z = braze.sum %e dims [1] keepdim : tensor<37x100xf32> -> tensor<37x1xf32>
  %p = braze.div %e, %z : tensor<37x100xf32>, tensor<37x1xf32> -> tensor<37x100xf32>
  %zero = braze.constant dense<2.0> : tensor<f32>
  %c = braze.gt %x, %zero : tensor<37x40xf32>, tensor<f32> -> tensor<37x40xi1>
  %any = braze.any %c dims [1] : tensor<37x40xi1> -> tensor<37xi1>
  %t = braze.sum %k dims [1] : tensor<37x40xi32> -> tensor<37xi32>
  return %s, %m, %a, %p, %any, %t
      : tensor<37xf32>, tensor<37xf32>, tensor<37xi64>, tensor<37x100xf32>, tensor<37xi1>, tensor<37xi32>
}
"""


def _warp_inputs():
    x = torch.randn(37, 40)
    x[3, 7] = float("nan")
    x[4, 30] = float("nan")
    x[4, 35] = float("nan")  # the first NaN wins
    x[5] = 1.0  # all tied: index 0
    x[6, 5] = x[6, 33] = 9.0  # a tie across lanes: the first
    y = torch.randn(37, 100) * 4
    k = torch.randint(-1000, 1000, (37, 40), dtype=torch.int32)
    return x, y, k


def _expected(x, y, k):
    return (x.sum(1), x.amax(1), torch.argmax(x, 1), torch.softmax(y, 1), (x > 2.0).any(1),
            k.sum(1, dtype=torch.int32))


def _strategies(text: str, target_name: str, **options) -> tuple:
    """The unit `target_name` emits for `text`, and its kernels' strategies."""
    target = targets.get(target_name)
    chosen = target.options(options)
    module = parse(text)
    run_pipeline(module, target.pipeline(chosen))
    func = next(iter(module.mlir_module.body.operations))
    unit = target.emit(function_operations(func), chosen)
    return unit, [spec.strategy for spec in unit.kernels.values()]


def test_warp_trees_match_eager_on_the_metal_shim():
    need("the metal target", targets.get("metal").compiler_missing())
    _, strategies = _strategies(WARP_ROWS, "metal", threads=64)
    assert set(strategies) == {"warp_tree"}
    program = braze.compile_mlir(WARP_ROWS, target="metal", options={"threads": 64})
    source = program.stats["source"].read_text()
    assert "simd_shuffle_down(" in source and "threadgroup_barrier" not in source.split("kernel void", 1)[1]
    inputs = _warp_inputs()
    for got, want in zip(program(*inputs), _expected(*inputs)):
        torch.testing.assert_close(got, want, equal_nan=True)


def test_opencl_takes_block_trees_for_medium_rows():
    need("the opencl target", targets.get("opencl").compiler_missing())
    _, strategies = _strategies(WARP_ROWS, "opencl")
    assert "warp_tree" not in strategies and "block_tree" in strategies
    program = braze.compile_mlir(WARP_ROWS, target="opencl")
    inputs = _warp_inputs()
    for got, want in zip(program(*inputs), _expected(*inputs)):
        torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_cuda_builds_warp_trees_and_split_reductions_without_spills(compiler):
    if compiler == "nvcc":
        need_program("nvcc")
    cuda = targets.get("cuda")
    need("the cuda target", cuda.compiler_missing())
    options = cuda.options({"compiler": compiler})
    for text, strategy in ((WARP_ROWS, "warp_tree"), (_reductions_to_one(1 << 22), "block_tree")):
        unit, strategies = _strategies(text, "cuda", compiler=compiler)
        assert strategy in strategies
        assert ("__shfl_down_sync(0xffffffffu, " in unit.source) == (strategy == "warp_tree")
        source, cubin, _ = cuda.compile_artifact(unit, options)
        assert cubin[:4] == b"\x7fELF"
        if compiler == "nvcc":
            report = (source.parent / "build.log").read_text()
            spills = re.findall(r"(\d+) bytes spill (?:stores|loads)", report)
            assert spills and all(count == "0" for count in spills), report


def test_hip_builds_warp_trees_and_split_reductions_for_gfx90a():
    need_program("hipcc")
    hip = targets.get("hip")
    options = hip.options()
    for text in (WARP_ROWS, _reductions_to_one(1 << 22)):
        unit, strategies = _strategies(text, "hip")
        assert ("__shfl_down(" in unit.source) == ("warp_tree" in strategies)
        _, code_object, _ = hip.compile_artifact(unit, options)
        assert code_object[:4] in (b"\x7fELF", b"__CL")


# 1049601 points: enough for 4 per thread (vector-points is 1M), and a
# last block only partly used. Static, so 32-bit indexing too.
LARGE_POINTWISE = """
func.func @f(%x: tensor<1049601xf32>, %y: tensor<1049601xf32>) -> tensor<1049601xf32> {
  %p = braze.mul %x, %y : tensor<1049601xf32>, tensor<1049601xf32> -> tensor<1049601xf32>
  %e = braze.exp %p : tensor<1049601xf32>
  return %e : tensor<1049601xf32>
}
"""


def test_large_pointwise_kernels_take_four_points_per_thread_in_32_bits():
    need("the opencl target", targets.get("opencl").compiler_missing())
    unit, _ = _strategies(LARGE_POINTWISE, "opencl")
    (spec,) = unit.kernels.values()
    assert (spec.elements, spec.index_bits) == (4, 32)
    assert spec.blocks([1049601]) == -(-1049601 // 1024)
    assert "const int first = ((int)get_group_id(0) * 256 + get_local_id(0)) * 4;" in unit.source
    assert "for (int k = 0; k < 4; ++k) {" in unit.source
    program = braze.compile_mlir(LARGE_POINTWISE, target="opencl")
    x, y = torch.randn(1049601), torch.randn(1049601)
    torch.testing.assert_close(program(x, y)[0], torch.exp(x * y))


def test_unbounded_dynamic_kernels_keep_64_bit_indexing_and_one_point_per_thread():
    text = """
    func.func @f(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?xf32>) {
      %e = braze.exp %x : tensor<?x64xf32>
      %s = braze.sum %x dims [1] : tensor<?x64xf32> -> tensor<?xf32>
      return %e, %s : tensor<?x64xf32>, tensor<?xf32>
    }"""
    unit, _ = _strategies(text, "cuda")
    assert {(spec.elements, spec.index_bits) for spec in unit.kernels.values()} == {(1, 64)}
    assert "const int " not in unit.source.split("braze_kernel_0", 1)[1]


def test_a_32_bit_kernel_reads_a_transposed_view_right(target):
    text = """
    func.func @f(%x: tensor<64x48xf32>) -> tensor<48xf32> {
      %t = braze.permute %x [1, 0] : tensor<64x48xf32> -> tensor<48x64xf32>
      %s = braze.sum %t dims [1] : tensor<48x64xf32> -> tensor<48xf32>
      return %s : tensor<48xf32>
    }"""
    program = _program(text, target)
    assert "const int point" in program.stats["source"].read_text()
    x = torch.randn(64, 48)
    torch.testing.assert_close(program(x)[0], x.sum(0))


def test_the_runtime_measures_how_far_a_view_reaches():
    from braze.runtime.executor import _last_offset

    view = torch.empty(2, 4, device="meta").as_strided((2, 4), (2**31, 1))
    assert _last_offset(view) == 2**31 + 3
    assert _last_offset(torch.empty(0, 5, device="meta")) == 0
    assert _last_offset(torch.empty(3, 1, device="meta").expand(3, 1000)) == 2


def test_a_warp_tree_schedule_given_to_opencl_is_refused():
    """braze-gpu-schedule never gives OpenCL a warp tree; one written by hand
    is an error naming the renderer, not a kernel without its reduction."""
    from braze.codegen import emit_kernels

    text = """
    func.func @f(%x: tensor<4x40xf32>) -> tensor<4xf32> {
      %s = braze.kernel ins(%x : tensor<4x40xf32>) domain [4, 40] reduce [1]
          attributes {braze.schedule = {strategy = "warp_tree", threads = 64 : i64}} : tensor<4xf32> {
      ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x40xf32>):
        %v = tensor.extract %a[%i, %j] : tensor<4x40xf32>
        %r = braze.reduce "add" %v : f32 -> f32
        braze.store %r, 0 [%i] : f32
      }
      return %s : tensor<4xf32>
    }"""
    module = parse(text)
    func = next(iter(module.mlir_module.body.operations))
    with pytest.raises(braze.BrazeError, match="the OpenCL C renderer has no warp shuffles"):
        emit_kernels(function_operations(func), "opencl")
    assert "__shfl_down_sync" in emit_kernels(function_operations(func), "cuda").source


def test_a_symbol_range_lets_a_dynamic_kernel_index_in_32_bits(target):
    """S is at most 4096 (the executor checks it every call): the kernels
    over [S, 64] index in 32 bits; a size outside the range is refused."""
    text = """
    module attributes {braze.symbols = {S = [1, 4096]}} {
      func.func @f(%x: tensor<?x64xf32> {braze.dims = ["S", 64]}) -> (tensor<?x64xf32>, tensor<?xf32>) {
        %e = braze.exp %x : tensor<?x64xf32>
        %s = braze.sum %e dims [1] : tensor<?x64xf32> -> tensor<?xf32>
        return %e, %s : tensor<?x64xf32>, tensor<?xf32>
      }
    }"""
    program = _program(text, target)
    assert "const int n0 = sizes[0];" in program.stats["source"].read_text()
    x = torch.randn(37, 64)
    e, s = program(x)
    torch.testing.assert_close(e, torch.exp(x))
    torch.testing.assert_close(s, torch.exp(x).sum(1))
    with pytest.raises(braze.BrazeError, match="outside its range"):
        program(torch.randn(4097, 64))
