// RUN: braze-opt %s -braze-fuse-pointwise -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-fuse-pointwise{recompute-limit=2}))' -split-input-file | FileCheck %s --check-prefix=RECOMPUTE

// Tests that softmax becomes one group: both reductions and the pointwise ops.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xf32>)
// CHECK-NEXT: %[[G:.*]] = braze.group ins(%[[X]]) : (tensor<?x64xf32>) -> tensor<?x64xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[M:.*]] = braze.max %[[A]] dims [1] keepdim
// CHECK-NEXT: %[[D:.*]] = braze.sub %[[A]], %[[M]]
// CHECK-NEXT: %[[E:.*]] = braze.exp %[[D]]
// CHECK-NEXT: %[[S:.*]] = braze.sum %[[E]] dims [1] keepdim
// CHECK-NEXT: %[[Y:.*]] = braze.div %[[E]], %[[S]]
// CHECK-NEXT: braze.yield %[[Y]] : tensor<?x64xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[G]]
func.func @softmax(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %m = braze.max %x dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
  %d = braze.sub %x, %m : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
  %e = braze.exp %d : tensor<?x64xf32>
  %s = braze.sum %e dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
  %y = braze.div %e, %s : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Tests that RMSNorm becomes one group; its splat constants are copied in
// and weights enter as inputs.
// CHECK-LABEL: func.func @rmsnorm
// CHECK-NOT: braze.constant
// CHECK: braze.group ins(%{{.*}}, %{{.*}}) : (tensor<4x?x32xf32>, tensor<32xf32>) -> tensor<4x?x32xf32>
// CHECK: braze.constant dense<9.99999997E-7> : tensor<f32>
// CHECK: braze.mean
// CHECK: braze.rsqrt
// CHECK: braze.yield
// CHECK-NOT: braze.constant
func.func @rmsnorm(%x: tensor<4x?x32xf32>, %w: tensor<32xf32>) -> tensor<4x?x32xf32> {
  %eps = braze.constant dense<1.0e-6> : tensor<f32>
  %sq = braze.mul %x, %x : tensor<4x?x32xf32>, tensor<4x?x32xf32> -> tensor<4x?x32xf32>
  %ms = braze.mean %sq dims [2] keepdim : tensor<4x?x32xf32> -> tensor<4x?x1xf32>
  %v = braze.add %ms, %eps : tensor<4x?x1xf32>, tensor<f32> -> tensor<4x?x1xf32>
  %r = braze.rsqrt %v : tensor<4x?x1xf32>
  %n = braze.mul %x, %r : tensor<4x?x32xf32>, tensor<4x?x1xf32> -> tensor<4x?x32xf32>
  %y = braze.mul %n, %w : tensor<4x?x32xf32>, tensor<32xf32> -> tensor<4x?x32xf32>
  return %y : tensor<4x?x32xf32>
}

// -----

// Tests that a GEMM stays outside: the bias add and GELU after it fuse, the
// matmul itself does not.
// CHECK-LABEL: func.func @gelu_after_bias
// CHECK: %[[MM:.*]] = braze.matmul
// CHECK-NEXT: braze.group ins(%[[MM]], %{{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: braze.add
// CHECK-NEXT: braze.gelu
// CHECK-NEXT: braze.yield
func.func @gelu_after_bias(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %mm = braze.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %a = braze.add %mm, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %g = braze.gelu %a : tensor<8x32xf32>
  return %g : tensor<8x32xf32>
}

// -----

// Tests that fusion never goes across a GEMM: exp feeds both the matmul and
// the add that reads the matmul, so fusing exp with the add would make the
// group depend on itself.
// CHECK-LABEL: func.func @no_cycle_through_gemm
// CHECK-NOT: braze.group
func.func @no_cycle_through_gemm(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e = braze.exp %x : tensor<8x8xf32>
  %m = braze.matmul %e, %e : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %y = braze.add %e, %m : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Tests that a value used outside the group is also a group result, and that
// the group's users keep their order.
// CHECK-LABEL: func.func @shared_intermediate
// CHECK: %[[G:.*]]:2 = braze.group ins(%{{.*}}) : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
// CHECK: braze.yield %{{.*}}, %{{.*}} : tensor<16xf32>, tensor<16xf32>
// CHECK: braze.matmul
// CHECK: return
func.func @shared_intermediate(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<1x1xf32>) {
  %e = braze.exp %x : tensor<16xf32>
  %t = braze.tanh %e : tensor<16xf32>
  %r = braze.reshape %e : tensor<16xf32> -> tensor<1x16xf32>
  %c = braze.reshape %t : tensor<16xf32> -> tensor<16x1xf32>
  %m = braze.matmul %r, %c : tensor<1x16xf32>, tensor<16x1xf32> -> tensor<1x1xf32>
  return %t, %m : tensor<16xf32>, tensor<1x1xf32>
}

// -----

// Tests that a reduction without keepdim ends its group: its rank-1 result
// cannot broadcast back over the rank-2 domain.
// CHECK-LABEL: func.func @reduction_without_keepdim
// CHECK: braze.group
// CHECK: braze.exp
// CHECK: braze.sum %{{.*}} dims [1] :
// CHECK: braze.yield
// CHECK-NEXT: }
// CHECK-NEXT: braze.neg
func.func @reduction_without_keepdim(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %e = braze.exp %x : tensor<4x8xf32>
  %s = braze.sum %e dims [1] : tensor<4x8xf32> -> tensor<4xf32>
  %n = braze.neg %s : tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

// Tests that reductions over different dims end up in different groups.
// CHECK-LABEL: func.func @different_reduction_dims
// CHECK: %[[G:.*]] = braze.group
// CHECK: braze.sum %{{.*}} dims [0] keepdim
// CHECK: braze.neg
// CHECK: braze.yield
// CHECK-NEXT: }
// CHECK-NEXT: braze.sum %[[G]] dims [1] keepdim
func.func @different_reduction_dims(%x: tensor<4x8xf32>) -> tensor<1x1xf32> {
  %e = braze.exp %x : tensor<4x8xf32>
  %c = braze.sum %e dims [0] keepdim : tensor<4x8xf32> -> tensor<1x8xf32>
  %n = braze.neg %c : tensor<1x8xf32>
  %r = braze.sum %n dims [1] keepdim : tensor<1x8xf32> -> tensor<1x1xf32>
  return %r : tensor<1x1xf32>
}

// -----

// Tests that ops of different domains stay apart, and a lone op is no group.
// CHECK-LABEL: func.func @different_domains
// CHECK-NOT: braze.group
func.func @different_domains(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e = braze.exp %x : tensor<4x8xf32>
  %t = braze.permute %e [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %s = braze.add %t, %y : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// Tests bounded recomputation: %s cannot join exp's group (the matmul sits
// between them), so by default that group also writes exp out for it; with
// recompute-limit the second group, which reads %x anyway, recomputes exp.
// CHECK-LABEL: func.func @recompute
// CHECK: braze.group ins(%[[X:.*]]) : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK: braze.matmul
// CHECK: braze.group ins(%{{.*}}, %{{.*}}, %[[X]]) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NOT: braze.exp
// RECOMPUTE-LABEL: func.func @recompute
// RECOMPUTE: braze.group ins(%[[X:.*]]) : (tensor<4x4xf32>) -> tensor<4x4xf32>
// RECOMPUTE: braze.matmul
// RECOMPUTE: braze.group ins(%[[X]], %{{.*}}) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// RECOMPUTE-NEXT: ^bb0
// RECOMPUTE-NEXT: braze.exp
func.func @recompute(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = braze.exp %x : tensor<4x4xf32>
  %a = braze.abs %e : tensor<4x4xf32>
  %m = braze.matmul %a, %a : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %s = braze.mul %e, %m : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %r = braze.add %s, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// Tests that a transcendental on a per-channel value stays out of the group
// that spreads it over an image (it would run once per pixel, not once per
// channel), also with recompute-limit though the group reads its operand;
// a cheap op on the same value joins, and a transcendental on the image's
// own domain fuses as usual.
// CHECK-LABEL: func.func @broadcast_transcendental
// CHECK: %[[S:.*]] = braze.sigmoid %[[G:.*]] : tensor<2x8x1x1xf32>
// CHECK: braze.group ins(%{{.*}}, %[[S]], %[[G]]) : (tensor<2x8x14x14xf32>, tensor<2x8x1x1xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x14x14xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: braze.mul
// CHECK-NEXT: braze.add
// CHECK-NEXT: braze.relu
// CHECK-NEXT: braze.exp
// CHECK-NEXT: braze.mul
// RECOMPUTE-LABEL: func.func @broadcast_transcendental
// RECOMPUTE: %[[S:.*]] = braze.sigmoid
// RECOMPUTE: braze.group ins(%{{.*}}, %[[S]], %{{.*}})
// RECOMPUTE-NOT: braze.sigmoid
// RECOMPUTE: return
func.func @broadcast_transcendental(%x: tensor<2x8x14x14xf32>, %g: tensor<2x8x1x1xf32>) -> tensor<2x8x14x14xf32> {
  %s = braze.sigmoid %g : tensor<2x8x1x1xf32>
  %m = braze.mul %x, %s : tensor<2x8x14x14xf32>, tensor<2x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %a = braze.add %m, %g : tensor<2x8x14x14xf32>, tensor<2x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %r = braze.relu %g : tensor<2x8x1x1xf32>
  %e = braze.exp %a : tensor<2x8x14x14xf32>
  %y = braze.mul %e, %r : tensor<2x8x14x14xf32>, tensor<2x8x1x1xf32> -> tensor<2x8x14x14xf32>
  return %y : tensor<2x8x14x14xf32>
}

// -----

// Tests that a transcendental broadcast to fewer than 4 points each still
// fuses: recomputing it twice costs less than a round trip through memory.
// CHECK-LABEL: func.func @broadcast_twice
// CHECK: braze.group ins(%{{.*}}, %{{.*}}) : (tensor<8x1xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: braze.exp
// CHECK-NEXT: braze.mul
func.func @broadcast_twice(%x: tensor<8x2xf32>, %g: tensor<8x1xf32>) -> tensor<8x2xf32> {
  %e = braze.exp %g : tensor<8x1xf32>
  %m = braze.mul %x, %e : tensor<8x2xf32>, tensor<8x1xf32> -> tensor<8x2xf32>
  return %m : tensor<8x2xf32>
}

// -----

// Tests that recomputation keeps a group at one rank: the rank-0 sqrt of a
// splat constant is computed once outside the rank-2 group that reads it
// (copied in, braze-lower-kernels refused the group).
// RECOMPUTE-LABEL: func.func @recompute_keeps_one_rank
// RECOMPUTE: %[[R:.*]] = braze.sqrt
// RECOMPUTE: braze.group ins(%{{.*}}, %[[R]], %{{.*}})
// RECOMPUTE-NOT: braze.sqrt
// RECOMPUTE: return
func.func @recompute_keeps_one_rank(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %c = braze.constant dense<1.600000e+01> : tensor<f32>
  %r = braze.sqrt %c : tensor<f32>
  %m = braze.mul %x, %r : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %s = braze.add %m, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  return %s : tensor<2x3xf32>
}
