// RUN: braze-opt %s -split-input-file -verify-diagnostics

// Tests that mismatched broadcast dims name the operand, the dim and both sizes.
func.func @broadcast_mismatch(%a: tensor<3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{'braze.add' op operand #1 dim 0 has size 4, which does not broadcast with size 3 of operand #0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.add %a, %b : tensor<3xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that a result type other than the broadcast shape is rejected.
func.func @wrong_result_shape(%a: tensor<3x1xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3x4xf32>' are incompatible with return type(s) of operation 'tensor<3x5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.mul %a, %b : tensor<3x1xf32>, tensor<4xf32> -> tensor<3x5xf32>
  return
}

// -----

// Tests that a static inferred dim may not be declared dynamic (only ? may be refined).
func.func @unrefined_result(%a: tensor<3x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3x4xf32>' are incompatible with return type(s) of operation 'tensor<?x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.sub %a, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  return
}

// -----

// Tests that element types never mix implicitly.
func.func @element_type_mismatch(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+2 {{operand #1 has element type f16 but operand #0 has f32 (convert one with braze.cast)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.div %a, %b : tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  return
}

// -----

// Tests that transcendental ops take floats only.
func.func @exp_of_int(%a: tensor<4xi32>) {
  // expected-error @+1 {{'braze.exp' op operand #0 must be ranked tensor of}}
  %0 = braze.exp %a : tensor<4xi32>
  return
}

// -----

// Tests that rounding ops take floats only (the frontend passes integers through).
func.func @floor_of_int(%a: tensor<4xi32>) {
  // expected-error @+1 {{'braze.floor' op operand #0 must be ranked tensor of}}
  %0 = braze.floor %a : tensor<4xi32>
  return
}

// -----

// Tests that atan2 takes floats only.
func.func @atan2_of_int(%a: tensor<4xi32>) {
  // expected-error @+1 {{'braze.atan2' op operand #0 must be ranked tensor of}}
  %0 = braze.atan2 %a, %a : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  return
}

// -----

// Tests that remainder has no boolean form.
func.func @remainder_of_bool(%a: tensor<4xi1>) {
  // expected-error @+1 {{'braze.remainder' op operand #0 must be ranked tensor of}}
  %0 = braze.remainder %a, %a : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  return
}

// -----

// Tests that gelu's approximation is checked.
func.func @gelu_approximation(%a: tensor<4xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "erf"}}
  %0 = braze.gelu %a approximate "erf" : tensor<4xf32>
  return
}

// -----

// Tests that where's two values must share an element type.
func.func @where_values(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+2 {{operand #2 has element type i32 but operand #1 has f32}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.where %c, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xi32> -> tensor<4xf32>
  return
}

// -----

// Tests that where's condition must be boolean.
func.func @where_condition(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = braze.where %c, %a, %a : tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that a cast may not change the shape.
func.func @cast_shape(%a: tensor<4x?xf32>) {
  // expected-error @+1 {{changes the shape from [4, ?] to [4, 4]; a cast converts element types only}}
  %0 = braze.cast %a : tensor<4x?xf32> to tensor<4x4xf16>
  return
}

// -----

// Tests that reduced dims must be in range.
func.func @reduce_dim_range(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{'braze.sum' op reduced dim 2 is out of range for rank 2 (valid: 0 to 1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.sum %a dims [2] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that reduced dims must be strictly increasing.
func.func @reduce_dim_order(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{reduced dims must be strictly increasing, but 0 follows 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.max %a dims [1, 0] : tensor<4x8xf32> -> tensor<f32>
  return
}

// -----

// Tests that a reduction needs a dim.
func.func @reduce_no_dims(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{needs at least one dim to reduce}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.min %a dims [] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that keepdim keeps the reduced dims with size 1.
func.func @reduce_keepdim_shape(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.mean %a dims [1] keepdim : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that argmax gives i64 indices.
func.func @argmax_type(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 64-bit signless integer values}}
  %0 = braze.argmax %a dims [1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that matmul checks the contraction dim.
func.func @matmul_k(%a: tensor<4x8xf32>, %b: tensor<7x2xf32>) {
  // expected-error @+2 {{contraction dim mismatch: operand #0 has K = 8 (dim 1) but operand #1 has K = 7 (dim 0)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.matmul %a, %b : tensor<4x8xf32>, tensor<7x2xf32> -> tensor<4x2xf32>
  return
}

// -----

// Tests that matmul takes 2-D operands.
func.func @matmul_rank(%a: tensor<2x4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error @+2 {{operand #0 must have rank 2, got rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.matmul %a, %b : tensor<2x4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  return
}

// -----

// Tests that bmm checks the batch dim.
func.func @bmm_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x2xf32>) {
  // expected-error @+2 {{batch dim 0 is 2 in operand #0 but 3 in operand #1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.bmm %a, %b : tensor<2x4x8xf32>, tensor<3x8x2xf32> -> tensor<2x4x2xf32>
  return
}

// -----

// Tests that addmm's bias must broadcast to the product.
func.func @addmm_bias(%bias: tensor<3xf32>, %a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error @+2 {{bias (operand #0) dim 0 has size 3, which does not broadcast to size 2 of the product}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.addmm %bias, %a, %b : tensor<3xf32>, tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  return
}

// -----

// Tests that addmm names its operands by position (lhs is operand #1).
func.func @addmm_k(%bias: tensor<2xf32>, %a: tensor<4x8xf32>, %b: tensor<9x2xf32>) {
  // expected-error @+2 {{operand #1 has K = 8 (dim 1) but operand #2 has K = 9 (dim 0)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.addmm %bias, %a, %b : tensor<2xf32>, tensor<4x8xf32>, tensor<9x2xf32> -> tensor<4x2xf32>
  return
}

// -----

// Tests that a static reshape keeps the element count.
func.func @reshape_count(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{changes the element count from 32 to 30}}
  %0 = braze.reshape %a : tensor<4x8xf32> -> tensor<5x6xf32>
  return
}

// -----

// Tests that a single inferred dim must divide the element count.
func.func @reshape_infer(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{cannot infer the dynamic dim: 32 elements are not a multiple of 5}}
  %0 = braze.reshape %a : tensor<4x8xf32> -> tensor<?x5xf32>
  return
}

// -----

// Tests that two dynamic result dims need explicit sizes.
func.func @reshape_two_dynamic(%a: tensor<?x8xf32>) {
  // expected-error @+1 {{result has 2 dynamic dims; give one index size per dynamic dim}}
  %0 = braze.reshape %a : tensor<?x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

// Tests that the number of reshape sizes matches the dynamic dims.
func.func @reshape_sizes(%a: tensor<?x8xf32>, %n: index) {
  // expected-error @+1 {{has 1 size operand(s) but the result has 2 dynamic dim(s)}}
  %0 = braze.reshape %a sizes [%n] : tensor<?x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

// Tests that a permutation must cover every dim once.
func.func @permute_repeat(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{permutation names dim 0 twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.permute %a [0, 0] : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

// Tests that a permutation has one entry per dim.
func.func @permute_length(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{permutation has 3 entries but the input has rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.permute %a [0, 1, 2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that only size-1 dims expand.
func.func @expand_non_unit(%a: tensor<3x8xf32>) {
  // expected-error @+1 {{input dim 0 has size 3, which cannot expand to 6 (result dim 0); only size-1 dims expand}}
  %0 = braze.expand %a : tensor<3x8xf32> -> tensor<6x8xf32>
  return
}

// -----

// Tests that expand cannot drop dims.
func.func @expand_rank(%a: tensor<1x3x8xf32>) {
  // expected-error @+1 {{cannot expand rank 3 to the smaller rank 2}}
  %0 = braze.expand %a : tensor<1x3x8xf32> -> tensor<3x8xf32>
  return
}

// -----

// Tests that a dynamic expanded dim needs a size operand.
func.func @expand_needs_size(%a: tensor<1x8xf32>) {
  // expected-error @+1 {{needs 1 size operand(s), one per dynamic result dim not over a dynamic input dim, but has 0}}
  %0 = braze.expand %a : tensor<1x8xf32> -> tensor<?x8xf32>
  return
}

// -----

// Tests that slice bounds are checked.
func.func @slice_bounds(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{needs 0 <= start <= end, got start 5 and end 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.slice %a dim 1 [5 : 2 : 1] : tensor<4x8xf32> -> tensor<4x0xf32>
  return
}

// -----

// Tests that slice steps are positive.
func.func @slice_step(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{step must be at least 1, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.slice %a dim 1 [0 : 8 : 0] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that a constant step is checked beside symbolic bounds.
func.func @slice_symbolic_step(%a: tensor<4x8xf32>, %n: index) {
  // expected-error @+2 {{step must be at least 1, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.slice %a dim 1 [0 : %n : 0] : tensor<4x8xf32> -> tensor<4x?xf32>
  return
}

// -----

// Tests that a constant negative start is refused beside a symbolic end.
func.func @slice_symbolic_negative_start(%a: tensor<4x8xf32>, %n: index) {
  // expected-error @+2 {{needs 0 <= start <= end, got start -1 and end ?}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.slice %a dim 1 [-1 : %n : 1] : tensor<4x8xf32> -> tensor<4x?xf32>
  return
}

// -----

// Tests that a symbolic slice's result may not contradict the input's other dims.
func.func @slice_symbolic_other_dim(%a: tensor<4x8xf32>, %n: index) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x?xf32>' are incompatible with return type(s) of operation 'tensor<5x?xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.slice %a dim 1 [0 : %n : 1] : tensor<4x8xf32> -> tensor<5x?xf32>
  return
}

// -----

// Tests that slice's dim is in range.
func.func @slice_dim(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{dim 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.slice %a dim 2 [0 : 1 : 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that concat inputs agree off the concatenated dim.
func.func @concat_mismatch(%a: tensor<4x8xf32>, %b: tensor<5x8xf32>) {
  // expected-error @+2 {{operand #1 dim 0 has size 5 but earlier operands have 4 (only dim 1 may differ)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.concat %a, %b dim 1 : tensor<4x8xf32>, tensor<5x8xf32> -> tensor<4x16xf32>
  return
}

// -----

// Tests that concat inputs share a rank.
func.func @concat_rank(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+2 {{operand #1 has rank 1 but operand #0 has rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.concat %a, %b dim 0 : tensor<4x8xf32>, tensor<8xf32> -> tensor<5x8xf32>
  return
}

// -----

// Tests that a constant's type is its value's type.
func.func @constant_type() {
  // expected-error @+1 {{'braze.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "braze.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<5xf32>
  return
}

// -----

// Tests that a parameter is named.
func.func @parameter_name() {
  // expected-error @+1 {{needs a non-empty parameter name}}
  %0 = braze.parameter "" : tensor<4xf32>
  return
}

// -----

// Tests that unranked tensors are rejected by the verifier.
func.func @unranked(%a: tensor<*xf32>) {
  // expected-error @+1 {{'braze.neg' op operand #0 must be ranked tensor of}}
  %0 = "braze.neg"(%a) : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

// Tests that the custom form refuses an unranked type while parsing.
func.func @unranked_custom(%a: tensor<*xf32>) {
  // expected-error @+1 {{expected builtin.tensor, but found 'tensor<*xf32>'}}
  %0 = braze.neg %a : tensor<*xf32>
  return
}

// -----

// Tests that inference reports a non-tensor operand instead of crashing.
func.func @scalar_operand(%a: f32, %b: tensor<4xf32>) {
  // expected-error @+1 {{'braze.add' op operand #0 must be ranked tensor of}}
  %0 = "braze.add"(%a, %b) : (f32, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that comparisons need one element type on both sides.
func.func @compare_types(%a: tensor<4xf32>, %b: tensor<4xi64>) {
  // expected-error @+2 {{'braze.lt' op operand #1 has element type i64 but operand #0 has f32}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.lt %a, %b : tensor<4xf32>, tensor<4xi64> -> tensor<4xi1>
  return
}

// -----

// Tests that comparisons produce booleans.
func.func @compare_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = braze.eq %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that logical ops take booleans only.
func.func @logic_of_floats(%a: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = braze.and %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that take's dim is checked.
func.func @take_dim(%t: tensor<4x8xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{'braze.take' op dim 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = braze.take %t, %i dim 2 : tensor<4x8xf32>, tensor<3xi64> -> tensor<4x8xf32>
  return
}

// -----

// Tests that take's indices are integers.
func.func @take_index_type(%t: tensor<4x8xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = braze.take %t, %i dim 0 : tensor<4x8xf32>, tensor<3xf32> -> tensor<3x8xf32>
  return
}

// -----

// Tests that a dynamic iota needs its length.
func.func @iota_no_size() {
  // expected-error @+1 {{has a dynamic length but no size operand}}
  %0 = braze.iota start 0.0 step 1.0 : tensor<?xi64>
  return
}

// -----

// Tests that a static iota takes no length operand.
func.func @iota_both(%n: index) {
  // expected-error @+1 {{has a static length 4 and a size operand; give one of them}}
  %0 = braze.iota start 0.0 step 1.0 sizes [%n] : tensor<4xi64>
  return
}

// -----

// Tests that an iota's start is an operand or a constant, not both.
func.func @iota_start_twice(%n: index) {
  // expected-error @+1 {{has a start operand and a nonzero start constant}}
  %0 = braze.iota start %n step 1.0 {start = 2.0 : f64} : tensor<4xi64>
  return
}

// -----

// Tests that iota is 1-D.
func.func @iota_rank() {
  // expected-error @+1 {{result must be 1-D, got rank 2}}
  %0 = braze.iota start 0.0 step 1.0 : tensor<2x2xi64>
  return
}

// -----

// Tests that a group's body arguments match its inputs.
func.func @group_arguments(%x: tensor<4xf32>) {
  // expected-error @+1 {{'braze.group' op input #0 has type 'tensor<4xf32>' but body argument #0 has type 'tensor<5xf32>'}}
  %0 = braze.group ins(%x) : (tensor<4xf32>) -> tensor<5xf32> {
  ^bb0(%a: tensor<5xf32>):
    braze.yield %a : tensor<5xf32>
  }
  return
}

// -----

// Tests that a group yields its result types.
func.func @group_yield(%x: tensor<4xf32>) {
  // expected-error @+1 {{'braze.group' op yields 'tensor<4xf32>' but its results are 'tensor<4xf16>'}}
  %0 = braze.group ins(%x) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%a: tensor<4xf32>):
    braze.yield %a : tensor<4xf32>
  }
  return
}

// -----

// Tests that a group body cannot capture values from outside.
func.func @group_capture(%x: tensor<4xf32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = braze.group ins() : () -> tensor<4xf32> {
    // expected-error @+1 {{using value defined outside the region}}
    %n = braze.neg %x : tensor<4xf32>
    braze.yield %n : tensor<4xf32>
  }
  return
}

// -----

func.func @kernel_extents(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'braze.kernel' op has 1 dynamic extent(s) in its domain but 0 extent operand(s)}}
  %r = "braze.kernel"(%x) <{operandSegmentSizes = array<i32: 1, 0>, static_domain = array<i64: -9223372036854775808>, reduce = array<i64>}> ({
  ^bb0(%i: index, %n: index, %a: tensor<?xf32>):
    %v = tensor.extract %a[%i] : tensor<?xf32>
    braze.store %v, 0 [%i] : f32
  }) : (tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

func.func @kernel_arguments(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.kernel' op body must take 1 indices, 1 extents and 1 input(s) (3 arguments), but takes 2}}
  %r = braze.kernel ins(%x : tensor<4xf32>) domain [4] reduce [] : tensor<4xf32> {
  ^bb0(%i: index, %a: tensor<4xf32>):
    %v = tensor.extract %a[%i] : tensor<4xf32>
    braze.store %v, 0 [%i] : f32
  }
  return %r : tensor<4xf32>
}

// -----

func.func @kernel_reduce_dims(%x: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'braze.kernel' op reduce dims must be strictly increasing and in [0, 1), got [1]}}
  %r = braze.kernel ins(%x : tensor<4xf32>) domain [4] reduce [1] : tensor<f32> {
  ^bb0(%i: index, %n: index, %a: tensor<4xf32>):
    %v = tensor.extract %a[%i] : tensor<4xf32>
    braze.store %v, 0 [] : f32
  }
  return %r : tensor<f32>
}

// -----

func.func @kernel_unstored(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'braze.kernel' op never stores result #1}}
  %r:2 = braze.kernel ins(%x : tensor<4xf32>) domain [4] reduce [] : tensor<4xf32>, tensor<4xf32> {
  ^bb0(%i: index, %n: index, %a: tensor<4xf32>):
    %v = tensor.extract %a[%i] : tensor<4xf32>
    braze.store %v, 0 [%i] : f32
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @reduce_kind(%x: tensor<4xf32>) -> tensor<f32> {
  %r = braze.kernel ins(%x : tensor<4xf32>) domain [4] reduce [0] : tensor<f32> {
  ^bb0(%i: index, %n: index, %a: tensor<4xf32>):
    %v = tensor.extract %a[%i] : tensor<4xf32>
    // expected-error @+1 {{'braze.reduce' op unknown reduction kind 'and' for 'f32' (add, max, min, argmax; and, or on i1)}}
    %s = braze.reduce "and" %v : f32 -> f32
    braze.store %s, 0 [] : f32
  }
  return %r : tensor<f32>
}

// -----

func.func @reduce_argmax_type(%x: tensor<4xf32>) -> tensor<f32> {
  %r = braze.kernel ins(%x : tensor<4xf32>) domain [4] reduce [0] : tensor<f32> {
  ^bb0(%i: index, %n: index, %a: tensor<4xf32>):
    %v = tensor.extract %a[%i] : tensor<4xf32>
    // expected-error @+1 {{'braze.reduce' op result must be 'i64' for 'argmax' of 'f32'}}
    %s = braze.reduce "argmax" %v : f32 -> f32
    braze.store %s, 0 [] : f32
  }
  return %r : tensor<f32>
}

// -----

func.func @store_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = braze.kernel ins(%x : tensor<4xf32>) domain [4] reduce [] : tensor<4xf32> {
  ^bb0(%i: index, %n: index, %a: tensor<4xf32>):
    %v = tensor.extract %a[%i] : tensor<4xf32>
    // expected-error @+1 {{'braze.store' op has 2 index(es) for result #0 of rank 1}}
    braze.store %v, 0 [%i, %i] : f32
  }
  return %r : tensor<4xf32>
}

// -----

func.func @store_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  %r = braze.kernel ins(%x : tensor<4xf32>) domain [4] reduce [] : tensor<4xf16> {
  ^bb0(%i: index, %n: index, %a: tensor<4xf32>):
    %v = tensor.extract %a[%i] : tensor<4xf32>
    // expected-error @+1 {{'braze.store' op stores 'f32' into result #0 of 'tensor<4xf16>'}}
    braze.store %v, 0 [%i] : f32
  }
  return %r : tensor<4xf16>
}

// -----

// Tests that a reduced value (once per parallel point) cannot be stored at
// a reduction index.
func.func @store_reduced_at_reduction_index(%x: tensor<4x1xf32>) -> tensor<4x1xf32> {
  %r = braze.kernel ins(%x : tensor<4x1xf32>) domain [4, 1] reduce [1] : tensor<4x1xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x1xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x1xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    // expected-error @+1 {{'braze.store' op stores a reduced value at the index of reduction dim 1 (index #1); store it at 0 there}}
    braze.store %s, 0 [%i, %j] : f32
  }
  return %r : tensor<4x1xf32>
}

// -----

// Tests that a convolution's channels must agree with its weight.
func.func @convolution_channels(%x: tensor<2x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+1 {{'braze.convolution' op input has 4 channels but the weight expects 3}}
  %0 = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1
      : tensor<2x4x8x8xf32>, tensor<6x3x3x3xf32> -> tensor<2x6x6x6xf32>
  return
}

// -----

// Tests that a static output size must follow from stride and padding.
func.func @convolution_output_size(%x: tensor<2x3x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+1 {{'braze.convolution' op spatial dim 1 of the result is 8 but the sizes give 4}}
  %0 = braze.convolution %x, %w stride [2, 2] padding [1, 1] dilation [1, 1] groups 1
      : tensor<2x3x8x8xf32>, tensor<6x3x3x3xf32> -> tensor<2x6x4x8xf32>
  return
}

// -----

// Tests that stride, padding and dilation have one entry per spatial dim.
func.func @convolution_attribute_length(%x: tensor<2x3x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+1 {{'braze.convolution' op stride must have 2 entries (one per spatial dim), got 1}}
  %0 = braze.convolution %x, %w stride [1] padding [0, 0] dilation [1, 1] groups 1
      : tensor<2x3x8x8xf32>, tensor<6x3x3x3xf32> -> tensor<2x6x6x6xf32>
  return
}

// -----

// Tests that groups must divide the weight's channels.
func.func @convolution_groups(%x: tensor<2x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{'braze.convolution' op weight dim 0 (6) is not divisible by groups (4)}}
  %0 = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 4
      : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x6x6xf32>
  return
}

// -----

// Tests that output_padding belongs to transposed convolutions only.
func.func @convolution_output_padding(%x: tensor<2x3x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+1 {{'braze.convolution' op output_padding is only for a transposed convolution}}
  %0 = "braze.convolution"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 1, 1>}
      : (tensor<2x3x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<2x6x6x6xf32>
  return
}

// -----

// Tests that an extern target names an overload.
func.func @extern_target(%x: tensor<4xf32>) {
  // expected-error @+1 {{'braze.extern' op target must name an overload as namespace.op.overload, got 'cumsum'}}
  %0 = braze.extern "cumsum" (%x) args [0 : index, 0] : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that an operand reference must name an operand.
func.func @extern_operand_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{'braze.extern' op argument refers to operand #1 but the op has 1 operand(s)}}
  %0 = braze.extern "aten.add.Tensor" (%x) args [0 : index, 1 : index] : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that every operand is passed to the call.
func.func @extern_unused_operand(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'braze.extern' op operand #1 is not used by any argument}}
  %0 = braze.extern "aten.neg.default" (%x, %y) args [0 : index] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that only device, layout and memory_format objects are arguments.
func.func @extern_object(%x: tensor<4xf32>) {
  // expected-error @+1 {{'braze.extern' op a dictionary argument must be one of}}
  %0 = braze.extern "aten.clone.default" (%x) args [0 : index] kwargs {memory_format = {stream = "0"}} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that only a 2-D or 3-D convolution runs channels-last.
func.func @convolution_memory_format(%x: tensor<2x3x8xf32>, %w: tensor<6x3x3xf32>) {
  // expected-error @+1 {{'braze.convolution' op memory_format must be "channels_last" on a 2-D or 3-D convolution, got "channels_last" on 1 spatial dim(s)}}
  %0 = braze.convolution %x, %w stride [1] padding [0] dilation [1] groups 1 memory_format "channels_last"
      : tensor<2x3x8xf32>, tensor<6x3x3xf32> -> tensor<2x6x6xf32>
  return
}

// -----

// Tests that attention's query and key must share the embedding size.
func.func @attention_embedding(%q: tensor<2x4x8x64xf32>, %k: tensor<2x4x8x32xf32>, %v: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{'braze.attention' op query and key must have one embedding size, got 64 and 32}}
  %0 = braze.attention %q, %k, %v : tensor<2x4x8x64xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32> -> tensor<2x4x8x32xf32>
  return
}

// -----

// Tests that fewer key/value heads than query heads need `gqa`.
func.func @attention_heads(%q: tensor<2x12x8x64xf32>, %k: tensor<2x4x8x64xf32>, %v: tensor<2x4x8x64xf32>) {
  // expected-error @+1 {{'braze.attention' op batch dim 1 of key or value (4) does not broadcast to the query's (12); grouped heads need `gqa`}}
  %0 = braze.attention %q, %k, %v : tensor<2x12x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32> -> tensor<2x12x8x64xf32>
  return
}

// -----

// Tests that key and value must share the sequence length, and the result
// is batch... x L x Ev.
func.func @attention_lengths(%q: tensor<2x8x64xf32>, %k: tensor<2x8x64xf32>, %v: tensor<2x6x64xf32>) {
  // expected-error @+1 {{'braze.attention' op key and value must have one sequence length, got 8 and 6}}
  %0 = braze.attention %q, %k, %v : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x6x64xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x8x64xf32>, %k: tensor<2x8x64xf32>, %v: tensor<2x8x32xf32>) {
  // expected-error @+1 {{'braze.attention' op result must be batch... x L x Ev (8 x 32), got 'tensor<2x8x64xf32>'}}
  %0 = braze.attention %q, %k, %v : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x32xf32> -> tensor<2x8x64xf32>
  return
}

// -----

// Tests that a mask is i1 or the query's type, and excludes `causal`.
func.func @attention_mask_type(%q: tensor<2x8x64xf32>, %m: tensor<8x8xi32>) {
  // expected-error @+1 {{'braze.attention' op mask must be i1 or the query's element type, got 'i32'}}
  %0 = braze.attention %q, %q, %q mask %m : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<8x8xi32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_mask_and_causal(%q: tensor<2x8x64xf32>, %m: tensor<8x8xi1>) {
  // expected-error @+1 {{'braze.attention' op takes a mask or `causal`, not both}}
  %0 = braze.attention %q, %q, %q mask %m causal : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<8x8xi1> -> tensor<2x8x64xf32>
  return
}

// -----

// Tests that a soft cap is above 0 (tanh's sign would flip) and finite.
func.func @attention_softcap(%q: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'braze.attention' op softcap must be positive and finite, got 0}}
  %0 = braze.attention %q, %q, %q softcap 0.0 : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @flash_attention_softcap(%q: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'braze.flash_attention' op softcap must be positive and finite, got -3}}
  %0 = braze.flash_attention %q, %q, %q scale 0.125 softcap -3.0 q_block 8 kv_block 8 : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32> -> tensor<2x8x64xf32>
  return
}

// -----

// Tests that a symbolic slice bound needs its operand.
func.func @slice_bound_without_operand(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{has 0 bound operand(s) for 1 symbolic bound(s)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "braze.slice"(%a) <{dim = 1 : i64, static_bounds = array<i64: 0, -9223372036854775808, 1>}> : (tensor<4x8xf32>) -> tensor<4x?xf32>
  return
}

// -----

// Tests that a slice has exactly three bounds.
func.func @slice_two_bounds(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{needs 3 bounds (start, end, step), got 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "braze.slice"(%a) <{dim = 1 : i64, static_bounds = array<i64: 0, 4>}> : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @flash_attention_block(%q: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-error @+1 {{q_block and kv_block must be at least 1, got 0 and 64}}
  %o = braze.flash_attention %q, %q, %q scale 0.25 q_block 0 kv_block 64 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return %o : tensor<2x8x16xf32>
}

// -----

func.func @flash_attention_shapes(%q: tensor<2x8x16xf32>, %k: tensor<2x8x12xf32>) -> tensor<2x8x16xf32> {
  // expected-error @+1 {{query and key must have one embedding size, got 16 and 12}}
  %o = braze.flash_attention %q, %k, %q scale 0.25 q_block 8 kv_block 8 : tensor<2x8x16xf32>, tensor<2x8x12xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return %o : tensor<2x8x16xf32>
}

// -----

func.func @result_order_moving_the_last_dim(%q: tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+1 {{result_order must permute the result's 4 dims and keep the last one last, got [0, 1, 3, 2]}}
  %o = braze.flash_attention %q, %q, %q scale 0.25 q_block 8 kv_block 8 result_order [0, 1, 3, 2] : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  return %o : tensor<2x4x16x8xf32>
}

// -----

func.func @attention_result_order_of_too_few_dims(%q: tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'braze.attention' op result_order must permute the result's 4 dims and keep the last one last, got [1, 0, 3]}}
  %o = braze.attention %q, %q, %q result_order [1, 0, 3] : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %o : tensor<2x8x4x16xf32>
}

// -----

func.func @result_order_not_a_permutation(%q: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  // expected-error @+1 {{result_order must permute the result's 4 dims and keep the last one last, got [0, 0, 2, 3]}}
  %o = braze.flash_attention %q, %q, %q scale 0.25 q_block 8 kv_block 8 result_order [0, 0, 2, 3] : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// The result is the attention's [2, 4, 8, 16] permuted: [2, 8, 4, 16].
func.func @result_order_of_the_wrong_shape(%q: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  // expected-error @+1 {{result must be batch... x L x Ev (8 x 16), got 'tensor<2x8x4x16xf32>' in the attention's order}}
  %o = braze.flash_attention %q, %q, %q scale 0.25 q_block 8 kv_block 8 result_order [0, 2, 1, 3] : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

func.func @grouped_heads_without_gqa(%q: tensor<1x8x1x16xf32>, %k: tensor<1x8x9x16xf32>) -> tensor<1x8x1x16xf32> {
  // expected-error @+1 {{grouped_heads needs grouped query heads (gqa)}}
  %o = braze.flash_attention %q, %k, %k scale 0.25 q_block 1 kv_block 8 grouped_heads : tensor<1x8x1x16xf32>, tensor<1x8x9x16xf32>, tensor<1x8x9x16xf32> -> tensor<1x8x1x16xf32>
  return %o : tensor<1x8x1x16xf32>
}

// -----

func.func @grouped_heads_of_several_rows(%q: tensor<1x8x2x16xf32>, %k: tensor<1x2x9x16xf32>) -> tensor<1x8x2x16xf32> {
  // expected-error @+1 {{grouped_heads needs one query row}}
  %o = braze.flash_attention %q, %k, %k scale 0.25 gqa q_block 2 kv_block 8 grouped_heads : tensor<1x8x2x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32> -> tensor<1x8x2x16xf32>
  return %o : tensor<1x8x2x16xf32>
}

// -----

func.func @grouped_heads_with_a_mask_per_head(%q: tensor<1x8x1x16xf32>, %k: tensor<1x2x9x16xf32>, %m: tensor<1x8x1x9xf32>) -> tensor<1x8x1x16xf32> {
  // expected-error @+1 {{grouped_heads needs a mask the same for every head}}
  %o = braze.flash_attention %q, %k, %k mask %m scale 0.25 gqa q_block 1 kv_block 8 grouped_heads : tensor<1x8x1x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x8x1x9xf32> -> tensor<1x8x1x16xf32>
  return %o : tensor<1x8x1x16xf32>
}
