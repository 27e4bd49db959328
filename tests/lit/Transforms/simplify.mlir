// RUN: braze-opt %s -braze-simplify -split-input-file | FileCheck %s
// RUN: braze-opt %s -braze-simplify -mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-simplify{max-iterations=1}))' -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONCE

// STATS: (S) 6 algebraic-rewrites
// STATS: (S) 2 broadcast-products
// STATS: (S) 2 rotations
// STATS: (S) 2 unit-permutes
// ONCE: warning: braze-simplify did not converge in 1 iterations

// Tests that adding a negation becomes a subtraction, on either side, and
// subtracting one an addition.
// CHECK-LABEL: func.func @add_of_neg
// CHECK-SAME: (%[[A:.*]]: tensor<?x4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[L:.*]] = braze.sub %[[A]], %[[B]] : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
// CHECK-NEXT: %[[R:.*]] = braze.sub %[[A]], %[[B]] : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
// CHECK-NEXT: %[[S:.*]] = braze.add %[[A]], %[[B]] : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
// CHECK-NEXT: return %[[L]], %[[R]], %[[S]]
func.func @add_of_neg(%a: tensor<?x4xf32>, %b: tensor<4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) {
  %n = braze.neg %b : tensor<4xf32>
  %0 = braze.add %a, %n : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %1 = braze.add %n, %a : tensor<4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
  %2 = braze.neg %b : tensor<4xf32>
  %3 = braze.sub %a, %2 : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  return %0, %1, %3 : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>
}

// -----

// Tests that subtracting a negation becomes an addition.
// CHECK-LABEL: func.func @sub_of_neg
// CHECK-SAME: (%[[A:.*]]: tensor<8xf16>, %[[B:.*]]: tensor<8xf16>)
// CHECK-NEXT: %[[S:.*]] = braze.add %[[A]], %[[B]]
// CHECK-NEXT: return %[[S]]
func.func @sub_of_neg(%a: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<8xf16> {
  %n = braze.neg %b : tensor<8xf16>
  %0 = braze.sub %a, %n : tensor<8xf16>, tensor<8xf16> -> tensor<8xf16>
  return %0 : tensor<8xf16>
}

// -----

// Tests that the product of two negations loses both.
// CHECK-LABEL: func.func @mul_of_negs
// CHECK-SAME: (%[[A:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[M:.*]] = braze.mul %[[A]], %[[B]] : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: return %[[M]]
func.func @mul_of_negs(%a: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %na = braze.neg %a : tensor<2x8xf32>
  %nb = braze.neg %b : tensor<8xf32>
  %0 = braze.mul %na, %nb : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that one negation in a product, or a negation subtracted from, is kept.
// CHECK-LABEL: func.func @kept_negations
// CHECK: braze.neg
// CHECK: braze.mul
// CHECK: braze.sub
func.func @kept_negations(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %n = braze.neg %a : tensor<4xf32>
  %0 = braze.mul %n, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = braze.sub %n, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that the pass also applies the dialect's folders, so rewrites compose:
// (x * 1) - neg(reshape(reshape(y))) becomes x + reshape(y).
// CHECK-LABEL: func.func @composed
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[Y:.*]]: tensor<6xf32>)
// CHECK-NEXT: %[[R:.*]] = braze.reshape %[[Y]] : tensor<6xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[S:.*]] = braze.add %[[X]], %[[R]]
// CHECK-NEXT: return %[[S]]
func.func @composed(%x: tensor<2x3xf32>, %y: tensor<6xf32>) -> tensor<2x3xf32> {
  %one = braze.constant dense<1.0> : tensor<2x3xf32>
  %0 = braze.mul %x, %one : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = braze.reshape %y : tensor<6xf32> -> tensor<3x2xf32>
  %2 = braze.reshape %1 : tensor<3x2xf32> -> tensor<2x3xf32>
  %3 = braze.neg %2 : tensor<2x3xf32>
  %4 = braze.sub %0, %3 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return %4 : tensor<2x3xf32>
}

// -----

// Tests that ops of other dialects are not rewritten by the braze patterns.
// CHECK-LABEL: func.func @other_dialects
// CHECK: arith.negf
// CHECK: arith.addf
func.func @other_dialects(%a: f32, %b: f32) -> f32 {
  %n = arith.negf %b : f32
  %0 = arith.addf %a, %n : f32
  return %0 : f32
}

// -----

// Tests that a batched product of one broadcast matrix becomes one GEMM
// between reshapes, from a [K, N] or a [1, K, N] matrix, with a dynamic
// batch.
// CHECK-LABEL: func.func @bmm_of_broadcast_matrix
// CHECK-SAME: (%[[X:[^:]*]]: tensor<?x2x8xf32>, %[[W:[^:]*]]: tensor<8x5xf32>, %[[V:[^:]*]]: tensor<1x8x5xf32>,
// CHECK: %[[F:.*]] = braze.reshape %[[X]] : tensor<?x2x8xf32> -> tensor<?x8xf32>
// CHECK: %[[M:.*]] = braze.matmul %[[F]], %[[W]] : tensor<?x8xf32>, tensor<8x5xf32> -> tensor<?x5xf32>
// CHECK: braze.reshape %[[M]] : tensor<?x5xf32> -> tensor<?x2x5xf32>
// CHECK: %[[W2:.*]] = braze.reshape %[[V]] : tensor<1x8x5xf32> -> tensor<8x5xf32>
// CHECK: braze.matmul %{{.*}}, %[[W2]]
// CHECK-NOT: braze.bmm
func.func @bmm_of_broadcast_matrix(%x: tensor<?x2x8xf32>, %w: tensor<8x5xf32>, %v: tensor<1x8x5xf32>, %n: index) -> (tensor<?x2x5xf32>, tensor<?x2x5xf32>) {
  %e = braze.expand %w sizes [%n] : tensor<8x5xf32> -> tensor<?x8x5xf32>
  %0 = braze.bmm %x, %e : tensor<?x2x8xf32>, tensor<?x8x5xf32> -> tensor<?x2x5xf32>
  %f = braze.expand %v sizes [%n] : tensor<1x8x5xf32> -> tensor<?x8x5xf32>
  %1 = braze.bmm %x, %f : tensor<?x2x8xf32>, tensor<?x8x5xf32> -> tensor<?x2x5xf32>
  return %0, %1 : tensor<?x2x5xf32>, tensor<?x2x5xf32>
}

// -----

// Tests that a genuinely batched right operand, and a product whose batch
// and rows are both dynamic, stay batched products.
// CHECK-LABEL: func.func @bmm_kept
// CHECK-COUNT-2: braze.bmm
func.func @bmm_kept(%x: tensor<4x2x8xf32>, %w: tensor<4x8x5xf32>, %y: tensor<?x?x8xf32>, %v: tensor<8x5xf32>, %n: index) -> (tensor<4x2x5xf32>, tensor<?x?x5xf32>) {
  %0 = braze.bmm %x, %w : tensor<4x2x8xf32>, tensor<4x8x5xf32> -> tensor<4x2x5xf32>
  %e = braze.expand %v sizes [%n] : tensor<8x5xf32> -> tensor<?x8x5xf32>
  %1 = braze.bmm %y, %e : tensor<?x?x8xf32>, tensor<?x8x5xf32> -> tensor<?x?x5xf32>
  return %0, %1 : tensor<4x2x5xf32>, tensor<?x?x5xf32>
}

// -----

// Tests that a permute moving only unit dims becomes a reshape, which folds
// into the reshapes around it (einsum's capture of MaxViT's attention
// scores), and one with a dynamic dim too.
// CHECK-LABEL: func.func @permute_of_unit_dims
// CHECK-SAME: (%[[S:[^:]*]]: tensor<256x49x49xf32>, %[[D:[^:]*]]: tensor<?x1x8xf32>)
// CHECK-NOT: braze.permute
// CHECK: %[[R:.*]] = braze.reshape %[[S]] : tensor<256x49x49xf32> -> tensor<2x64x2x49x49xf32>
// CHECK: %[[E:.*]] = braze.reshape %[[D]] : tensor<?x1x8xf32> -> tensor<1x?x8xf32>
// CHECK: return %[[R]], %[[E]]
func.func @permute_of_unit_dims(%s: tensor<256x49x49xf32>, %d: tensor<?x1x8xf32>) -> (tensor<2x64x2x49x49xf32>, tensor<1x?x8xf32>) {
  %0 = braze.reshape %s : tensor<256x49x49xf32> -> tensor<2x64x2x49x1x49xf32>
  %1 = braze.permute %0 [0, 1, 2, 3, 5, 4] : tensor<2x64x2x49x1x49xf32> -> tensor<2x64x2x49x49x1xf32>
  %2 = braze.reshape %1 : tensor<2x64x2x49x49x1xf32> -> tensor<2x64x2x49x49xf32>
  %3 = braze.permute %d [1, 0, 2] : tensor<?x1x8xf32> -> tensor<1x?x8xf32>
  return %2, %3 : tensor<2x64x2x49x49xf32>, tensor<1x?x8xf32>
}

// -----

// Tests that permutes swapping dims of other sizes than 1 (a dynamic size
// may be anything), or with two dynamic dims (no reshape infers both),
// stay permutes.
// CHECK-LABEL: func.func @permutes_kept
// CHECK-COUNT-3: braze.permute
// CHECK-NOT: braze.reshape
func.func @permutes_kept(%x: tensor<2x1x3xf32>, %y: tensor<?x1x?xf32>, %z: tensor<?x4xf32>) -> (tensor<3x1x2xf32>, tensor<1x?x?xf32>, tensor<4x?xf32>) {
  %0 = braze.permute %x [2, 1, 0] : tensor<2x1x3xf32> -> tensor<3x1x2xf32>
  %1 = braze.permute %y [1, 0, 2] : tensor<?x1x?xf32> -> tensor<1x?x?xf32>
  %2 = braze.permute %z [1, 0] : tensor<?x4xf32> -> tensor<4x?xf32>
  return %0, %1, %2 : tensor<3x1x2xf32>, tensor<1x?x?xf32>, tensor<4x?xf32>
}

// -----

// Tests that torch.roll as export decomposes it (a take of fmod(iota + c,
// n) along a dim of size n) becomes slices: two concatenated where the
// rotation wraps (shift -3: indices 3..55, then 0..2), one where the iota's
// start and the offset leave no wrap (indices 2..5 of 8).
// CHECK-LABEL: func.func @rotations
// CHECK-SAME: (%[[X:.*]]: tensor<2x56x4xf32>, %[[Y:.*]]: tensor<8x3xf32>)
// CHECK-NOT: braze.take
// CHECK-DAG: %[[HEAD:.*]] = braze.slice %[[X]] dim 1 [3 : 56 : 1] : tensor<2x56x4xf32> -> tensor<2x53x4xf32>
// CHECK-DAG: %[[TAIL:.*]] = braze.slice %[[X]] dim 1 [0 : 3 : 1] : tensor<2x56x4xf32> -> tensor<2x3x4xf32>
// CHECK: %[[R:.*]] = braze.concat %[[HEAD]], %[[TAIL]] dim 1 : tensor<2x53x4xf32>, tensor<2x3x4xf32> -> tensor<2x56x4xf32>
// CHECK: %[[S:.*]] = braze.slice %[[Y]] dim 0 [2 : 6 : 1] : tensor<8x3xf32> -> tensor<4x3xf32>
// CHECK: return %[[R]], %[[S]]
func.func @rotations(%x: tensor<2x56x4xf32>, %y: tensor<8x3xf32>) -> (tensor<2x56x4xf32>, tensor<4x3xf32>) {
  %n = braze.constant dense<56> : tensor<i64>
  %c = braze.constant dense<3> : tensor<i64>
  %iota = braze.iota start 0.000000e+00 step 1.000000e+00 : tensor<56xi64>
  %shifted = braze.add %iota, %c : tensor<56xi64>, tensor<i64> -> tensor<56xi64>
  %index = braze.fmod %shifted, %n : tensor<56xi64>, tensor<i64> -> tensor<56xi64>
  %r = braze.take %x, %index dim 1 : tensor<2x56x4xf32>, tensor<56xi64> -> tensor<2x56x4xf32>
  %eight = braze.constant dense<8> : tensor<i32>
  %one = braze.constant dense<1> : tensor<i32>
  %iota4 = braze.iota start 1.000000e+00 step 1.000000e+00 : tensor<4xi32>
  %from2 = braze.add %one, %iota4 : tensor<i32>, tensor<4xi32> -> tensor<4xi32>
  %index4 = braze.fmod %from2, %eight : tensor<4xi32>, tensor<i32> -> tensor<4xi32>
  %s = braze.take %y, %index4 dim 0 : tensor<8x3xf32>, tensor<4xi32> -> tensor<4x3xf32>
  return %r, %s : tensor<2x56x4xf32>, tensor<4x3xf32>
}

// -----

// Tests that takes that are not rotations stay takes: a modulus other than
// the dim's size, an iota of step 2, more indices than the dim has, and an
// iota starting below zero (fmod keeps the sign: -1 would be out of range).
// CHECK-LABEL: func.func @takes_kept
// CHECK-COUNT-4: braze.take
// CHECK-NOT: braze.slice
func.func @takes_kept(%x: tensor<8x3xf32>) -> (tensor<8x3xf32>, tensor<4x3xf32>, tensor<10x3xf32>, tensor<8x3xf32>) {
  %seven = braze.constant dense<7> : tensor<i64>
  %eight = braze.constant dense<8> : tensor<i64>
  %iota = braze.iota start 0.000000e+00 step 1.000000e+00 : tensor<8xi64>
  %mod7 = braze.fmod %iota, %seven : tensor<8xi64>, tensor<i64> -> tensor<8xi64>
  %a = braze.take %x, %mod7 dim 0 : tensor<8x3xf32>, tensor<8xi64> -> tensor<8x3xf32>
  %even = braze.iota start 0.000000e+00 step 2.000000e+00 : tensor<4xi64>
  %mod8 = braze.fmod %even, %eight : tensor<4xi64>, tensor<i64> -> tensor<4xi64>
  %b = braze.take %x, %mod8 dim 0 : tensor<8x3xf32>, tensor<4xi64> -> tensor<4x3xf32>
  %long = braze.iota start 0.000000e+00 step 1.000000e+00 : tensor<10xi64>
  %wraps = braze.fmod %long, %eight : tensor<10xi64>, tensor<i64> -> tensor<10xi64>
  %c = braze.take %x, %wraps dim 0 : tensor<8x3xf32>, tensor<10xi64> -> tensor<10x3xf32>
  %below = braze.iota start -1.000000e+00 step 1.000000e+00 : tensor<8xi64>
  %negative = braze.fmod %below, %eight : tensor<8xi64>, tensor<i64> -> tensor<8xi64>
  %d = braze.take %x, %negative dim 0 : tensor<8x3xf32>, tensor<8xi64> -> tensor<8x3xf32>
  return %a, %b, %c, %d : tensor<8x3xf32>, tensor<4x3xf32>, tensor<10x3xf32>, tensor<8x3xf32>
}
