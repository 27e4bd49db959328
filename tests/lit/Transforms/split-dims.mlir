// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-split-dims{min-inner=8}))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -braze-split-dims -split-input-file | FileCheck %s --check-prefix=DEFAULT

// Tests that attention's output copy (heads moved back beside the features
// and merged into them) iterates over batch, token, head and feature: both
// merged dims split, the source is read at the four indices with no
// division left, and the result is written split and reshaped back. By
// default (min-inner=16) an inner extent of 8 stays merged.
// CHECK-LABEL: func.func @heads_merged
// CHECK-SAME: (%[[O:.*]]: tensor<2x4x8x8xf32>)
// CHECK: %[[K:.*]] = braze.kernel ins(%[[O]] : tensor<2x4x8x8xf32>) domain [2, 8, 4, 8] reduce [] : tensor<2x8x4x8xf32>
// CHECK: ^bb0(%[[B:.*]]: index, %[[T:.*]]: index, %[[H:.*]]: index, %[[D:.*]]: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[A:.*]]: tensor<2x4x8x8xf32>):
// CHECK-NOT: arith.divsi
// CHECK-NOT: arith.remsi
// CHECK: tensor.extract %[[A]][%[[B]], %[[H]], %[[T]], %[[D]]] : tensor<2x4x8x8xf32>
// CHECK: braze.store %{{.*}}, 0 [%[[B]], %[[T]], %[[H]], %[[D]]] : f32
// CHECK: %[[C:.*]] = braze.reshape %[[K]] : tensor<2x8x4x8xf32> -> tensor<16x32xf32>
// CHECK: return %[[C]]
// DEFAULT-LABEL: func.func @heads_merged
// DEFAULT: domain [16, 32]
// DEFAULT: arith.divsi
func.func @heads_merged(%o: tensor<2x4x8x8xf32>) -> tensor<16x32xf32> {
  %c = braze.kernel ins(%o : tensor<2x4x8x8xf32>) domain [16, 32] reduce [] : tensor<16x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<2x4x8x8xf32>):
    %c8 = arith.constant 8 : index
    %b = arith.divsi %i, %c8 : index
    %t = arith.remsi %i, %c8 : index
    %h = arith.divsi %j, %c8 : index
    %d = arith.remsi %j, %c8 : index
    %v = tensor.extract %a[%b, %h, %t, %d] : tensor<2x4x8x8xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  return %c : tensor<16x32xf32>
}

// -----

// Tests a kernel with a dynamic batch: the static dim splits, an input read
// at the whole index is read through a reshape that splits it (its dynamic
// dim kept), the extent's other use becomes the constant, and a use in
// arithmetic reads outer * 16 + inner.
// CHECK-LABEL: func.func @dynamic_batch
// CHECK-SAME: (%[[X:.*]]: tensor<?x16x4xf32>, %[[R:.*]]: tensor<?x64xf32>, %[[N:.*]]: index)
// CHECK: %[[RS:.*]] = braze.reshape %[[R]] : tensor<?x64xf32> -> tensor<?x4x16xf32>
// CHECK: %[[K:.*]] = braze.kernel ins(%[[X]], %[[RS]] : tensor<?x16x4xf32>, tensor<?x4x16xf32>) domain [%[[N]], 4, 16] reduce [] : tensor<?x4x16xf32>
// CHECK: ^bb0(%[[I:.*]]: index, %[[Q:.*]]: index, %[[S:.*]]: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[A:.*]]: tensor<?x16x4xf32>, %[[B:.*]]: tensor<?x4x16xf32>):
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : index
// CHECK-DAG: %[[M:.*]] = arith.muli %[[Q]], %[[C16]] : index
// CHECK-DAG: %[[W:.*]] = arith.addi %[[M]], %[[S]] : index
// CHECK: tensor.extract %[[A]][%[[I]], %[[S]], %[[Q]]] : tensor<?x16x4xf32>
// CHECK: tensor.extract %[[B]][%[[I]], %[[Q]], %[[S]]] : tensor<?x4x16xf32>
// CHECK: arith.index_cast %[[W]] : index to i64
// CHECK: arith.index_cast %[[C64]] : index to i64
// CHECK: braze.store %{{.*}}, 0 [%[[I]], %[[Q]], %[[S]]] : f32
// CHECK: braze.reshape %[[K]] : tensor<?x4x16xf32> -> tensor<?x64xf32>
func.func @dynamic_batch(%x: tensor<?x16x4xf32>, %r: tensor<?x64xf32>, %n: index) -> tensor<?x64xf32> {
  %y = braze.kernel ins(%x, %r : tensor<?x16x4xf32>, tensor<?x64xf32>) domain [%n, 64] reduce [] : tensor<?x64xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x16x4xf32>, %b: tensor<?x64xf32>):
    %c16 = arith.constant 16 : index
    %q = arith.divsi %j, %c16 : index
    %s = arith.remsi %j, %c16 : index
    %v = tensor.extract %a[%i, %s, %q] : tensor<?x16x4xf32>
    %w = tensor.extract %b[%i, %j] : tensor<?x64xf32>
    %ji = arith.index_cast %j : index to i64
    %ni64 = arith.index_cast %nj : index to i64
    %p = arith.addi %ji, %ni64 : i64
    %f = arith.sitofp %p : i64 to f32
    %sum = arith.addf %v, %w : f32
    %out = arith.addf %sum, %f : f32
    braze.store %out, 0 [%i, %j] : f32
  }
  return %y : tensor<?x64xf32>
}

// -----

// Tests the kernels left as they are: an index taken apart by two divisors
// (neither split keeps it whole), an extent that is no multiple of the
// divisor, a reduction dim (its order of adding is the reduction's), a
// dynamic extent, and a divisor at the extent (no inner loop to make).
// CHECK-LABEL: func.func @left_alone
// CHECK: domain [64] reduce []
// CHECK: arith.divsi
// CHECK: domain [60] reduce []
// CHECK: arith.remsi
// CHECK: domain [4, 64] reduce [1]
// CHECK: arith.remsi
// CHECK: domain [%{{.*}}] reduce []
// CHECK: arith.remsi
// CHECK: domain [16] reduce []
// CHECK: arith.remsi
// CHECK-NOT: braze.reshape
func.func @left_alone(%x: tensor<8x8xf32>, %y: tensor<16x4xf32>, %n: index) -> (tensor<64xf32>, tensor<60xf32>, tensor<4xf32>, tensor<?xf32>, tensor<16xf32>) {
  %two = braze.kernel ins(%x : tensor<8x8xf32>) domain [64] reduce [] : tensor<64xf32> {
  ^bb0(%i: index, %ni: index, %a: tensor<8x8xf32>):
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %q = arith.divsi %i, %c8 : index
    %s = arith.remsi %i, %c16 : index
    %t = arith.remsi %s, %c8 : index
    %v = tensor.extract %a[%q, %t] : tensor<8x8xf32>
    braze.store %v, 0 [%i] : f32
  }
  %ragged = braze.kernel ins(%y : tensor<16x4xf32>) domain [60] reduce [] : tensor<60xf32> {
  ^bb0(%i: index, %ni: index, %a: tensor<16x4xf32>):
    %c16 = arith.constant 16 : index
    %s = arith.remsi %i, %c16 : index
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%s, %c0] : tensor<16x4xf32>
    braze.store %v, 0 [%i] : f32
  }
  %sum = braze.kernel ins(%y : tensor<16x4xf32>) domain [4, 64] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<16x4xf32>):
    %c16 = arith.constant 16 : index
    %s = arith.remsi %j, %c16 : index
    %v = tensor.extract %a[%s, %i] : tensor<16x4xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  %dynamic = braze.kernel ins(%y : tensor<16x4xf32>) domain [%n] reduce [] : tensor<?xf32> {
  ^bb0(%i: index, %ni: index, %a: tensor<16x4xf32>):
    %c16 = arith.constant 16 : index
    %s = arith.remsi %i, %c16 : index
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%s, %c0] : tensor<16x4xf32>
    braze.store %v, 0 [%i] : f32
  }
  %whole = braze.kernel ins(%y : tensor<16x4xf32>) domain [16] reduce [] : tensor<16xf32> {
  ^bb0(%i: index, %ni: index, %a: tensor<16x4xf32>):
    %c16 = arith.constant 16 : index
    %s = arith.remsi %i, %c16 : index
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%s, %c0] : tensor<16x4xf32>
    braze.store %v, 0 [%i] : f32
  }
  return %two, %ragged, %sum, %dynamic, %whole : tensor<64xf32>, tensor<60xf32>, tensor<4xf32>, tensor<?xf32>, tensor<16xf32>
}

// -----

// Tests that a kernel over no dims (a scalar: a branch's condition) is left
// as it is.
// CHECK-LABEL: func.func @scalar
// CHECK: braze.kernel ins(%{{.*}} : tensor<f32>) domain [] reduce [] : tensor<i1>
func.func @scalar(%x: tensor<f32>) -> tensor<i1> {
  %y = braze.kernel ins(%x : tensor<f32>) domain [] reduce [] : tensor<i1> {
  ^bb0(%a: tensor<f32>):
    %v = tensor.extract %a[] : tensor<f32>
    %z = arith.constant 0.0 : f32
    %p = arith.cmpf ogt, %v, %z : f32
    braze.store %p, 0 [] : i1
  }
  return %y : tensor<i1>
}
