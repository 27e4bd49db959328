"""Fused-GEMM cases both GPU families' tests run (test_triton_tiled.py,
test_gpu_gemm.py): hand-written IR with scales, extras and statistics, and
quantised GEMMs as torchao and torch._scaled_mm write them."""

import torch
import torch.nn.functional as F

SCALED = """
func.func @f(%x: tensor<?x19xf32>, %w: tensor<19x21xf32>, %sa: tensor<f32>, %sb: tensor<21xf32>,
             %k: tensor<f32>) -> (tensor<?x21xf32>, tensor<?xf32>, tensor<?xf32>) {
  %y, %s, %m = braze.fused_gemm %x, %w lhs_scale(%sa : tensor<f32>) rhs_scale(%sb : tensor<21xf32>)
      extras(%k : tensor<f32>) indexing ["scalar"] accumulator f32 reductions ["add", "max"]
      : (tensor<?x19xf32>, tensor<19x21xf32>) -> tensor<?x21xf32>, tensor<?xf32>, tensor<?xf32> {
  ^bb0(%acc: f32, %c: f32):
    %v = arith.addf %acc, %c : f32
    %q = arith.mulf %v, %v : f32
    braze.gemm_yield %v, %q, %v : f32, f32, f32
  }
  return %y, %s, %m : tensor<?x21xf32>, tensor<?xf32>, tensor<?xf32>
}"""
SCALED_RESIDUAL = """
func.func @f(%a: tensor<2x4x8xbf16>, %b: tensor<2x4x16xbf16>, %sa: tensor<8xf32>, %sb: tensor<f32>,
             %res: tensor<2x8x16xbf16>, %row: tensor<8xf32>, %k: tensor<f32>) -> tensor<2x8x16xbf16> {
  %y = braze.fused_gemm %a, %b lhs_scale(%sa : tensor<8xf32>) rhs_scale(%sb : tensor<f32>)
      extras(%res, %row, %k : tensor<2x8x16xbf16>, tensor<8xf32>, tensor<f32>) indexing ["mn", "m", "scalar"]
      transpose_lhs accumulator f32 : (tensor<2x4x8xbf16>, tensor<2x4x16xbf16>) -> tensor<2x8x16xbf16> {
  ^bb0(%acc: f32, %r: bf16, %m: f32, %s: f32):
    %wide = arith.extf %r : bf16 to f32
    %t = arith.mulf %acc, %s : f32
    %u = arith.addf %t, %m : f32
    %v = arith.addf %u, %wide : f32
    %o = arith.truncf %v : f32 to bf16
    braze.gemm_yield %o : bf16
  }
  return %y : tensor<2x8x16xbf16>
}"""

# An integer product, which no GPU renderer multiplies (epilogue fusion leaves
# integer GEMMs to the library).
INTEGER_GEMM = """
func.func @f(%x: tensor<8x16xi8>, %w: tensor<16x8xi8>) -> tensor<8x8xi32> {
  %y = braze.fused_gemm %x, %w extras() indexing [] accumulator i32
      : (tensor<8x16xi8>, tensor<16x8xi8>) -> tensor<8x8xi32> {
  ^bb0(%acc: i32):
    braze.gemm_yield %acc : i32
  }
  return %y : tensor<8x8xi32>
}"""

QUANTISED = ["int8_f32", "int8_bf16", "e4m3_tensorwise", "e4m3_rowwise"]


def _random(*shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _int8_linear(x, w, s, b):
    """An int8 weight dequantised for one linear, as torchao writes it."""
    return F.silu(F.linear(x, w.to(x.dtype) * s[:, None], b))


def _scaled_mm(a, b, sa, sb, bias):
    return torch._scaled_mm(a, b.t(), sa, sb, bias=bias, out_dtype=torch.bfloat16)


def quantised(case: str, m: int = 9):
    """(function, args) of a quantised GEMM: an int8 weight with f32 or
    bf16 activations, or e4m3 operands with per-tensor or row-wise scales."""
    if case.startswith("int8"):
        dtype = torch.bfloat16 if case.endswith("bf16") else torch.float32
        w = torch.randint(-127, 128, (24, 70), generator=torch.Generator().manual_seed(1), dtype=torch.int8)
        scale = (_random(24, seed=2).abs() / 64 + 1e-3).to(dtype)
        return _int8_linear, (_random(m, 70, dtype=dtype), w, scale, _random(24, dtype=dtype, seed=3))
    a, b = _random(m, 48).to(torch.float8_e4m3fn), _random(32, 48, seed=1).to(torch.float8_e4m3fn)
    rowwise = case.endswith("rowwise")
    sa = _random(m, 1, seed=2).abs() + 0.5 if rowwise else torch.tensor(0.75)
    sb = _random(1, 32, seed=3).abs() + 0.5 if rowwise else torch.tensor(1.5)
    return _scaled_mm, (a, b, sa, sb, _random(32, dtype=torch.bfloat16, seed=4))
