// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion{decode-rows=4}))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion{decode-rows=4 remarks=true}))' -split-input-file -verify-diagnostics -o /dev/null
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion))' -split-input-file | FileCheck %s --check-prefix=OFF

// braze-epilogue-fusion's decode-rows: a GEMM with nothing to fuse after it
// becomes a fused GEMM (an epilogue of the product alone) when its M is
// static and at most decode-rows; off (0) by default.

// Tests that a lone nn.Linear at M = 4 becomes a fused GEMM with its bias.
// CHECK-LABEL: func.func @decode_linear
// CHECK: %[[Y:.*]] = braze.fused_gemm %{{.*}}, %{{.*}} extras(%{{.*}} : tensor<32xf32>) indexing ["n"] transpose_rhs
// CHECK: return %[[Y]]
// OFF-LABEL: func.func @decode_linear
// OFF: braze.addmm
// OFF-NOT: braze.fused_gemm
func.func @decode_linear(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>, %b: tensor<32xf32>) -> tensor<4x32xf32> {
  %t = braze.permute %w [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  // expected-remark @+1 {{'braze.addmm' fused with 0 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 1 extra(s), a decode shape: M <= decode-rows)}}
  %y = braze.addmm %b, %x, %t : tensor<32xf32>, tensor<4x64xf32>, tensor<64x32xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

// Tests that a batched product of decode rows (bf16, M = 1) becomes a fused
// GEMM: the rounding to bf16 is its store's, as the library's.
// CHECK-LABEL: func.func @decode_bmm
// CHECK: braze.fused_gemm
// CHECK-SAME: (tensor<8x1x64xbf16>, tensor<8x64x16xbf16>) -> tensor<8x1x16xbf16>
// CHECK-NOT: braze.bmm
func.func @decode_bmm(%x: tensor<8x1x64xbf16>, %w: tensor<8x64x16xbf16>) -> tensor<8x1x16xbf16> {
  // expected-remark @+1 {{'braze.bmm' fused with 0 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 0 extra(s), a decode shape: M <= decode-rows)}}
  %y = braze.bmm %x, %w : tensor<8x1x64xbf16>, tensor<8x64x16xbf16> -> tensor<8x1x16xbf16>
  return %y : tensor<8x1x16xbf16>
}

// -----

// Tests that M above decode-rows stays a library call, and the remark says
// by how much.
// CHECK-LABEL: func.func @prefill_rows
// CHECK: braze.matmul
// CHECK-NOT: braze.fused_gemm
func.func @prefill_rows(%x: tensor<5x64xf32>, %w: tensor<64x32xf32>) -> tensor<5x32xf32> {
  // expected-remark @+1 {{'braze.matmul' not fused with an epilogue: nothing after it fits an epilogue (M = 5 is above decode-rows = 4)}}
  %y = braze.matmul %x, %w : tensor<5x64xf32>, tensor<64x32xf32> -> tensor<5x32xf32>
  return %y : tensor<5x32xf32>
}

// -----

// Tests that a dynamic M stays a library call (it may be any size).
// CHECK-LABEL: func.func @dynamic_rows
// CHECK: braze.matmul
// CHECK-NOT: braze.fused_gemm
func.func @dynamic_rows(%x: tensor<?x64xf32>, %w: tensor<64x32xf32>) -> tensor<?x32xf32> {
  // expected-remark @+1 {{'braze.matmul' not fused with an epilogue: nothing after it fits an epilogue}}
  %y = braze.matmul %x, %w : tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Tests that an integer product stays a library call at a decode shape too.
// CHECK-LABEL: func.func @integer_decode
// CHECK: braze.matmul
// CHECK-NOT: braze.fused_gemm
func.func @integer_decode(%x: tensor<2x8xi32>, %w: tensor<8x4xi32>) -> tensor<2x4xi32> {
  // expected-remark @+1 {{'braze.matmul' not fused with an epilogue: integer products stay library calls (exact in integers)}}
  %y = braze.matmul %x, %w : tensor<2x8xi32>, tensor<8x4xi32> -> tensor<2x4xi32>
  return %y : tensor<2x4xi32>
}
