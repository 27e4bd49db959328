// RUN: braze-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: braze-opt %s -split-input-file -verify-diagnostics | braze-opt -split-input-file | FileCheck %s

// Tests that a combo of a pointwise kernel and a reduction parses, verifies
// and prints back (round trip), with dynamic extents from outside.
// CHECK-LABEL: func.func @two
// CHECK: %[[C:.*]]:2 = braze.combo dispatch "sequential" schedules [{block = 64 : i64, cost = 64 : i64}, {block = 4 : i64, cost = 256 : i64, rblock = 32 : i64}] : tensor<?xf32>, tensor<4xf32> {
// CHECK: braze.combo_yield %{{.*}} : tensor<?xf32>
// CHECK-NEXT: }, {
// CHECK: braze.combo_yield %{{.*}} : tensor<4xf32>
// CHECK: return %[[C]]#0, %[[C]]#1
func.func @two(%x: tensor<?xf32>, %y: tensor<4x32xf32>, %n: index) -> (tensor<?xf32>, tensor<4xf32>) {
  %a, %b = braze.combo dispatch "sequential" schedules [
      {block = 64 : i64, cost = 64 : i64},
      {block = 4 : i64, rblock = 32 : i64, cost = 256 : i64}] : tensor<?xf32>, tensor<4xf32> {
    %0 = braze.kernel ins(%x : tensor<?xf32>) domain [%n] reduce [] : tensor<?xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<?xf32>):
      %v = tensor.extract %t[%i] : tensor<?xf32>
      %e = math.exp %v : f32
      braze.store %e, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<?xf32>
  }, {
    %1 = braze.kernel ins(%y : tensor<4x32xf32>) domain [4, 32] reduce [1] : tensor<4xf32> {
    ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<4x32xf32>):
      %v = tensor.extract %t[%i, %j] : tensor<4x32xf32>
      %s = braze.reduce "add" %v : f32 -> f32
      braze.store %s, 0 [%i] : f32
    }
    braze.combo_yield %1 : tensor<4xf32>
  }
  return %a, %b : tensor<?xf32>, tensor<4xf32>
}

// -----

// Tests round-robin dispatch over equal static work items (2 each).
// CHECK-LABEL: func.func @round_robin
// CHECK: braze.combo dispatch "round_robin"
func.func @round_robin(%x: tensor<128xf32>, %y: tensor<8x16xf32>) -> (tensor<128xf32>, tensor<8x16xf32>) {
  %a, %b = braze.combo dispatch "round_robin" schedules [{block = 64 : i64, cost = 1 : i64}, {block = 64 : i64, cost = 1 : i64}] : tensor<128xf32>, tensor<8x16xf32> {
    %0 = braze.kernel ins(%x : tensor<128xf32>) domain [128] reduce [] : tensor<128xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<128xf32>):
      %v = tensor.extract %t[%i] : tensor<128xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<128xf32>
  }, {
    %1 = braze.kernel ins(%y : tensor<8x16xf32>) domain [8, 16] reduce [] : tensor<8x16xf32> {
    ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<8x16xf32>):
      %v = tensor.extract %t[%i, %j] : tensor<8x16xf32>
      braze.store %v, 0 [%i, %j] : f32
    }
    braze.combo_yield %1 : tensor<8x16xf32>
  }
  return %a, %b : tensor<128xf32>, tensor<8x16xf32>
}
