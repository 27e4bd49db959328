// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-fuse-pointwise{remarks=true recompute-limit=1}))' -split-input-file -verify-diagnostics
// RUN: sed -e '/expected-remark/d' %s | braze-opt -braze-fuse-pointwise -split-input-file 2>&1 | FileCheck %s --check-prefix=QUIET

// The remarks are opt-in: without remarks=true the pass fuses as before and
// says nothing.
// QUIET-NOT: remark
// QUIET: func.func @softmax
// QUIET-NEXT: braze.group
// QUIET: func.func @recompute
// QUIET-NOT: remark

// Tests that each merge of softmax's chain is reported as fused.
func.func @softmax(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %m = braze.max %x dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
  // expected-remark @+1 {{'braze.sub' fused with its producer 'braze.max'}}
  %d = braze.sub %x, %m : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
  // expected-remark @+1 {{'braze.exp' fused with its producer 'braze.sub'}}
  %e = braze.exp %d : tensor<?x64xf32>
  // expected-remark @+1 {{'braze.sum' fused with its producer 'braze.exp'}}
  %s = braze.sum %e dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
  // expected-remark @+1 {{'braze.div' fused with its producer 'braze.exp'}}
  %y = braze.div %e, %s : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Tests the refusal of a rank-dropping reduction's consumer.
func.func @reduction_without_keepdim(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %e = braze.exp %x : tensor<4x8xf32>
  // expected-remark @+1 {{'braze.sum' fused with its producer 'braze.exp'}}
  %s = braze.sum %e dims [1] : tensor<4x8xf32> -> tensor<4xf32>
  // expected-remark @+1 {{'braze.neg' not fused with its producer 'braze.sum': the reduction drops its dims (no keepdim)}}
  %n = braze.neg %s : tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

// Tests the refusal of reductions over different dims.
func.func @different_reduction_dims(%x: tensor<4x8xf32>) -> tensor<1x1xf32> {
  %e = braze.exp %x : tensor<4x8xf32>
  // expected-remark @+1 {{'braze.sum' fused with its producer 'braze.exp'}}
  %c = braze.sum %e dims [0] keepdim : tensor<4x8xf32> -> tensor<1x8xf32>
  // expected-remark @+1 {{'braze.neg' fused with its producer 'braze.sum'}}
  %n = braze.neg %c : tensor<1x8xf32>
  // expected-remark @+1 {{'braze.sum' not fused with its producer 'braze.neg': their groups reduce different dims}}
  %r = braze.sum %n dims [1] keepdim : tensor<1x8xf32> -> tensor<1x1xf32>
  return %r : tensor<1x1xf32>
}

// -----

// Tests the refusal of a merge that would make a group depend on itself
// through the matmul.
func.func @no_cycle_through_gemm(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e = braze.exp %x : tensor<8x8xf32>
  %m = braze.matmul %e, %e : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  // expected-remark @+1 {{'braze.add' not fused with its producer 'braze.exp': a path through an op outside both groups joins them}}
  %y = braze.add %e, %m : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Tests that an op no fusible op feeds gets no remark (the permute is not
// fusible, so the add has no producer to decide about).
func.func @not_fusible_producer(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %t = braze.permute %x [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %s = braze.add %t, %y : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// Tests the refusal of a merge across ranks: one kernel has one domain.
func.func @different_domains(%x: tensor<4x8xf32>, %y: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %e = braze.exp %x : tensor<4x8xf32>
  // expected-remark @+1 {{'braze.add' not fused with its producer 'braze.exp': their iteration domains differ}}
  %s = braze.add %e, %y : tensor<4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return %s : tensor<2x4x8xf32>
}

// -----

// Tests the recomputation decisions: exp is copied into the first group
// after the matmul that reads %x, not into the second (recompute-limit=1).
func.func @recompute(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-remark @+2 {{'braze.exp' recomputed in the group of 'braze.add' at loc(}}
  // expected-remark @+1 {{'braze.exp' not recomputed in the group of 'braze.add' at loc(}}
  %e = braze.exp %x : tensor<4x4xf32>
  // expected-remark @+1 {{'braze.abs' fused with its producer 'braze.exp'}}
  %a = braze.abs %e : tensor<4x4xf32>
  %m = braze.matmul %a, %a : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  // expected-remark @+1 {{'braze.mul' not fused with its producer 'braze.exp': a path through an op outside both groups joins them}}
  %s = braze.mul %e, %m : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  // expected-remark @+1 {{'braze.add' fused with its producer 'braze.mul'}}
  %r = braze.add %s, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %n = braze.matmul %r, %r : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  // expected-remark @+1 {{'braze.sub' not fused with its producer 'braze.exp': a path through an op outside both groups joins them}}
  %t = braze.sub %e, %n : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  // expected-remark @+1 {{'braze.add' fused with its producer 'braze.sub'}}
  %u = braze.add %t, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %u : tensor<4x4xf32>
}

// -----

// Tests that a producer of another rank is not recomputed in a group, even
// when it reads only splat constants (braze-lower-kernels needs one rank per
// group): the rank-0 sqrt stays outside, and the group reads its result.
func.func @recompute_other_rank(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %c = braze.constant dense<1.600000e+01> : tensor<f32>
  // expected-remark @+1 {{'braze.sqrt' not recomputed in the group of 'braze.add' at loc(}}
  %r = braze.sqrt %c : tensor<f32>
  // expected-remark @+1 {{'braze.mul' not fused with its producer 'braze.sqrt': their iteration domains differ}}
  %m = braze.mul %x, %r : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  // expected-remark @+1 {{'braze.add' fused with its producer 'braze.mul'}}
  %s = braze.add %m, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  return %s : tensor<2x3xf32>
}
