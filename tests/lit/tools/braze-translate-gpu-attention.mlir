// Tests that braze-translate prints the C-like GPU targets' flash attention
// (codegen/gpu_attention.py): a causal grouped-query bf16 attention with
// dynamic L and S as one kernel of 32 threads, a thread per query row, the
// query rows staged once and each block of 16 keys and values through
// shared memory, an online softmax per row. Captured IR goes through the
// target's pipeline (braze-lower-attention with the targets' blocks).

// RUN: braze-translate --target=opencl %s | FileCheck %s --check-prefix=CL
// CUDA keeps PyTorch's attention unless asked (its default is the vendor's
// library), so its run asks; without the option no kernel is made.
// RUN: braze-translate --target=cuda --option flash_attention=true %s | FileCheck %s --check-prefix=CUDA
// RUN: braze-translate --target=cuda %s | FileCheck %s --check-prefix=LIBRARY
// RUN: not braze-translate --target=cuda --option flash_attention %s 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not braze-translate --target=cuda --option no_such_option=1 %s 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// LIBRARY: function @attention: 0 kernel(s), cuda
// BAD: braze-translate: --option 'flash_attention': expected KEY=VALUE
// UNKNOWN: braze-translate: unknown compile option 'no_such_option' for target 'cuda'

// CL-LABEL: function @attention: 1 kernel(s), opencl
// CL: __kernel void braze_kernel_0(__global const uint16_t* in0, __global const uint16_t* in1, __global const uint16_t* in2, __global uint16_t* out0, __global const int64_t* sizes, __global int* failed) {
// CL: __local float q_tile[2048];
// CL-NEXT: __local float k_tile[1024];
// CL-NEXT: __local float v_tile[1024];
// CL-NEXT: const int row = (int)get_local_id(0);
// CL-NEXT: const int64_t q_blocks = (n2 + 31) / 32;
// CL: const int64_t group = n1 / (n6 > 1 ? n6 : 1);
// CL: q_tile[c * 32 + j] = q0 + j < n2 ? bz_bf16_to_f32(in0[0 * stride0_0 + (i1) * stride0_1 + (q0 + j) * stride0_2 + (c)]) : (float)0;
// CL: const int64_t keys = (n4 < q0 + 32 ? n4 : q0 + 32);
// CL-NEXT: for (int64_t s0 = 0; s0 < keys; s0 += 16) {
// CL: k_tile[j * 64 + c] = s0 + j < n4 ? bz_bf16_to_f32(in1[0 * stride1_0 + (i1 / group) * stride1_1 + (s0 + j) * stride1_2 + (c)]) : (float)0;
// CL: barrier(CLK_LOCAL_MEM_FENCE);
// CL: const float score = (live && s < n4 && s <= l) ? scores[j] * 0.125f : -BZ_INF_F;
// CL: const float correction = exp(row_max - safe_max);
// CL: scores[j] = bz_round_bf16(weight);
// CL: for (int c = 0; c < 64; ++c) acc[c] += scores[j] * v_tile[j * 64 + c];
// CL: out0[((i0 * n1 + i1) * n2 + l) * 64 + c] = bz_f32_to_bf16(row_sum == (float)0 ? (float)0 : acc[c] / row_sum);

// CUDA-LABEL: function @attention: 1 kernel(s), cuda
// CUDA: extern "C" __global__ void __launch_bounds__(32) braze_kernel_0(
// CUDA: __shared__ float k_tile[1024];
// CUDA: __syncthreads();
// CUDA-NEXT: float scores[16];
// CUDA-NEXT: #pragma unroll
// CUDA-NEXT: for (int j = 0; j < 16; ++j) scores[j] = (float)0;
// CUDA: const float correction = expf(row_max - safe_max);
func.func @attention(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x2x?x64xbf16>, %v: tensor<1x2x?x64xbf16>)
    -> tensor<1x8x?x64xbf16> {
  %o = braze.attention %q, %k, %v causal gqa : tensor<1x8x?x64xbf16>, tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16>
      -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}

// An attention read as an output projection reads it ([B, L, H * E]): the
// kernel stores each row at its place in [B, L, H, E] (result_order), and no
// other kernel copies it there.
// CL-LABEL: function @projection: 1 kernel(s), opencl
// CL: out0[((i0 * n2 + l) * n1 + i1) * 16 + c] = row_sum == (float)0 ? (float)0 : acc[c] / row_sum;
func.func @projection(%q: tensor<2x4x37x16xf32>) -> tensor<2x37x64xf32> {
  %o = braze.attention %q, %q, %q : tensor<2x4x37x16xf32>, tensor<2x4x37x16xf32>, tensor<2x4x37x16xf32> -> tensor<2x4x37x16xf32>
  %t = braze.permute %o [0, 2, 1, 3] : tensor<2x4x37x16xf32> -> tensor<2x37x4x16xf32>
  %r = braze.reshape %t : tensor<2x37x4x16xf32> -> tensor<2x37x64xf32>
  return %r : tensor<2x37x64xf32>
}
