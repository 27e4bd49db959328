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

// Tests a producer read at several points: a ReLU read by a 2x2 max pool at
// stride 2 through its window's four strided slices (each point computed
// once) is computed at each read, and a negation read twice (at the point
// and its mirror image) at both.
// CHECK-LABEL: func.func @several_reads
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: braze.kernel ins(%[[X]] : tensor<4x8xf32>) domain [2, 4]
// CHECK-COUNT-4: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: braze.kernel ins(%[[X]] : tensor<4x8xf32>) domain [4, 8]
// CHECK-COUNT-2: arith.negf
// CHECK-NOT: braze.kernel
// CHECK: return
func.func @several_reads(%x: tensor<4x8xf32>) -> (tensor<2x4xf32>, tensor<4x8xf32>) {
  %relu = braze.kernel ins(%x : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xf32>):
    %zero = arith.constant 0.0 : f32
    %v = tensor.extract %a[%i, %j] : tensor<4x8xf32>
    %r = arith.maximumf %v, %zero : f32
    braze.store %r, 0 [%i, %j] : f32
  }
  %pool = braze.kernel ins(%relu : tensor<4x8xf32>) domain [2, 4] reduce [] : tensor<2x4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xf32>):
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %i2 = arith.muli %i, %c2 : index
    %j2 = arith.muli %j, %c2 : index
    %i3 = arith.addi %i2, %c1 : index
    %j3 = arith.addi %j2, %c1 : index
    %v0 = tensor.extract %b[%i2, %j2] : tensor<4x8xf32>
    %v1 = tensor.extract %b[%i2, %j3] : tensor<4x8xf32>
    %v2 = tensor.extract %b[%i3, %j2] : tensor<4x8xf32>
    %v3 = tensor.extract %b[%i3, %j3] : tensor<4x8xf32>
    %m0 = arith.maximumf %v0, %v1 : f32
    %m1 = arith.maximumf %v2, %v3 : f32
    %m = arith.maximumf %m0, %m1 : f32
    braze.store %m, 0 [%i, %j] : f32
  }
  %neg = braze.kernel ins(%x : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x8xf32>
    %m2 = arith.negf %v : f32
    braze.store %m2, 0 [%i, %j] : f32
  }
  %mirror = braze.kernel ins(%neg : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xf32>):
    %c7 = arith.constant 7 : index
    %k = arith.subi %c7, %j : index
    %v = tensor.extract %b[%i, %j] : tensor<4x8xf32>
    %w = tensor.extract %b[%i, %k] : tensor<4x8xf32>
    %s = arith.addf %v, %w : f32
    braze.store %s, 0 [%i, %j] : f32
  }
  return %pool, %mirror : tensor<2x4xf32>, tensor<4x8xf32>
}

// -----

// Tests the rounding a producer's bf16 store implied, at each inlined read:
// a ReLU's maximum of a widened bf16 value and 0 is a bf16 value already,
// so it is read without a truncf/extf round trip; a sum is rounded to bf16
// as its store did.
// CHECK-LABEL: func.func @bf16_roundings
// CHECK: braze.kernel
// CHECK-NOT: arith.truncf
// CHECK-COUNT-3: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: braze.store
// CHECK: braze.kernel
// CHECK: %[[S:.*]] = arith.addf
// CHECK: %[[R:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: arith.extf %[[R]] : bf16 to f32
func.func @bf16_roundings(%x: tensor<4x8xbf16>) -> (tensor<4x4xbf16>, tensor<4x4xbf16>) {
  %relu = braze.kernel ins(%x : tensor<4x8xbf16>) domain [4, 8] reduce [] : tensor<4x8xbf16> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xbf16>):
    %zero = arith.constant 0.0 : f32
    %v = tensor.extract %a[%i, %j] : tensor<4x8xbf16>
    %w = arith.extf %v : bf16 to f32
    %r = arith.maximumf %w, %zero : f32
    %t = arith.truncf %r : f32 to bf16
    braze.store %t, 0 [%i, %j] : bf16
  }
  %pool = braze.kernel ins(%relu : tensor<4x8xbf16>) domain [4, 4] reduce [] : tensor<4x4xbf16> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xbf16>):
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %j2 = arith.muli %j, %c2 : index
    %j3 = arith.addi %j2, %c1 : index
    %v0 = tensor.extract %b[%i, %j2] : tensor<4x8xbf16>
    %v1 = tensor.extract %b[%i, %j3] : tensor<4x8xbf16>
    %w0 = arith.extf %v0 : bf16 to f32
    %w1 = arith.extf %v1 : bf16 to f32
    %m = arith.maximumf %w0, %w1 : f32
    %t = arith.truncf %m : f32 to bf16
    braze.store %t, 0 [%i, %j] : bf16
  }
  %sum = braze.kernel ins(%x : tensor<4x8xbf16>) domain [4, 8] reduce [] : tensor<4x8xbf16> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xbf16>):
    %one = arith.constant 1.0 : f32
    %v = tensor.extract %a[%i, %j] : tensor<4x8xbf16>
    %w = arith.extf %v : bf16 to f32
    %r = arith.addf %w, %one : f32
    %t = arith.truncf %r : f32 to bf16
    braze.store %t, 0 [%i, %j] : bf16
  }
  %half = braze.kernel ins(%sum : tensor<4x8xbf16>) domain [4, 4] reduce [] : tensor<4x4xbf16> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xbf16>):
    %v0 = tensor.extract %b[%i, %j] : tensor<4x8xbf16>
    %w0 = arith.extf %v0 : bf16 to f32
    %m = math.exp %w0 : f32
    %t = arith.truncf %m : f32 to bf16
    braze.store %t, 0 [%i, %j] : bf16
  }
  return %pool, %half : tensor<4x4xbf16>, tensor<4x4xbf16>
}

// -----

// Tests producers read too often: a chain of twelve exponentials read at
// nine points of a consumer with as many points (nine evaluations a point,
// within max-evaluations, but 8 * 32 * 12 extra flops take longer than the
// 2 * 128 bytes of its result's trip through memory), and a negation read
// ten times (over max-evaluations, however cheap).
// CHECK-LABEL: func.func @too_many_reads
// CHECK-COUNT-4: braze.kernel
func.func @too_many_reads(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %costly = braze.kernel ins(%x : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x8xf32>
    %e1 = math.exp %v : f32
    %e2 = math.exp %e1 : f32
    %e3 = math.exp %e2 : f32
    %e4 = math.exp %e3 : f32
    %e5 = math.exp %e4 : f32
    %e6 = math.exp %e5 : f32
    %e7 = math.exp %e6 : f32
    %e8 = math.exp %e7 : f32
    %e9 = math.exp %e8 : f32
    %e10 = math.exp %e9 : f32
    %e11 = math.exp %e10 : f32
    %e12 = math.exp %e11 : f32
    braze.store %e12, 0 [%i, %j] : f32
  }
  %nine = braze.kernel ins(%costly : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xf32>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c5 = arith.constant 5 : index
    %c6 = arith.constant 6 : index
    %c7 = arith.constant 7 : index
    %v0 = tensor.extract %b[%i, %c0] : tensor<4x8xf32>
    %v1 = tensor.extract %b[%i, %c1] : tensor<4x8xf32>
    %v2 = tensor.extract %b[%i, %c2] : tensor<4x8xf32>
    %v3 = tensor.extract %b[%i, %c3] : tensor<4x8xf32>
    %v4 = tensor.extract %b[%i, %c4] : tensor<4x8xf32>
    %v5 = tensor.extract %b[%i, %c5] : tensor<4x8xf32>
    %v6 = tensor.extract %b[%i, %c6] : tensor<4x8xf32>
    %v7 = tensor.extract %b[%i, %c7] : tensor<4x8xf32>
    %v8 = tensor.extract %b[%i, %j] : tensor<4x8xf32>
    %s1 = arith.addf %v0, %v1 : f32
    %s2 = arith.addf %s1, %v2 : f32
    %s3 = arith.addf %s2, %v3 : f32
    %s4 = arith.addf %s3, %v4 : f32
    %s5 = arith.addf %s4, %v5 : f32
    %s6 = arith.addf %s5, %v6 : f32
    %s7 = arith.addf %s6, %v7 : f32
    %s8 = arith.addf %s7, %v8 : f32
    braze.store %s8, 0 [%i, %j] : f32
  }
  %neg = braze.kernel ins(%x : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x8xf32>
    %m2 = arith.negf %v : f32
    braze.store %m2, 0 [%i, %j] : f32
  }
  %ten = braze.kernel ins(%neg : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xf32>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c5 = arith.constant 5 : index
    %c6 = arith.constant 6 : index
    %c7 = arith.constant 7 : index
    %v0 = tensor.extract %b[%i, %c0] : tensor<4x8xf32>
    %v1 = tensor.extract %b[%i, %c1] : tensor<4x8xf32>
    %v2 = tensor.extract %b[%i, %c2] : tensor<4x8xf32>
    %v3 = tensor.extract %b[%i, %c3] : tensor<4x8xf32>
    %v4 = tensor.extract %b[%i, %c4] : tensor<4x8xf32>
    %v5 = tensor.extract %b[%i, %c5] : tensor<4x8xf32>
    %v6 = tensor.extract %b[%i, %c6] : tensor<4x8xf32>
    %v7 = tensor.extract %b[%i, %c7] : tensor<4x8xf32>
    %v8 = tensor.extract %b[%i, %j] : tensor<4x8xf32>
    %v9 = tensor.extract %b[%c0, %j] : tensor<4x8xf32>
    %s1 = arith.addf %v0, %v1 : f32
    %s2 = arith.addf %s1, %v2 : f32
    %s3 = arith.addf %s2, %v3 : f32
    %s4 = arith.addf %s3, %v4 : f32
    %s5 = arith.addf %s4, %v5 : f32
    %s6 = arith.addf %s5, %v6 : f32
    %s7 = arith.addf %s6, %v7 : f32
    %s8 = arith.addf %s7, %v8 : f32
    %s9 = arith.addf %s8, %v9 : f32
    braze.store %s9, 0 [%i, %j] : f32
  }
  return %nine, %ten : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests the producers left as they are: one whose result is also
// returned, a reduction, one read by a consumer with many more points (a
// broadcast: recomputed per row), one over another dynamic extent, one that
// reads its dynamic extent, and one stored transposed.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-12: braze.kernel
func.func @left_alone(%x: tensor<4x8xf32>, %n: index, %m: index, %d: tensor<?x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<64x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<8x4xf32>) {
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
  return %returned, %r2, %r3, %r4, %r5, %r6, %r7 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<64x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<8x4xf32>
}
