// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=cuda}))' | FileCheck %s
// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=hip threads=128}))' | FileCheck %s --check-prefix=HIP

// Tests that a kernel without reductions takes one thread per point, and a
// long static row a block tree sized to the row (at least a warp, at most
// `threads`).
// CHECK-LABEL: func.func @shapes
// CHECK: braze.kernel {{.*}} reduce [] attributes {braze.schedule = {strategy = "points", threads = 256 : i64}}
// CHECK: braze.kernel {{.*}} reduce [1] attributes {braze.schedule = {strategy = "block_tree", threads = 64 : i64}}
// CHECK: braze.kernel {{.*}} reduce [1] attributes {braze.schedule = {strategy = "block_tree", threads = 256 : i64}}
// HIP-LABEL: func.func @shapes
// HIP: {strategy = "points", threads = 128 : i64}
// HIP: {strategy = "block_tree", threads = 64 : i64}
// HIP: {strategy = "block_tree", threads = 128 : i64}
func.func @shapes(%x: tensor<4x40xf32>, %y: tensor<4x5000xf32>) -> (tensor<4x40xf32>, tensor<4xf32>, tensor<4xf32>) {
  %e = braze.kernel ins(%x : tensor<4x40xf32>) domain [4, 40] reduce [] : tensor<4x40xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x40xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x40xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  %s = braze.kernel ins(%x : tensor<4x40xf32>) domain [4, 40] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x40xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x40xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  %t = braze.kernel ins(%y : tensor<4x5000xf32>) domain [4, 5000] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x5000xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x5000xf32>
    %r = braze.reduce "max" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  return %e, %s, %t : tensor<4x40xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that short static rows take one thread each, and that a dynamic row
// takes a block tree of `threads`.
// CHECK-LABEL: func.func @short_and_dynamic_rows
// CHECK: reduce [1] attributes {braze.schedule = {strategy = "row_per_thread", threads = 256 : i64}}
// CHECK: reduce [1] attributes {braze.schedule = {strategy = "block_tree", threads = 256 : i64}}
func.func @short_and_dynamic_rows(%x: tensor<?x10xf32>, %y: tensor<4x?xf32>, %n: index) -> (tensor<?xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x10xf32>
  %s = braze.kernel ins(%x : tensor<?x10xf32>) domain [%m, 10] reduce [1] : tensor<?xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x10xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x10xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  %t = braze.kernel ins(%y : tensor<4x?xf32>) domain [4, %n] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x?xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x?xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  return %s, %t : tensor<?xf32>, tensor<4xf32>
}
