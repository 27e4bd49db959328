// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion{half-products=false decode-rows=4}))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion{half-products=false decode-rows=4 remarks=true}))' -split-input-file -verify-diagnostics -o /dev/null
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion))' -split-input-file | FileCheck %s --check-prefix=ON

// braze-epilogue-fusion's half-products=false (the CPU's setting): GEMMs of
// f16/bf16 operands stay the library's, except at decode shapes (M <=
// decode-rows) and where the fused GEMM reads an int8 weight.

// Tests that a bf16 Linear + GELU at 64 rows stays the library's GEMM and a
// GELU after it; fused by default.
// CHECK-LABEL: func.func @bf16_linear_gelu
// CHECK: braze.addmm
// CHECK: braze.gelu
// CHECK-NOT: braze.fused_gemm
// ON-LABEL: func.func @bf16_linear_gelu
// ON: braze.fused_gemm
// ON-NOT: braze.addmm
func.func @bf16_linear_gelu(%x: tensor<64x32xbf16>, %w: tensor<16x32xbf16>, %b: tensor<16xbf16>) -> tensor<64x16xbf16> {
  %t = braze.permute %w [1, 0] : tensor<16x32xbf16> -> tensor<32x16xbf16>
  // expected-remark @+1 {{'braze.addmm' not fused with an epilogue: a product of bf16 operands stays the library's (half-products is off); M = 64 is above decode-rows = 4}}
  %y = braze.addmm %b, %x, %t : tensor<16xbf16>, tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xbf16>
  %g = braze.gelu %y : tensor<64x16xbf16>
  return %g : tensor<64x16xbf16>
}

// -----

// Tests that an f16 product with a dynamic M stays the library's.
// CHECK-LABEL: func.func @f16_dynamic_rows
// CHECK: braze.matmul
// CHECK-NOT: braze.fused_gemm
func.func @f16_dynamic_rows(%x: tensor<?x32xf16>, %w: tensor<32x16xf16>) -> tensor<?x16xf16> {
  // expected-remark @+1 {{'braze.matmul' not fused with an epilogue: a product of f16 operands stays the library's (half-products is off)}}
  %y = braze.matmul %x, %w : tensor<?x32xf16>, tensor<32x16xf16> -> tensor<?x16xf16>
  %r = braze.relu %y : tensor<?x16xf16>
  return %r : tensor<?x16xf16>
}

// -----

// Tests that a bf16 decode row (M = 2 <= decode-rows) is fused with its
// epilogue all the same.
// CHECK-LABEL: func.func @bf16_decode
// CHECK: braze.fused_gemm
// CHECK-NOT: braze.matmul
func.func @bf16_decode(%x: tensor<2x32xbf16>, %w: tensor<32x16xbf16>) -> tensor<2x16xbf16> {
  // expected-remark @+1 {{'braze.matmul' fused with 1 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 0 extra(s))}}
  %y = braze.matmul %x, %w : tensor<2x32xbf16>, tensor<32x16xbf16> -> tensor<2x16xbf16>
  %r = braze.relu %y : tensor<2x16xbf16>
  return %r : tensor<2x16xbf16>
}

// -----

// Tests that a bf16 product of an int8 weight (dequantised for it alone)
// is fused: the fused GEMM reads the int8 weight in place.
// CHECK-LABEL: func.func @bf16_int8_weight
// CHECK: braze.fused_gemm
// CHECK-SAME: tensor<16x32xi8>
func.func @bf16_int8_weight(%x: tensor<64x32xbf16>, %w: tensor<16x32xi8>) -> tensor<64x16xbf16> {
  %wf = braze.cast %w : tensor<16x32xi8> to tensor<16x32xbf16>
  %t = braze.permute %wf [1, 0] : tensor<16x32xbf16> -> tensor<32x16xbf16>
  // expected-remark @+1 {{'braze.matmul' fused with 0 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 0 extra(s), its int8 weight read in place)}}
  %y = braze.matmul %x, %t : tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xbf16>
  return %y : tensor<64x16xbf16>
}

// -----

// Tests that an f32 product is not affected.
// CHECK-LABEL: func.func @f32_linear_relu
// CHECK: braze.fused_gemm
func.func @f32_linear_relu(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>) -> tensor<64x16xf32> {
  // expected-remark @+1 {{'braze.matmul' fused with 1 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 0 extra(s))}}
  %y = braze.matmul %x, %w : tensor<64x32xf32>, tensor<32x16xf32> -> tensor<64x16xf32>
  %r = braze.relu %y : tensor<64x16xf32>
  return %r : tensor<64x16xf32>
}
