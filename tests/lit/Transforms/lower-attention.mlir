// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-lower-attention))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-lower-attention{q-block=32 kv-block=64}))' -split-input-file | FileCheck %s --check-prefix=SMALL
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-lower-attention{remarks=true}))' -split-input-file -verify-diagnostics -o /dev/null
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-lower-attention{halves=true}))' -split-input-file | FileCheck %s --check-prefix=HALVES
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-lower-attention{q-block=0}))' -split-input-file 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-lower-attention{group-heads=true}))' -split-input-file | FileCheck %s --check-prefix=GROUP

// BAD: braze-lower-attention: q-block and kv-block must be at least 1, got 0 and 512

// Tests that an attention with a mask becomes a flash attention with the
// mask, scale and soft cap kept and blocks no larger than its static extents (128
// query rows but L is 100; 512 keys but S is 300).
// CHECK-LABEL: func.func @masked
// CHECK: braze.flash_attention %arg0, %arg1, %arg2 mask %arg3 scale 1.250000e-01 softcap 3.000000e+01 masked_rows_nan q_block 100 kv_block 300
// CHECK-NOT: braze.attention
// SMALL-LABEL: func.func @masked
// SMALL: q_block 32 kv_block 64
func.func @masked(%q: tensor<2x4x100x64xf32>, %k: tensor<2x4x300x64xf32>, %v: tensor<2x4x300x64xf32>, %m: tensor<2x1x1x300xf32>) -> tensor<2x4x100x64xf32> {
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 100, kv_block 300)}}
  %o = braze.attention %q, %k, %v mask %m scale 0.125 softcap 30.0 masked_rows_nan : tensor<2x4x100x64xf32>, tensor<2x4x300x64xf32>, tensor<2x4x300x64xf32>, tensor<2x1x1x300xf32> -> tensor<2x4x100x64xf32>
  return %o : tensor<2x4x100x64xf32>
}

// -----

// Tests that SDPA's default scale 1/sqrt(E) is written out, causal and
// gqa are kept, and dynamic extents take the default blocks; a decode step
// (one query row) takes a block of one row. bf16: lowered only with
// halves=true (by default the library's, measured faster).
// CHECK-LABEL: func.func @causal_gqa
// CHECK-NOT: braze.flash_attention
// HALVES-LABEL: func.func @causal_gqa
// HALVES: braze.flash_attention %arg0, %arg1, %arg2 scale 2.500000e-01 causal gqa q_block 128 kv_block 512 : tensor<1x8x?x16xbf16>, tensor<1x2x?x16xbf16>
// HALVES: braze.flash_attention %arg3, %arg1, %arg2 scale 2.500000e-01 gqa q_block 1 kv_block 512 : tensor<1x8x1x16xbf16>
func.func @causal_gqa(%q: tensor<1x8x?x16xbf16>, %k: tensor<1x2x?x16xbf16>, %v: tensor<1x2x?x16xbf16>, %step: tensor<1x8x1x16xbf16>) -> (tensor<1x8x?x16xbf16>, tensor<1x8x1x16xbf16>) {
  // expected-remark @+1 {{braze.attention kept: f16/bf16 attention stays the library's (halves=false)}}
  %o = braze.attention %q, %k, %v causal gqa : tensor<1x8x?x16xbf16>, tensor<1x2x?x16xbf16>, tensor<1x2x?x16xbf16> -> tensor<1x8x?x16xbf16>
  // expected-remark @+1 {{braze.attention kept: f16/bf16 attention stays the library's (halves=false)}}
  %d = braze.attention %step, %k, %v gqa : tensor<1x8x1x16xbf16>, tensor<1x2x?x16xbf16>, tensor<1x2x?x16xbf16> -> tensor<1x8x1x16xbf16>
  return %o, %d : tensor<1x8x?x16xbf16>, tensor<1x8x1x16xbf16>
}

// -----

// Tests that an attention with no scale and a dynamic embedding size stays
// a library call: its default scale is known only at run time.
// CHECK-LABEL: func.func @dynamic_embedding
// CHECK: braze.attention
// CHECK-NOT: braze.flash_attention
func.func @dynamic_embedding(%q: tensor<2x8x?xf32>, %k: tensor<2x8x?xf32>, %v: tensor<2x8x?xf32>) -> tensor<2x8x?xf32> {
  // expected-remark @+1 {{braze.attention kept: its default scale needs a static embedding size}}
  %o = braze.attention %q, %k, %v : tensor<2x8x?xf32>, tensor<2x8x?xf32>, tensor<2x8x?xf32> -> tensor<2x8x?xf32>
  return %o : tensor<2x8x?xf32>
}

// -----

// Tests that with group-heads a decode step's grouped-query attention (one
// query row, 8 query heads on 2 key/value heads) takes the query heads of a
// key/value head as one work item, with no mask or a mask the same for
// every head; and that it does not where the heads cannot be grouped: more
// than one query row, a causal mask, a mask per head, heads not grouped
// (no gqa, or as many key/value heads as query heads). Without the option
// no attention is grouped.
// GROUP-LABEL: func.func @grouped_decode
// GROUP: braze.flash_attention %arg0, %arg1, %arg2 scale 1.250000e-01 gqa q_block 1 kv_block 300 grouped_heads :
// GROUP: braze.flash_attention %arg0, %arg1, %arg2 mask %arg3 scale 1.250000e-01 gqa q_block 1 kv_block 300 grouped_heads :
// GROUP: braze.flash_attention %arg0, %arg1, %arg2 mask %arg4 scale 1.250000e-01 gqa q_block 1 kv_block 300 grouped_heads :
// CHECK-LABEL: func.func @grouped_decode
// CHECK-NOT: grouped_heads
func.func @grouped_decode(%q: tensor<2x8x1x64xf32>, %k: tensor<2x2x300x64xf32>, %v: tensor<2x2x300x64xf32>,
                          %m: tensor<2x1x1x300xf32>, %b: tensor<1x300xi1>)
    -> (tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>) {
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 1, kv_block 300)}}
  %o = braze.attention %q, %k, %v gqa : tensor<2x8x1x64xf32>, tensor<2x2x300x64xf32>, tensor<2x2x300x64xf32> -> tensor<2x8x1x64xf32>
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 1, kv_block 300)}}
  %p = braze.attention %q, %k, %v mask %m gqa : tensor<2x8x1x64xf32>, tensor<2x2x300x64xf32>, tensor<2x2x300x64xf32>, tensor<2x1x1x300xf32> -> tensor<2x8x1x64xf32>
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 1, kv_block 300)}}
  %r = braze.attention %q, %k, %v mask %b gqa : tensor<2x8x1x64xf32>, tensor<2x2x300x64xf32>, tensor<2x2x300x64xf32>, tensor<1x300xi1> -> tensor<2x8x1x64xf32>
  return %o, %p, %r : tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>
}

// -----

// GROUP-LABEL: func.func @not_grouped
// GROUP-NOT: grouped_heads
func.func @not_grouped(%q: tensor<2x8x1x64xf32>, %q2: tensor<2x8x3x64xf32>, %k: tensor<2x2x300x64xf32>,
                       %v: tensor<2x2x300x64xf32>, %m: tensor<2x8x1x300xf32>, %k8: tensor<2x8x300x64xf32>)
    -> (tensor<2x8x3x64xf32>, tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>) {
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 3, kv_block 300)}}
  %rows = braze.attention %q2, %k, %v gqa : tensor<2x8x3x64xf32>, tensor<2x2x300x64xf32>, tensor<2x2x300x64xf32> -> tensor<2x8x3x64xf32>
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 1, kv_block 300)}}
  %causal = braze.attention %q, %k, %v causal gqa : tensor<2x8x1x64xf32>, tensor<2x2x300x64xf32>, tensor<2x2x300x64xf32> -> tensor<2x8x1x64xf32>
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 1, kv_block 300)}}
  %per_head = braze.attention %q, %k, %v mask %m gqa : tensor<2x8x1x64xf32>, tensor<2x2x300x64xf32>, tensor<2x2x300x64xf32>, tensor<2x8x1x300xf32> -> tensor<2x8x1x64xf32>
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 1, kv_block 300)}}
  %same_heads = braze.attention %q, %k8, %k8 gqa : tensor<2x8x1x64xf32>, tensor<2x8x300x64xf32>, tensor<2x8x300x64xf32> -> tensor<2x8x1x64xf32>
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 1, kv_block 300)}}
  %plain = braze.attention %q, %k8, %k8 : tensor<2x8x1x64xf32>, tensor<2x8x300x64xf32>, tensor<2x8x300x64xf32> -> tensor<2x8x1x64xf32>
  return %rows, %causal, %per_head, %same_heads, %plain : tensor<2x8x3x64xf32>, tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>, tensor<2x8x1x64xf32>
}

// -----

// Tests that a soft-capped bf16 attention is lowered with halves=false too:
// the library has no soft-capped attention to keep it for.
// CHECK-LABEL: func.func @capped_half
// CHECK: braze.flash_attention %arg0, %arg1, %arg2 mask %arg3 scale 6.250000e-02 softcap 5.000000e+01 q_block 16 kv_block 16
func.func @capped_half(%q: tensor<2x4x16x64xbf16>, %k: tensor<2x4x16x64xbf16>, %v: tensor<2x4x16x64xbf16>, %m: tensor<2x1x16x16xbf16>) -> tensor<2x4x16x64xbf16> {
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 16, kv_block 16)}}
  %o = braze.attention %q, %k, %v mask %m scale 0.0625 softcap 50.0 : tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x1x16x16xbf16> -> tensor<2x4x16x64xbf16>
  return %o : tensor<2x4x16x64xbf16>
}

// -----

// Tests that an attention's result_order (braze-order-attention's) carries
// over to the flash attention.
// CHECK-LABEL: func.func @ordered
// CHECK: braze.flash_attention %arg0, %arg0, %arg0 scale 1.250000e-01 causal q_block 128 kv_block 512 result_order [0, 2, 1, 3] : tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32> -> tensor<2x?x4x64xf32>
func.func @ordered(%q: tensor<2x4x?x64xf32>) -> tensor<2x?x4x64xf32> {
  // expected-remark @+1 {{braze.attention lowered to braze.flash_attention (q_block 128, kv_block 512)}}
  %o = braze.attention %q, %q, %q causal result_order [0, 2, 1, 3] : tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32> -> tensor<2x?x4x64xf32>
  return %o : tensor<2x?x4x64xf32>
}
