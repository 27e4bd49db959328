// RUN: braze-opt %s -split-input-file -verify-diagnostics

// Tests that the contraction dims must agree after the transpose flags.
func.func @contraction(%x: tensor<4x64xf32>, %w: tensor<64x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'braze.fused_gemm' op contraction dim mismatch: lhs has K = 64 but rhs has K = 32 (after the transpose flags)}}
  %y = braze.fused_gemm %x, %w extras() indexing [] transpose_rhs accumulator f32
      : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %y : tensor<4x32xf32>
}

// -----

// Tests that an integer accumulator cannot hold a float product.
func.func @accumulator(%x: tensor<4x8xf16>, %w: tensor<8x2xf16>) -> tensor<4x2xf16> {
  // expected-error @+1 {{'braze.fused_gemm' op accumulator 'i32' cannot accumulate a product of 'f16' (f32 or f64 for floats, i32 or i64 for integers)}}
  %y = braze.fused_gemm %x, %w extras() indexing [] accumulator i32
      : (tensor<4x8xf16>, tensor<8x2xf16>) -> tensor<4x2xf16> {
  ^bb0(%acc: i32):
    %t = arith.sitofp %acc : i32 to f16
    braze.gemm_yield %t : f16
  }
  return %y : tensor<4x2xf16>
}

// -----

// Tests that a bias indexed by n must have N elements.
func.func @bias_shape(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %bias: tensor<4xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'braze.fused_gemm' op extra #0 is indexed by 'n' but has type 'tensor<4xf32>' (the product is [..., 4, 2])}}
  %y = braze.fused_gemm %x, %w extras(%bias : tensor<4xf32>) indexing ["n"] accumulator f32
      : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%acc: f32, %b: f32):
    %s = arith.addf %acc, %b : f32
    braze.gemm_yield %s : f32
  }
  return %y : tensor<4x2xf32>
}

// -----

// Tests that an unknown indexing names the choices.
func.func @indexing(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %bias: tensor<2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'braze.fused_gemm' op extra #0 has indexing 'k'; expected "mn", "n", "m" or "scalar"}}
  %y = braze.fused_gemm %x, %w extras(%bias : tensor<2xf32>) indexing ["k"] accumulator f32
      : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%acc: f32, %b: f32):
    braze.gemm_yield %acc : f32
  }
  return %y : tensor<4x2xf32>
}

// -----

// Tests that a row-wise scale must have one element per row.
func.func @scale_shape(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %s: tensor<2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'braze.fused_gemm' op lhs_scale must be a scalar (rank 0) or have one element per row (M = 4), got 'tensor<2xf32>'}}
  %y = braze.fused_gemm %x, %w lhs_scale(%s : tensor<2xf32>) extras() indexing [] accumulator f32
      : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %y : tensor<4x2xf32>
}

// -----

// Tests that the epilogue takes the accumulator, then one element per extra.
func.func @epilogue_arguments(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %bias: tensor<2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'braze.fused_gemm' op epilogue must take 2 argument(s) (the accumulator element, then one element per extra), got 1}}
  %y = braze.fused_gemm %x, %w extras(%bias : tensor<2xf32>) indexing ["n"] accumulator f32
      : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %y : tensor<4x2xf32>
}

// -----

// Tests that the epilogue yields the result's element type.
func.func @epilogue_type(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  // expected-error @+1 {{'braze.fused_gemm' op epilogue yields 'f32' for result #0, whose elements are 'bf16'}}
  %y = braze.fused_gemm %x, %w extras() indexing [] accumulator f32
      : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %y : tensor<4x2xbf16>
}

// -----

// Tests that the batch dims must agree.
func.func @batch(%x: tensor<2x4x8xf32>, %w: tensor<3x8x2xf32>) -> tensor<2x4x2xf32> {
  // expected-error @+1 {{'braze.fused_gemm' op batch dim 0 is 2 in lhs, 3 in rhs and 2 in the result}}
  %y = braze.fused_gemm %x, %w extras() indexing [] accumulator f32
      : (tensor<2x4x8xf32>, tensor<3x8x2xf32>) -> tensor<2x4x2xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %y : tensor<2x4x2xf32>
}

// -----

// Tests that a reduction kind must be "add" or "max".
func.func @reduction_kind(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> (tensor<4x2xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'braze.fused_gemm' op reduction 'min' is not "add" or "max"}}
  %y, %s = braze.fused_gemm %x, %w extras() indexing [] accumulator f32 reductions ["min"]
      : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>, tensor<4xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc, %acc : f32, f32
  }
  return %y, %s : tensor<4x2xf32>, tensor<4xf32>
}

// -----

// Tests that a fused GEMM keeps at least one output besides its statistics.
func.func @no_output(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.fused_gemm' op has 1 result(s) and 1 reduction(s): the results are one or more outputs, then one row statistic per reduction}}
  %s = braze.fused_gemm %x, %w extras() indexing [] accumulator f32 reductions ["add"]
      : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %s : tensor<4xf32>
}

// -----

// Tests that a row statistic is [batch..., M].
func.func @statistic_shape(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>) {
  // expected-error @+1 {{'braze.fused_gemm' op result #1 must be [batch..., M] (a row statistic), like result #0, got 'tensor<2xf32>'}}
  %y, %s = braze.fused_gemm %x, %w extras() indexing [] accumulator f32 reductions ["max"]
      : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>, tensor<2xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc, %acc : f32, f32
  }
  return %y, %s : tensor<4x2xf32>, tensor<2xf32>
}

// -----

// Tests that the epilogue yields one value per result.
func.func @yield_count(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  // expected-error @+1 {{'braze.fused_gemm' op epilogue yields 1 value(s) but the op has 2 result(s)}}
  %y, %z = braze.fused_gemm %x, %w extras() indexing [] accumulator f32
      : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>, tensor<4x2xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %y, %z : tensor<4x2xf32>, tensor<4x2xf32>
}

// -----

// Tests that a float times an int8 weight is accepted but an int8 lhs
// times a float is not (the weight is the rhs).
func.func @int8_lhs(%x: tensor<4x8xi8>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'braze.fused_gemm' op lhs and rhs must have one element type, or both be 8-bit floats, or be floats times an i8 weight; got 'i8' and 'f32'}}
  %y = braze.fused_gemm %x, %w extras() indexing [] accumulator f32
      : (tensor<4x8xi8>, tensor<8x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %y : tensor<4x2xf32>
}

// -----

// Tests that a scale is a float of 32 bits or fewer.
func.func @scale_type(%x: tensor<4x8xf32>, %w: tensor<8x2xi8>, %s: tensor<2xf64>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'braze.fused_gemm' op rhs_scale must be f32, bf16 or f16, got 'f64'}}
  %y = braze.fused_gemm %x, %w rhs_scale(%s : tensor<2xf64>) extras() indexing [] accumulator f32
      : (tensor<4x8xf32>, tensor<8x2xi8>) -> tensor<4x2xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %y : tensor<4x2xf32>
}
