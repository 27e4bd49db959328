// Tests that braze-translate prints the Triton form of the tiled kernels:
// nn.Linear + GELU as one fused GEMM (a tile per program, a K loop of
// tl.dot, the unfused alternative behind PRODUCT_GIVEN, the epilogue on the
// accumulator tile), a residual add with its row max (whole rows per
// program, a statistic folded per tile), and a causal grouped-query bf16
// attention as one flash-attention kernel (an online softmax over blocks of
// keys). Captured IR goes through the Triton target's pipeline.

// RUN: braze-translate --target=triton %s | FileCheck %s

// CHECK-LABEL: function @linear_gelu: 1 kernel(s), triton
// CHECK: {{^}}@triton.jit
// CHECK-NEXT: def gemm_add_mul_erf_0(in0, in1, in2, out0, n0: tl.int64, s0_0: tl.int64, s0_1: tl.int64, s1_0: tl.int64, s1_1: tl.int64, s2_0: tl.int64, product, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRODUCT_GIVEN: tl.constexpr):
// CHECK-NEXT: # braze-translate-triton-tiled.mlir:{{[0-9]+}}:8, braze-translate-triton-tiled.mlir:{{[0-9]+}}:8: fused GEMM [?, 32, 64] ([B..., M, N, K]), rhs transposed
// CHECK: tiles_n = tl.cdiv(n1, BLOCK_N)
// CHECK-NEXT: tile = tl.program_id(0).to(tl.int64)
// CHECK-NEXT: m = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
// CHECK-NEXT: n = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
// CHECK: tile_mask = mask_m & mask_n
// CHECK-NEXT: if PRODUCT_GIVEN:
// CHECK-NEXT: acc = tl.load(product + m * n1 + n, mask=tile_mask).to(tl.float32)
// CHECK-NEXT: else:
// CHECK-NEXT: acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
// CHECK-NEXT: lhs = in0 + m * s0_0
// CHECK-NEXT: rhs = in1 + n * s1_0
// CHECK-NEXT: for k0 in range(0, n2, BLOCK_K):
// CHECK-NEXT: k = k0 + tl.arange(0, BLOCK_K)
// CHECK-NEXT: a = tl.load(lhs + k[None, :] * s0_1, mask=mask_m & (k[None, :] < n2), other=0.0)
// CHECK-NEXT: b = tl.load(rhs + k[:, None] * s1_1, mask=(k[:, None] < n2) & mask_n, other=0.0)
// CHECK-NEXT: acc = tl.dot(a, b, acc, input_precision="ieee")
// CHECK-NEXT: v1 = tl.load(in2 + n * s2_0, mask=mask_n)
// CHECK-NEXT: v2 = acc + v1
// CHECK: v7 = tl.erf(v6)
// CHECK: tl.store(out0 + m * n1 + n, v10, mask=tile_mask)
func.func @linear_gelu(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %b: tensor<32xf32>) -> tensor<?x32xf32> {
  %t = braze.permute %w [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  %y = braze.addmm %b, %x, %t : tensor<32xf32>, tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  %r = braze.gelu %y : tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// CHECK-LABEL: function @residual_row_max: 1 kernel(s), triton
// CHECK: def _max_keep_nan(values, axis: tl.constexpr):
// CHECK: def gemm_add_0(in0, in1, in2, out0, out1, n0: tl.int64,
// CHECK-NEXT: # {{.*}}: fused GEMM [?, 32, 64] ([B..., M, N, K]), row statistics max along N
// CHECK: m = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
// CHECK-NEXT: mask_m = m < n0
// CHECK-NEXT: stat0 = tl.full([BLOCK_M, 1], float("-inf"), tl.float32)
// CHECK-NEXT: for n_start in range(0, n1, BLOCK_N):
// CHECK-NEXT: n = n_start + tl.arange(0, BLOCK_N)[None, :]
// CHECK: acc = tl.dot(a, b, acc, input_precision="ieee")
// CHECK-NEXT: v1 = tl.load(in2 + m * s2_0 + n * s2_1, mask=tile_mask)
// CHECK-NEXT: v2 = acc + v1
// CHECK-NEXT: tl.store(out0 + m * n1 + n, v2, mask=tile_mask)
// CHECK-NEXT: stat0 = tl.maximum(stat0, _max_keep_nan(tl.where(tile_mask, v2, float("-inf")), 1), propagate_nan=tl.PropagateNan.ALL)
// CHECK-NEXT: tl.store(out1 + m, stat0, mask=mask_m)
func.func @residual_row_max(%x: tensor<?x64xf32>, %w: tensor<64x32xf32>, %r: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?xf32>) {
  %y = braze.matmul %x, %w : tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  %s = braze.add %y, %r : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  %m = braze.max %s dims [1] : tensor<?x32xf32> -> tensor<?xf32>
  return %s, %m : tensor<?x32xf32>, tensor<?xf32>
}

// CHECK-LABEL: function @causal_gqa: 1 kernel(s), triton
// CHECK: def _round_bf16(x):
// CHECK: def attention_0(in0, in1, in2, out0, n2: tl.int64, n4: tl.int64, s0_0: tl.int64, {{.*}}, s2_3: tl.int64, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_EV: tl.constexpr):
// CHECK-NEXT: # braze-translate-triton-tiled.mlir:{{[0-9]+}}:8: flash attention [1, 8, ?, 16, ?, 16, 2] ([B..., L, Ev, S, E, Hk]), causal, gqa
// CHECK: batch = tl.program_id(1).to(tl.int64)
// CHECK-NEXT: i1 = batch % n1
// CHECK-NEXT: i0 = batch // n1
// CHECK-NEXT: group = n1 // tl.maximum(n6, 1)
// CHECK: q = tl.load(in0 + i1 * s0_1 + l * s0_2 + e[None, :] * s0_3, mask=mask_l & (e[None, :] < n5), other=0.0)
// CHECK-NEXT: key = in1 + (i1 // group) * s1_1
// CHECK-NEXT: value = in2 + (i1 // group) * s2_1
// CHECK: for s0 in range(0, tl.minimum(n4, first + BLOCK_M), BLOCK_N):
// CHECK: scores = tl.dot(q, key_block)
// CHECK-NEXT: scores = scores * 0.25
// CHECK-NEXT: scores = tl.where(s > l, float("-inf"), scores)
// CHECK: weights = tl.exp(scores - safe_max)
// CHECK-NEXT: correction = tl.exp(row_max - safe_max)
// CHECK-NEXT: row_sum = row_sum * correction + tl.sum(weights, axis=1, keep_dims=True)
// CHECK: acc = tl.dot(_round_bf16(weights).to(tl.bfloat16), value_block, acc * correction)
// CHECK: empty = 0.0
// CHECK: tl.store(out0 + ((i0 * n1 + i1) * n2 + l) * n3 + ev, _round_bf16(out), mask=mask_l & (ev < n3))
func.func @causal_gqa(%q: tensor<1x8x?x16xbf16>, %k: tensor<1x2x?x16xbf16>, %v: tensor<1x2x?x16xbf16>) -> tensor<1x8x?x16xbf16> {
  %o = braze.attention %q, %k, %v causal gqa : tensor<1x8x?x16xbf16>, tensor<1x2x?x16xbf16>, tensor<1x2x?x16xbf16> -> tensor<1x8x?x16xbf16>
  return %o : tensor<1x8x?x16xbf16>
}

// torch's multi-head attention reads the result as [L, B, H, E]: the kernel
// stores each row there (result_order), and no other kernel copies it.
// CHECK-LABEL: function @sequence_first: 1 kernel(s), triton
// CHECK: tl.store(out0 + ((l * n0 + i0) * n1 + i1) * n3 + ev, out, mask=mask_l & (ev < n3))
func.func @sequence_first(%q: tensor<2x4x37x16xf32>) -> tensor<37x2x64xf32> {
  %o = braze.attention %q, %q, %q : tensor<2x4x37x16xf32>, tensor<2x4x37x16xf32>, tensor<2x4x37x16xf32> -> tensor<2x4x37x16xf32>
  %t = braze.permute %o [2, 0, 1, 3] : tensor<2x4x37x16xf32> -> tensor<37x2x4x16xf32>
  %r = braze.reshape %t : tensor<37x2x4x16xf32> -> tensor<37x2x64xf32>
  return %r : tensor<37x2x64xf32>
}
