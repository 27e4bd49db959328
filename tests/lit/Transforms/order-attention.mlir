// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-order-attention))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-order-attention{remarks=true}))' -split-input-file -verify-diagnostics -o /dev/null

// Tests that an attention whose only reader swaps its heads and rows (an
// output projection's `transpose(1, 2).reshape(B, L, H * E)`) writes that
// order itself: the permute goes and the reshape reads the result. With a
// dynamic sequence length too.
// CHECK-LABEL: func.func @projection_order
// CHECK: %[[O:.*]] = braze.attention %arg0, %arg1, %arg2 causal result_order [0, 2, 1, 3] : tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32> -> tensor<2x?x4x64xf32>
// CHECK-NOT: braze.permute
// CHECK: braze.reshape %[[O]] : tensor<2x?x4x64xf32> -> tensor<2x?x256xf32>
func.func @projection_order(%q: tensor<2x4x?x64xf32>, %k: tensor<2x4x?x64xf32>, %v: tensor<2x4x?x64xf32>) -> tensor<2x?x256xf32> {
  // expected-remark @+1 {{braze.attention writes the order its permute reads (result_order [0, 2, 1, 3])}}
  %o = braze.attention %q, %k, %v causal : tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32> -> tensor<2x4x?x64xf32>
  %t = braze.permute %o [0, 2, 1, 3] : tensor<2x4x?x64xf32> -> tensor<2x?x4x64xf32>
  %r = braze.reshape %t : tensor<2x?x4x64xf32> -> tensor<2x?x256xf32>
  return %r : tensor<2x?x256xf32>
}

// -----

// Tests torch's multi-head attention, which reads the result as [L, B, H, E].
// CHECK-LABEL: func.func @sequence_first
// CHECK: braze.attention {{.*}} result_order [2, 0, 1, 3] : {{.*}} -> tensor<197x1x12x64xf32>
// CHECK-NEXT: braze.reshape
func.func @sequence_first(%q: tensor<1x12x197x64xf32>) -> tensor<197x768xf32> {
  // expected-remark @+1 {{braze.attention writes the order its permute reads (result_order [2, 0, 1, 3])}}
  %o = braze.attention %q, %q, %q : tensor<1x12x197x64xf32>, tensor<1x12x197x64xf32>, tensor<1x12x197x64xf32> -> tensor<1x12x197x64xf32>
  %t = braze.permute %o [2, 0, 1, 3] : tensor<1x12x197x64xf32> -> tensor<197x1x12x64xf32>
  %r = braze.reshape %t : tensor<197x1x12x64xf32> -> tensor<197x768xf32>
  return %r : tensor<197x768xf32>
}

// -----

// Tests Swin's windows: reshapes come between the attention and its
// permute, which join the heads into the batch and split them out again:
// together they only join the batch dims before the heads. The result is
// written rows first with the attention's own batch dims, and one reshape
// gives it the permute's.
// CHECK-LABEL: func.func @windows
// CHECK: %[[O:.*]] = braze.attention {{.*}} result_order [0, 1, 3, 2, 4] : {{.*}} -> tensor<2x64x49x3x32xf32>
// CHECK-NEXT: %[[R:.*]] = braze.reshape %[[O]] : tensor<2x64x49x3x32xf32> -> tensor<128x49x3x32xf32>
// CHECK-NEXT: return %[[R]]
func.func @windows(%q: tensor<2x64x3x49x32xf32>, %m: tensor<1x64x3x49x49xf32>) -> tensor<128x49x3x32xf32> {
  // expected-remark @+1 {{braze.attention writes the order its permute reads (result_order [0, 1, 3, 2, 4])}}
  %o = braze.attention %q, %q, %q mask %m scale 1.0 masked_rows_nan : tensor<2x64x3x49x32xf32>, tensor<2x64x3x49x32xf32>, tensor<2x64x3x49x32xf32>, tensor<1x64x3x49x49xf32> -> tensor<2x64x3x49x32xf32>
  %a = braze.reshape %o : tensor<2x64x3x49x32xf32> -> tensor<384x49x32xf32>
  %b = braze.reshape %a : tensor<384x49x32xf32> -> tensor<128x3x49x32xf32>
  %t = braze.permute %b [0, 2, 1, 3] : tensor<128x3x49x32xf32> -> tensor<128x49x3x32xf32>
  return %t : tensor<128x49x3x32xf32>
}

// -----

// Tests the readers that keep the attention's order: a permute that moves
// the last dim; a second reader; a reshape that splits the heads (the permute
// then swaps half of them with the rows); a reshape that joins the heads
// into a dynamic batch dim; an attention of rank 2 (no heads).
// CHECK-LABEL: func.func @kept_order
// CHECK-NOT: result_order
// CHECK-COUNT-5: braze.permute
func.func @kept_order(%q: tensor<2x4x16x8xf32>, %d: tensor<?x4x16x8xf32>, %p: tensor<16x8xf32>)
    -> (tensor<2x4x8x16xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x2x16x2x8xf32>, tensor<16x?x8xf32>, tensor<8x16xf32>) {
  // expected-remark @+1 {{braze.attention kept in its own order: its only reader is not a permute of it that keeps Ev last}}
  %o = braze.attention %q, %q, %q : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %t = braze.permute %o [0, 1, 3, 2] : tensor<2x4x16x8xf32> -> tensor<2x4x8x16xf32>
  // expected-remark @+1 {{braze.attention kept in its own order: its only reader is not a permute of it that keeps Ev last}}
  %o2 = braze.attention %q, %q, %q : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %t2 = braze.permute %o2 [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  // expected-remark @+1 {{braze.attention kept in its own order: its only reader is not a permute of it that keeps Ev last}}
  %o3 = braze.attention %q, %q, %q : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %s = braze.reshape %o3 : tensor<2x4x16x8xf32> -> tensor<2x2x2x16x8xf32>
  %t3 = braze.permute %s [0, 1, 3, 2, 4] : tensor<2x2x2x16x8xf32> -> tensor<2x2x16x2x8xf32>
  // expected-remark @+1 {{braze.attention kept in its own order: its only reader is not a permute of it that keeps Ev last}}
  %o4 = braze.attention %d, %d, %d : tensor<?x4x16x8xf32>, tensor<?x4x16x8xf32>, tensor<?x4x16x8xf32> -> tensor<?x4x16x8xf32>
  %f = braze.reshape %o4 : tensor<?x4x16x8xf32> -> tensor<?x16x8xf32>
  %t4 = braze.permute %f [1, 0, 2] : tensor<?x16x8xf32> -> tensor<16x?x8xf32>
  // expected-remark @+1 {{braze.attention kept in its own order: its only reader is not a permute of it that keeps Ev last}}
  %o5 = braze.attention %p, %p, %p : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32> -> tensor<16x8xf32>
  %t5 = braze.permute %o5 [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
  return %t, %t2, %o2, %t3, %t4, %t5 : tensor<2x4x8x16xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x2x16x2x8xf32>, tensor<16x?x8xf32>, tensor<8x16xf32>
}
