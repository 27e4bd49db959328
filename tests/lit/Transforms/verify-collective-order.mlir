// RUN: braze-opt %s -braze-verify-collective-order -split-input-file -verify-diagnostics | FileCheck %s
// RUN: braze-opt %s -braze-verify-collective-order -braze-verify-collective-order -split-input-file -verify-diagnostics | FileCheck %s

// Tests that the first run records each start's position in its group
// (groups numbered apart) and that a second run accepts it.
// CHECK-LABEL: func.func @records
func.func @records(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) {
  // CHECK: braze.all_reduce_start {{.*}} {braze.collective_order = 0 : i64}
  %a = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  // CHECK: braze.all_reduce_start {{.*}} group "tp" {{.*}} {braze.collective_order = 0 : i64}
  %b = braze.all_reduce_start %x "sum" group "tp" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  // CHECK: braze.all_gather_start {{.*}} {braze.collective_order = 1 : i64}
  %c = braze.all_gather_start %x group "dp" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<8xf32>>
  %ra = braze.wait %a : !braze.work<tensor<4xf32>>
  %rb = braze.wait %b : !braze.work<tensor<4xf32>>
  %rc = braze.wait %c : !braze.work<tensor<8xf32>>
  return %ra, %rb, %rc : tensor<4xf32>, tensor<4xf32>, tensor<8xf32>
}

// -----

// Tests that a collective under control flow is accepted when the
// condition is the same on every rank (the result of an all_reduce).
// CHECK-LABEL: func.func @replicated_condition
func.func @replicated_condition(%x: tensor<4xf32>, %i: index) -> tensor<4xf32> {
  %w = braze.all_reduce_start %x "max" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %m = braze.wait %w : !braze.work<tensor<4xf32>>
  %c0 = arith.constant 0 : index
  %e = tensor.extract %m[%c0] : tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %p = arith.cmpf ogt, %e, %zero : f32
  %r = scf.if %p -> tensor<4xf32> {
    %v = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
    %s = braze.wait %v : !braze.work<tensor<4xf32>>
    scf.yield %s : tensor<4xf32>
  } else {
    scf.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a collective under a rank-dependent condition is refused,
// naming the group's collective ranks would mispair it with.
func.func @rank_dependent_condition(%x: tensor<4xf32>, %p: i1) -> (tensor<4xf32>, tensor<8xf32>) {
  %r = scf.if %p -> tensor<4xf32> {
    // expected-error @+1 {{'braze.all_reduce_start' of group "0" at}}
    %v = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
    %s = braze.wait %v : !braze.work<tensor<4xf32>>
    scf.yield %s : tensor<4xf32>
  } else {
    scf.yield %x : tensor<4xf32>
  }
  %g = braze.all_gather_start %r group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<8xf32>>
  %h = braze.wait %g : !braze.work<tensor<8xf32>>
  return %r, %h : tensor<4xf32>, tensor<8xf32>
}

// -----

// Tests that the reason is given: the condition depends on a reduce_scatter's
// result (each rank gets a different block).
func.func @scattered_condition(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = braze.reduce_scatter_start %x "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<2xf32>>
  %m = braze.wait %w : !braze.work<tensor<2xf32>>
  %c0 = arith.constant 0 : index
  %e = tensor.extract %m[%c0] : tensor<2xf32>
  %zero = arith.constant 0.0 : f32
  %p = arith.cmpf ogt, %e, %zero : f32
  %r = scf.if %p -> tensor<4xf32> {
    // expected-error-re @+1 {{is under 'scf.if' at {{.*}}, whose operand #0 depends on rank-dependent values: ranks that skip or repeat it would pair 'braze.reduce_scatter_start' of group "0"}}
    %v = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
    %s = braze.wait %v : !braze.work<tensor<4xf32>>
    scf.yield %s : tensor<4xf32>
  } else {
    scf.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a group's order changed since it was recorded is refused,
// naming both collectives.
func.func @reordered(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %b = braze.all_gather_start %x group "0" ranks [0, 1] {braze.collective_order = 1 : i64} : tensor<4xf32> -> !braze.work<tensor<8xf32>>
  // expected-error-re @+1 {{'braze.all_gather_start' of group "0" at {{.*}} (#1 of its group) is issued before 'braze.all_reduce_start' of group "0" at {{.*}} (#0): the group's order changed since it was recorded}}
  %a = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] {braze.collective_order = 0 : i64} : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %rb = braze.wait %b : !braze.work<tensor<8xf32>>
  %ra = braze.wait %a : !braze.work<tensor<4xf32>>
  return %ra, %rb : tensor<4xf32>, tensor<8xf32>
}

// -----

// Tests that a collective added after the order was recorded is refused.
func.func @added(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] {braze.collective_order = 0 : i64} : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  // expected-error-re @+1 {{'braze.all_reduce_start' of group "0" at {{.*}} has no recorded position in its group's order (it follows 'braze.all_reduce_start' of group "0" at {{.*}}): a pass added it after the order was recorded}}
  %b = braze.all_reduce_start %x "max" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %ra = braze.wait %a : !braze.work<tensor<4xf32>>
  %rb = braze.wait %b : !braze.work<tensor<4xf32>>
  return %ra, %rb : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a start never waited for is refused.
func.func @never_waited(%x: tensor<4xf32>) {
  // expected-error @+1 {{'braze.all_reduce_start' of group "0" at}}
  %a = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  return
}

// -----

// Tests that a collective in a braze.switch branch is accepted when the
// index is the same on every rank, even though the branch's input (a
// function argument) differs per rank: only the index decides the branch.
// CHECK-LABEL: func.func @switch_on_replicated_index
func.func @switch_on_replicated_index(%x: tensor<4xf32>) -> tensor<4xf32> {
  %i = braze.constant dense<1> : tensor<i64>
  %r = braze.switch %i (%x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // CHECK: braze.all_reduce_start {{.*}} {braze.collective_order = 0 : i64}
    %v = braze.all_reduce_start %a "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
    %s = braze.wait %v : !braze.work<tensor<4xf32>>
    braze.yield %s : tensor<4xf32>
  }, {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a collective in a braze.switch branch is refused when the
// index is rank-dependent (a function argument).
func.func @switch_on_rank_dependent_index(%x: tensor<4xf32>, %i: tensor<i64>) -> tensor<4xf32> {
  %r = braze.switch %i (%x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error-re @+1 {{is under 'braze.switch' at {{.*}}, whose operand #0 depends on rank-dependent values}}
    %v = braze.all_reduce_start %a "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
    %s = braze.wait %v : !braze.work<tensor<4xf32>>
    braze.yield %s : tensor<4xf32>
  }, {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
