// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion{remarks=true}))' -split-input-file -verify-diagnostics -o /dev/null
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion{pointwise=false reductions=false bias=false}))' -split-input-file | FileCheck %s --check-prefix=OFF
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-epilogue-fusion{extra-outputs=false}))' -split-input-file | FileCheck %s --check-prefix=SINGLE

// With every kind of fusion off, no GEMM is fused.
// OFF-NOT: braze.fused_gemm

// Tests that nn.Linear + ReLU (the weight transposed by a permute, M
// dynamic) becomes one fused GEMM: the permute is read by transpose_rhs,
// the bias is an extra indexed by n, added in the accumulator.
// CHECK-LABEL: func.func @linear_relu
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xf32>, %[[W:.*]]: tensor<32x64xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK-NOT: braze.permute
// CHECK: %[[Y:.*]] = braze.fused_gemm %[[X]], %[[W]] extras(%[[B]] : tensor<32xf32>) indexing ["n"] transpose_rhs accumulator f32 : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32> {
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[BIAS:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[BIAS]] : f32
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[R:.*]] = arith.maximumf %[[S]], %[[ZERO]] : f32
// CHECK-NEXT: braze.gemm_yield %[[R]] : f32
// CHECK: return %[[Y]]
func.func @linear_relu(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %b: tensor<32xf32>) -> tensor<?x32xf32> {
  %t = braze.permute %w [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  // expected-remark @+1 {{'braze.addmm' fused with 1 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 1 extra(s))}}
  %y = braze.addmm %b, %x, %t : tensor<32xf32>, tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  %r = braze.relu %y : tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// -----

// Tests that a Linear on 3-D input (captured as a 2-D addmm between
// reshapes) followed by a residual add is fused through the reshape: the
// residual is read by (m, n) as a [8, 32] view, the result reshaped back;
// alpha and beta scale the product and the bias.
// CHECK-LABEL: func.func @linear_residual_3d
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xf32>, %[[W:.*]]: tensor<64x32xf32>, %[[B:.*]]: tensor<32xf32>, %[[RES:.*]]: tensor<2x4x32xf32>)
// CHECK: %[[RV:.*]] = braze.reshape %[[RES]] : tensor<2x4x32xf32> -> tensor<8x32xf32>
// CHECK: %[[Y:.*]] = braze.fused_gemm %[[X]], %[[W]] extras(%[[B]], %[[RV]] : tensor<32xf32>, tensor<8x32xf32>) indexing ["n", "mn"] accumulator f32
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[BIAS:.*]]: f32, %[[R:.*]]: f32):
// CHECK-NEXT: %[[ALPHA:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[ACC]], %[[ALPHA]] : f32
// CHECK-NEXT: %[[BETA:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT: %[[Q:.*]] = arith.mulf %[[BIAS]], %[[BETA]] : f32
// CHECK-NEXT: %[[E:.*]] = arith.addf %[[P]], %[[Q]] : f32
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[E]], %[[R]] : f32
// CHECK-NEXT: braze.gemm_yield %[[SUM]] : f32
// CHECK: %[[BACK:.*]] = braze.reshape %[[Y]] : tensor<8x32xf32> -> tensor<2x4x32xf32>
// CHECK: return %[[BACK]]
func.func @linear_residual_3d(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>,
                              %res: tensor<2x4x32xf32>) -> tensor<2x4x32xf32> {
  // expected-remark @+1 {{'braze.addmm' fused with 1 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 2 extra(s))}}
  %y = braze.addmm %b, %x, %w {alpha = 2.0 : f64, beta = 0.5 : f64} : tensor<32xf32>, tensor<8x64xf32>, tensor<64x32xf32> -> tensor<8x32xf32>
  %v = braze.reshape %y : tensor<8x32xf32> -> tensor<2x4x32xf32>
  %r = braze.add %v, %res : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  return %r : tensor<2x4x32xf32>
}

// -----

// Tests that a residual add followed by a LayerNorm fuses the add and the
// row sum its mean needs (divided by N after), not the normalisation: the
// subtraction needs the whole row's mean first.
// CHECK-LABEL: func.func @residual_layernorm
// CHECK: %[[Y:.*]]:2 = braze.fused_gemm %{{.*}}, %{{.*}} extras(%{{.*}} : tensor<?x32xf32>) indexing ["mn"] accumulator f32 reductions ["add"] : (tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>, tensor<?xf32>
// CHECK: braze.gemm_yield %[[V:.*]], %[[V]] : f32, f32
// CHECK: %[[S:.*]] = braze.reshape %[[Y]]#1 : tensor<?xf32> -> tensor<?x1xf32>
// CHECK: %[[N:.*]] = braze.constant dense<3.200000e+01> : tensor<f32>
// CHECK: %[[MEAN:.*]] = braze.div %[[S]], %[[N]] : tensor<?x1xf32>, tensor<f32> -> tensor<?x1xf32>
// CHECK: braze.sub %[[Y]]#0, %[[MEAN]]
// CHECK-NOT: braze.mean %[[Y]]#0
func.func @residual_layernorm(%x: tensor<?x64xf32>, %w: tensor<64x32xf32>, %res: tensor<?x32xf32>) -> tensor<?x32xf32> {
  // expected-remark @+1 {{'braze.matmul' fused with 2 op(s) into braze.fused_gemm (1 output(s), 1 row statistic(s), 1 extra(s))}}
  %p = braze.matmul %x, %w : tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  %y = braze.add %p, %res : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  %mean = braze.mean %y dims [1] keepdim : tensor<?x32xf32> -> tensor<?x1xf32>
  // expected-remark @+1 {{'braze.sub' not fused into the epilogue of 'braze.matmul': it needs a row statistic of the product first (the normalisation stays a kernel; the statistic is fused)}}
  %d = braze.sub %y, %mean : tensor<?x32xf32>, tensor<?x1xf32> -> tensor<?x32xf32>
  %sq = braze.mul %d, %d : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  %var = braze.mean %sq dims [1] keepdim : tensor<?x32xf32> -> tensor<?x1xf32>
  %eps = braze.constant dense<1.0e-5> : tensor<f32>
  %ve = braze.add %var, %eps : tensor<?x1xf32>, tensor<f32> -> tensor<?x1xf32>
  %rs = braze.rsqrt %ve : tensor<?x1xf32>
  %out = braze.mul %d, %rs : tensor<?x32xf32>, tensor<?x1xf32> -> tensor<?x32xf32>
  return %out : tensor<?x32xf32>
}

// -----

// Tests that RMSNorm's statistic, the mean of squares, is fused as the sum
// of a squared epilogue value; the square is computed in the epilogue but
// not written (nothing else reads it).
// CHECK-LABEL: func.func @rmsnorm_statistic
// CHECK: %[[Y:.*]]:2 = braze.fused_gemm {{.*}} reductions ["add"] : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>, tensor<4xf32>
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32):
// CHECK-NEXT: %[[SQ:.*]] = arith.mulf %[[ACC]], %[[ACC]] : f32
// CHECK-NEXT: braze.gemm_yield %[[ACC]], %[[SQ]] : f32, f32
func.func @rmsnorm_statistic(%x: tensor<4x64xf32>, %w: tensor<64x32xf32>, %g: tensor<32xf32>) -> tensor<4x32xf32> {
  // expected-remark @+1 {{'braze.matmul' fused with 2 op(s) into braze.fused_gemm (1 output(s), 1 row statistic(s), 0 extra(s))}}
  %y = braze.matmul %x, %w : tensor<4x64xf32>, tensor<64x32xf32> -> tensor<4x32xf32>
  %sq = braze.mul %y, %y : tensor<4x32xf32>, tensor<4x32xf32> -> tensor<4x32xf32>
  %ms = braze.mean %sq dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
  %rs = braze.rsqrt %ms : tensor<4x1xf32>
  // expected-remark @+1 {{'braze.mul' not fused into the epilogue of 'braze.matmul': it needs a row statistic of the product first}}
  %n = braze.mul %y, %rs : tensor<4x32xf32>, tensor<4x1xf32> -> tensor<4x32xf32>
  %out = braze.mul %n, %g : tensor<4x32xf32>, tensor<32xf32> -> tensor<4x32xf32>
  return %out : tensor<4x32xf32>
}

// -----

// Tests that attention scores (a batched product, scaled by a splat
// constant, plus a mask shared by the batch) fuse with softmax's row max;
// the exponent needs the max first.
// CHECK-LABEL: func.func @scores_softmax_max
// CHECK: %[[S:.*]]:2 = braze.fused_gemm %{{.*}}, %{{.*}} extras(%{{.*}} : tensor<8x8xf32>) indexing ["mn"] transpose_rhs accumulator f32 reductions ["max"] : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x8xf32>, tensor<4x8xf32>
// CHECK: %[[MAX:.*]] = braze.reshape %[[S]]#1 : tensor<4x8xf32> -> tensor<4x8x1xf32>
// CHECK: braze.sub %[[S]]#0, %[[MAX]]
func.func @scores_softmax_max(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %mask: tensor<8x8xf32>) -> tensor<4x8x8xf32> {
  %kt = braze.permute %k [0, 2, 1] : tensor<4x8x16xf32> -> tensor<4x16x8xf32>
  // expected-remark @+1 {{'braze.bmm' fused with 3 op(s) into braze.fused_gemm (1 output(s), 1 row statistic(s), 1 extra(s))}}
  %s = braze.bmm %q, %kt : tensor<4x8x16xf32>, tensor<4x16x8xf32> -> tensor<4x8x8xf32>
  %c = braze.constant dense<0.25> : tensor<f32>
  %scaled = braze.mul %s, %c : tensor<4x8x8xf32>, tensor<f32> -> tensor<4x8x8xf32>
  %masked = braze.add %scaled, %mask : tensor<4x8x8xf32>, tensor<8x8xf32> -> tensor<4x8x8xf32>
  %m = braze.max %masked dims [2] keepdim : tensor<4x8x8xf32> -> tensor<4x8x1xf32>
  // expected-remark @+1 {{'braze.sub' not fused into the epilogue of 'braze.bmm': it needs a row statistic of the product first}}
  %d = braze.sub %masked, %m : tensor<4x8x8xf32>, tensor<4x8x1xf32> -> tensor<4x8x8xf32>
  %e = braze.exp %d : tensor<4x8x8xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<4x8x8xf32> -> tensor<4x8x1xf32>
  %p = braze.div %e, %sum : tensor<4x8x8xf32>, tensor<4x8x1xf32> -> tensor<4x8x8xf32>
  return %p : tensor<4x8x8xf32>
}

// -----

// Tests that an epilogue value read by an op outside the epilogue (here the
// pre-activation, returned) becomes an extra output; with extra outputs
// off, the GEMM is not fused.
// CHECK-LABEL: func.func @extra_output
// CHECK: %[[Y:.*]]:2 = braze.fused_gemm {{.*}} -> tensor<4x32xf32>, tensor<4x32xf32>
// CHECK: braze.gemm_yield %[[ACC:.*]], %{{.*}} : f32, f32
// CHECK: return %[[Y]]#0, %[[Y]]#1
// SINGLE-LABEL: func.func @extra_output
// SINGLE: braze.matmul
// SINGLE-NOT: braze.fused_gemm
// SINGLE: return
func.func @extra_output(%x: tensor<4x64xf32>, %w: tensor<64x32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  // expected-remark @+1 {{'braze.matmul' fused with 1 op(s) into braze.fused_gemm (2 output(s), 0 row statistic(s), 0 extra(s))}}
  %y = braze.matmul %x, %w : tensor<4x64xf32>, tensor<64x32xf32> -> tensor<4x32xf32>
  %g = braze.gelu %y : tensor<4x32xf32>
  return %y, %g : tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// Tests that a bf16 product is rounded to bf16 before the epilogue (as the
// library's result), then computes in f32 and rounds where it is written;
// the bf16 residual is widened where it enters.
// CHECK-LABEL: func.func @bf16_chain
// CHECK: braze.fused_gemm {{.*}} extras(%{{.*}} : tensor<4x32xbf16>) indexing ["mn"] accumulator f32 : (tensor<4x64xbf16>, tensor<64x32xbf16>) -> tensor<4x32xbf16>
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[R:.*]]: bf16):
// CHECK-NEXT: %[[RW:.*]] = arith.extf %[[R]] : bf16 to f32
// CHECK-NEXT: %[[P:.*]] = arith.truncf %[[ACC]] : f32 to bf16
// CHECK-NEXT: %[[PW:.*]] = arith.extf %[[P]] : bf16 to f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[PW]], %[[RW]] : f32
// CHECK: %[[O:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: braze.gemm_yield %[[O]] : bf16
func.func @bf16_chain(%x: tensor<4x64xbf16>, %w: tensor<64x32xbf16>, %res: tensor<4x32xbf16>) -> tensor<4x32xbf16> {
  // expected-remark @+1 {{'braze.matmul' fused with 2 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 1 extra(s))}}
  %y = braze.matmul %x, %w : tensor<4x64xbf16>, tensor<64x32xbf16> -> tensor<4x32xbf16>
  %s = braze.add %y, %res : tensor<4x32xbf16>, tensor<4x32xbf16> -> tensor<4x32xbf16>
  %g = braze.silu %s : tensor<4x32xbf16>
  return %g : tensor<4x32xbf16>
}

// -----

// Tests that a cast to f32 and a per-row extra ([M, 1], read by m) join
// the epilogue.
// CHECK-LABEL: func.func @cast_per_row
// CHECK: %[[ROW:.*]] = braze.reshape %{{.*}} : tensor<4x1xf32> -> tensor<4xf32>
// CHECK: braze.fused_gemm {{.*}} extras(%[[ROW]] : tensor<4xf32>) indexing ["m"] accumulator f32 : (tensor<4x64xf16>, tensor<64x32xf16>) -> tensor<4x32xf32>
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @cast_per_row(%x: tensor<4x64xf16>, %w: tensor<64x32xf16>, %row: tensor<4x1xf32>) -> tensor<4x32xf32> {
  // expected-remark @+1 {{'braze.matmul' fused with 2 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 1 extra(s))}}
  %y = braze.matmul %x, %w : tensor<4x64xf16>, tensor<64x32xf16> -> tensor<4x32xf16>
  %c = braze.cast %y : tensor<4x32xf16> to tensor<4x32xf32>
  %m = braze.mul %c, %row : tensor<4x32xf32>, tensor<4x1xf32> -> tensor<4x32xf32>
  return %m : tensor<4x32xf32>
}

// -----

// Tests that a lone GEMM is left to the library: nothing to fuse.
// CHECK-LABEL: func.func @lone_gemm
// CHECK: braze.addmm
// CHECK-NOT: braze.fused_gemm
func.func @lone_gemm(%x: tensor<4x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<4x32xf32> {
  // expected-remark @+1 {{'braze.addmm' not fused with an epilogue: nothing after it fits an epilogue}}
  %y = braze.addmm %b, %x, %w : tensor<32xf32>, tensor<4x64xf32>, tensor<64x32xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

// Tests that integer products stay library calls.
// CHECK-LABEL: func.func @integer_product
// CHECK: braze.matmul
// CHECK-NOT: braze.fused_gemm
func.func @integer_product(%x: tensor<4x8xi32>, %w: tensor<8x2xi32>, %b: tensor<2xi32>) -> tensor<4x2xi32> {
  // expected-remark @+1 {{'braze.matmul' not fused with an epilogue: integer products stay library calls (exact in integers)}}
  %y = braze.matmul %x, %w : tensor<4x8xi32>, tensor<8x2xi32> -> tensor<4x2xi32>
  %r = braze.add %y, %b : tensor<4x2xi32>, tensor<2xi32> -> tensor<4x2xi32>
  return %r : tensor<4x2xi32>
}

// -----

// Tests that an operand broadcast per batch but not per row ([2, 1, 32] in
// a [2, 4, 32] view) is refused: no indexing reads it.
// CHECK-LABEL: func.func @per_batch_operand
// CHECK: braze.matmul
// CHECK-NOT: braze.fused_gemm
func.func @per_batch_operand(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %t: tensor<2x1x32xf32>) -> tensor<2x4x32xf32> {
  // expected-remark @+1 {{'braze.matmul' not fused with an epilogue: nothing after it fits an epilogue}}
  %y = braze.matmul %x, %w : tensor<8x64xf32>, tensor<64x32xf32> -> tensor<8x32xf32>
  %v = braze.reshape %y : tensor<8x32xf32> -> tensor<2x4x32xf32>
  // expected-remark @+1 {{'braze.add' not fused into the epilogue of 'braze.matmul': an operand of shape [2, 1, 32] broadcasts in a way the epilogue cannot index (by (m, n), n, m or a scalar)}}
  %r = braze.add %v, %t : tensor<2x4x32xf32>, tensor<2x1x32xf32> -> tensor<2x4x32xf32>
  return %r : tensor<2x4x32xf32>
}

// -----

// Tests that the mean of a bf16 value is refused (dividing a rounded
// statistic would round twice), while the add before it is fused.
// CHECK-LABEL: func.func @bf16_mean
// CHECK: braze.fused_gemm {{.*}} accumulator f32 : (tensor<4x64xbf16>, tensor<64x32xbf16>) -> tensor<4x32xbf16>
// CHECK: braze.mean
func.func @bf16_mean(%x: tensor<4x64xbf16>, %w: tensor<64x32xbf16>, %b: tensor<32xbf16>) -> tensor<4x1xbf16> {
  // expected-remark @+1 {{'braze.matmul' fused with 1 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 1 extra(s))}}
  %y = braze.matmul %x, %w : tensor<4x64xbf16>, tensor<64x32xbf16> -> tensor<4x32xbf16>
  %s = braze.add %y, %b : tensor<4x32xbf16>, tensor<32xbf16> -> tensor<4x32xbf16>
  // expected-remark @+1 {{'braze.mean' not fused into the epilogue of 'braze.matmul': the mean of an f16/bf16 value would change eager's rounding (eager divides the f32 sum and rounds once)}}
  %m = braze.mean %s dims [1] keepdim : tensor<4x32xbf16> -> tensor<4x1xbf16>
  return %m : tensor<4x1xbf16>
}

// -----

// Tests that an operand computed from the product by an op outside the
// epilogue (another GEMM reading it) is refused: the fused GEMM would
// depend on itself. That other GEMM takes the op instead, reading the
// first product as an extra.
// CHECK-LABEL: func.func @operand_from_product
// CHECK: %[[P:.*]] = braze.matmul
// CHECK: braze.fused_gemm %[[P]], %{{.*}} extras(%[[P]] : tensor<8x8xf32>) indexing ["mn"]
func.func @operand_from_product(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-remark @+1 {{'braze.matmul' not fused with an epilogue: nothing after it fits an epilogue}}
  %p = braze.matmul %x, %w : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  // expected-remark @+1 {{'braze.matmul' fused with 1 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 1 extra(s))}}
  %q = braze.matmul %p, %w : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  // expected-remark @+1 {{'braze.mul' not fused into the epilogue of 'braze.matmul': another operand depends on the product through an op outside the epilogue}}
  %r = braze.mul %p, %q : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Tests that reductions over other dims than N, and min, are refused.
// CHECK-LABEL: func.func @other_reductions
// CHECK: braze.fused_gemm {{.*}} -> tensor<4x32xf32> {
// CHECK: braze.sum %{{.*}} dims [0]
// CHECK: braze.min
func.func @other_reductions(%x: tensor<4x64xf32>, %w: tensor<64x32xf32>) -> (tensor<1x32xf32>, tensor<4x1xf32>) {
  // expected-remark @+1 {{'braze.matmul' fused with 1 op(s) into braze.fused_gemm (1 output(s), 0 row statistic(s), 0 extra(s))}}
  %y = braze.matmul %x, %w : tensor<4x64xf32>, tensor<64x32xf32> -> tensor<4x32xf32>
  %e = braze.exp %y : tensor<4x32xf32>
  // expected-remark @+1 {{'braze.sum' not fused into the epilogue of 'braze.matmul': it reduces other dims than the product's rows (N)}}
  %c = braze.sum %e dims [0] keepdim : tensor<4x32xf32> -> tensor<1x32xf32>
  // expected-remark @+1 {{'braze.min' not fused into the epilogue of 'braze.matmul': only sum, mean and max are row statistics of the epilogue}}
  %m = braze.min %e dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
  return %c, %m : tensor<1x32xf32>, tensor<4x1xf32>
}
