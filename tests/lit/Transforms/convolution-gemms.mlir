// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-convolution-gemms))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-convolution-gemms{max-work=0}))' -split-input-file | FileCheck %s --check-prefix=OFF
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-convolution-gemms{remarks=true}))' -split-input-file -verify-diagnostics -o /dev/null

// Tests that a 1x1 convolution becomes a GEMM over its channels-last rows
// (the weight transposed), that the batch norm and ReLU after it move into
// the product's frame (the per-channel [C, 1, 1] operands become [1, 1, 1, C]
// reshapes, not permutes), that the pointwise op computing its input for
// it alone moves into the rows' frame (the permute lands on the function's
// argument), and that the permute back lands before the return.
// CHECK-LABEL: func.func @bn_relu
// CHECK: %[[IN:.*]] = braze.permute %arg0 [0, 2, 3, 1] : tensor<2x16x7x7xf32> -> tensor<2x7x7x16xf32>
// CHECK: %[[X:.*]] = braze.mul %[[IN]], %{{.*}} : tensor<2x7x7x16xf32>, tensor<f32> -> tensor<2x7x7x16xf32>
// CHECK: %[[ROWS:.*]] = braze.reshape %[[X]] : tensor<2x7x7x16xf32> -> tensor<98x16xf32>
// CHECK: %[[W:.*]] = braze.reshape %arg1 : tensor<32x16x1x1xf32> -> tensor<32x16xf32>
// CHECK: %[[WT:.*]] = braze.permute %[[W]] [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
// CHECK: %[[P:.*]] = braze.matmul %[[ROWS]], %[[WT]] : tensor<98x16xf32>, tensor<16x32xf32> -> tensor<98x32xf32>
// CHECK: %[[S:.*]] = braze.reshape %[[P]] : tensor<98x32xf32> -> tensor<2x7x7x32xf32>
// CHECK: %[[SCALE:.*]] = braze.reshape %arg2 : tensor<32x1x1xf32> -> tensor<1x1x1x32xf32>
// CHECK: %[[M:.*]] = braze.mul %[[S]], %[[SCALE]] : tensor<2x7x7x32xf32>, tensor<1x1x1x32xf32> -> tensor<2x7x7x32xf32>
// CHECK: %[[R:.*]] = braze.relu %[[M]] : tensor<2x7x7x32xf32>
// CHECK: %[[BACK:.*]] = braze.permute %[[R]] [0, 3, 1, 2] : tensor<2x7x7x32xf32> -> tensor<2x32x7x7xf32>
// CHECK: return %[[BACK]]
// CHECK-NOT: braze.convolution
// OFF-LABEL: func.func @bn_relu
// OFF: braze.convolution
// OFF-NOT: braze.matmul
func.func @bn_relu(%x: tensor<2x16x7x7xf32>, %w: tensor<32x16x1x1xf32>, %scale: tensor<32x1x1xf32>) -> tensor<2x32x7x7xf32> {
  %c = braze.constant dense<2.0> : tensor<f32>
  %x2 = braze.mul %x, %c : tensor<2x16x7x7xf32>, tensor<f32> -> tensor<2x16x7x7xf32>
  %y = braze.convolution %x2, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x16x7x7xf32>, tensor<32x16x1x1xf32> -> tensor<2x32x7x7xf32>
  %m = braze.mul %y, %scale : tensor<2x32x7x7xf32>, tensor<32x1x1xf32> -> tensor<2x32x7x7xf32>
  %r = braze.relu %m : tensor<2x32x7x7xf32>
  return %r : tensor<2x32x7x7xf32>
}

// -----

// Tests that a bias makes an addmm, that a residual of the convolution's
// shape is permuted into the product's frame, that an op both frames read
// (%u reads %r and %s) takes %r's frame value without a second permute, and
// that the input is not moved when something else reads it too (%x2 is
// returned).
// CHECK-LABEL: func.func @bias_residual
// CHECK: %[[X2:.*]] = braze.add %arg0, %arg0
// CHECK: %[[IN:.*]] = braze.permute %[[X2]] [0, 2, 3, 1]
// CHECK: %[[ROWS:.*]] = braze.reshape %[[IN]] : tensor<1x4x4x8xf32> -> tensor<16x8xf32>
// CHECK: %[[P:.*]] = braze.addmm %arg2, %[[ROWS]], %{{.*}} : tensor<8xf32>, tensor<16x8xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK: %[[S:.*]] = braze.reshape %[[P]] : tensor<16x8xf32> -> tensor<1x4x4x8xf32>
// CHECK: %[[RES:.*]] = braze.permute %arg3 [0, 2, 3, 1] : tensor<1x8x4x4xf32> -> tensor<1x4x4x8xf32>
// CHECK: %[[A:.*]] = braze.add %[[S]], %[[RES]] : tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>
// CHECK: %[[SIG:.*]] = braze.sigmoid %[[A]] : tensor<1x4x4x8xf32>
// CHECK: %[[U:.*]] = braze.mul %[[A]], %[[SIG]] : tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>
// CHECK: %[[BACK:.*]] = braze.permute %[[U]] [0, 3, 1, 2]
// CHECK: return %[[BACK]], %[[X2]]
func.func @bias_residual(%x: tensor<1x8x4x4xf32>, %w: tensor<8x8x1x1xf32>, %b: tensor<8xf32>, %res: tensor<1x8x4x4xf32>) -> (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) {
  %x2 = braze.add %x, %x : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32> -> tensor<1x8x4x4xf32>
  %y = braze.convolution %x2, %w bias %b stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>, tensor<8xf32> -> tensor<1x8x4x4xf32>
  %r = braze.add %y, %res : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32> -> tensor<1x8x4x4xf32>
  %s = braze.sigmoid %r : tensor<1x8x4x4xf32>
  %u = braze.mul %r, %s : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32> -> tensor<1x8x4x4xf32>
  return %u, %x2 : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>
}

// -----

// Tests that the convolutions a GEMM would not compute alike, or that are
// too large, stay the library's: a 3x3 kernel (no remark), a stride, padding,
// groups, a dynamic batch, and more than 2^23 multiply-adds; and that a
// reduction after a GEMM's convolution keeps the permute back before it.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-6: braze.convolution
// CHECK: braze.matmul
// CHECK: %[[BACK:.*]] = braze.permute %{{.*}} [0, 3, 1, 2]
// CHECK: braze.sum %[[BACK]]
func.func @kept(%x: tensor<2x8x8x8xf32>, %w3: tensor<8x8x3x3xf32>, %w: tensor<8x8x1x1xf32>, %wg: tensor<8x4x1x1xf32>, %d: tensor<?x8x8x8xf32>, %big: tensor<8x256x128x128xf32>, %wb: tensor<256x256x1x1xf32>) -> (tensor<2x8x6x6xf32>, tensor<2x8x4x4xf32>, tensor<2x8x10x10xf32>, tensor<2x8x8x8xf32>, tensor<?x8x8x8xf32>, tensor<8x256x128x128xf32>, tensor<2x8xf32>) {
  %a = braze.convolution %x, %w3 stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32> -> tensor<2x8x6x6xf32>
  // expected-remark @+1 {{1x1 convolution left to the library: its stride is not 1}}
  %b = braze.convolution %x, %w stride [2, 2] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x8x8xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x4x4xf32>
  // expected-remark @+1 {{1x1 convolution left to the library: it is padded}}
  %c = braze.convolution %x, %w stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<2x8x8x8xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x10x10xf32>
  // expected-remark @+1 {{1x1 convolution left to the library: it has groups}}
  %g = braze.convolution %x, %wg stride [1, 1] padding [0, 0] dilation [1, 1] groups 2 : tensor<2x8x8x8xf32>, tensor<8x4x1x1xf32> -> tensor<2x8x8x8xf32>
  // expected-remark @+1 {{1x1 convolution left to the library: its input shape is dynamic}}
  %e = braze.convolution %d, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<?x8x8x8xf32>, tensor<8x8x1x1xf32> -> tensor<?x8x8x8xf32>
  // expected-remark @+1 {{1x1 convolution left to the library: its 8589934592 multiply-adds are more than max-work (8388608): the library's convolution is faster}}
  %f = braze.convolution %big, %wb stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<8x256x128x128xf32>, tensor<256x256x1x1xf32> -> tensor<8x256x128x128xf32>
  %h = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x8x8xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x8x8xf32>
  %s = braze.sum %h dims [2, 3] : tensor<2x8x8x8xf32> -> tensor<2x8xf32>
  return %a, %b, %c, %g, %e, %f, %s : tensor<2x8x6x6xf32>, tensor<2x8x4x4xf32>, tensor<2x8x10x10xf32>, tensor<2x8x8x8xf32>, tensor<?x8x8x8xf32>, tensor<8x256x128x128xf32>, tensor<2x8xf32>
}
