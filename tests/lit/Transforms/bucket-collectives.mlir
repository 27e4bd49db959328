// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-bucket-collectives{bucket-bytes=128 remarks=true}))' -split-input-file -verify-diagnostics | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-verify-collective-order,braze-bucket-collectives{bucket-bytes=128},braze-verify-collective-order,braze-overlap{keep-peak=false}))' -split-input-file | FileCheck %s --check-prefix=OVERLAP
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-bucket-collectives{bucket-bytes=0}))' -split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: braze-bucket-collectives: bucket-bytes must be at least 1, got 0

// Tests that three small gradients' all_reduces become one bucket started
// where the last one was: the inputs flattened and concatenated, each
// result sliced back before its first user, and the updates that used the
// first two results moved below the bucket's wait, in their order, to just
// before their first user (the return). After braze-overlap (without its
// memory bound: the bucket's input would be live over the matmul) the
// bucket's wait sinks past the independent matmul, and the order verifier
// accepts the bucket in its first member's place.
// CHECK-LABEL: func.func @three_gradients
// CHECK: %[[G1:.*]] = braze.neg %arg0
// CHECK-NEXT: %[[G2:.*]] = braze.neg %arg1
// CHECK-NEXT: %[[G3:.*]] = braze.neg %arg2
// CHECK-NEXT: %[[F1:.*]] = braze.reshape %[[G1]] : tensor<4x4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[F3:.*]] = braze.reshape %[[G3]] : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[C:.*]] = braze.concat %[[F1]], %[[G2]], %[[F3]] dim 0 : tensor<16xf32>, tensor<8xf32>, tensor<6xf32> -> tensor<30xf32>
// CHECK-NEXT: %[[W:.*]] = braze.all_reduce_start %[[C]] "sum" group "dp" ranks [0, 1] : tensor<30xf32> -> !braze.work<tensor<30xf32>>
// CHECK-NEXT: %[[R:.*]] = braze.wait %[[W]]
// CHECK-NEXT: braze.matmul
// CHECK-NEXT: %[[S3:.*]] = braze.slice %[[R]] dim 0 [24 : 30 : 1] : tensor<30xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[R3:.*]] = braze.reshape %[[S3]] : tensor<6xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[U3:.*]] = braze.add %[[R3]], %arg2
// CHECK-NEXT: %[[S1:.*]] = braze.slice %[[R]] dim 0 [0 : 16 : 1] : tensor<30xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[R1:.*]] = braze.reshape %[[S1]] : tensor<16xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[U1:.*]] = braze.add %[[R1]], %arg0
// CHECK-NEXT: %[[R2:.*]] = braze.slice %[[R]] dim 0 [16 : 24 : 1] : tensor<30xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[U2:.*]] = braze.add %[[R2]], %arg1
// CHECK-NEXT: return %[[U1]], %[[U2]], %[[U3]]
// OVERLAP-LABEL: func.func @three_gradients
// OVERLAP: braze.concat
// OVERLAP-NEXT: braze.all_reduce_start {{.*}} {braze.collective_order = 0 : i64} : tensor<30xf32>
// OVERLAP-NEXT: braze.matmul
// OVERLAP-NEXT: braze.wait
// OVERLAP-NEXT: braze.slice
func.func @three_gradients(%x: tensor<4x4xf32>, %y: tensor<8xf32>, %z: tensor<2x3xf32>, %a: tensor<8x8xf32>) -> (tensor<4x4xf32>, tensor<8xf32>, tensor<2x3xf32>, tensor<8x8xf32>) {
  %g1 = braze.neg %x : tensor<4x4xf32>
  // expected-remark-re @+1 {{'braze.all_reduce_start' of group "dp" at {{.*}} and 2 later all_reduce(s) reduced as one bucket of 120 bytes, started at {{.*}}}}
  %w1 = braze.all_reduce_start %g1 "sum" group "dp" ranks [0, 1] : tensor<4x4xf32> -> !braze.work<tensor<4x4xf32>>
  %r1 = braze.wait %w1 : !braze.work<tensor<4x4xf32>>
  %u1 = braze.add %r1, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %g2 = braze.neg %y : tensor<8xf32>
  %w2 = braze.all_reduce_start %g2 "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %r2 = braze.wait %w2 : !braze.work<tensor<8xf32>>
  %u2 = braze.add %r2, %y : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %g3 = braze.neg %z : tensor<2x3xf32>
  %w3 = braze.all_reduce_start %g3 "sum" group "dp" ranks [0, 1] : tensor<2x3xf32> -> !braze.work<tensor<2x3xf32>>
  %r3 = braze.wait %w3 : !braze.work<tensor<2x3xf32>>
  %m = braze.matmul %a, %a : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %u3 = braze.add %r3, %z : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return %u1, %u2, %u3, %m : tensor<4x4xf32>, tensor<8xf32>, tensor<2x3xf32>, tensor<8x8xf32>
}

// -----

// Tests the size bound: with 128 bucket bytes the third gradient does not
// fit beside the first two and opens the next bucket (alone: left as it is).
// CHECK-LABEL: func.func @size_bound
// CHECK: braze.concat {{.*}} -> tensor<24xf32>
// CHECK-NEXT: braze.all_reduce_start {{.*}} : tensor<24xf32>
// CHECK-NEXT: braze.all_reduce_start %arg2 "sum" group "dp" ranks [0, 1] : tensor<4x4xf32>
// CHECK-NEXT: braze.wait {{.*}} : !braze.work<tensor<24xf32>>
// CHECK-NEXT: braze.wait {{.*}} : !braze.work<tensor<4x4xf32>>
func.func @size_bound(%x: tensor<16xf32>, %y: tensor<8xf32>, %z: tensor<4x4xf32>) -> (tensor<16xf32>, tensor<8xf32>, tensor<4x4xf32>) {
  // expected-remark @+1 {{and 1 later all_reduce(s) reduced as one bucket of 96 bytes}}
  %w1 = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<16xf32> -> !braze.work<tensor<16xf32>>
  %w2 = braze.all_reduce_start %y "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  // expected-remark @+1 {{starts a new bucket: the bucket's 96 bytes and its 64 would exceed bucket-bytes (128)}}
  %w3 = braze.all_reduce_start %z "sum" group "dp" ranks [0, 1] : tensor<4x4xf32> -> !braze.work<tensor<4x4xf32>>
  %r1 = braze.wait %w1 : !braze.work<tensor<16xf32>>
  %r2 = braze.wait %w2 : !braze.work<tensor<8xf32>>
  %r3 = braze.wait %w3 : !braze.work<tensor<4x4xf32>>
  return %r1, %r2, %r3 : tensor<16xf32>, tensor<8xf32>, tensor<4x4xf32>
}

// -----

// Tests that a gradient computed from another all_reduce's result is never
// reduced in the same bucket (a data dependency).
// CHECK-LABEL: func.func @dependent
// CHECK: braze.all_reduce_start %arg0
// CHECK-NEXT: braze.wait
// CHECK-NEXT: braze.neg
// CHECK-NEXT: braze.all_reduce_start
// CHECK-NOT: braze.concat
func.func @dependent(%x: tensor<8xf32>) -> tensor<8xf32> {
  %w1 = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %r1 = braze.wait %w1 : !braze.work<tensor<8xf32>>
  %g2 = braze.neg %r1 : tensor<8xf32>
  // expected-remark @+1 {{starts a new bucket: its input depends on the result of a member of the bucket}}
  %w2 = braze.all_reduce_start %g2 "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %r2 = braze.wait %w2 : !braze.work<tensor<8xf32>>
  return %r2 : tensor<8xf32>
}

// -----

// Tests that all_reduces with another reduction or element type are not
// merged: each opens its own bucket.
// CHECK-LABEL: func.func @mismatches
// CHECK-NOT: braze.concat
func.func @mismatches(%x: tensor<8xf32>, %y: tensor<8xf32>, %z: tensor<8xf16>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf16>) {
  %w1 = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  // expected-remark @+1 {{starts a new bucket: its reduction "max" differs from the bucket's "sum"}}
  %w2 = braze.all_reduce_start %y "max" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  // expected-remark @+1 {{starts a new bucket: its element type f16 differs from the bucket's f32}}
  %w3 = braze.all_reduce_start %z "max" group "dp" ranks [0, 1] : tensor<8xf16> -> !braze.work<tensor<8xf16>>
  %r1 = braze.wait %w1 : !braze.work<tensor<8xf32>>
  %r2 = braze.wait %w2 : !braze.work<tensor<8xf32>>
  %r3 = braze.wait %w3 : !braze.work<tensor<8xf16>>
  return %r1, %r2, %r3 : tensor<8xf32>, tensor<8xf32>, tensor<8xf16>
}

// -----

// Tests that an op with effects using a member's result before the next
// start cannot move below the bucket's wait: that start opens a new bucket.
// CHECK-LABEL: func.func @effects_in_between
// CHECK-NOT: braze.concat
func.func @effects_in_between(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %w1 = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %r1 = braze.wait %w1 : !braze.work<tensor<8xf32>>
  %e = braze.extern "aten.neg.default" (%r1) args [0 : index] : (tensor<8xf32>) -> tensor<8xf32>
  // expected-remark-re @+1 {{starts a new bucket: 'braze.extern' at {{.*}} uses a member's result and has effects, so it cannot move below the bucket's wait}}
  %w2 = braze.all_reduce_start %y "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %r2 = braze.wait %w2 : !braze.work<tensor<8xf32>>
  return %e, %r2 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a bucket crosses a collective of another group, but another
// kind of collective of its own group closes it (the group's order is
// kept): the all_reduces after the all_gather make the next bucket.
// CHECK-LABEL: func.func @groups
// CHECK: braze.all_reduce_start %arg1 "sum" group "tp"
// CHECK-NEXT: braze.concat %arg0, %arg2
// CHECK-NEXT: braze.all_reduce_start {{.*}} group "dp" {{.*}} : tensor<16xf32>
// CHECK: braze.all_gather_start
// CHECK: braze.concat %arg2, %arg0
// CHECK-NEXT: braze.all_reduce_start {{.*}} group "dp" {{.*}} : tensor<16xf32>
func.func @groups(%x: tensor<8xf32>, %y: tensor<8xf32>, %z: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16xf32>, tensor<8xf32>, tensor<8xf32>) {
  // expected-remark @+1 {{and 1 later all_reduce(s) reduced as one bucket of 64 bytes}}
  %w1 = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %wt = braze.all_reduce_start %y "sum" group "tp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %w2 = braze.all_reduce_start %z "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %r1 = braze.wait %w1 : !braze.work<tensor<8xf32>>
  %rt = braze.wait %wt : !braze.work<tensor<8xf32>>
  %r2 = braze.wait %w2 : !braze.work<tensor<8xf32>>
  %wg = braze.all_gather_start %x group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<16xf32>>
  // expected-remark @+1 {{and 1 later all_reduce(s) reduced as one bucket of 64 bytes}}
  %w3 = braze.all_reduce_start %z "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %rg = braze.wait %wg : !braze.work<tensor<16xf32>>
  %r3 = braze.wait %w3 : !braze.work<tensor<8xf32>>
  %w4 = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %r4 = braze.wait %w4 : !braze.work<tensor<8xf32>>
  return %r1, %rt, %r2, %rg, %r3, %r4 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a bucket whose members are all waited for after the last
// start is waited for where the first of them was: after the wait of the
// group's earlier all_gather, so the group's waits keep its starts' order.
// CHECK-LABEL: func.func @earlier_wait
// CHECK: braze.all_gather_start
// CHECK: braze.all_reduce_start {{.*}} : tensor<16xf32>
// CHECK-NEXT: braze.wait {{.*}} : !braze.work<tensor<16xf32>>
// CHECK-NEXT: braze.wait {{.*}} : !braze.work<tensor<16xf32>>
func.func @earlier_wait(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<16xf32>, tensor<8xf32>, tensor<8xf32>) {
  %wg = braze.all_gather_start %x group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<16xf32>>
  // expected-remark @+1 {{and 1 later all_reduce(s) reduced as one bucket of 64 bytes}}
  %w1 = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %w2 = braze.all_reduce_start %y "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  %rg = braze.wait %wg : !braze.work<tensor<16xf32>>
  %r1 = braze.wait %w1 : !braze.work<tensor<8xf32>>
  %r2 = braze.wait %w2 : !braze.work<tensor<8xf32>>
  return %rg, %r1, %r2 : tensor<16xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests what is never bucketed: an input of dynamic shape, and one larger
// than bucket-bytes on its own.
// CHECK-LABEL: func.func @alone
// CHECK-NOT: braze.concat
func.func @alone(%x: tensor<?xf32>, %y: tensor<64xf32>, %z: tensor<8xf32>) -> (tensor<?xf32>, tensor<64xf32>, tensor<8xf32>) {
  %w0 = braze.all_reduce_start %z "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
  // expected-remark @+1 {{is not bucketed: its input tensor<?xf32> has a dynamic shape or non-numeric elements}}
  %w1 = braze.all_reduce_start %x "sum" group "dp" ranks [0, 1] : tensor<?xf32> -> !braze.work<tensor<?xf32>>
  // expected-remark @+1 {{is not bucketed: its 256 bytes exceed bucket-bytes (128)}}
  %w2 = braze.all_reduce_start %y "sum" group "dp" ranks [0, 1] : tensor<64xf32> -> !braze.work<tensor<64xf32>>
  %r0 = braze.wait %w0 : !braze.work<tensor<8xf32>>
  %r1 = braze.wait %w1 : !braze.work<tensor<?xf32>>
  %r2 = braze.wait %w2 : !braze.work<tensor<64xf32>>
  return %r1, %r2, %r0 : tensor<?xf32>, tensor<64xf32>, tensor<8xf32>
}
