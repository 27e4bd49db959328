// RUN: braze-opt %s -split-input-file -verify-diagnostics

// Tests that a switch needs a branch.
func.func @no_branch(%i: tensor<i64>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.switch' op needs at least one branch}}
  %r = "braze.switch"(%i, %x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Tests that the index is a rank-0 integer tensor.
func.func @float_index(%i: tensor<f32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.switch' op operand #0 must be 0D tensor of}}
  %r = braze.switch %i (%x) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that every branch takes the inputs' types.
func.func @branch_arguments(%i: tensor<i64>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.switch' op branch #1 takes 'tensor<4xf16>' but must take 'tensor<4xf32>'}}
  %r = braze.switch %i (%x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }, {
  ^bb0(%a: tensor<4xf16>):
    %c = braze.constant dense<1.0> : tensor<4xf32>
    braze.yield %c : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a branch whose block is empty (no braze.yield: a truncated
// file) is an error, not a crash.
func.func @empty_branch(%i: tensor<i64>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.switch' op branch #1 must end with braze.yield}}
  %r = braze.switch %i (%x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }, {
  ^bb0(%b: tensor<4xf32>):
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a branch with no block at all is an error, not a crash.
func.func @blockless_branch(%i: tensor<i64>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.switch' op region #1 ('branches') failed to verify constraint: region with 1 blocks}}
  %r = braze.switch %i (%x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }, {
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a branch yields as many values as the switch has results.
func.func @yield_count(%i: tensor<i64>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.switch' op branch #0 yields 2 value(s) but 1 are expected}}
  %r = braze.switch %i (%x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a, %a : tensor<4xf32>, tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a yielded static dim must agree with a static result dim.
func.func @yield_shape(%i: tensor<i64>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.switch' op branch #0 yields 'tensor<3xf32>' as value #0 where 'tensor<4xf32>' is expected}}
  %r = braze.switch %i (%x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %c = braze.constant dense<1.0> : tensor<3xf32>
    braze.yield %c : tensor<3xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a region cannot read a value defined outside it.
func.func @captured(%i: tensor<i64>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %r = braze.switch %i () : (tensor<i64>) -> tensor<4xf32> {
    // expected-error @+1 {{using value defined outside the region}}
    braze.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a while carries as many values as it has results.
func.func @while_count(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'braze.while' op carries 1 value(s) but has 2 result(s)}}
  %r:2 = braze.while (%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) condition {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %c = braze.constant dense<false> : tensor<i1>
    braze.yield %c : tensor<i1>
  } do {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    braze.yield %a, %b : tensor<4xf32>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that the condition yields one rank-0 i1 tensor.
func.func @while_condition(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.while' op the condition yields 'tensor<4xi1>' as value #0 where 'tensor<i1>' is expected}}
  %r = braze.while (%x) : (tensor<4xf32>) -> tensor<4xf32> condition {
  ^bb0(%a: tensor<4xf32>):
    %z = braze.constant dense<0.0> : tensor<4xf32>
    %c = braze.lt %a, %z : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>
    braze.yield %c : tensor<4xi1>
  } do {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that the body takes the carried values then the extras.
func.func @while_body_arguments(%x: tensor<4xf32>, %e: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.while' op the body takes 'tensor<4xf32>' but must take 'tensor<4xf32>', 'tensor<i64>'}}
  %r = braze.while (%x) extra (%e) : (tensor<4xf32>, tensor<i64>) -> tensor<4xf32> condition {
  ^bb0(%a: tensor<4xf32>, %l: tensor<i64>):
    %c = braze.constant dense<false> : tensor<i1>
    braze.yield %c : tensor<i1>
  } do {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that the body yields the carried types.
func.func @while_body_yield(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.while' op the body yields 'tensor<4xi64>' as value #0 where 'tensor<4xf32>' is expected}}
  %r = braze.while (%x) : (tensor<4xf32>) -> tensor<4xf32> condition {
  ^bb0(%a: tensor<4xf32>):
    %c = braze.constant dense<false> : tensor<i1>
    braze.yield %c : tensor<i1>
  } do {
  ^bb0(%a: tensor<4xf32>):
    %c = braze.constant dense<1> : tensor<4xi64>
    braze.yield %c : tensor<4xi64>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that braze.yield outside a group, switch or while is refused.
func.func @stray_yield(%x: tensor<4xf32>) {
  // expected-error @+1 {{'braze.yield' op expects parent op to be one of 'braze.group, braze.switch, braze.while'}}
  braze.yield %x : tensor<4xf32>
}
