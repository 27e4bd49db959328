// A two-layer MLP block as a frontend might emit it, with the redundancies
// that braze-simplify removes: a double transpose, a reshape round trip, a
// multiply by one and a subtraction of a negation.
//
//   braze-opt --braze-simplify examples/mlp.mlir
func.func @mlp(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w1 = braze.parameter "fc1.weight" : tensor<256x64xf32>
  %b1 = braze.parameter "fc1.bias" : tensor<256xf32>
  %w2 = braze.parameter "fc2.weight" : tensor<64x256xf32>
  %b2 = braze.parameter "fc2.bias" : tensor<64xf32>
  %one = braze.constant dense<1.0> : tensor<64xf32>

  %w1t = braze.permute %w1 [1, 0] : tensor<256x64xf32> -> tensor<64x256xf32>
  %h = braze.addmm %b1, %x, %w1t : tensor<256xf32>, tensor<?x64xf32>, tensor<64x256xf32> -> tensor<?x256xf32>
  %g = braze.gelu %h approximate "tanh" : tensor<?x256xf32>

  %w2t = braze.permute %w2 [1, 0] : tensor<64x256xf32> -> tensor<256x64xf32>
  %w2tt = braze.permute %w2t [1, 0] : tensor<256x64xf32> -> tensor<64x256xf32>
  %w2u = braze.permute %w2tt [1, 0] : tensor<64x256xf32> -> tensor<256x64xf32>
  %y = braze.addmm %b2, %g, %w2u : tensor<64xf32>, tensor<?x256xf32>, tensor<256x64xf32> -> tensor<?x64xf32>

  %flat = braze.reshape %y : tensor<?x64xf32> -> tensor<?xf32>
  %back = braze.reshape %flat : tensor<?xf32> -> tensor<?x64xf32>
  %scaled = braze.mul %back, %one : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  %neg = braze.neg %x : tensor<?x64xf32>
  %out = braze.sub %scaled, %neg : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %out : tensor<?x64xf32>
}
