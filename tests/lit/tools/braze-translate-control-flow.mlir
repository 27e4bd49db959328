// Tests that the kernels inside a braze.switch's branches reach every
// renderer as ordinary kernels, numbered in program order after the kernel
// before the switch: nothing about control flow is new to a renderer.

// RUN: braze-translate --target=cuda %s | FileCheck %s --check-prefix=CUDA
// RUN: braze-translate --target=opencl %s | FileCheck %s --check-prefix=CL
// RUN: braze-translate --target=triton %s | FileCheck %s --check-prefix=TRITON
// RUN: braze-translate --target=cpu %s | FileCheck %s --check-prefix=CPP

// CUDA: 3 kernel(s), cuda
// CUDA-COUNT-3: extern "C" __global__
// CUDA-NOT: __global__
// CL-COUNT-3: __kernel void
// CL-NOT: __kernel void
// TRITON: {{^}}@triton.jit
// TRITON-NEXT: def neg_exp_add_0(
// TRITON: {{^}}@triton.jit
// TRITON-NEXT: def sum_exp_div_1(
// TRITON: {{^}}@triton.jit
// TRITON-NEXT: def neg_2(
// TRITON-NOT: @triton.jit
// CPP-COUNT-3: extern "C" {{.*}}int braze_kernel_{{[0-9]}}(
// CPP-NOT: extern "C" {{.*}}int braze_kernel_{{[0-9]}}(
func.func @branches(%i: tensor<i64>, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = braze.sigmoid %x : tensor<4x8xf32>
  %r = braze.switch %i (%s) : (tensor<i64>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %e = braze.exp %a : tensor<4x8xf32>
    %sum = braze.sum %e dims [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = braze.div %e, %sum : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    braze.yield %d : tensor<4x8xf32>
  }, {
  ^bb0(%b: tensor<4x8xf32>):
    %n = braze.neg %b : tensor<4x8xf32>
    braze.yield %n : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}
