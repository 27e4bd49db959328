// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-overlap{remarks=true}))' -split-input-file -verify-diagnostics | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-overlap{keep-peak=false}))' -split-input-file | FileCheck %s --check-prefix=NOPEAK

// Tests that a start moves above independent compute and its wait below
// it, so both matmuls run while the all_reduce is in flight (the block's
// peak of live bytes is at its top, where the 16 KB %big is live).
// CHECK-LABEL: func.func @hoist_and_sink
// CHECK: braze.neg
// CHECK-NEXT: braze.all_reduce_start
// CHECK-NEXT: braze.matmul
// CHECK-NEXT: braze.matmul
// CHECK-NEXT: braze.wait
// CHECK-NEXT: braze.add
func.func @hoist_and_sink(%x: tensor<1x64xf32>, %a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> (tensor<64xf32>, tensor<8x8xf32>) {
  %big = braze.expand %x : tensor<1x64xf32> -> tensor<64x64xf32>
  %t = braze.sum %big dims [1] : tensor<64x64xf32> -> tensor<64xf32>
  %g = braze.neg %t : tensor<64xf32>
  %m = braze.matmul %a, %b : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  // expected-remark @+1 {{'braze.all_reduce_start' of group "dp" at}}
  %w = braze.all_reduce_start %g "sum" group "dp" ranks [0, 1] : tensor<64xf32> -> !braze.work<tensor<64xf32>>
  // expected-remark @+2 {{moved down past 1 op(s); stopped by the first user of its result, 'braze.add'}}
  // expected-remark @+1 {{is in flight over 2 op(s) of compute writing 512 bytes}}
  %r = braze.wait %w : !braze.work<tensor<64xf32>>
  %n = braze.matmul %m, %b : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %s = braze.add %r, %r : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  return %s, %n : tensor<64xf32>, tensor<8x8xf32>
}

// -----

// Tests that a start stops at its input's producer and a wait at another
// collective of the same group (the group's order is kept).
// CHECK-LABEL: func.func @same_group_barrier
// CHECK: braze.matmul
// CHECK-NEXT: braze.all_reduce_start
// CHECK-NEXT: braze.wait
// CHECK-NEXT: braze.all_reduce_start
func.func @same_group_barrier(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %m = braze.matmul %a, %b : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  // expected-remark @+1 {{moved up past 0 op(s); stopped by its input's producer 'braze.matmul'}}
  %w = braze.all_reduce_start %m "sum" group "0" ranks [0, 1] : tensor<8x8xf32> -> !braze.work<tensor<8x8xf32>>
  // expected-remark-re @+2 {{moved down past 0 op(s); stopped by 'braze.all_reduce_start' of group "0" at {{.*}}, of the same group}}
  // expected-remark @+1 {{in flight over 0 op(s)}}
  %r = braze.wait %w : !braze.work<tensor<8x8xf32>>
  // expected-remark-re @+1 {{moved up past 0 op(s); stopped by 'braze.wait' (of 'braze.all_reduce_start') of group "0" at {{.*}}, of the same group}}
  %v = braze.all_reduce_start %a "max" group "0" ranks [0, 1] : tensor<8x8xf32> -> !braze.work<tensor<8x8xf32>>
  // expected-remark @+2 {{moved down past 0 op(s); stopped by the first user of its result, 'func.return'}}
  // expected-remark @+1 {{in flight over 0 op(s)}}
  %s = braze.wait %v : !braze.work<tensor<8x8xf32>>
  return %r, %s : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Tests that collectives of another group are crossed, but an op with
// effects (an extern call) is not.
// CHECK-LABEL: func.func @other_group_and_effects
// CHECK: braze.all_reduce_start {{.*}} group "tp"
// CHECK-NEXT: braze.all_reduce_start {{.*}} group "dp"
// CHECK-NEXT: braze.neg
// CHECK-NEXT: braze.wait
// CHECK-NEXT: braze.extern
// CHECK-NEXT: braze.wait
func.func @other_group_and_effects(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  // expected-remark @+1 {{moved up past 0 op(s); stopped by the start of the block}}
  %w = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  // expected-remark @+2 {{moved down past 1 op(s); stopped by 'braze.extern', an op with effects}}
  // expected-remark @+1 {{in flight over 1 op(s)}}
  %r = braze.wait %w : !braze.work<tensor<4xf32>>
  %k = braze.neg %y : tensor<4xf32>
  // expected-remark @+1 {{moved up past 3 op(s); stopped by the start of the block}}
  %v = braze.all_reduce_start %y "sum" group "tp" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %e = braze.extern "aten.neg.default" (%y) args [0 : index] : (tensor<4xf32>) -> tensor<4xf32>
  // expected-remark @+2 {{moved down past 0 op(s); stopped by the first user of its result, 'func.return'}}
  // expected-remark @+1 {{in flight over 2 op(s)}}
  %s = braze.wait %v : !braze.work<tensor<4xf32>>
  return %r, %s, %e, %k : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests the memory bound: hoisting the start above the add is free, but
// above the matmul its 4 MB output buffer would be live where the inputs
// and the product meet, raising the block's peak: that step is undone.
// Without keep-peak it is taken.
// CHECK-LABEL: func.func @peak_bound
// CHECK: braze.matmul
// CHECK-NEXT: braze.all_reduce_start
// CHECK-NEXT: braze.add
// NOPEAK-LABEL: func.func @peak_bound
// NOPEAK: braze.all_reduce_start
// NOPEAK-NEXT: braze.matmul
func.func @peak_bound(%g: tensor<1024x1024xf32>, %a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>) -> (tensor<1024x1024xf32>, tensor<1024x1024xf32>) {
  %m = braze.matmul %a, %b : tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %n = braze.add %m, %m : tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  // expected-remark @+1 {{moved up past 1 op(s); stopped by the peak of live bytes (one more step would raise it from 16777216 to 20971520)}}
  %w = braze.all_reduce_start %g "sum" group "dp" ranks [0, 1] : tensor<1024x1024xf32> -> !braze.work<tensor<1024x1024xf32>>
  // expected-remark @+2 {{moved down past 0 op(s); stopped by the first user of its result, 'func.return'}}
  // expected-remark @+1 {{in flight over 1 op(s)}}
  %r = braze.wait %w : !braze.work<tensor<1024x1024xf32>>
  return %r, %n : tensor<1024x1024xf32>, tensor<1024x1024xf32>
}
