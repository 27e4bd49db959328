// RUN: not braze-opt %s 2>&1 | FileCheck %s
// RUN: not braze-opt %s --braze-simplify 2>&1 | FileCheck %s
// RUN: not braze-opt %s --no-such-pass 2>&1 | FileCheck %s --check-prefix=FLAG

// Tests that invalid IR makes braze-opt print the diagnostic with its file,
// line and column, and exit non-zero, before any pass runs.

// CHECK: braze-opt-errors.mlir:[[@LINE+3]]:8: error: 'braze.matmul' op contraction dim mismatch
// FLAG: Unknown command line argument '--no-such-pass'
func.func @bad(%a: tensor<4x8xf32>, %b: tensor<7x2xf32>) -> tensor<4x2xf32> {
  %0 = braze.matmul %a, %b : tensor<4x8xf32>, tensor<7x2xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}
