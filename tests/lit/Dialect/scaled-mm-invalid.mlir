// RUN: braze-opt %s -split-input-file -verify-diagnostics

// Tests that a per-tensor scale with a row-wise one is rejected.
func.func @mixed_scales(%a: tensor<8x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %sa: tensor<f32>, %sb: tensor<1x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'braze.scaled_mm' op scales must be both per tensor (one element: rank 0, [1] or [1, 1]) or both row-wise (lhs_scale [M, 1] = [8, 1], rhs_scale [1, N] = [1, 32]), got 'tensor<f32>' and 'tensor<1x32xf32>'}}
  %y = braze.scaled_mm %a, %b scales(%sa, %sb : tensor<f32>, tensor<1x32xf32>)
      : (tensor<8x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Tests that a row-wise scale of the wrong length is rejected.
func.func @scale_length(%a: tensor<8x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %sa: tensor<4x1xf32>, %sb: tensor<1x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'braze.scaled_mm' op scales must be both per tensor (one element: rank 0, [1] or [1, 1]) or both row-wise (lhs_scale [M, 1] = [8, 1], rhs_scale [1, N] = [1, 32]), got 'tensor<4x1xf32>' and 'tensor<1x32xf32>'}}
  %y = braze.scaled_mm %a, %b scales(%sa, %sb : tensor<4x1xf32>, tensor<1x32xf32>)
      : (tensor<8x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Tests that the contraction dims must agree.
func.func @contraction(%a: tensor<8x64xf8E4M3FN>, %b: tensor<48x32xf8E4M3FN>, %sa: tensor<f32>, %sb: tensor<f32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'braze.scaled_mm' op contraction dim mismatch: lhs has K = 64 but rhs has K = 48}}
  %y = braze.scaled_mm %a, %b scales(%sa, %sb : tensor<f32>, tensor<f32>)
      : (tensor<8x64xf8E4M3FN>, tensor<48x32xf8E4M3FN>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Tests that the bias is one per column.
func.func @bias_shape(%a: tensor<8x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %sa: tensor<f32>, %sb: tensor<f32>, %bias: tensor<8xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'braze.scaled_mm' op bias must be [N] = [32], got 'tensor<8xf32>'}}
  %y = braze.scaled_mm %a, %b scales(%sa, %sb : tensor<f32>, tensor<f32>) bias(%bias : tensor<8xf32>)
      : (tensor<8x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Tests that the operands are 8-bit floats.
func.func @operand_type(%a: tensor<8x64xbf16>, %b: tensor<64x32xf8E4M3FN>, %sa: tensor<f32>, %sb: tensor<f32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'braze.scaled_mm' op operand #0 must be ranked tensor of}}
  %y = braze.scaled_mm %a, %b scales(%sa, %sb : tensor<f32>, tensor<f32>)
      : (tensor<8x64xbf16>, tensor<64x32xf8E4M3FN>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
