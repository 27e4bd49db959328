// RUN: braze-opt %s --pass-pipeline='builtin.module(braze-simplify,func.func(braze-fuse-pointwise,braze-lower-kernels))' --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s
// RUN: braze-opt %s --pass-pipeline='builtin.module(braze-simplify,func.func(braze-fuse-pointwise))' --mlir-print-ir-after-all --mlir-print-ir-module-scope --mlir-disable-threading 2>&1 >/dev/null | FileCheck %s --check-prefix=MODULE

// Tests that braze-opt prints the IR after each pass as mlir-opt does: the
// function after each function pass, the whole module with
// --mlir-print-ir-module-scope.

// CHECK: // -----// IR Dump After BrazeSimplify (braze-simplify) //----- //
// CHECK-NEXT: module {
// CHECK: braze.neg
// CHECK: // -----// IR Dump After BrazeFusePointwise (braze-fuse-pointwise) //----- //
// CHECK-NEXT: func.func @f
// CHECK: braze.group
// CHECK: // -----// IR Dump After BrazeLowerKernels (braze-lower-kernels) //----- //
// CHECK-NEXT: func.func @f
// CHECK: braze.kernel

// MODULE: // -----// IR Dump After BrazeSimplify (braze-simplify) ('builtin.module' operation) //----- //
// MODULE-NEXT: module {
// MODULE: // -----// IR Dump After BrazeFusePointwise (braze-fuse-pointwise) ('func.func' operation: @f) //----- //
// MODULE-NEXT: module {
// MODULE: braze.group
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = braze.exp %x : tensor<4x8xf32>
  %n = braze.neg %e : tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}
