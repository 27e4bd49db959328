// RUN: braze-opt %s | braze-opt | FileCheck %s
// RUN: braze-opt %s --mlir-print-op-generic | braze-opt | FileCheck %s

// Tests that every collective op and the work type survive a print/parse
// round trip, in the custom form and through the generic form.

// CHECK-LABEL: func.func @every_collective
func.func @every_collective(%x: tensor<8x4xf32>, %i: tensor<6x2xi64>, %d: tensor<?x4xf32>) -> (tensor<8x4xf32>, tensor<16x4xf32>, tensor<4x4xf32>, tensor<6x2xi64>, tensor<8x4xf32>, tensor<?x4xf32>) {
  // CHECK: braze.all_reduce_start %{{.*}} "sum" group "0" ranks [0, 1] : tensor<8x4xf32> -> !braze.work<tensor<8x4xf32>>
  %w0 = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : tensor<8x4xf32> -> !braze.work<tensor<8x4xf32>>
  // CHECK: braze.wait %{{.*}} : !braze.work<tensor<8x4xf32>>
  %r0 = braze.wait %w0 : !braze.work<tensor<8x4xf32>>
  // CHECK: braze.all_gather_start %{{.*}} group "0" ranks [0, 1] : tensor<8x4xf32> -> !braze.work<tensor<16x4xf32>>
  %w1 = braze.all_gather_start %x group "0" ranks [0, 1] : tensor<8x4xf32> -> !braze.work<tensor<16x4xf32>>
  %r1 = braze.wait %w1 : !braze.work<tensor<16x4xf32>>
  // CHECK: braze.reduce_scatter_start %{{.*}} "avg" group "0" ranks [0, 1] : tensor<8x4xf32> -> !braze.work<tensor<4x4xf32>>
  %w2 = braze.reduce_scatter_start %x "avg" group "0" ranks [0, 1] : tensor<8x4xf32> -> !braze.work<tensor<4x4xf32>>
  %r2 = braze.wait %w2 : !braze.work<tensor<4x4xf32>>
  // CHECK: braze.all_to_all_start %{{.*}} output_splits [1, 5] input_splits [2, 4] group "0" ranks [0, 1] : tensor<6x2xi64> -> !braze.work<tensor<6x2xi64>>
  %w3 = braze.all_to_all_start %i output_splits [1, 5] input_splits [2, 4] group "0" ranks [0, 1] : tensor<6x2xi64> -> !braze.work<tensor<6x2xi64>>
  %r3 = braze.wait %w3 : !braze.work<tensor<6x2xi64>>
  // CHECK: braze.broadcast_start %{{.*}} root 1 group "tp" ranks [2, 3] : tensor<8x4xf32> -> !braze.work<tensor<8x4xf32>>
  %w4 = braze.broadcast_start %x root 1 group "tp" ranks [2, 3] : tensor<8x4xf32> -> !braze.work<tensor<8x4xf32>>
  %r4 = braze.wait %w4 : !braze.work<tensor<8x4xf32>>
  // CHECK: braze.all_to_all_start %{{.*}} output_splits [] input_splits [] group "0" ranks [0, 1] : tensor<?x4xf32> -> !braze.work<tensor<?x4xf32>>
  %w5 = braze.all_to_all_start %d output_splits [] input_splits [] group "0" ranks [0, 1] : tensor<?x4xf32> -> !braze.work<tensor<?x4xf32>>
  %r5 = braze.wait %w5 : !braze.work<tensor<?x4xf32>>
  return %r0, %r1, %r2, %r3, %r4, %r5 : tensor<8x4xf32>, tensor<16x4xf32>, tensor<4x4xf32>, tensor<6x2xi64>, tensor<8x4xf32>, tensor<?x4xf32>
}

// Tests that collectives of different groups may be in flight together and
// that a group's waits may follow several of its starts, in order.
// CHECK-LABEL: func.func @in_flight_together
func.func @in_flight_together(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = braze.all_reduce_start %x "sum" group "dp" ranks [0, 2] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %b = braze.all_reduce_start %x "max" group "dp" ranks [0, 2] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %c = braze.all_reduce_start %x "min" group "tp" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  // CHECK: braze.wait
  %rc = braze.wait %c : !braze.work<tensor<4xf32>>
  %ra = braze.wait %a : !braze.work<tensor<4xf32>>
  %rb = braze.wait %b : !braze.work<tensor<4xf32>>
  return %ra, %rb, %rc : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
