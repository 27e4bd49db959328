// RUN: braze-opt %s -canonicalize -split-input-file | FileCheck %s

// Tests that x + 0, 0 + x, x - 0, x * 1, 1 * x and x / 1 fold to x.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NOT: braze.add
// CHECK-NOT: braze.sub
// CHECK-NOT: braze.mul
// CHECK-NOT: braze.div
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = braze.constant dense<0.0> : tensor<8xf32>
  %one = braze.constant dense<1.0> : tensor<4x8xf32>
  %0 = braze.add %x, %zero : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = braze.add %zero, %x : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = braze.sub %x, %zero : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %3 = braze.mul %x, %one : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = braze.mul %one, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %5 = braze.div %x, %one : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that integer identities fold too.
// CHECK-LABEL: func.func @integer_identities
// CHECK-SAME: (%[[X:.*]]: tensor<4xi64>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @integer_identities(%x: tensor<4xi64>) -> (tensor<4xi64>, tensor<4xi64>) {
  %zero = braze.constant dense<0> : tensor<4xi64>
  %one = braze.constant dense<1> : tensor<4xi64>
  %0 = braze.add %x, %zero : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
  %1 = braze.mul %one, %x : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
  return %0, %1 : tensor<4xi64>, tensor<4xi64>
}

// -----

// Tests that an identity that broadcasts x to a larger shape does not fold.
// CHECK-LABEL: func.func @broadcasting_identity
// CHECK: braze.add
// CHECK: braze.mul
func.func @broadcasting_identity(%x: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = braze.constant dense<0.0> : tensor<4x8xf32>
  %one = braze.constant dense<1.0> : tensor<4x1xf32>
  %0 = braze.add %x, %zero : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = braze.mul %x, %one : tensor<8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that non-identity constants and non-splat constants do not fold.
// CHECK-LABEL: func.func @not_identities
// CHECK: braze.add
// CHECK: braze.mul
// CHECK: braze.sub
func.func @not_identities(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %half = braze.constant dense<0.5> : tensor<2xf32>
  %mixed = braze.constant dense<[1.0, 0.0]> : tensor<2xf32>
  %zero = braze.constant dense<0.0> : tensor<2xf32>
  %0 = braze.add %x, %half : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %1 = braze.mul %x, %mixed : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %2 = braze.sub %zero, %x : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0, %1, %2 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Tests that neg(neg(x)) and relu(relu(x)) fold.
// CHECK-LABEL: func.func @involutions
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[R:.*]] = braze.relu %[[X]]
// CHECK-NEXT: return %[[X]], %[[R]]
func.func @involutions(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = braze.neg %x : tensor<4xf32>
  %1 = braze.neg %0 : tensor<4xf32>
  %2 = braze.relu %x : tensor<4xf32>
  %3 = braze.relu %2 : tensor<4xf32>
  return %1, %3 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that reshape of reshape becomes one reshape, and a reshape to the same type disappears.
// CHECK-LABEL: func.func @reshapes
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.*]] = braze.reshape %[[X]] : tensor<4x8xf32> -> tensor<2x16xf32>
// CHECK-NEXT: return %[[R]], %[[X]]
func.func @reshapes(%x: tensor<4x8xf32>) -> (tensor<2x16xf32>, tensor<4x8xf32>) {
  %0 = braze.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %1 = braze.reshape %0 : tensor<32xf32> -> tensor<2x16xf32>
  %2 = braze.reshape %x : tensor<4x8xf32> -> tensor<4x8xf32>
  return %1, %2 : tensor<2x16xf32>, tensor<4x8xf32>
}

// -----

// Tests that a reshape with explicit sizes is kept even between equal types.
// CHECK-LABEL: func.func @reshape_with_sizes
// CHECK: braze.reshape %{{.*}} sizes [%{{.*}}, %{{.*}}]
func.func @reshape_with_sizes(%x: tensor<?x?xf32>, %a: index, %b: index) -> tensor<?x?xf32> {
  %0 = braze.reshape %x sizes [%a, %b] : tensor<?x?xf32> -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// Tests that permute of permute composes and an identity permute disappears.
// CHECK-LABEL: func.func @permutes
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[P:.*]] = braze.permute %[[X]] [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[P]], %[[X]]
func.func @permutes(%x: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = braze.permute %x [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = braze.permute %0 [1, 2, 0] : tensor<3x4x2xf32> -> tensor<4x2x3xf32>
  %2 = braze.permute %x [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %1, %2 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// Tests that two transposes cancel.
// CHECK-LABEL: func.func @transpose_twice
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_twice(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = braze.permute %x [1, 0] : tensor<?x8xf32> -> tensor<8x?xf32>
  %1 = braze.permute %0 [1, 0] : tensor<8x?xf32> -> tensor<?x8xf32>
  return %1 : tensor<?x8xf32>
}

// -----

// Tests that expand to the same shape disappears, while a real or sized expand stays.
// CHECK-LABEL: func.func @expands
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %[[Y:.*]]: tensor<1xf32>, %[[N:.*]]: index)
// CHECK-NEXT: %[[E:.*]] = braze.expand %[[Y]] sizes [%[[N]]]
// CHECK-NEXT: %[[F:.*]] = braze.expand %[[Y]] : tensor<1xf32> -> tensor<4xf32>
// CHECK-NEXT: return %[[X]], %[[E]], %[[F]]
func.func @expands(%x: tensor<?x8xf32>, %y: tensor<1xf32>, %n: index) -> (tensor<?x8xf32>, tensor<?xf32>, tensor<4xf32>) {
  %0 = braze.expand %x : tensor<?x8xf32> -> tensor<?x8xf32>
  %1 = braze.expand %y sizes [%n] : tensor<1xf32> -> tensor<?xf32>
  %2 = braze.expand %y : tensor<1xf32> -> tensor<4xf32>
  return %0, %1, %2 : tensor<?x8xf32>, tensor<?xf32>, tensor<4xf32>
}

// -----

// Tests that a full slice, a same-type cast and a single-input concat disappear.
// CHECK-LABEL: func.func @trivial_layout
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[S:.*]] = braze.slice %[[X]] dim 1 [0 : 8 : 2]
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[S]]
func.func @trivial_layout(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x4xf32>) {
  %0 = braze.slice %x dim 1 [0 : 100 : 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = braze.cast %x : tensor<4x8xf32> to tensor<4x8xf32>
  %2 = braze.concat %x dim 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = braze.slice %x dim 1 [0 : 8 : 2] : tensor<4x8xf32> -> tensor<4x4xf32>
  return %0, %1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x4xf32>
}

// -----

// Tests that a partial slice of a dynamic dim is kept.
// CHECK-LABEL: func.func @dynamic_slice
// CHECK: braze.slice
func.func @dynamic_slice(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = braze.slice %x dim 0 [0 : 16 : 1] : tensor<?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// Tests that a slice with a symbolic bound is kept, even one that may cover
// the dim (its bounds are checked when it runs).
// CHECK-LABEL: func.func @symbolic_slice
// CHECK: braze.slice %{{.*}} dim 0 [0 : %{{.*}} : 1]
func.func @symbolic_slice(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %0 = braze.slice %x dim 0 [0 : %n : 1] : tensor<?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
