"""Fused GEMMs in the C-like GPU renderers (codegen/gpu_gemm.py): shared-
memory tiled GEMMs with their epilogue, run on OpenCL (PoCL) and Metal
(the C++ shim) against eager PyTorch and the reference interpreter; the
CUDA, HIP and OpenCL sources built by nvcc/NVRTC (no spills), hipcc and
ocloc (no GPU needed)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import (assert_builds_for_every_gpu, assert_close_with_nans, emitted_unit, need, need_program,
                      torch_compile_without_fallback)
from conftest import random_tensor as _random
from gemm_cases import INTEGER_GEMM, QUANTISED, SCALED, SCALED_RESIDUAL, quantised

import braze
import braze.codegen
import braze.reference
from braze import target as targets
from braze.ir import parse
from braze.testing.modules import Apply

TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(params=["opencl", "metal"])
def target(request):
    need(f"the {request.param} target", targets.get(request.param).compiler_missing())
    return request.param


def _compare(actual, expected, dtype):
    actual = actual if isinstance(actual, (tuple, list)) else (actual,)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    for a, e in zip(actual, expected, strict=True):
        assert_close_with_nans(a, e, TOLERANCE[dtype])


def _check(function, args, target, dtype=torch.float32, **compile_options):
    compiled = braze.compile(Apply(function), args, target=target, **compile_options)
    assert compiled.stats["fused_gemms"] == 1
    assert "a_tile[" in compiled.stats["source"].read_text()
    _compare(compiled(*args), function(*args), dtype)
    return compiled


def _linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b))


def _linear_residual(x, w, r):
    return F.linear(x, w) + r


def _broadcasts(x, w, row, scalar):
    """Extras read by m (a [M, 1] column), by n (a bias) and once (a 0-d tensor)."""
    return F.linear(x, w) * row + scalar


def _batched_transposed(a, b, c):
    """A batched product with a transposed rhs whose batches are strided
    (a [N, B, K] tensor read as [B, K, N])."""
    return torch.bmm(a, b.permute(1, 2, 0)) * 0.5 + c


def _transposed_lhs(x, w, b):
    return torch.relu(x.mT @ w + b)


def _cast_to_f32(x, w):
    return F.linear(x, w).float().sigmoid()


# (function, argument shapes): nn.Linear's transposed weight, a residual at
# (m, n), extras by m, n and scalar, a batch with a strided transposed
# rhs, one row (decode), K of 67 (not a multiple of 16), a
# transposed lhs, a cast out of the product's type, an empty K, more than
# one tile each way.
GEMMS = {
    "linear_bias_gelu": (_linear_gelu, [(10, 40), (24, 40), (24,)]),
    "linear_residual": (_linear_residual, [(10, 40), (24, 40), (10, 24)]),
    "broadcasts": (_broadcasts, [(10, 40), (24, 40), (10, 1), ()]),
    "batched_transposed": (_batched_transposed, [(3, 9, 20), (18, 3, 20), (3, 9, 18)]),
    "one_row": (_linear_gelu, [(1, 40), (24, 40), (24,)]),
    "odd_k": (_linear_gelu, [(10, 67), (24, 67), (24,)]),
    "transposed_lhs": (_transposed_lhs, [(40, 10), (40, 24), (24,)]),
    "cast": (_cast_to_f32, [(10, 40), (24, 40)]),
    "empty_k": (_linear_gelu, [(10, 0), (24, 0), (24,)]),
    "tiles": (_linear_residual, [(70, 33), (130, 33), (70, 130)]),
}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("case", sorted(GEMMS))
def test_fused_gemms_match_eager(target, case, dtype):
    function, shapes = GEMMS[case]
    dtype = DTYPES[dtype]
    args = tuple(_random(*shape, dtype=dtype, seed=n) for n, shape in enumerate(shapes))
    _check(function, args, target, dtype)


def test_a_dynamic_m_serves_every_row_count(target):
    rows = torch.export.Dim("rows", min=1, max=4096)
    args = (_random(10, 40), _random(24, 40, seed=1), _random(24, seed=2))
    compiled = _check(_linear_gelu, args, target, dynamic_shapes=(({0: rows}, None, None),))
    for m in (1, 7, 33, 130):
        x = _random(m, 40, seed=m)
        _compare(compiled(x, *args[1:]), _linear_gelu(x, *args[1:]), torch.float32)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_row_statistics_walk_whole_rows(target, dtype):
    """A softmax's row max and an RMSNorm's sum of squares fused as
    statistics, N over several tiles of 64; a batched softmax too."""
    dtype = DTYPES[dtype]

    def function(x, w, r):
        y = F.linear(x, w) + r
        return torch.softmax(y, -1), y * torch.rsqrt((y * y).mean(-1, keepdim=True) + 1e-6)

    args = (_random(12, 32, dtype=dtype), _random(200, 32, seed=1, dtype=dtype), _random(12, 200, seed=2, dtype=dtype))
    compiled = _check(function, args, target, dtype)
    assert "stat0_part" in compiled.stats["source"].read_text()

    def batched(a, b, c):
        return torch.softmax(torch.bmm(a, b) + c, -1)

    _check(batched, (_random(2, 9, 20), _random(2, 20, 70, seed=1), _random(2, 9, 70, seed=2)), target)


def test_hand_written_scales_extras_and_statistics_match_the_reference(target):
    """A per-tensor lhs scale and per-column rhs scales with a scalar extra
    and both statistics (NaN rows included); per-row lhs scales on a batched
    bf16 product with a transposed lhs and (m, n), m and scalar extras."""
    f32, bf16 = torch.float32, torch.bfloat16
    for text, shapes in ((SCALED, [((5, 19), f32), ((19, 21), f32), ((), f32), ((21,), f32), ((), f32)]),
                         (SCALED_RESIDUAL, [((2, 4, 8), bf16), ((2, 4, 16), bf16), ((8,), f32), ((), f32),
                                            ((2, 8, 16), bf16), ((8,), f32), ((), f32)])):
        inputs = [_random(*shape, dtype=dtype, seed=n) for n, (shape, dtype) in enumerate(shapes)]
        if text is SCALED:
            inputs[0][2, 3] = float("nan")  # row 2's statistics are NaN
        compiled = braze.compile_mlir(text, target=target)
        assert compiled.stats["fused_gemms"] == 1
        for out, expected in zip(compiled(*inputs), braze.reference.run(parse(text), *inputs), strict=True):
            _compare(out, expected, expected.dtype)


DYNAMIC = """
func.func @f(%x: tensor<?x?x?xf32>, %w: tensor<?x?x?xf32>, %b: tensor<?xf32>) -> (tensor<?x?x?xf32>, tensor<?x?xf32>) {
  %y, %s = braze.fused_gemm %x, %w extras(%b : tensor<?xf32>) indexing ["n"] transpose_rhs accumulator f32
      reductions ["add"] : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>, tensor<?x?xf32> {
  ^bb0(%acc: f32, %bias: f32):
    %v = arith.addf %acc, %bias : f32
    braze.gemm_yield %v, %v : f32, f32
  }
  return %y, %s : tensor<?x?x?xf32>, tensor<?x?xf32>
}"""


def test_every_extent_dynamic_in_one_compile(target):
    """Batch, M, N and K all dynamic, one compile: a row (M = 1), a column
    (N = 1), an empty K, no columns (the statistic's empty sum), no batch,
    and K past one block."""
    compiled = braze.compile_mlir(DYNAMIC, target=target)
    module = parse(DYNAMIC)
    for b, m, n, k in ((2, 1, 70, 20), (1, 9, 1, 33), (3, 5, 7, 0), (2, 4, 0, 5), (0, 3, 3, 3), (1, 65, 65, 17)):
        inputs = [_random(b, m, k), _random(b, n, k, seed=1), _random(n, seed=2)]
        for out, expected in zip(compiled(*inputs), braze.reference.run(module, *inputs), strict=True):
            _compare(out, expected, torch.float32)


@pytest.mark.parametrize("case", QUANTISED)
def test_quantised_gemms_match_eager(target, case):
    """An int8 weight widened to the activations' type and 8-bit floats
    widened to f32 as they are staged, the scales on the accumulator; M of
    9 and 1."""
    for m in (9, 1):
        function, args = quantised(case, m)
        compiled = braze.compile(Apply(function), args, target=target)
        assert compiled.stats["fused_gemms"] == 1
        got, expected = compiled(*args), function(*args)
        # Relative to the largest value: eager rounds the scaled weight to bf16 before its
        # product, braze scales the f32 accumulator.
        tolerance = TOLERANCE[expected.dtype] * max(expected.float().abs().max().item(), 1.0)
        assert got.dtype == expected.dtype and (got.float() - expected.float()).abs().max().item() <= tolerance


FLOAT8_TYPES = {torch.float8_e4m3fn: "f8E4M3FN", torch.float8_e5m2: "f8E5M2"}


def test_float8_decoders_are_exact():
    """Every byte of both 8-bit float formats widens to torch's value
    (NaNs as NaN), through a GEMM with a one-element K."""
    need("the opencl target", targets.get("opencl").compiler_missing())
    for fp8, name in FLOAT8_TYPES.items():
        text = f"""
func.func @f(%a: tensor<256x1x{name}>, %b: tensor<1x1x{name}>) -> tensor<256x1xf32> {{
  %y = braze.fused_gemm %a, %b extras() indexing [] accumulator f32
      : (tensor<256x1x{name}>, tensor<1x1x{name}>) -> tensor<256x1xf32> {{
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }}
  return %y : tensor<256x1xf32>
}}"""
        a = torch.arange(256, dtype=torch.uint8).view(fp8).reshape(256, 1)
        (got,) = braze.compile_mlir(text, target="opencl")(a, torch.ones(1, 1).to(fp8))
        expected = a.float()
        assert torch.equal(torch.isnan(got), torch.isnan(expected))
        assert torch.equal(got.nan_to_num(), expected.nan_to_num())


def test_torch_compile_runs_a_model_with_no_fallback(target):
    """A small MLP block (linear + GELU, linear + residual, then an RMSNorm)
    through torch.compile(backend="braze"): no graph runs in eager."""
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = torch.nn.Linear(32, 96), torch.nn.Linear(96, 32)

        def forward(self, x):
            y = x + self.down(F.gelu(self.up(x)))
            return y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)

    model = Block().eval()
    x = torch.randn(2, 7, 32)
    actual, expected = torch_compile_without_fallback(model, x, target)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)


def test_the_pipelines_fuse_gemms():
    """The C-like targets run braze-epilogue-fusion (and
    braze-lower-attention: test_gpu_attention.py)."""
    for name in ("opencl", "cuda", "hip", "metal"):
        target = targets.get(name)
        assert target.fused_gemm_missing() is None
        assert "braze-epilogue-fusion" in target.pipeline(target.options({"epilogue_fusion": True}))
    # CUDA and HIP keep the vendor's GEMMs unless asked (docs/targets.md: their library is untimed against it).
    for name, fused in (("opencl", True), ("metal", True), ("cuda", False), ("hip", False)):
        target = targets.get(name)
        assert ("braze-epilogue-fusion" in target.pipeline(target.options())) == fused, name


F64 = """
func.func @f(%x: tensor<?x37xf64>, %w: tensor<37x5xf64>) -> tensor<?x5xf64> {
  %y = braze.fused_gemm %x, %w extras() indexing [] accumulator f64 : (tensor<?x37xf64>, tensor<37x5xf64>)
      -> tensor<?x5xf64> {
  ^bb0(%acc: f64):
    %e = math.exp %acc : f64
    braze.gemm_yield %e : f64
  }
  return %y : tensor<?x5xf64>
}"""


def test_f64_accumulates_in_double():
    need("the opencl target", targets.get("opencl").compiler_missing())
    inputs = [_random(70, 37, dtype=torch.float64) / 8, _random(37, 5, seed=1, dtype=torch.float64)]
    (got,) = braze.compile_mlir(F64, target="opencl")(*inputs)
    (expected,) = braze.reference.run(parse(F64), *inputs)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_bad_schedules_and_operands_are_refused_by_name():
    with pytest.raises(braze.BrazeError, match="the OpenCL C renderer multiplies no i8 x i8 operands"):
        braze.codegen.emit(parse(INTEGER_GEMM), "opencl")
    with pytest.raises(braze.BrazeError, match="the Metal renderer has no type for f64"):
        braze.codegen.emit(parse(F64), "metal")
    tiled = SCALED.replace('reductions ["add", "max"]',
                           'reductions ["add", "max"] {braze.schedule = {strategy = "tiled_gemm", threads = 256, '
                           'tile = array<i64: 64, 64, 16>}}')
    with pytest.raises(braze.BrazeError, match="strategy 'tiled_gemm' does not fit a GEMM with row statistics"):
        braze.codegen.emit(parse(tiled), "cuda")
    odd = tiled.replace('"tiled_gemm"', '"tiled_gemm_rows"').replace("64, 64, 16", "24, 64, 16")
    with pytest.raises(braze.BrazeError, match=r"tile \[24, 64, 16\] must have M and N sides that are multiples"):
        braze.codegen.emit(parse(odd), "cuda")


# -- ahead-of-time builds ------------------------------------------------------
# A module with every form: f32 with a bias and GELU, bf16 with row
# statistics, a batched transposed product, an int8 weight and f8 operands.
def _aot_unit(target_name: str, **options):
    target, chosen, unit = emitted_unit(target_name, AOT, **options)
    assert sum(spec.strategy.startswith("tiled_gemm") for spec in unit.kernels.values()) == 4
    return target, chosen, unit


AOT = """
func.func @f(%x: tensor<?x40xf32>, %w: tensor<24x40xf32>, %b: tensor<24xf32>, %h: tensor<12x32xbf16>,
             %hw: tensor<200x32xbf16>, %q: tensor<2x3x9x20xf32>, %k: tensor<2x3x18x20xf32>,
             %a8: tensor<9x48xf8E4M3FN>, %b8: tensor<48x32xf8E4M3FN>)
    -> (tensor<?x24xf32>, tensor<12x200xbf16>, tensor<12xf32>, tensor<2x3x9x18xf32>, tensor<9x32xbf16>) {
  %y = braze.fused_gemm %x, %w extras(%b : tensor<24xf32>) indexing ["n"] transpose_rhs accumulator f32
      : (tensor<?x40xf32>, tensor<24x40xf32>) -> tensor<?x24xf32> {
  ^bb0(%acc: f32, %bias: f32):
    %s = arith.addf %acc, %bias : f32
    %t = math.tanh %s : f32
    braze.gemm_yield %t : f32
  }
  %z, %ss = braze.fused_gemm %h, %hw extras() indexing [] transpose_rhs accumulator f32 reductions ["add"]
      : (tensor<12x32xbf16>, tensor<200x32xbf16>) -> tensor<12x200xbf16>, tensor<12xf32> {
  ^bb0(%acc: f32):
    %r = arith.truncf %acc : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    %sq = arith.mulf %e, %e : f32
    braze.gemm_yield %r, %sq : bf16, f32
  }
  %p = braze.fused_gemm %q, %k extras() indexing [] transpose_rhs accumulator f32
      : (tensor<2x3x9x20xf32>, tensor<2x3x18x20xf32>) -> tensor<2x3x9x18xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  %f = braze.fused_gemm %a8, %b8 extras() indexing [] accumulator f32
      : (tensor<9x48xf8E4M3FN>, tensor<48x32xf8E4M3FN>) -> tensor<9x32xbf16> {
  ^bb0(%acc: f32):
    %r = arith.truncf %acc : f32 to bf16
    braze.gemm_yield %r : bf16
  }
  return %y, %z, %ss, %p, %f : tensor<?x24xf32>, tensor<12x200xbf16>, tensor<12xf32>, tensor<2x3x9x18xf32>,
      tensor<9x32xbf16>
}"""


def test_every_form_matches_the_reference(target):
    """The ahead-of-time module run: two batch dims, 8-bit float operands,
    a bf16 statistic's f32 result and a dynamic M."""
    module = parse(AOT)
    shapes = [((5, 40), torch.float32), ((24, 40), torch.float32), ((24,), torch.float32),
              ((12, 32), torch.bfloat16), ((200, 32), torch.bfloat16), ((2, 3, 9, 20), torch.float32),
              ((2, 3, 18, 20), torch.float32), ((9, 48), torch.float8_e4m3fn), ((48, 32), torch.float8_e4m3fn)]
    inputs = [_random(*shape, seed=n).to(dtype) for n, (shape, dtype) in enumerate(shapes)]
    compiled = braze.compile_mlir(AOT, target=target)
    assert compiled.stats["fused_gemms"] == 4
    for out, expected in zip(compiled(*inputs), braze.reference.run(module, *inputs), strict=True):
        _compare(out, expected, expected.dtype)


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_the_cuda_gemms_build_an_sm90_cubin_without_spills(compiler):
    if compiler == "nvcc":
        need_program("nvcc")
    _, options, unit = _aot_unit("cuda", compiler=compiler)
    assert_builds_for_every_gpu("cuda", unit, options)


@pytest.mark.parametrize("target_name", ["hip", "opencl"])
def test_the_hip_and_ocloc_builds(target_name):
    """gfx90a through hipcc, pvc through ocloc."""
    _, options, unit = _aot_unit(target_name)
    assert_builds_for_every_gpu(target_name, unit, options)
