// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=tpu}))' 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=hip threads=32}))' 2>&1 | FileCheck %s --check-prefix=THREADS

// Tests that an unknown target and a thread count below the warp are refused.
// TARGET: braze-gpu-schedule: unknown target 'tpu' (cuda, hip, opencl, metal)
// THREADS: braze-gpu-schedule: threads must be a power of two of at least 64 on hip, got 32
func.func @f() {
  return
}
