// Tests that braze-translate prints each target's form of the kernel form:
// a pointwise kernel, a row reduction (a block tree with barriers on GPUs, a
// persistent reduction in Triton), a reduction over a non-innermost dim,
// argmax, bf16 in and out, a broadcast input, a dynamic extent, (Triton)
// a looped softmax, a long sum split in two kernels and a warp tree over
// medium rows (a block tree on OpenCL). Captured IR goes through the
// target's pipeline. Static kernels index in 32 bits on the GPU targets
// (`int` extents, points and offsets), the dynamic one in 64.

// RUN: braze-translate --target=cuda %s | FileCheck %s --check-prefix=CUDA
// RUN: braze-translate --target=hip %s | FileCheck %s --check-prefix=HIP
// RUN: braze-translate --target=opencl %s | FileCheck %s --check-prefix=CL
// RUN: braze-translate --target=metal --threads=32 %s | FileCheck %s --check-prefix=METAL
// RUN: braze-translate --target=cpu %s | FileCheck %s --check-prefix=CPP
// RUN: braze-translate --target=triton %s | FileCheck %s --check-prefix=TRITON
// RUN: braze-translate --target=triton %s -o %t.triton && ls %t.triton | FileCheck %s --check-prefix=PY
// RUN: braze-translate --target=opencl %s -o %t && ls %t | FileCheck %s --check-prefix=FILES
// RUN: not braze-translate --target=tpu %s 2>&1 | FileCheck %s --check-prefix=BAD

// FILES: argmax.cl
// FILES: pointwise.cl
// BAD: invalid choice: 'tpu'
// PY: argmax.py
// PY: looped_softmax.py

// CUDA-LABEL: function @pointwise: 1 kernel(s), cuda
// CUDA: #ifdef __CUDACC_RTC__
// CUDA: extern "C" __global__ void __launch_bounds__(256) braze_kernel_0(const float* in0, const float* in1, float* out0, const int64_t* sizes, int* failed) {
// CUDA: const int point = (int)blockIdx.x * 256 + threadIdx.x;
// CUDA-NEXT: if (point >= n0 * n1) return;
// CUDA: const float v3 = v1 + v2;
// CUDA-NEXT: out0[(i0) * 16 + i1] = v3;
// HIP-LABEL: function @pointwise: 1 kernel(s), hip
// HIP: #include <hip/hip_runtime.h>
// HIP: extern "C" __global__ void __launch_bounds__(256) braze_kernel_0(
// CL-LABEL: function @pointwise: 1 kernel(s), opencl
// CL: #pragma OPENCL EXTENSION cl_khr_fp64 : enable
// CL: __kernel void braze_kernel_0(__global const float* in0, __global const float* in1, __global float* out0, __global const int64_t* sizes, __global int* failed) {
// CL: const int point = (int)get_group_id(0) * 256 + get_local_id(0);
// METAL-LABEL: function @pointwise: 1 kernel(s), metal
// METAL: #include <metal_stdlib>
// METAL: kernel void braze_kernel_0(device const float* in0 {{\[\[}}buffer(0)]], device const float* in1 {{\[\[}}buffer(1)]], device float* out0 {{\[\[}}buffer(2)]], device const int64_t* sizes {{\[\[}}buffer(3)]], device int* failed {{\[\[}}buffer(4)]], uint bz_tid {{\[\[}}thread_position_in_threadgroup]], uint bz_bid {{\[\[}}threadgroup_position_in_grid]]) {
// METAL: const int point = (int)bz_bid * 32 + bz_tid;
// CPP-LABEL: function @pointwise: 1 kernel(s), cpu
// CPP: extern "C" int braze_kernel_0(void* const* buffers, const int64_t* sizes) {
// CPP: #pragma omp simd
// TRITON-LABEL: function @pointwise: 1 kernel(s), triton
// TRITON: import triton.language as tl
// TRITON: @triton.jit
// TRITON-NEXT: def add_0(in0, in1, out0, s0_0: tl.int64, s0_1: tl.int64, s1_0: tl.int64, s1_1: tl.int64, XBLOCK: tl.constexpr, INDEX: tl.constexpr):
// TRITON-NEXT: # braze-translate.mlir:{{[0-9]+}}:8: domain [8, 16]
// TRITON-NEXT: n0 = tl.full([], 8, INDEX)
// TRITON-NEXT: n1 = tl.full([], 16, INDEX)
// TRITON-NEXT: s0_0, s0_1 = s0_0.to(INDEX), s0_1.to(INDEX)
// TRITON-NEXT: s1_0, s1_1 = s1_0.to(INDEX), s1_1.to(INDEX)
// TRITON-NEXT: x = tl.program_id(0).to(INDEX) * XBLOCK + tl.arange(0, XBLOCK)
// TRITON-NEXT: xmask = x < n0 * n1
// TRITON-NEXT: i0 = x // n1
// TRITON-NEXT: i1 = x % n1
// TRITON-NEXT: v1 = tl.load(in0 + i0 * s0_0 + i1 * s0_1, mask=xmask)
// TRITON: v3 = v1 + v2
// TRITON-NEXT: tl.store(out0 + i0 * 16 + i1, v3, mask=xmask)
func.func @pointwise(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = braze.add %a, %b : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// CUDA-LABEL: function @row_sum: 1 kernel(s), cuda
// CUDA: braze_kernel_0(const float* __restrict__ in0, float* out0, const int64_t* sizes, int* failed) {
// CUDA: __shared__ float v1_s[256];
// CUDA-NEXT: const int tid = threadIdx.x;
// CUDA-NEXT: const int point = blockIdx.x;
// CUDA: const int reduce_points = n1;
// CUDA-NEXT: float v1_s_mine = (float)0;
// CUDA-NEXT: for (int r = tid; r < reduce_points; r += 256) {
// CUDA: v1_s_mine = v1_s_mine + v2;
// CUDA: v1_s[tid] = v1_s_mine;
// CUDA-NEXT: __syncthreads();
// CUDA-NEXT: for (int s = 128; s > 0; s >>= 1) {
// CUDA-NEXT: if (tid < s) { v1_s[tid] = v1_s[tid] + v1_s[tid + s]; }
// CUDA-NEXT: __syncthreads();
// CUDA: const float v1 = v1_s[0];
// CUDA-NEXT: if (tid == 0) { out0[i0] = v1; }
// CL-LABEL: function @row_sum: 1 kernel(s), opencl
// CL: __local float v1_s[256];
// CL: barrier(CLK_LOCAL_MEM_FENCE);
// METAL-LABEL: function @row_sum: 1 kernel(s), metal
// METAL: threadgroup float v1_s[32];
// METAL: threadgroup_barrier(mem_flags::mem_threadgroup);
// METAL: for (int s = 16; s > 0; s >>= 1) {
// CPP-LABEL: function @row_sum: 1 kernel(s), cpu
// CPP: reduction(+:v1_part)
// TRITON-LABEL: function @row_sum: 1 kernel(s), triton
// TRITON: def sum_0(in0, out0, s0_0: tl.int64, s0_1: tl.int64, XBLOCK: tl.constexpr, INDEX: tl.constexpr):
// TRITON: x = tl.program_id(0).to(INDEX) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
// TRITON-NEXT: xmask = x < n0
// TRITON-NEXT: i0 = x
// TRITON-NEXT: RBLOCK: tl.constexpr = 512
// TRITON-NEXT: rnumel = n1
// TRITON-NEXT: r = tl.arange(0, RBLOCK)[None, :]
// TRITON-NEXT: rmask = r < rnumel
// TRITON-NEXT: i1 = r
// TRITON-NEXT: v1 = tl.load(in0 + i0 * s0_0 + i1 * s0_1, mask=xmask & rmask)
// TRITON-NEXT: v2 = tl.sum(tl.broadcast_to(tl.where(rmask, v1, 0.0), [XBLOCK, RBLOCK]), axis=1, keep_dims=True)
// TRITON-NEXT: tl.store(out0 + i0, v2, mask=xmask)
func.func @row_sum(%x: tensor<4x300xf32>) -> tensor<4xf32> {
  %s = braze.sum %x dims [1] : tensor<4x300xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// CUDA-LABEL: function @column_sum: 1 kernel(s), cuda
// CUDA: const int n0 = 300;
// CUDA-NEXT: const int n1 = 4;
// CUDA: const int i1 = point_rest % n1; point_rest /= n1;
// CUDA-NEXT: const int reduce_points = n0;
// CUDA: const int i0 = r_rest % n0; r_rest /= n0;
// CUDA-NEXT: const float v2 = in0[i0 * stride0_0 + i1];
// TRITON-LABEL: function @column_sum: 1 kernel(s), triton
// TRITON: xmask = x < n1
// TRITON-NEXT: i1 = x
// TRITON: i0 = r
// TRITON: tl.store(out0 + i1, v2, mask=xmask)
func.func @column_sum(%x: tensor<300x4xf32>) -> tensor<4xf32> {
  %s = braze.sum %x dims [0] : tensor<300x4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// CUDA-LABEL: function @argmax: 1 kernel(s), cuda
// CUDA: __shared__ float v1_s[256];
// CUDA-NEXT: __shared__ int64_t v1_at[256];
// CUDA: int64_t v1_at_mine = -1;
// CUDA: if (v1_at_mine < 0 || (v2 > v1_s_mine || (v2 != v2 && v1_s_mine == v1_s_mine))) { v1_s_mine = v2; v1_at_mine = r; }
// CUDA: if (tid < s) { if (v1_at[tid + s] >= 0 && (v1_at[tid] < 0 ||
// CUDA: const int64_t v1 = v1_at[0] < 0 ? 0 : v1_at[0];
// CUDA-NEXT: if (tid == 0) { out0[i0] = v1; }
// TRITON-LABEL: function @argmax: 1 kernel(s), triton
// TRITON: def _max_keep_nan(values, axis: tl.constexpr):
// TRITON: def _argmax(values, at, lowest, axis: tl.constexpr):
// TRITON: def argmax_0(
// TRITON: v2 = _argmax(tl.broadcast_to(v1, [XBLOCK, RBLOCK]), tl.broadcast_to(tl.where(rmask, r, -1), [XBLOCK, RBLOCK]), float("-inf"), 1)
// TRITON-NEXT: tl.store(out0 + i0, v2, mask=xmask)
func.func @argmax(%x: tensor<4x300xf32>) -> tensor<4xi64> {
  %i = braze.argmax %x dims [1] : tensor<4x300xf32> -> tensor<4xi64>
  return %i : tensor<4xi64>
}

// CUDA-LABEL: function @bf16: 1 kernel(s), cuda
// CUDA: BZ_FN float bz_bf16_to_f32(uint16_t h)
// CUDA: braze_kernel_0(const uint16_t* in0, uint16_t* out0, const int64_t* sizes, int* failed) {
// CUDA: const float v1 = bz_bf16_to_f32(in0[i0]);
// CUDA-NEXT: const float v2 = (float)v1;
// CUDA-NEXT: const float v3 = expf(v2);
// CUDA-NEXT: const float v4 = (float)v3;
// CUDA-NEXT: out0[i0] = bz_f32_to_bf16(v4);
// CL-LABEL: function @bf16: 1 kernel(s), opencl
// CL: const float v3 = exp(v2);
// CPP-LABEL: function @bf16: 1 kernel(s), cpu
// CPP: const float v1 = bz_bf16_to_f32(in0[i0]);
// CPP-NEXT: const float v2 = (float)v1;
// CPP-NEXT: const float v3 = bz_exp(v2);
// TRITON-LABEL: function @bf16: 1 kernel(s), triton
// TRITON: def _round_bf16(x):
// TRITON: def exp_0(
// TRITON: v1 = tl.load(in0 + i0 * s0_0, mask=xmask).to(tl.float32)
// TRITON-NEXT: v2 = tl.exp(v1)
// TRITON-NEXT: tl.store(out0 + i0, _round_bf16(v2), mask=xmask)
func.func @bf16(%x: tensor<16xbf16>) -> tensor<16xbf16> {
  %y = braze.exp %x : tensor<16xbf16>
  return %y : tensor<16xbf16>
}

// CUDA-LABEL: function @broadcast: 1 kernel(s), cuda
// CUDA: const float v1 = in0[i0 * stride0_0 + i1];
// CUDA-NEXT: const float v2 = in1[i1];
// CUDA-NEXT: const float v3 = v1 * v2;
// TRITON-LABEL: function @broadcast: 1 kernel(s), triton
// TRITON: def mul_0(in0, in1, out0, s0_0: tl.int64, s0_1: tl.int64, s1_0: tl.int64, XBLOCK: tl.constexpr, INDEX: tl.constexpr):
// TRITON: v2 = tl.load(in1 + i1 * s1_0, mask=xmask)
func.func @broadcast(%a: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %s = braze.mul %a, %b : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// CUDA-LABEL: function @dynamic: 1 kernel(s), cuda
// CUDA: const int64_t n0 = sizes[0];
// CUDA-NEXT: const int64_t n1 = 256;
// CUDA: out0[(i0) * 256 + i1] = v2;
// CL-LABEL: function @dynamic: 1 kernel(s), opencl
// CL: const int64_t n0 = sizes[0];
// CPP-LABEL: function @dynamic: 1 kernel(s), cpu
// CPP: const int64_t n0 = sizes[0];
// TRITON-LABEL: function @dynamic: 1 kernel(s), triton
// TRITON: def neg_0(in0, out0, n0: tl.int64, s0_0: tl.int64, s0_1: tl.int64, XBLOCK: tl.constexpr, INDEX: tl.constexpr):
// TRITON-NEXT: # braze-translate.mlir:{{[0-9]+}}:8: domain [?, 256]
// TRITON-NEXT: n0 = n0.to(INDEX)
// TRITON-NEXT: n1 = tl.full([], 256, INDEX)
func.func @dynamic(%x: tensor<?x256xf32>) -> tensor<?x256xf32> {
  %y = braze.neg %x : tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}


// TRITON-LABEL: function @looped_softmax: 1 kernel(s), triton
// TRITON: def amax_sum_sub_0(in0, out0, n0: tl.int64, s0_0: tl.int64, s0_1: tl.int64, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr, INDEX: tl.constexpr):
// TRITON: v1_acc = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
// TRITON-NEXT: for roffset in range(0, rnumel, RBLOCK):
// TRITON-NEXT: r = roffset + tl.arange(0, RBLOCK)[None, :]
// TRITON-NEXT: rmask = r < rnumel
// TRITON: v1_acc = tl.maximum(v1_acc, tl.where(rmask, v2, float("-inf")), propagate_nan=tl.PropagateNan.ALL)
// TRITON-NEXT: v1 = _max_keep_nan(v1_acc, 1)
// TRITON-NEXT: v3_acc = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
// TRITON-NEXT: for roffset in range(0, rnumel, RBLOCK):
// TRITON: v6 = tl.exp(v5)
// TRITON-NEXT: v3_acc = v3_acc + tl.where(rmask, v6, 0.0)
// TRITON-NEXT: v3 = tl.sum(v3_acc, axis=1, keep_dims=True)
// TRITON-NEXT: for roffset in range(0, rnumel, RBLOCK):
// TRITON: v10 = v9 / v3
// TRITON-NEXT: tl.store(out0 + i0 * 3000 + i1, v10, mask=xmask & rmask)
func.func @looped_softmax(%x: tensor<?x3000xf32>) -> tensor<?x3000xf32> {
  %m = braze.max %x dims [1] keepdim : tensor<?x3000xf32> -> tensor<?x1xf32>
  %d = braze.sub %x, %m : tensor<?x3000xf32>, tensor<?x1xf32> -> tensor<?x3000xf32>
  %e = braze.exp %d : tensor<?x3000xf32>
  %s = braze.sum %e dims [1] keepdim : tensor<?x3000xf32> -> tensor<?x1xf32>
  %q = braze.div %e, %s : tensor<?x3000xf32>, tensor<?x1xf32> -> tensor<?x3000xf32>
  return %q : tensor<?x3000xf32>
}

// CUDA-LABEL: function @split_sum: 2 kernel(s), cuda
// CUDA: braze_kernel_0(const float* __restrict__ in0, float* out0, const int64_t* sizes, int* failed) {
// CUDA-NEXT: const int n0 = 1024;
// CUDA-NEXT: const int n1 = 4096;
// CUDA: const int reduce_points = n1;
// CUDA: for (int r = tid; r < reduce_points; r += 256) {
// CUDA: if (tid == 0) { out0[i0] = v3; }
// CUDA: braze_kernel_1(const float* __restrict__ in0, float* out0, const int64_t* sizes, int* failed) {
// CUDA-NEXT: const int n0 = 1024;
// CUDA: if (tid == 0) { out0[0] = v1; }
// HIP-LABEL: function @split_sum: 2 kernel(s), hip
// HIP: braze_kernel_0(
// HIP-NEXT: const int n0 = 1024;
// HIP-NEXT: const int n1 = 4096;
// HIP: braze_kernel_1(
// HIP-NEXT: const int n0 = 1024;
// CL-LABEL: function @split_sum: 2 kernel(s), opencl
// CL: __kernel void braze_kernel_0(
// CL-NEXT: const int n0 = 1024;
// CL-NEXT: const int n1 = 4096;
// CL: __kernel void braze_kernel_1(
// CL-NEXT: const int n0 = 1024;
// METAL-LABEL: function @split_sum: 2 kernel(s), metal
// METAL: kernel void braze_kernel_0(
// METAL-NEXT: const int n0 = 1024;
// METAL-NEXT: const int n1 = 4096;
// METAL: kernel void braze_kernel_1(
// METAL-NEXT: const int n0 = 1024;
// CPP-LABEL: function @split_sum: 1 kernel(s), cpu
// TRITON-LABEL: function @split_sum: 2 kernel(s), triton
func.func @split_sum(%x: tensor<4194304xf32>) -> tensor<f32> {
  %s = braze.sum %x dims [0] : tensor<4194304xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// CUDA-LABEL: function @warp_rows: 1 kernel(s), cuda
// CUDA: extern "C" __global__ void __launch_bounds__(256) braze_kernel_0(
// CUDA-NOT: __shared__
// CUDA: const int tid = threadIdx.x % 32;
// CUDA-NEXT: const int point = (int)blockIdx.x * 8 + threadIdx.x / 32;
// CUDA-NEXT: if (point >= n0) return;
// CUDA: for (int r = tid; r < reduce_points; r += 32) {
// CUDA: for (int s = 16; s > 0; s >>= 1) {
// CUDA-NEXT: const float v1_s_other = __shfl_down_sync(0xffffffffu, v1_s_mine, s);
// CUDA-NEXT: v1_s_mine = v1_s_mine + v1_s_other;
// CUDA-NEXT: }
// CUDA-NEXT: v1_s_mine = __shfl_sync(0xffffffffu, v1_s_mine, 0);
// CUDA-NEXT: const float v1 = v1_s_mine;
// CUDA-NEXT: if (tid == 0) { out0[i0] = v1; }
// CUDA-NOT: __syncthreads
// HIP-LABEL: function @warp_rows: 1 kernel(s), hip
// HIP: const int tid = threadIdx.x % 64;
// HIP-NEXT: const int point = (int)blockIdx.x * 4 + threadIdx.x / 64;
// HIP: for (int s = 32; s > 0; s >>= 1) {
// HIP-NEXT: const float v1_s_other = __shfl_down(v1_s_mine, s);
// HIP: v1_s_mine = __shfl(v1_s_mine, 0);
// CL-LABEL: function @warp_rows: 1 kernel(s), opencl
// CL: __local float v1_s[64];
// CL: barrier(CLK_LOCAL_MEM_FENCE);
// METAL-LABEL: function @warp_rows: 1 kernel(s), metal
// METAL: const int tid = bz_tid % 32;
// METAL-NEXT: const int point = (int)bz_bid * 1 + bz_tid / 32;
// METAL: const float v1_s_other = simd_shuffle_down(v1_s_mine, (ushort)s);
// METAL: v1_s_mine = simd_broadcast(v1_s_mine, (ushort)0);
func.func @warp_rows(%x: tensor<6x40xf32>) -> tensor<6xf32> {
  %s = braze.sum %x dims [1] : tensor<6x40xf32> -> tensor<6xf32>
  return %s : tensor<6xf32>
}
