// RUN: braze-opt %s -split-input-file | braze-opt -split-input-file | FileCheck %s
// RUN: braze-opt %s -split-input-file --mlir-print-op-generic | braze-opt -split-input-file | FileCheck %s

// Tests that a Linear layer with a bias and a ReLU (the weight transposed by
// a flag, M dynamic) survives a print/parse round trip.
// CHECK-LABEL: func.func @linear_relu
// CHECK: braze.fused_gemm %{{.*}}, %{{.*}} extras(%{{.*}} : tensor<32xf32>) indexing ["n"] transpose_rhs accumulator f32 : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
// CHECK: ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: f32):
// CHECK: braze.gemm_yield %{{.*}} : f32
func.func @linear_relu(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %bias: tensor<32xf32>) -> tensor<?x32xf32> {
  %y = braze.fused_gemm %x, %w extras(%bias : tensor<32xf32>) indexing ["n"] transpose_rhs accumulator f32
      : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32> {
  ^bb0(%acc: f32, %b: f32):
    %s = arith.addf %acc, %b : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %zero : f32
    braze.gemm_yield %r : f32
  }
  return %y : tensor<?x32xf32>
}

// -----

// Tests that a batched bf16 product with row-wise and global scales, a
// residual indexed by (m, n), a per-row extra and a scalar, accumulating in
// f32 and rounding to bf16 in the epilogue, round-trips.
// CHECK-LABEL: func.func @scaled_residual
// CHECK: braze.fused_gemm %{{.*}}, %{{.*}} lhs_scale(%{{.*}} : tensor<8xf32>) rhs_scale(%{{.*}} : tensor<f32>) extras(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x16xbf16>, tensor<8xf32>, tensor<f32>) indexing ["mn", "m", "scalar"] transpose_lhs accumulator f32 : (tensor<2x4x8xbf16>, tensor<2x4x16xbf16>) -> tensor<2x8x16xbf16>
func.func @scaled_residual(%a: tensor<2x4x8xbf16>, %b: tensor<2x4x16xbf16>, %sa: tensor<8xf32>, %sb: tensor<f32>,
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
}

// -----

// Tests that a bf16 product with an extra output and two row statistics
// (a sum of squares accumulated in f32, a max) round-trips.
// CHECK-LABEL: func.func @statistics
// CHECK: %{{.*}}:4 = braze.fused_gemm %{{.*}}, %{{.*}} extras() indexing [] accumulator f32 reductions ["add", "max"] : (tensor<?x8xbf16>, tensor<8x16xbf16>) -> tensor<?x16xbf16>, tensor<?x16xf32>, tensor<?xbf16>, tensor<?xf32>
// CHECK: braze.gemm_yield %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : bf16, f32, f32, f32
func.func @statistics(%x: tensor<?x8xbf16>, %w: tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x16xf32>, tensor<?xbf16>, tensor<?xf32>) {
  %y, %raw, %ss, %max = braze.fused_gemm %x, %w extras() indexing [] accumulator f32 reductions ["add", "max"]
      : (tensor<?x8xbf16>, tensor<8x16xbf16>) -> tensor<?x16xbf16>, tensor<?x16xf32>, tensor<?xbf16>, tensor<?xf32> {
  ^bb0(%acc: f32):
    %o = arith.truncf %acc : f32 to bf16
    %q = arith.mulf %acc, %acc : f32
    braze.gemm_yield %o, %acc, %q, %acc : bf16, f32, f32, f32
  }
  return %y, %raw, %ss, %max : tensor<?x16xbf16>, tensor<?x16xf32>, tensor<?xbf16>, tensor<?xf32>
}

// -----

// Tests that a product of two different 8-bit floats and one of f32
// activations with an int8 weight (a bf16 per-column scale) round-trip.
// CHECK-LABEL: func.func @narrow_operands
// CHECK: braze.fused_gemm %{{.*}}, %{{.*}} lhs_scale(%{{.*}} : tensor<?xf32>) rhs_scale(%{{.*}} : tensor<32xf32>) extras() indexing [] accumulator f32 : (tensor<?x64xf8E5M2>, tensor<64x32xf8E4M3FN>) -> tensor<?x32xbf16>
// CHECK: braze.fused_gemm %{{.*}}, %{{.*}} rhs_scale(%{{.*}} : tensor<32xbf16>) extras() indexing [] transpose_rhs accumulator f32 : (tensor<?x64xf32>, tensor<32x64xi8>) -> tensor<?x32xf32>
func.func @narrow_operands(%a: tensor<?x64xf8E5M2>, %b: tensor<64x32xf8E4M3FN>, %sa: tensor<?xf32>, %sb: tensor<32xf32>,
                           %x: tensor<?x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xbf16>) -> (tensor<?x32xbf16>, tensor<?x32xf32>) {
  %y = braze.fused_gemm %a, %b lhs_scale(%sa : tensor<?xf32>) rhs_scale(%sb : tensor<32xf32>) extras() indexing [] accumulator f32
      : (tensor<?x64xf8E5M2>, tensor<64x32xf8E4M3FN>) -> tensor<?x32xbf16> {
  ^bb0(%acc: f32):
    %r = arith.truncf %acc : f32 to bf16
    braze.gemm_yield %r : bf16
  }
  %z = braze.fused_gemm %x, %w rhs_scale(%s : tensor<32xbf16>) extras() indexing [] transpose_rhs accumulator f32
      : (tensor<?x64xf32>, tensor<32x64xi8>) -> tensor<?x32xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %y, %z : tensor<?x32xbf16>, tensor<?x32xf32>
}
