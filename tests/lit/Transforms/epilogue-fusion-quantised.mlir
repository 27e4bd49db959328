// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion{remarks=true}))' -split-input-file -verify-diagnostics -o /dev/null

// braze-epilogue-fusion on scaled and quantised products: braze.scaled_mm
// (its scales are an epilogue even when nothing follows it) and a GEMM
// whose weight is an int8 tensor dequantised just for it.

// Tests that a per-tensor scaled_mm with nothing after it becomes a fused
// GEMM: the [1] scales read as scalars, the transposed weight by flag.
// CHECK-LABEL: func.func @per_tensor
// CHECK-SAME: (%[[A:.*]]: tensor<?x64xf8E4M3FN>, %[[W:.*]]: tensor<32x64xf8E4M3FN>, %[[SA:.*]]: tensor<1xf32>, %[[SB:.*]]: tensor<1xf32>)
// CHECK-DAG: %[[LS:.*]] = braze.reshape %[[SA]] : tensor<1xf32> -> tensor<f32>
// CHECK-DAG: %[[RS:.*]] = braze.reshape %[[SB]] : tensor<1xf32> -> tensor<f32>
// CHECK-NOT: braze.permute
// CHECK: %[[Y:.*]] = braze.fused_gemm %[[A]], %[[W]] lhs_scale(%[[LS]] : tensor<f32>) rhs_scale(%[[RS]] : tensor<f32>) extras() indexing [] transpose_rhs accumulator f32 : (tensor<?x64xf8E4M3FN>, tensor<32x64xf8E4M3FN>) -> tensor<?x32xf32> {
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT: braze.gemm_yield %[[ACC]] : f32
// CHECK-NOT: braze.scaled_mm
// CHECK: return %[[Y]]
func.func @per_tensor(%a: tensor<?x64xf8E4M3FN>, %w: tensor<32x64xf8E4M3FN>, %sa: tensor<1xf32>, %sb: tensor<1xf32>) -> tensor<?x32xf32> {
  %t = braze.permute %w [1, 0] : tensor<32x64xf8E4M3FN> -> tensor<64x32xf8E4M3FN>
  // expected-remark @+1 {{'braze.scaled_mm' fused with 0 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 0 extra(s), scaled)}}
  %y = braze.scaled_mm %a, %t scales(%sa, %sb : tensor<1xf32>, tensor<1xf32>)
      : (tensor<?x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Tests that row-wise scales become [M] and [N] vectors, the bias is added
// in the accumulator before the rounding to bf16, and a following SiLU
// joins the epilogue.
// CHECK-LABEL: func.func @row_wise_bias_silu
// CHECK: %[[LS:.*]] = braze.reshape %{{.*}} : tensor<?x1xf32> -> tensor<?xf32>
// CHECK: %[[RS:.*]] = braze.reshape %{{.*}} : tensor<1x32xf32> -> tensor<32xf32>
// CHECK: braze.fused_gemm %{{.*}}, %{{.*}} lhs_scale(%[[LS]] : tensor<?xf32>) rhs_scale(%[[RS]] : tensor<32xf32>) extras(%{{.*}} : tensor<32xbf16>) indexing ["n"] accumulator f32 : (tensor<?x64xf8E4M3FN>, tensor<64x32xf8E5M2>) -> tensor<?x32xbf16> {
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[B:.*]]: bf16):
// CHECK-NEXT: %[[BF:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[BF]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: braze.gemm_yield
func.func @row_wise_bias_silu(%a: tensor<?x64xf8E4M3FN>, %b: tensor<64x32xf8E5M2>, %sa: tensor<?x1xf32>, %sb: tensor<1x32xf32>,
                              %bias: tensor<32xbf16>) -> tensor<?x32xbf16> {
  // expected-remark @+1 {{'braze.scaled_mm' fused with 1 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 1 extra(s), scaled)}}
  %y = braze.scaled_mm %a, %b scales(%sa, %sb : tensor<?x1xf32>, tensor<1x32xf32>) bias(%bias : tensor<32xbf16>)
      : (tensor<?x64xf8E4M3FN>, tensor<64x32xf8E5M2>) -> tensor<?x32xbf16>
  %s = braze.silu %y : tensor<?x32xbf16>
  return %s : tensor<?x32xbf16>
}

// -----

// Tests that a scaled_mm rounding to an 8-bit float is left to torch (the
// CPU's fused GEMMs store no 8-bit floats), with a remark.
// CHECK-LABEL: func.func @float8_result
// CHECK: braze.scaled_mm
// CHECK-NOT: braze.fused_gemm
func.func @float8_result(%a: tensor<8x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %s: tensor<f32>) -> tensor<8x32xf8E4M3FN> {
  // expected-remark @+1 {{'braze.scaled_mm' not fused with an epilogue: its result is an 8-bit float, rounded by torch._scaled_mm (the CPU's fused GEMMs store no 8-bit floats)}}
  %y = braze.scaled_mm %a, %b scales(%s, %s : tensor<f32>, tensor<f32>) scale_result(%s : tensor<f32>)
      : (tensor<8x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<8x32xf8E4M3FN>
  return %y : tensor<8x32xf8E4M3FN>
}

// -----

// Tests that x @ (w.to(f32) * s[:, None]).t(), a weight-only int8 linear
// layer with a per-output-channel scale, reads the int8 weight in place:
// the scale, one per column of the product, multiplies the accumulator
// (it commutes with the sum over K); the cast, the multiply and the
// transpose are gone, so the dequantised weight is never made.
// CHECK-LABEL: func.func @int8_weight
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xf32>, %[[W:.*]]: tensor<32x64xi8>, %[[S:.*]]: tensor<32xf32>)
// CHECK: %[[SV:.*]] = braze.reshape %{{.*}} : tensor<32x1xf32> -> tensor<32xf32>
// CHECK: %[[Y:.*]] = braze.fused_gemm %[[X]], %[[W]] rhs_scale(%[[SV]] : tensor<32xf32>) extras() indexing [] transpose_rhs accumulator f32 : (tensor<?x64xf32>, tensor<32x64xi8>) -> tensor<?x32xf32>
// CHECK-NOT: braze.cast
// CHECK-NOT: braze.mul
// CHECK: return %[[Y]]
func.func @int8_weight(%x: tensor<?x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>) -> tensor<?x32xf32> {
  %wf = braze.cast %w : tensor<32x64xi8> to tensor<32x64xf32>
  %s2 = braze.reshape %s : tensor<32xf32> -> tensor<32x1xf32>
  %dq = braze.mul %wf, %s2 : tensor<32x64xf32>, tensor<32x1xf32> -> tensor<32x64xf32>
  %t = braze.permute %dq [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  // expected-remark @+1 {{'braze.matmul' fused with 0 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 0 extra(s), scaled, its int8 weight read in place)}}
  %y = braze.matmul %x, %t : tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Tests that F.linear(x, w.to(bf16)) * s with a bias (the scale after the
// product, an extra of the epilogue) reads the bf16 product's int8 weight
// in place too.
// CHECK-LABEL: func.func @int8_linear_then_scale
// CHECK: braze.fused_gemm %{{.*}}, %{{.*}} extras(%{{.*}}, %{{.*}} : tensor<32xbf16>, tensor<32xbf16>) indexing ["n", "n"] transpose_rhs accumulator f32 : (tensor<?x64xbf16>, tensor<32x64xi8>) -> tensor<?x32xbf16>
// CHECK-NOT: braze.cast
func.func @int8_linear_then_scale(%x: tensor<?x64xbf16>, %w: tensor<32x64xi8>, %b: tensor<32xbf16>, %s: tensor<32xbf16>) -> tensor<?x32xbf16> {
  %wf = braze.cast %w : tensor<32x64xi8> to tensor<32x64xbf16>
  %t = braze.permute %wf [1, 0] : tensor<32x64xbf16> -> tensor<64x32xbf16>
  // expected-remark @+1 {{'braze.addmm' fused with 1 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 2 extra(s), its int8 weight read in place)}}
  %y = braze.addmm %b, %x, %t : tensor<32xbf16>, tensor<?x64xbf16>, tensor<64x32xbf16> -> tensor<?x32xbf16>
  %z = braze.mul %y, %s : tensor<?x32xbf16>, tensor<32xbf16> -> tensor<?x32xbf16>
  return %z : tensor<?x32xbf16>
}

// -----

// Tests that an int8 weight scaled along K (not per output column) is
// dequantised before the product, with a remark.
// CHECK-LABEL: func.func @int8_scale_along_k
// CHECK: braze.mul
// CHECK: braze.matmul
func.func @int8_scale_along_k(%x: tensor<?x64xf32>, %w: tensor<32x64xi8>, %s: tensor<64xf32>) -> tensor<?x32xf32> {
  %wf = braze.cast %w : tensor<32x64xi8> to tensor<32x64xf32>
  %dq = braze.mul %wf, %s : tensor<32x64xf32>, tensor<64xf32> -> tensor<32x64xf32>
  %t = braze.permute %dq [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  // expected-remark @+2 {{'braze.matmul' does not read its int8 weight in place: the weight is multiplied by something other than an f32, bf16 or f16 scale per output column (the dequantised weight is made before the product)}}
  // expected-remark @+1 {{'braze.matmul' not fused with an epilogue: nothing after it fits an epilogue}}
  %y = braze.matmul %x, %t : tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Tests that a dequantised weight something else also reads is left alone
// (it is made anyway).
// CHECK-LABEL: func.func @int8_shared
// CHECK: braze.cast
// CHECK: braze.matmul
func.func @int8_shared(%x: tensor<?x64xf32>, %w: tensor<64x32xi8>) -> (tensor<?x32xf32>, tensor<64x32xf32>) {
  %wf = braze.cast %w : tensor<64x32xi8> to tensor<64x32xf32>
  // expected-remark @+1 {{'braze.matmul' not fused with an epilogue: nothing after it fits an epilogue}}
  %y = braze.matmul %x, %wf : tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  return %y, %wf : tensor<?x32xf32>, tensor<64x32xf32>
}
