// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-form-attention))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-form-attention{remarks=true}))' -split-input-file -verify-diagnostics -o /dev/null

// Tests that BERT's eager attention (rank-4 q, k, v merged into rank-3
// products, scores divided by sqrt(64), an additive mask) becomes one
// braze.attention over the rank-4 tensors: k is read through its permute,
// and the product's reshape back to rank 4 reads the attention itself.
// CHECK-LABEL: func.func @bert
// CHECK-SAME: (%[[Q:.*]]: tensor<2x12x128x64xf32>, %[[K:.*]]: tensor<2x12x128x64xf32>, %[[V:.*]]: tensor<2x12x128x64xf32>, %[[M:.*]]: tensor<2x1x1x128xf32>)
// CHECK-NEXT: %[[O:.*]] = braze.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] scale 1.250000e-01 masked_rows_nan
// CHECK-NEXT: return %[[O]] : tensor<2x12x128x64xf32>
func.func @bert(%q: tensor<2x12x128x64xf32>, %k: tensor<2x12x128x64xf32>, %v: tensor<2x12x128x64xf32>, %mask: tensor<2x1x1x128xf32>) -> tensor<2x12x128x64xf32> {
  %kt = braze.permute %k [0, 1, 3, 2] : tensor<2x12x128x64xf32> -> tensor<2x12x64x128xf32>
  %q3 = braze.reshape %q : tensor<2x12x128x64xf32> -> tensor<24x128x64xf32>
  %kt3 = braze.reshape %kt : tensor<2x12x64x128xf32> -> tensor<24x64x128xf32>
  %s3 = braze.bmm %q3, %kt3 : tensor<24x128x64xf32>, tensor<24x64x128xf32> -> tensor<24x128x128xf32>
  %s = braze.reshape %s3 : tensor<24x128x128xf32> -> tensor<2x12x128x128xf32>
  %c8 = braze.constant dense<8.0> : tensor<f32>
  %scaled = braze.div %s, %c8 : tensor<2x12x128x128xf32>, tensor<f32> -> tensor<2x12x128x128xf32>
  %x = braze.add %scaled, %mask : tensor<2x12x128x128xf32>, tensor<2x1x1x128xf32> -> tensor<2x12x128x128xf32>
  %max = braze.max %x dims [3] keepdim : tensor<2x12x128x128xf32> -> tensor<2x12x128x1xf32>
  %shifted = braze.sub %x, %max : tensor<2x12x128x128xf32>, tensor<2x12x128x1xf32> -> tensor<2x12x128x128xf32>
  %e = braze.exp %shifted : tensor<2x12x128x128xf32>
  %sum = braze.sum %e dims [3] keepdim : tensor<2x12x128x128xf32> -> tensor<2x12x128x1xf32>
  %p = braze.div %e, %sum : tensor<2x12x128x128xf32>, tensor<2x12x128x1xf32> -> tensor<2x12x128x128xf32>
  %p3 = braze.reshape %p : tensor<2x12x128x128xf32> -> tensor<24x128x128xf32>
  %v3 = braze.reshape %v : tensor<2x12x128x64xf32> -> tensor<24x128x64xf32>
  // expected-remark @+1 {{'braze.bmm' of a softmax formed into braze.attention (additive mask, scale 0.125)}}
  %o3 = braze.bmm %p3, %v3 : tensor<24x128x128xf32>, tensor<24x128x64xf32> -> tensor<24x128x64xf32>
  %o = braze.reshape %o3 : tensor<24x128x64xf32> -> tensor<2x12x128x64xf32>
  return %o : tensor<2x12x128x64xf32>
}

// -----

// Tests a causal masked_fill(~causal, -inf) with the sequence length
// dynamic: the `not` is undone (the mask keeps where `causal` is true),
// the reshapes carry dynamic sizes, and the result is read in rank 3
// through a new reshape.
// CHECK-LABEL: func.func @masked_fill_dynamic
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x?x64xf32>, %[[K:.*]]: tensor<2x8x?x64xf32>, %[[V:.*]]: tensor<2x8x?x64xf32>, %[[C:.*]]: tensor<?x?xi1>, %{{.*}}: index)
// CHECK-NOT: braze.not
// CHECK: %[[O:.*]] = braze.attention %[[Q]], %[[K]], %[[V]] mask %[[C]] scale 1.250000e-01 masked_rows_nan : tensor<2x8x?x64xf32>, tensor<2x8x?x64xf32>, tensor<2x8x?x64xf32>, tensor<?x?xi1> -> tensor<2x8x?x64xf32>
// CHECK-NEXT: %[[R:.*]] = braze.reshape %[[O]] : tensor<2x8x?x64xf32> -> tensor<16x?x64xf32>
// CHECK-NEXT: return %[[R]]
func.func @masked_fill_dynamic(%q: tensor<2x8x?x64xf32>, %k: tensor<2x8x?x64xf32>, %v: tensor<2x8x?x64xf32>, %causal: tensor<?x?xi1>, %n: index) -> tensor<16x?x64xf32> {
  %kt = braze.permute %k [0, 1, 3, 2] : tensor<2x8x?x64xf32> -> tensor<2x8x64x?xf32>
  %q3 = braze.reshape %q : tensor<2x8x?x64xf32> -> tensor<16x?x64xf32>
  %kt3 = braze.reshape %kt : tensor<2x8x64x?xf32> -> tensor<16x64x?xf32>
  %s3 = braze.bmm %q3, %kt3 : tensor<16x?x64xf32>, tensor<16x64x?xf32> -> tensor<16x?x?xf32>
  %s = braze.reshape %s3 sizes [%n, %n] : tensor<16x?x?xf32> -> tensor<2x8x?x?xf32>
  %c = braze.constant dense<0.125> : tensor<f32>
  %scaled = braze.mul %c, %s : tensor<f32>, tensor<2x8x?x?xf32> -> tensor<2x8x?x?xf32>
  %masked = braze.not %causal : tensor<?x?xi1>
  %ninf = braze.constant dense<0xFF800000> : tensor<f32>
  %x = braze.where %masked, %ninf, %scaled : tensor<?x?xi1>, tensor<f32>, tensor<2x8x?x?xf32> -> tensor<2x8x?x?xf32>
  %max = braze.max %x dims [3] keepdim : tensor<2x8x?x?xf32> -> tensor<2x8x?x1xf32>
  %shifted = braze.sub %x, %max : tensor<2x8x?x?xf32>, tensor<2x8x?x1xf32> -> tensor<2x8x?x?xf32>
  %e = braze.exp %shifted : tensor<2x8x?x?xf32>
  %sum = braze.sum %e dims [3] keepdim : tensor<2x8x?x?xf32> -> tensor<2x8x?x1xf32>
  %p = braze.div %e, %sum : tensor<2x8x?x?xf32>, tensor<2x8x?x1xf32> -> tensor<2x8x?x?xf32>
  %p3 = braze.reshape %p sizes [%n, %n] : tensor<2x8x?x?xf32> -> tensor<16x?x?xf32>
  %v3 = braze.reshape %v : tensor<2x8x?x64xf32> -> tensor<16x?x64xf32>
  // expected-remark @+1 {{formed into braze.attention (boolean mask, scale 0.125)}}
  %o3 = braze.bmm %p3, %v3 : tensor<16x?x?xf32>, tensor<16x?x64xf32> -> tensor<16x?x64xf32>
  return %o3 : tensor<16x?x64xf32>
}

// -----

// Tests a boolean mask selected the other way round (the fill where the
// condition is true, with no `not` to undo): the mask becomes its `not`.
// A rank-3 attention with no scale: scale 1, and k^T permuted back.
// CHECK-LABEL: func.func @fill_on_true
// CHECK-SAME: (%[[Q:.*]]: tensor<4x16x8xf32>, %[[KT:.*]]: tensor<4x8x16xf32>, %[[V:.*]]: tensor<4x16x8xf32>, %[[PAD:.*]]: tensor<4x1x16xi1>)
// CHECK-DAG: %[[K:.*]] = braze.permute %[[KT]] [0, 2, 1]
// CHECK-DAG: %[[KEEP:.*]] = braze.not %[[PAD]]
// CHECK: braze.attention %[[Q]], %[[K]], %[[V]] mask %[[KEEP]] scale 1.000000e+00 masked_rows_nan
func.func @fill_on_true(%q: tensor<4x16x8xf32>, %kt: tensor<4x8x16xf32>, %v: tensor<4x16x8xf32>, %pad: tensor<4x1x16xi1>) -> tensor<4x16x8xf32> {
  %s = braze.bmm %q, %kt : tensor<4x16x8xf32>, tensor<4x8x16xf32> -> tensor<4x16x16xf32>
  %ninf = braze.constant dense<0xFF800000> : tensor<f32>
  %x = braze.where %pad, %ninf, %s : tensor<4x1x16xi1>, tensor<f32>, tensor<4x16x16xf32> -> tensor<4x16x16xf32>
  %max = braze.max %x dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  %e = braze.exp %shifted : tensor<4x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %p = braze.div %e, %sum : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  // expected-remark @+1 {{formed into braze.attention (boolean mask, scale 1)}}
  %o = braze.bmm %p, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>
  return %o : tensor<4x16x8xf32>
}

// -----

// Tests a bf16 attention whose softmax runs in f32 (HF's
// softmax(..., dtype=float32).to(q.dtype)): both casts are taken.
// CHECK-LABEL: func.func @bf16_f32_softmax
// CHECK-NOT: braze.cast
// CHECK: braze.attention %{{.*}}, %{{.*}}, %{{.*}} scale 1.250000e-01 masked_rows_nan : tensor<2x16x64xbf16>
// CHECK-NOT: braze.cast
func.func @bf16_f32_softmax(%q: tensor<2x16x64xbf16>, %k: tensor<2x16x64xbf16>, %v: tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16> {
  %kt = braze.permute %k [0, 2, 1] : tensor<2x16x64xbf16> -> tensor<2x64x16xbf16>
  %s = braze.bmm %q, %kt : tensor<2x16x64xbf16>, tensor<2x64x16xbf16> -> tensor<2x16x16xbf16>
  %c = braze.constant dense<1.250000e-01> : tensor<bf16>
  %scaled = braze.mul %s, %c : tensor<2x16x16xbf16>, tensor<bf16> -> tensor<2x16x16xbf16>
  %x = braze.cast %scaled : tensor<2x16x16xbf16> to tensor<2x16x16xf32>
  %max = braze.max %x dims [2] keepdim : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  %e = braze.exp %shifted : tensor<2x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %p32 = braze.div %e, %sum : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  %p = braze.cast %p32 : tensor<2x16x16xf32> to tensor<2x16x16xbf16>
  // expected-remark @+1 {{formed into braze.attention (no mask, scale 0.125)}}
  %o = braze.bmm %p, %v : tensor<2x16x16xbf16>, tensor<2x16x64xbf16> -> tensor<2x16x64xbf16>
  return %o : tensor<2x16x64xbf16>
}

// -----

// Tests Gemma 2's soft-capped scores (bf16, an f32 softmax): ((s * 0.125) /
// 50) through tanh, times 50, then its additive mask: softcap 50, and the
// factors under the tanh times the cap as the scale (0.125).
// CHECK-LABEL: func.func @gemma2_softcap
// CHECK-NOT: braze.tanh
// CHECK: braze.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale 1.250000e-01 softcap 5.000000e+01 masked_rows_nan : tensor<2x16x64xbf16>
// CHECK-NOT: braze.tanh
func.func @gemma2_softcap(%q: tensor<2x16x64xbf16>, %k: tensor<2x16x64xbf16>, %v: tensor<2x16x64xbf16>, %m: tensor<1x16x16xbf16>) -> tensor<2x16x64xbf16> {
  %kt = braze.permute %k [0, 2, 1] : tensor<2x16x64xbf16> -> tensor<2x64x16xbf16>
  %s = braze.bmm %q, %kt : tensor<2x16x64xbf16>, tensor<2x64x16xbf16> -> tensor<2x16x16xbf16>
  %c = braze.constant dense<1.250000e-01> : tensor<bf16>
  %scaled = braze.mul %s, %c : tensor<2x16x16xbf16>, tensor<bf16> -> tensor<2x16x16xbf16>
  %cap = braze.constant dense<5.000000e+01> : tensor<bf16>
  %inner = braze.div %scaled, %cap : tensor<2x16x16xbf16>, tensor<bf16> -> tensor<2x16x16xbf16>
  %t = braze.tanh %inner : tensor<2x16x16xbf16>
  %capped = braze.mul %t, %cap : tensor<2x16x16xbf16>, tensor<bf16> -> tensor<2x16x16xbf16>
  %masked = braze.add %capped, %m : tensor<2x16x16xbf16>, tensor<1x16x16xbf16> -> tensor<2x16x16xbf16>
  %x = braze.cast %masked : tensor<2x16x16xbf16> to tensor<2x16x16xf32>
  %max = braze.max %x dims [2] keepdim : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  %e = braze.exp %shifted : tensor<2x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %p32 = braze.div %e, %sum : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  %p = braze.cast %p32 : tensor<2x16x16xf32> to tensor<2x16x16xbf16>
  // expected-remark @+1 {{formed into braze.attention (additive mask, scale 0.125, softcap 50)}}
  %o = braze.bmm %p, %v : tensor<2x16x16xbf16>, tensor<2x16x64xbf16> -> tensor<2x16x64xbf16>
  return %o : tensor<2x16x64xbf16>
}

// -----

// Tests a tanh of the scores with no constant multiplying it (the scores
// are then not q @ k^T through a scale and a mask): left as it is.
// CHECK-LABEL: func.func @tanh_without_cap
// CHECK-NOT: braze.attention
// CHECK: braze.tanh
func.func @tanh_without_cap(%q: tensor<2x16x64xf32>, %kt: tensor<2x64x16xf32>, %v: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %s = braze.bmm %q, %kt : tensor<2x16x64xf32>, tensor<2x64x16xf32> -> tensor<2x16x16xf32>
  %masked = braze.tanh %s : tensor<2x16x16xf32>
  %max = braze.max %masked dims [2] keepdim : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %shifted = braze.sub %masked, %max : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  %e = braze.exp %shifted : tensor<2x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %p32 = braze.div %e, %sum : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  // expected-remark @+1 {{not formed into braze.attention: the scores pass through tanh without a constant cap multiplying it}}
  %o = braze.bmm %p32, %v : tensor<2x16x16xf32>, tensor<2x16x64xf32> -> tensor<2x16x64xf32>
  return %o : tensor<2x16x64xf32>
}

// -----

// Tests a cap below 0 around the tanh: not a soft cap, left as it is.
// CHECK-LABEL: func.func @negative_cap
// CHECK-NOT: braze.attention
func.func @negative_cap(%q: tensor<2x16x64xf32>, %kt: tensor<2x64x16xf32>, %v: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %s = braze.bmm %q, %kt : tensor<2x16x64xf32>, tensor<2x64x16xf32> -> tensor<2x16x16xf32>
  %t = braze.tanh %s : tensor<2x16x16xf32>
  %cap = braze.constant dense<-3.000000e+01> : tensor<f32>
  %masked = braze.mul %t, %cap : tensor<2x16x16xf32>, tensor<f32> -> tensor<2x16x16xf32>
  %max = braze.max %masked dims [2] keepdim : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %shifted = braze.sub %masked, %max : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  %e = braze.exp %shifted : tensor<2x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %p32 = braze.div %e, %sum : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  // expected-remark @+1 {{not formed into braze.attention: the scores are soft-capped by -30, not a positive cap}}
  %o = braze.bmm %p32, %v : tensor<2x16x16xf32>, tensor<2x16x64xf32> -> tensor<2x16x64xf32>
  return %o : tensor<2x16x64xf32>
}

// -----

// Tests that returned attention weights (HF's output_attentions) keep the
// spelled-out form: the weights would have to be written anyway.
// CHECK-LABEL: func.func @weights_returned
// CHECK-NOT: braze.attention
// CHECK: braze.bmm
// CHECK: braze.bmm
func.func @weights_returned(%q: tensor<4x16x8xf32>, %kt: tensor<4x8x16xf32>, %v: tensor<4x16x8xf32>) -> (tensor<4x16x8xf32>, tensor<4x16x16xf32>) {
  %s = braze.bmm %q, %kt : tensor<4x16x8xf32>, tensor<4x8x16xf32> -> tensor<4x16x16xf32>
  %max = braze.max %s dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %shifted = braze.sub %s, %max : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  %e = braze.exp %shifted : tensor<4x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %p = braze.div %e, %sum : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  // expected-remark @+1 {{'braze.bmm' of a softmax not formed into braze.attention: 'braze.div' (the scores or the weights) is read outside the attention}}
  %o = braze.bmm %p, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>
  return %o, %p : tensor<4x16x8xf32>, tensor<4x16x16xf32>
}

// -----

// Tests that a finite fill far below any score (GPT-2's and HF's eager
// torch.where(causal, w, finfo.min)) is read as the additive mask
// where(keep, 0, fill): a score added to it rounds to the fill, so a fully
// masked row gets uniform weights, as eager's. A fill a score would move
// (f16's finfo.min, -65504) is refused.
// CHECK-LABEL: func.func @finite_fill
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<4x16x8xf32>, %[[KT:[^:]*]]: tensor<4x8x16xf32>, %[[V:[^:]*]]: tensor<4x16x8xf32>, %[[KEEP:[^:]*]]: tensor<16x16xi1>, %[[F16:[^:]*]]: tensor<4x16x16xf16>
// CHECK-DAG: %[[MIN:.*]] = braze.constant dense<-3.40282347E+38> : tensor<f32>
// CHECK-DAG: %[[ZERO:.*]] = braze.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[M:.*]] = braze.where %[[KEEP]], %[[ZERO]], %[[MIN]] : tensor<16x16xi1>, tensor<f32>, tensor<f32> -> tensor<16x16xf32>
// CHECK: braze.attention %[[Q]], %{{.*}}, %[[V]] mask %[[M]] scale 1.000000e+00 masked_rows_nan
// CHECK-NOT: braze.exp
// CHECK: braze.exp
func.func @finite_fill(%q: tensor<4x16x8xf32>, %kt: tensor<4x8x16xf32>, %v: tensor<4x16x8xf32>, %keep: tensor<16x16xi1>, %s16: tensor<4x16x16xf16>, %v16: tensor<4x16x8xf16>) -> (tensor<4x16x8xf32>, tensor<4x16x8xf16>) {
  %s = braze.bmm %q, %kt : tensor<4x16x8xf32>, tensor<4x8x16xf32> -> tensor<4x16x16xf32>
  %min = braze.constant dense<-3.40282347E+38> : tensor<f32>
  %x = braze.where %keep, %s, %min : tensor<16x16xi1>, tensor<4x16x16xf32>, tensor<f32> -> tensor<4x16x16xf32>
  %max = braze.max %x dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  %e = braze.exp %shifted : tensor<4x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %p = braze.div %e, %sum : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  // expected-remark @+1 {{formed into braze.attention (additive mask, scale 1)}}
  %o = braze.bmm %p, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>
  %s2 = braze.bmm %s16, %s16 : tensor<4x16x16xf16>, tensor<4x16x16xf16> -> tensor<4x16x16xf16>
  %min16 = braze.constant dense<-6.550400e+04> : tensor<f16>
  %x16 = braze.where %keep, %s2, %min16 : tensor<16x16xi1>, tensor<4x16x16xf16>, tensor<f16> -> tensor<4x16x16xf16>
  %max16 = braze.max %x16 dims [2] keepdim : tensor<4x16x16xf16> -> tensor<4x16x1xf16>
  %shifted16 = braze.sub %x16, %max16 : tensor<4x16x16xf16>, tensor<4x16x1xf16> -> tensor<4x16x16xf16>
  %e16 = braze.exp %shifted16 : tensor<4x16x16xf16>
  %sum16 = braze.sum %e16 dims [2] keepdim : tensor<4x16x16xf16> -> tensor<4x16x1xf16>
  %p16 = braze.div %e16, %sum16 : tensor<4x16x16xf16>, tensor<4x16x1xf16> -> tensor<4x16x16xf16>
  // expected-remark @+1 {{not formed into braze.attention: the mask fills with -65504, not minus infinity nor below -1e30}}
  %o16 = braze.bmm %p16, %v16 : tensor<4x16x16xf16>, tensor<4x16x8xf16> -> tensor<4x16x8xf16>
  return %o, %o16 : tensor<4x16x8xf32>, tensor<4x16x8xf16>
}

// -----

// Tests that a NaN fill is no mask: refused, not read as minus infinity.
// CHECK-LABEL: func.func @nan_fill
// CHECK-NOT: braze.attention
func.func @nan_fill(%q: tensor<4x16x8xf32>, %kt: tensor<4x8x16xf32>, %v: tensor<4x16x8xf32>, %keep: tensor<16x16xi1>) -> tensor<4x16x8xf32> {
  %s = braze.bmm %q, %kt : tensor<4x16x8xf32>, tensor<4x8x16xf32> -> tensor<4x16x16xf32>
  %nan = braze.constant dense<0x7FC00000> : tensor<f32>
  %x = braze.where %keep, %s, %nan : tensor<16x16xi1>, tensor<4x16x16xf32>, tensor<f32> -> tensor<4x16x16xf32>
  %max = braze.max %x dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  %e = braze.exp %shifted : tensor<4x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %p = braze.div %e, %sum : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  // expected-remark @+1 {{not formed into braze.attention: the mask fills with nan, not minus infinity}}
  %o = braze.bmm %p, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>
  return %o : tensor<4x16x8xf32>
}

// -----

// Tests that scores scaled by a tensor (not a constant) are left alone.
// CHECK-LABEL: func.func @tensor_scale
// CHECK-NOT: braze.attention
func.func @tensor_scale(%q: tensor<4x16x8xf32>, %kt: tensor<4x8x16xf32>, %v: tensor<4x16x8xf32>, %t: tensor<f32>) -> tensor<4x16x8xf32> {
  %s = braze.bmm %q, %kt : tensor<4x16x8xf32>, tensor<4x8x16xf32> -> tensor<4x16x16xf32>
  %x = braze.mul %s, %t : tensor<4x16x16xf32>, tensor<f32> -> tensor<4x16x16xf32>
  %max = braze.max %x dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  %e = braze.exp %shifted : tensor<4x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %p = braze.div %e, %sum : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  // expected-remark @+1 {{not formed into braze.attention: the scores are scaled by a tensor, not a constant}}
  %o = braze.bmm %p, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>
  return %o : tensor<4x16x8xf32>
}

// -----

// Tests that a softmax over another dim than the last, and a product of
// something that is not a softmax, are not attention: no remark.
// CHECK-LABEL: func.func @not_attention
// CHECK-NOT: braze.attention
func.func @not_attention(%a: tensor<4x16x16xf32>, %v: tensor<4x16x8xf32>) -> (tensor<4x16x8xf32>, tensor<4x16x8xf32>) {
  %max = braze.max %a dims [1] keepdim : tensor<4x16x16xf32> -> tensor<4x1x16xf32>
  %shifted = braze.sub %a, %max : tensor<4x16x16xf32>, tensor<4x1x16xf32> -> tensor<4x16x16xf32>
  %e = braze.exp %shifted : tensor<4x16x16xf32>
  %sum = braze.sum %e dims [1] keepdim : tensor<4x16x16xf32> -> tensor<4x1x16xf32>
  %p = braze.div %e, %sum : tensor<4x16x16xf32>, tensor<4x1x16xf32> -> tensor<4x16x16xf32>
  %o = braze.bmm %p, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>
  %r = braze.relu %a : tensor<4x16x16xf32>
  %o2 = braze.bmm %r, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>
  return %o, %o2 : tensor<4x16x8xf32>, tensor<4x16x8xf32>
}

// -----

// Tests q, k and v sliced out of one [3, B, H, L, E] projection (each
// merged to rank 3 from rank 5): each is read through a reshape of its own
// to the frame [B, H, ...].
// CHECK-LABEL: func.func @sliced_qkv
// CHECK-DAG: %[[Q:.*]] = braze.reshape %{{.*}} : tensor<8x9x4xf32> -> tensor<2x4x9x4xf32>
// CHECK-DAG: %[[V:.*]] = braze.reshape %{{.*}} : tensor<8x9x4xf32> -> tensor<2x4x9x4xf32>
// CHECK: %[[O:.*]] = braze.attention %[[Q]], %{{.*}}, %[[V]] scale 5.000000e-01 masked_rows_nan
// CHECK-NEXT: return %[[O]]
func.func @sliced_qkv(%qkv: tensor<3x2x4x9x4xf32>) -> tensor<2x4x9x4xf32> {
  %q5 = braze.slice %qkv dim 0 [0 : 1 : 1] : tensor<3x2x4x9x4xf32> -> tensor<1x2x4x9x4xf32>
  %k5 = braze.slice %qkv dim 0 [1 : 2 : 1] : tensor<3x2x4x9x4xf32> -> tensor<1x2x4x9x4xf32>
  %v5 = braze.slice %qkv dim 0 [2 : 3 : 1] : tensor<3x2x4x9x4xf32> -> tensor<1x2x4x9x4xf32>
  %k = braze.reshape %k5 : tensor<1x2x4x9x4xf32> -> tensor<2x4x9x4xf32>
  %kt = braze.permute %k [0, 1, 3, 2] : tensor<2x4x9x4xf32> -> tensor<2x4x4x9xf32>
  %q3 = braze.reshape %q5 : tensor<1x2x4x9x4xf32> -> tensor<8x9x4xf32>
  %kt3 = braze.reshape %kt : tensor<2x4x4x9xf32> -> tensor<8x4x9xf32>
  %s3 = braze.bmm %q3, %kt3 : tensor<8x9x4xf32>, tensor<8x4x9xf32> -> tensor<8x9x9xf32>
  %s = braze.reshape %s3 : tensor<8x9x9xf32> -> tensor<2x4x9x9xf32>
  %c = braze.constant dense<5.000000e-01> : tensor<f32>
  %x = braze.mul %s, %c : tensor<2x4x9x9xf32>, tensor<f32> -> tensor<2x4x9x9xf32>
  %max = braze.max %x dims [3] keepdim : tensor<2x4x9x9xf32> -> tensor<2x4x9x1xf32>
  %shifted = braze.sub %x, %max : tensor<2x4x9x9xf32>, tensor<2x4x9x1xf32> -> tensor<2x4x9x9xf32>
  %e = braze.exp %shifted : tensor<2x4x9x9xf32>
  %sum = braze.sum %e dims [3] keepdim : tensor<2x4x9x9xf32> -> tensor<2x4x9x1xf32>
  %p = braze.div %e, %sum : tensor<2x4x9x9xf32>, tensor<2x4x9x1xf32> -> tensor<2x4x9x9xf32>
  %p3 = braze.reshape %p : tensor<2x4x9x9xf32> -> tensor<8x9x9xf32>
  %v3 = braze.reshape %v5 : tensor<1x2x4x9x4xf32> -> tensor<8x9x4xf32>
  // expected-remark @+1 {{formed into braze.attention (no mask, scale 0.5)}}
  %o3 = braze.bmm %p3, %v3 : tensor<8x9x9xf32>, tensor<8x9x4xf32> -> tensor<8x9x4xf32>
  %o = braze.reshape %o3 : tensor<8x9x4xf32> -> tensor<2x4x9x4xf32>
  return %o : tensor<2x4x9x4xf32>
}

// -----

// Tests grouped-query attention written with repeated heads (HF's
// repeat_kv: 2 key/value heads, each repeated for 2 query heads): the
// attention reads the 2 unrepeated heads with `gqa`, and the repeat (its
// reshapes and expand) is gone.
// CHECK-LABEL: func.func @repeated_heads
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x32x16xf32>, %[[K:.*]]: tensor<2x2x32x16xf32>, %[[V:.*]]: tensor<2x2x32x16xf32>
// CHECK-NOT: braze.expand
// CHECK: braze.attention %[[Q]], %[[K]], %[[V]] mask %{{.*}} scale 2.500000e-01 gqa : tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>
func.func @repeated_heads(%q: tensor<2x4x32x16xf32>, %k: tensor<2x2x32x16xf32>, %v: tensor<2x2x32x16xf32>, %m: tensor<2x1x32x32xi1>) -> tensor<2x4x32x16xf32> {
  %k1 = braze.reshape %k : tensor<2x2x32x16xf32> -> tensor<2x2x1x32x16xf32>
  %kg = braze.expand %k1 : tensor<2x2x1x32x16xf32> -> tensor<2x2x2x32x16xf32>
  %kr = braze.reshape %kg : tensor<2x2x2x32x16xf32> -> tensor<2x4x32x16xf32>
  %v1 = braze.reshape %v : tensor<2x2x32x16xf32> -> tensor<2x2x1x32x16xf32>
  %vg = braze.expand %v1 : tensor<2x2x1x32x16xf32> -> tensor<2x2x2x32x16xf32>
  %vr = braze.reshape %vg : tensor<2x2x2x32x16xf32> -> tensor<2x4x32x16xf32>
  // expected-remark @+1 {{braze.attention reads its grouped key/value heads in place (gqa, group 2)}}
  %o = braze.attention %q, %kr, %vr mask %m scale 0.25 : tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x1x32x32xi1> -> tensor<2x4x32x16xf32>
  return %o : tensor<2x4x32x16xf32>
}

// -----

// Tests repeats that are not grouped heads: the key repeated but not the
// value, and heads tiled (the inserted dim before the heads: query head h
// reads key head h % 2, not h / 2). Both stay as they are.
// CHECK-LABEL: func.func @not_grouped
// CHECK-NOT: gqa
func.func @not_grouped(%q: tensor<2x4x32x16xf32>, %k: tensor<2x2x32x16xf32>, %v: tensor<2x4x32x16xf32>) -> (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) {
  %k1 = braze.reshape %k : tensor<2x2x32x16xf32> -> tensor<2x2x1x32x16xf32>
  %kg = braze.expand %k1 : tensor<2x2x1x32x16xf32> -> tensor<2x2x2x32x16xf32>
  %kr = braze.reshape %kg : tensor<2x2x2x32x16xf32> -> tensor<2x4x32x16xf32>
  %o = braze.attention %q, %kr, %v scale 0.25 : tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32> -> tensor<2x4x32x16xf32>
  %t1 = braze.reshape %k : tensor<2x2x32x16xf32> -> tensor<2x1x2x32x16xf32>
  %tg = braze.expand %t1 : tensor<2x1x2x32x16xf32> -> tensor<2x2x2x32x16xf32>
  %tr = braze.reshape %tg : tensor<2x2x2x32x16xf32> -> tensor<2x4x32x16xf32>
  %o2 = braze.attention %q, %tr, %tr scale 0.25 : tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32> -> tensor<2x4x32x16xf32>
  return %o, %o2 : tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>
}

// -----

// Tests Swin's shifted windows: the position bias is added to scores of
// [B*nW, H, L, L], which are then viewed as [B, nW, H, L, L] to add the
// window mask and viewed back for the softmax. The attention runs over the
// finer batch dims, q, k and v are reshaped to them, and the two masks are
// summed into one of [1, nW, H, L, L] (B times smaller than the scores).
// CHECK-LABEL: func.func @shifted_windows
// CHECK-SAME: %[[BIAS:[^:]*]]: tensor<1x3x16x16xf32>, %[[WINDOWS:[^:]*]]: tensor<4x16x16xf32>
// CHECK-NOT: braze.bmm
// CHECK-DAG: %[[W5:.*]] = braze.reshape %[[WINDOWS]] : tensor<4x16x16xf32> -> tensor<1x4x1x16x16xf32>
// CHECK-DAG: %[[B5:.*]] = braze.reshape %[[BIAS]] : tensor<1x3x16x16xf32> -> tensor<1x1x3x16x16xf32>
// CHECK: %[[M:.*]] = braze.add %[[B5]], %[[W5]] : tensor<1x1x3x16x16xf32>, tensor<1x4x1x16x16xf32> -> tensor<1x4x3x16x16xf32>
// CHECK: %[[O:.*]] = braze.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M]] scale 1.000000e+00 masked_rows_nan : tensor<2x4x3x16x8xf32>, tensor<2x4x3x16x8xf32>, tensor<2x4x3x16x8xf32>, tensor<1x4x3x16x16xf32> -> tensor<2x4x3x16x8xf32>
// CHECK-NOT: braze.exp
// CHECK-NOT: braze.bmm
func.func @shifted_windows(%q: tensor<8x3x16x8xf32>, %k: tensor<8x3x16x8xf32>, %v: tensor<8x3x16x8xf32>, %bias: tensor<1x3x16x16xf32>, %windows: tensor<4x16x16xf32>) -> tensor<8x3x16x8xf32> {
  %kt = braze.permute %k [0, 1, 3, 2] : tensor<8x3x16x8xf32> -> tensor<8x3x8x16xf32>
  %q3 = braze.reshape %q : tensor<8x3x16x8xf32> -> tensor<24x16x8xf32>
  %kt3 = braze.reshape %kt : tensor<8x3x8x16xf32> -> tensor<24x8x16xf32>
  %s3 = braze.bmm %q3, %kt3 : tensor<24x16x8xf32>, tensor<24x8x16xf32> -> tensor<24x16x16xf32>
  %s = braze.reshape %s3 : tensor<24x16x16xf32> -> tensor<8x3x16x16xf32>
  %biased = braze.add %s, %bias : tensor<8x3x16x16xf32>, tensor<1x3x16x16xf32> -> tensor<8x3x16x16xf32>
  %s5 = braze.reshape %biased : tensor<8x3x16x16xf32> -> tensor<2x4x3x16x16xf32>
  %w5 = braze.reshape %windows : tensor<4x16x16xf32> -> tensor<1x4x1x16x16xf32>
  %masked5 = braze.add %s5, %w5 : tensor<2x4x3x16x16xf32>, tensor<1x4x1x16x16xf32> -> tensor<2x4x3x16x16xf32>
  %x = braze.reshape %masked5 : tensor<2x4x3x16x16xf32> -> tensor<8x3x16x16xf32>
  %max = braze.max %x dims [3] keepdim : tensor<8x3x16x16xf32> -> tensor<8x3x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<8x3x16x16xf32>, tensor<8x3x16x1xf32> -> tensor<8x3x16x16xf32>
  %e = braze.exp %shifted : tensor<8x3x16x16xf32>
  %sum = braze.sum %e dims [3] keepdim : tensor<8x3x16x16xf32> -> tensor<8x3x16x1xf32>
  %p = braze.div %e, %sum : tensor<8x3x16x16xf32>, tensor<8x3x16x1xf32> -> tensor<8x3x16x16xf32>
  %p3 = braze.reshape %p : tensor<8x3x16x16xf32> -> tensor<24x16x16xf32>
  %v3 = braze.reshape %v : tensor<8x3x16x8xf32> -> tensor<24x16x8xf32>
  // expected-remark @+1 {{'braze.bmm' of a softmax formed into braze.attention (additive masks, scale 1)}}
  %o3 = braze.bmm %p3, %v3 : tensor<24x16x16xf32>, tensor<24x16x8xf32> -> tensor<24x16x8xf32>
  %o = braze.reshape %o3 : tensor<24x16x8xf32> -> tensor<8x3x16x8xf32>
  return %o : tensor<8x3x16x8xf32>
}

// -----

// Tests the same with the batch dynamic: the merged and split dims are
// dynamic, and the reshapes to the finer batch dims need no sizes.
// CHECK-LABEL: func.func @shifted_windows_dynamic
// CHECK-NOT: braze.bmm
// CHECK: braze.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale 1.000000e+00 masked_rows_nan : tensor<?x4x3x16x8xf32>, tensor<?x4x3x16x8xf32>, tensor<?x4x3x16x8xf32>, tensor<1x4x3x16x16xf32> -> tensor<?x4x3x16x8xf32>
// CHECK-NOT: braze.bmm
func.func @shifted_windows_dynamic(%q: tensor<?x3x16x8xf32>, %k: tensor<?x3x16x8xf32>, %v: tensor<?x3x16x8xf32>, %bias: tensor<1x3x16x16xf32>, %windows: tensor<4x16x16xf32>, %b: index) -> tensor<?x3x16x8xf32> {
  %kt = braze.permute %k [0, 1, 3, 2] : tensor<?x3x16x8xf32> -> tensor<?x3x8x16xf32>
  %q3 = braze.reshape %q : tensor<?x3x16x8xf32> -> tensor<?x16x8xf32>
  %kt3 = braze.reshape %kt : tensor<?x3x8x16xf32> -> tensor<?x8x16xf32>
  %s3 = braze.bmm %q3, %kt3 : tensor<?x16x8xf32>, tensor<?x8x16xf32> -> tensor<?x16x16xf32>
  %s = braze.reshape %s3 sizes [%b] : tensor<?x16x16xf32> -> tensor<?x3x16x16xf32>
  %biased = braze.add %s, %bias : tensor<?x3x16x16xf32>, tensor<1x3x16x16xf32> -> tensor<?x3x16x16xf32>
  %s5 = braze.reshape %biased sizes [%b] : tensor<?x3x16x16xf32> -> tensor<?x4x3x16x16xf32>
  %w5 = braze.reshape %windows : tensor<4x16x16xf32> -> tensor<1x4x1x16x16xf32>
  %masked5 = braze.add %s5, %w5 : tensor<?x4x3x16x16xf32>, tensor<1x4x1x16x16xf32> -> tensor<?x4x3x16x16xf32>
  %x = braze.reshape %masked5 : tensor<?x4x3x16x16xf32> -> tensor<?x3x16x16xf32>
  %max = braze.max %x dims [3] keepdim : tensor<?x3x16x16xf32> -> tensor<?x3x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<?x3x16x16xf32>, tensor<?x3x16x1xf32> -> tensor<?x3x16x16xf32>
  %e = braze.exp %shifted : tensor<?x3x16x16xf32>
  %sum = braze.sum %e dims [3] keepdim : tensor<?x3x16x16xf32> -> tensor<?x3x16x1xf32>
  %p = braze.div %e, %sum : tensor<?x3x16x16xf32>, tensor<?x3x16x1xf32> -> tensor<?x3x16x16xf32>
  %p3 = braze.reshape %p : tensor<?x3x16x16xf32> -> tensor<?x16x16xf32>
  %v3 = braze.reshape %v : tensor<?x3x16x8xf32> -> tensor<?x16x8xf32>
  // expected-remark @+1 {{'braze.bmm' of a softmax formed into braze.attention (additive masks, scale 1)}}
  %o3 = braze.bmm %p3, %v3 : tensor<?x16x16xf32>, tensor<?x16x8xf32> -> tensor<?x16x8xf32>
  %o = braze.reshape %o3 sizes [%b] : tensor<?x16x8xf32> -> tensor<?x3x16x8xf32>
  return %o : tensor<?x3x16x8xf32>
}

// -----

// Tests a mask added to the scores viewed in batch dims that do not split
// the softmax's ([8, 3] as [2, 12]): no one frame reads both, so nothing is
// formed.
// CHECK-LABEL: func.func @mask_in_other_heads
// CHECK-NOT: braze.attention
func.func @mask_in_other_heads(%q: tensor<8x3x16x8xf32>, %kt: tensor<8x3x8x16xf32>, %v: tensor<8x3x16x8xf32>, %m: tensor<2x12x16x16xf32>) -> tensor<8x3x16x8xf32> {
  %q3 = braze.reshape %q : tensor<8x3x16x8xf32> -> tensor<24x16x8xf32>
  %kt3 = braze.reshape %kt : tensor<8x3x8x16xf32> -> tensor<24x8x16xf32>
  %s3 = braze.bmm %q3, %kt3 : tensor<24x16x8xf32>, tensor<24x8x16xf32> -> tensor<24x16x16xf32>
  %r = braze.reshape %s3 : tensor<24x16x16xf32> -> tensor<2x12x16x16xf32>
  %masked = braze.add %r, %m : tensor<2x12x16x16xf32>, tensor<2x12x16x16xf32> -> tensor<2x12x16x16xf32>
  %x = braze.reshape %masked : tensor<2x12x16x16xf32> -> tensor<8x3x16x16xf32>
  %max = braze.max %x dims [3] keepdim : tensor<8x3x16x16xf32> -> tensor<8x3x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<8x3x16x16xf32>, tensor<8x3x16x1xf32> -> tensor<8x3x16x16xf32>
  %e = braze.exp %shifted : tensor<8x3x16x16xf32>
  %sum = braze.sum %e dims [3] keepdim : tensor<8x3x16x16xf32> -> tensor<8x3x16x1xf32>
  %p = braze.div %e, %sum : tensor<8x3x16x16xf32>, tensor<8x3x16x1xf32> -> tensor<8x3x16x16xf32>
  %p3 = braze.reshape %p : tensor<8x3x16x16xf32> -> tensor<24x16x16xf32>
  %v3 = braze.reshape %v : tensor<8x3x16x8xf32> -> tensor<24x16x8xf32>
  // expected-remark @+1 {{not formed into braze.attention: a mask is applied to the scores in batch dims that do not split into the other masks'}}
  %o3 = braze.bmm %p3, %v3 : tensor<24x16x16xf32>, tensor<24x16x8xf32> -> tensor<24x16x8xf32>
  %o = braze.reshape %o3 : tensor<24x16x8xf32> -> tensor<8x3x16x8xf32>
  return %o : tensor<8x3x16x8xf32>
}

// -----

// Tests an additive mask under a boolean one: braze.attention takes one
// mask, so nothing is formed.
// CHECK-LABEL: func.func @boolean_then_additive
// CHECK-NOT: braze.attention
func.func @boolean_then_additive(%q: tensor<4x16x8xf32>, %kt: tensor<4x8x16xf32>, %v: tensor<4x16x8xf32>, %keep: tensor<16x16xi1>, %bias: tensor<1x16x16xf32>) -> tensor<4x16x8xf32> {
  %s = braze.bmm %q, %kt : tensor<4x16x8xf32>, tensor<4x8x16xf32> -> tensor<4x16x16xf32>
  %biased = braze.add %s, %bias : tensor<4x16x16xf32>, tensor<1x16x16xf32> -> tensor<4x16x16xf32>
  %ninf = braze.constant dense<0xFF800000> : tensor<f32>
  %x = braze.where %keep, %biased, %ninf : tensor<16x16xi1>, tensor<4x16x16xf32>, tensor<f32> -> tensor<4x16x16xf32>
  %max = braze.max %x dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %shifted = braze.sub %x, %max : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  %e = braze.exp %shifted : tensor<4x16x16xf32>
  %sum = braze.sum %e dims [2] keepdim : tensor<4x16x16xf32> -> tensor<4x16x1xf32>
  %p = braze.div %e, %sum : tensor<4x16x16xf32>, tensor<4x16x1xf32> -> tensor<4x16x16xf32>
  // expected-remark @+1 {{not formed into braze.attention: the scores are masked again after a boolean mask}}
  %o = braze.bmm %p, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>
  return %o : tensor<4x16x8xf32>
}
