// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-inline-kernels))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-inline-kernels{max-evaluations=1}))' -split-input-file | FileCheck %s --check-prefix=ONCE

// Tests rotate_half as braze-fold-layouts leaves it: the negated half is a
// kernel that the rotary kernel reads through the concat's remainder. Its
// body is computed at the read (its input joins the consumer's, once, as
// the consumer reads it already), and the kernel is gone. With
// max-evaluations=1 it stays: the consumer has twice its points.
// CHECK-LABEL: func.func @rotate_half
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xf32>)
// CHECK: %[[Y:.*]] = braze.kernel ins(%[[X]] : tensor<4x16xf32>) domain [4, 16]
// CHECK: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[A:.*]]: tensor<4x16xf32>):
// CHECK: %[[R:.*]] = arith.remsi %[[J]], %{{.*}} : index
// CHECK: %[[S:.*]] = arith.addi %[[R]], %{{.*}} : index
// CHECK: %[[V:.*]] = tensor.extract %[[A]][%[[I]], %[[S]]] : tensor<4x16xf32>
// CHECK: %[[N:.*]] = arith.negf %[[V]] : f32
// CHECK: arith.select %{{.*}}, %[[N]], %{{.*}} : f32
// CHECK-NOT: braze.kernel
// CHECK: return %[[Y]]
// ONCE-LABEL: func.func @rotate_half
// ONCE: braze.kernel ins(%{{.*}} : tensor<4x16xf32>) domain [4, 8]
// ONCE: braze.kernel ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x16xf32>) domain [4, 16]
func.func @rotate_half(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %n = braze.kernel ins(%x : tensor<4x16xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x16xf32>):
    %c8 = arith.constant 8 : index
    %s = arith.addi %j, %c8 : index
    %v = tensor.extract %a[%i, %s] : tensor<4x16xf32>
    %m = arith.negf %v : f32
    braze.store %m, 0 [%i, %j] : f32
  }
  %y = braze.kernel ins(%n, %x : tensor<4x8xf32>, tensor<4x16xf32>) domain [4, 16] reduce [] : tensor<4x16xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xf32>, %a: tensor<4x16xf32>):
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    %r = arith.remsi %j, %c8 : index
    %q = arith.divsi %j, %c8 : index
    %low = tensor.extract %b[%i, %r] : tensor<4x8xf32>
    %high = tensor.extract %a[%i, %r] : tensor<4x16xf32>
    %first = arith.cmpi slt, %q, %c1 : index
    %v = arith.select %first, %low, %high : f32
    braze.store %v, 0 [%i, %j] : f32
  }
  return %y : tensor<4x16xf32>
}

// -----

// Tests a producer over a dynamic batch, read by a consumer over the same
// `?` (the same value): inlined, and its static extent, read in the body,
// becomes a constant.
// CHECK-LABEL: func.func @dynamic_batch
// CHECK: braze.kernel ins(%{{.*}} : tensor<?x8xf32>) domain [%{{.*}}, 8]
// CHECK: arith.constant 8 : index
// CHECK: arith.mulf
// CHECK-NOT: braze.kernel
func.func @dynamic_batch(%x: tensor<?x8xf32>, %n: index) -> tensor<?x8xf32> {
  %p = braze.kernel ins(%x : tensor<?x8xf32>) domain [%n, 8] reduce [] : tensor<?x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x8xf32>
    %e = arith.index_cast %nj : index to i64
    %f = arith.sitofp %e : i64 to f32
    %m = arith.mulf %v, %f : f32
    braze.store %m, 0 [%i, %j] : f32
  }
  %y = braze.kernel ins(%p : tensor<?x8xf32>) domain [%n, 8] reduce [] : tensor<?x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<?x8xf32>):
    %c7 = arith.constant 7 : index
    %k = arith.subi %c7, %j : index
    %v = tensor.extract %b[%i, %k] : tensor<?x8xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  return %y : tensor<?x8xf32>
}

// -----

// Tests the producers left as they are: one read twice (two reads), one
// whose result is also returned, a reduction, one read by a consumer with
// many more points (a broadcast: recomputed per row), one over another
// dynamic extent, one that reads its dynamic extent, and one stored
// transposed.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-14: braze.kernel
func.func @left_alone(%x: tensor<4x8xf32>, %n: index, %m: index, %d: tensor<?x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<64x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<8x4xf32>) {
  %twice = braze.kernel ins(%x : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x8xf32>
    %m2 = arith.negf %v : f32
    braze.store %m2, 0 [%i, %j] : f32
  }
  %r1 = braze.kernel ins(%twice : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xf32>):
    %c7 = arith.constant 7 : index
    %k = arith.subi %c7, %j : index
    %v = tensor.extract %b[%i, %j] : tensor<4x8xf32>
    %w = tensor.extract %b[%i, %k] : tensor<4x8xf32>
    %s = arith.addf %v, %w : f32
    braze.store %s, 0 [%i, %j] : f32
  }
  %returned = braze.kernel ins(%x : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x8xf32>
    %m2 = arith.negf %v : f32
    braze.store %m2, 0 [%i, %j] : f32
  }
  %r2 = braze.kernel ins(%returned : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xf32>):
    %v = tensor.extract %b[%i, %j] : tensor<4x8xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  %sum = braze.kernel ins(%x : tensor<4x8xf32>) domain [4, 8] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x8xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [%i] : f32
  }
  %r3 = braze.kernel ins(%sum, %x : tensor<4xf32>, tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4xf32>, %a: tensor<4x8xf32>):
    %v = tensor.extract %b[%i] : tensor<4xf32>
    %w = tensor.extract %a[%i, %j] : tensor<4x8xf32>
    %s = arith.subf %w, %v : f32
    braze.store %s, 0 [%i, %j] : f32
  }
  %row = braze.kernel ins(%x : tensor<4x8xf32>) domain [8] reduce [] : tensor<8xf32> {
  ^bb0(%j: index, %nj: index, %a: tensor<4x8xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%c0, %j] : tensor<4x8xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%j] : f32
  }
  %r4 = braze.kernel ins(%row : tensor<8xf32>) domain [64, 8] reduce [] : tensor<64x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<8xf32>):
    %v = tensor.extract %b[%j] : tensor<8xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  %other = braze.kernel ins(%d : tensor<?x8xf32>) domain [%n, 8] reduce [] : tensor<?x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x8xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  %r5 = braze.kernel ins(%other : tensor<?x8xf32>) domain [%m, 8] reduce [] : tensor<?x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<?x8xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %b[%c0, %j] : tensor<?x8xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  %sized = braze.kernel ins(%d : tensor<?x8xf32>) domain [%n, 8] reduce [] : tensor<?x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x8xf32>
    %e = arith.index_cast %ni : index to i64
    %f = arith.sitofp %e : i64 to f32
    %s = arith.mulf %v, %f : f32
    braze.store %s, 0 [%i, %j] : f32
  }
  %r6 = braze.kernel ins(%sized : tensor<?x8xf32>) domain [%n, 8] reduce [] : tensor<?x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<?x8xf32>):
    %v = tensor.extract %b[%i, %j] : tensor<?x8xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  %transposed = braze.kernel ins(%x : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<8x4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x8xf32>
    braze.store %v, 0 [%j, %i] : f32
  }
  %r7 = braze.kernel ins(%transposed : tensor<8x4xf32>) domain [8, 4] reduce [] : tensor<8x4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<8x4xf32>):
    %v = tensor.extract %b[%i, %j] : tensor<8x4xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  return %r1, %returned, %r2, %r3, %r4, %r5, %r6, %r7 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<64x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<8x4xf32>
}
