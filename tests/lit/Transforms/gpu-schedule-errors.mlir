// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=tpu}))' 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=hip threads=32}))' 2>&1 | FileCheck %s --check-prefix=THREADS
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{warp-row=-1}))' 2>&1 | FileCheck %s --check-prefix=WARP
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{elements=3}))' 2>&1 | FileCheck %s --check-prefix=ELEMENTS
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{gemm-tile=8}))' 2>&1 | FileCheck %s --check-prefix=GEMM
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{gemm-tile=48}))' 2>&1 | FileCheck %s --check-prefix=GEMM48

// Tests that an unknown target, a thread count below the warp and a
// negative warp-row, elements per thread other than a power of two and a
// fused GEMM tile that is not a power of two of at least 16 are refused.
// TARGET: braze-gpu-schedule: unknown target 'tpu' (cuda, hip, opencl, metal)
// THREADS: braze-gpu-schedule: threads must be a power of two of at least 64 on hip, got 32
// WARP: braze-gpu-schedule: warp-row must be at least 0, got -1
// ELEMENTS: braze-gpu-schedule: elements must be a power of two, got 3
// GEMM: braze-gpu-schedule: gemm-tile must be a power of two of at least 16, got 8
// GEMM48: braze-gpu-schedule: gemm-tile must be a power of two of at least 16, got 48
func.func @f() {
  return
}
