// RUN: braze-opt %s -split-input-file | braze-opt -split-input-file | FileCheck %s
// RUN: braze-opt %s -split-input-file --mlir-print-op-generic | braze-opt -split-input-file | FileCheck %s

// Tests that a 3-way switch survives a round trip: index, inputs, one region
// per branch, each with its block arguments and yield.
// CHECK-LABEL: func.func @switch3
// CHECK: %[[R:.*]] = braze.switch %{{.*}}(%{{.*}}) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4xf32>):
// CHECK-NEXT: braze.neg %[[A]]
// CHECK: braze.yield
// CHECK-NEXT: }, {
// CHECK: braze.yield
// CHECK-NEXT: }, {
// CHECK: braze.exp
// CHECK: return %[[R]]
func.func @switch3(%i: tensor<i64>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %r = braze.switch %i (%x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %n = braze.neg %a : tensor<4xf32>
    braze.yield %n : tensor<4xf32>
  }, {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }, {
  ^bb0(%a: tensor<4xf32>):
    %e = braze.exp %a : tensor<4xf32>
    braze.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a branch may yield a more static type than the result, and a
// switch may have no inputs and several results.
// CHECK-LABEL: func.func @refined
// CHECK: braze.switch %{{.*}}() : (tensor<i1>) -> (tensor<?xf32>, tensor<i64>)
func.func @refined(%p: tensor<i1>) -> (tensor<?xf32>, tensor<i64>) {
  %r:2 = braze.switch %p () : (tensor<i1>) -> (tensor<?xf32>, tensor<i64>) {
    %c = braze.constant dense<1.0> : tensor<3xf32>
    %k = braze.constant dense<3> : tensor<i64>
    braze.yield %c, %k : tensor<3xf32>, tensor<i64>
  }, {
    %c = braze.constant dense<2.0> : tensor<5xf32>
    %k = braze.constant dense<5> : tensor<i64>
    braze.yield %c, %k : tensor<5xf32>, tensor<i64>
  }
  return %r#0, %r#1 : tensor<?xf32>, tensor<i64>
}

// -----

// Tests that a while loop survives a round trip: carried values, extras,
// the condition region and the body.
// CHECK-LABEL: func.func @count
// CHECK: braze.while(%{{.*}}, %{{.*}}) extra(%{{.*}}) : (tensor<i64>, tensor<4xf32>, tensor<i64>) -> (tensor<i64>, tensor<4xf32>) condition {
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<i64>, %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<i64>):
// CHECK-NEXT: braze.lt
// CHECK-NEXT: braze.yield %{{.*}} : tensor<i1>
// CHECK-NEXT: } do {
// CHECK: braze.yield %{{.*}}, %{{.*}} : tensor<i64>, tensor<4xf32>
func.func @count(%zero: tensor<i64>, %x: tensor<4xf32>, %limit: tensor<i64>) -> (tensor<i64>, tensor<4xf32>) {
  %n, %y = braze.while (%zero, %x) extra (%limit)
      : (tensor<i64>, tensor<4xf32>, tensor<i64>) -> (tensor<i64>, tensor<4xf32>) condition {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>, %l: tensor<i64>):
    %c = braze.lt %i, %l : tensor<i64>, tensor<i64> -> tensor<i1>
    braze.yield %c : tensor<i1>
  } do {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>, %l: tensor<i64>):
    %one = braze.constant dense<1> : tensor<i64>
    %j = braze.add %i, %one : tensor<i64>, tensor<i64> -> tensor<i64>
    %b = braze.add %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    braze.yield %j, %b : tensor<i64>, tensor<4xf32>
  }
  return %n, %y : tensor<i64>, tensor<4xf32>
}
