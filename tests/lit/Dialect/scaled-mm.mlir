// RUN: braze-opt %s -split-input-file | braze-opt -split-input-file | FileCheck %s
// RUN: braze-opt %s -split-input-file --mlir-print-op-generic | braze-opt -split-input-file | FileCheck %s

// Tests that a per-tensor braze.scaled_mm (rank-0 scales, a dynamic M)
// round-trips.
// CHECK-LABEL: func.func @per_tensor
// CHECK: braze.scaled_mm %{{.*}}, %{{.*}} scales(%{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>) : (tensor<?x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<?x32xf32>
func.func @per_tensor(%a: tensor<?x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %sa: tensor<f32>, %sb: tensor<f32>) -> tensor<?x32xf32> {
  %y = braze.scaled_mm %a, %b scales(%sa, %sb : tensor<f32>, tensor<f32>)
      : (tensor<?x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Tests that row-wise scales, mixed 8-bit floats, a bias, a result scale
// and fast_accum round-trip.
// CHECK-LABEL: func.func @row_wise
// CHECK: braze.scaled_mm %{{.*}}, %{{.*}} scales(%{{.*}}, %{{.*}} : tensor<8x1xf32>, tensor<1x32xf32>) bias(%{{.*}} : tensor<32xbf16>) scale_result(%{{.*}} : tensor<f32>) fast_accum : (tensor<8x64xf8E5M2>, tensor<64x32xf8E4M3FN>) -> tensor<8x32xbf16>
func.func @row_wise(%a: tensor<8x64xf8E5M2>, %b: tensor<64x32xf8E4M3FN>, %sa: tensor<8x1xf32>, %sb: tensor<1x32xf32>,
                    %bias: tensor<32xbf16>, %sr: tensor<f32>) -> tensor<8x32xbf16> {
  %y = braze.scaled_mm %a, %b scales(%sa, %sb : tensor<8x1xf32>, tensor<1x32xf32>) bias(%bias : tensor<32xbf16>)
      scale_result(%sr : tensor<f32>) fast_accum
      : (tensor<8x64xf8E5M2>, tensor<64x32xf8E4M3FN>) -> tensor<8x32xbf16>
  return %y : tensor<8x32xbf16>
}
