// Every pass of cxx/Transforms on functions with braze.switch and
// braze.while: each works inside the regions, and nothing crosses a region's
// boundary (regions are isolated from above).
// RUN: braze-opt %s -braze-simplify -split-input-file | FileCheck %s --check-prefix=SIMPLIFY
// RUN: braze-opt %s -braze-fuse-pointwise -split-input-file | FileCheck %s --check-prefix=FUSE
// RUN: braze-opt %s -braze-lower-kernels -split-input-file | FileCheck %s --check-prefix=LOWER
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-fuse-pointwise,braze-lower-kernels,braze-collapse-dims{min-points=1}))' -split-input-file | FileCheck %s --check-prefix=COLLAPSE
// RUN: braze-opt %s -braze-lower-kernels -braze-channels-last -split-input-file | FileCheck %s --check-prefix=CHANNELS
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-fuse-pointwise,braze-lower-kernels,braze-gpu-schedule{target=cuda}))' -split-input-file | FileCheck %s --check-prefix=SCHEDULE

// Tests that a switch's branches are simplified, fused and lowered in place:
// the chain before the switch is one group, each branch's chain one group
// of its own, and no group takes a value across the boundary.
// SIMPLIFY-LABEL: func.func @branches
// SIMPLIFY: braze.switch
// SIMPLIFY: braze.sub %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>
// SIMPLIFY-NOT: braze.neg
// SIMPLIFY: braze.yield
// FUSE-LABEL: func.func @branches
// FUSE: %[[PRE:.*]] = braze.group ins(%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FUSE: braze.switch %{{.*}}(%[[PRE]])
// FUSE-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>):
// FUSE-NEXT: %[[G:.*]] = braze.group ins(%[[A]]) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// FUSE: braze.exp
// FUSE: braze.sum
// FUSE: braze.div
// FUSE: braze.yield
// FUSE: braze.yield %[[G]]
// FUSE-NEXT: }, {
// FUSE-NEXT: ^bb0(%[[B:.*]]: tensor<4x8xf32>):
// FUSE-NEXT: braze.group ins(%[[B]]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FUSE: }, {
// FUSE-NEXT: ^bb0(%[[C:.*]]: tensor<4x8xf32>):
// FUSE-NEXT: braze.yield %[[C]]
// LOWER-LABEL: func.func @branches
// LOWER: braze.kernel
// LOWER: braze.switch
// LOWER: braze.kernel ins(%{{.*}} : tensor<4x8xf32>) domain [4, 8] reduce []
// LOWER: braze.yield
// LOWER: braze.kernel
// LOWER: braze.yield
func.func @branches(%i: tensor<i64>, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = braze.sigmoid %x : tensor<4x8xf32>
  %t = braze.mul %s, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %r = braze.switch %i (%t) : (tensor<i64>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %e = braze.exp %a : tensor<4x8xf32>
    %sum = braze.sum %e dims [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = braze.div %e, %sum : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    braze.yield %d : tensor<4x8xf32>
  }, {
  ^bb0(%b: tensor<4x8xf32>):
    %n = braze.neg %b : tensor<4x8xf32>
    %z = braze.add %b, %n : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    %y = braze.mul %z, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    braze.yield %y : tensor<4x8xf32>
  }, {
  ^bb0(%c: tensor<4x8xf32>):
    braze.yield %c : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

// Tests that a while loop's condition and body are fused and lowered inside
// their regions and the loop's values stay region arguments.
// FUSE-LABEL: func.func @loop
// FUSE: braze.while(%{{.*}}, %{{.*}}) extra(%{{.*}})
// FUSE: braze.lt
// FUSE: } do {
// FUSE-NEXT: ^bb0(%[[I:.*]]: tensor<i64>, %[[A:.*]]: tensor<16x64xf32>, %{{.*}}: tensor<i64>):
// FUSE: braze.group ins(%[[A]]) : (tensor<16x64xf32>) -> tensor<16x64xf32>
// FUSE: braze.tanh
// FUSE: braze.mul
// LOWER-LABEL: func.func @loop
// LOWER: braze.while
// LOWER: braze.kernel
// LOWER: } do {
// LOWER: braze.kernel
// COLLAPSE-LABEL: func.func @loop
// COLLAPSE: } do {
// COLLAPSE: braze.reshape %{{.*}} : tensor<16x64xf32> -> tensor<1024xf32>
// COLLAPSE: braze.kernel ins(%{{.*}} : tensor<1024xf32>) domain [1024] reduce []
// SCHEDULE-LABEL: func.func @loop
// SCHEDULE: } do {
// SCHEDULE: braze.kernel {{.*}} attributes {braze.schedule = {index_bits = 32 : i64, strategy = "points"
func.func @loop(%zero: tensor<i64>, %x: tensor<16x64xf32>, %n: tensor<i64>) -> tensor<16x64xf32> {
  %k, %y = braze.while (%zero, %x) extra (%n)
      : (tensor<i64>, tensor<16x64xf32>, tensor<i64>) -> (tensor<i64>, tensor<16x64xf32>) condition {
  ^bb0(%i: tensor<i64>, %a: tensor<16x64xf32>, %l: tensor<i64>):
    %c = braze.lt %i, %l : tensor<i64>, tensor<i64> -> tensor<i1>
    braze.yield %c : tensor<i1>
  } do {
  ^bb0(%i: tensor<i64>, %a: tensor<16x64xf32>, %l: tensor<i64>):
    %one = braze.constant dense<1> : tensor<i64>
    %j = braze.add %i, %one : tensor<i64>, tensor<i64> -> tensor<i64>
    %t = braze.tanh %a : tensor<16x64xf32>
    %h = braze.constant dense<0.5> : tensor<f32>
    %b = braze.mul %t, %h : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf32>
    braze.yield %j, %b : tensor<i64>, tensor<16x64xf32>
  }
  return %y : tensor<16x64xf32>
}

// -----

// Tests that a convolution inside a branch runs channels-last and the kernel
// after it, in the same branch, iterates in NHWC order.
// CHANNELS-LABEL: func.func @conv_branch
// CHANNELS: braze.switch
// CHANNELS: braze.convolution {{.*}} memory_format "channels_last"
// CHANNELS: braze.permute %{{.*}} [0, 2, 3, 1]
// CHANNELS: braze.kernel {{.*}} domain [1, 4, 4, 8]
// CHANNELS: braze.yield
func.func @conv_branch(%p: tensor<i1>, %x: tensor<1x8x4x4xf32>, %w: tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32> {
  %r = braze.switch %p (%x, %w) : (tensor<i1>, tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32> {
  ^bb0(%a: tensor<1x8x4x4xf32>, %k: tensor<8x8x1x1xf32>):
    braze.yield %a : tensor<1x8x4x4xf32>
  }, {
  ^bb0(%a: tensor<1x8x4x4xf32>, %k: tensor<8x8x1x1xf32>):
    %y = braze.convolution %a, %k stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32> -> tensor<1x8x4x4xf32>
    %z = braze.relu %y : tensor<1x8x4x4xf32>
    braze.yield %z : tensor<1x8x4x4xf32>
  }
  return %r : tensor<1x8x4x4xf32>
}
