// RUN: braze-opt %s -split-input-file -verify-diagnostics

// Tests that a group's waits must follow the order of its starts, naming both.
func.func @wait_out_of_order(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  // expected-error-re @+1 {{'braze.all_reduce_start' op is waited for after 'braze.wait' (of 'braze.all_gather_start') of group "0" at {{.*}}, which completes a later collective of the same group}}
  %a = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %b = braze.all_gather_start %x group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<8xf32>>
  %rb = braze.wait %b : !braze.work<tensor<8xf32>>
  %ra = braze.wait %a : !braze.work<tensor<4xf32>>
  return %ra, %rb : tensor<4xf32>, tensor<8xf32>
}

// -----

// Tests that an all_gather's dim 0 is the input's times the group's size.
func.func @all_gather_size(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'braze.all_gather_start' op dim 0 of the result is 4 but the input's dim 0 times the group's size gives 8}}
  %w = braze.all_gather_start %x group "0" ranks [0, 1] : tensor<4x2xf32> -> !braze.work<tensor<4x2xf32>>
  %r = braze.wait %w : !braze.work<tensor<4x2xf32>>
  return %r : tensor<4x2xf32>
}

// -----

// Tests that reduce_scatter needs dim 0 divisible by the group's size.
func.func @reduce_scatter_divisible(%x: tensor<5xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'braze.reduce_scatter_start' op dim 0 of the input (5) is not a multiple of the group's size 2}}
  %w = braze.reduce_scatter_start %x "sum" group "0" ranks [0, 1] : tensor<5xf32> -> !braze.work<tensor<2xf32>>
  %r = braze.wait %w : !braze.work<tensor<2xf32>>
  return %r : tensor<2xf32>
}

// -----

// Tests that all_to_all's input splits must add up to the input's dim 0.
func.func @all_to_all_splits(%x: tensor<6x2xf32>) -> tensor<6x2xf32> {
  // expected-error @+1 {{'braze.all_to_all_start' op dim 0 of the input is 6 but input_splits add up to 5}}
  %w = braze.all_to_all_start %x output_splits [3, 3] input_splits [2, 3] group "0" ranks [0, 1] : tensor<6x2xf32> -> !braze.work<tensor<6x2xf32>>
  %r = braze.wait %w : !braze.work<tensor<6x2xf32>>
  return %r : tensor<6x2xf32>
}

// -----

// Tests that all_to_all needs one split per member.
func.func @all_to_all_split_count(%x: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'braze.all_to_all_start' op output_splits has 3 entries for a group of 2}}
  %w = braze.all_to_all_start %x output_splits [2, 2, 2] input_splits [3, 3] group "0" ranks [0, 1] : tensor<6xf32> -> !braze.work<tensor<6xf32>>
  %r = braze.wait %w : !braze.work<tensor<6xf32>>
  return %r : tensor<6xf32>
}

// -----

// Tests that a broadcast's root is a position in the group.
func.func @broadcast_root(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.broadcast_start' op root 2 is not a position in a group of 2}}
  %w = braze.broadcast_start %x root 2 group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %r = braze.wait %w : !braze.work<tensor<4xf32>>
  return %r : tensor<4xf32>
}

// -----

// Tests that an unknown reduction is named.
func.func @unknown_reduction(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.all_reduce_start' op reduction "band" is not one of sum, avg, product, min, max}}
  %w = braze.all_reduce_start %x "band" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %r = braze.wait %w : !braze.work<tensor<4xf32>>
  return %r : tensor<4xf32>
}

// -----

// Tests that a rank may not be listed twice.
func.func @duplicate_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.all_reduce_start' op rank 1 is listed twice}}
  %w = braze.all_reduce_start %x "sum" group "0" ranks [1, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %r = braze.wait %w : !braze.work<tensor<4xf32>>
  return %r : tensor<4xf32>
}

// -----

// Tests that a work is waited for once.
func.func @waited_twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'braze.all_reduce_start' op its work is waited for more than once}}
  %w = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf32>>
  %r = braze.wait %w : !braze.work<tensor<4xf32>>
  %s = braze.wait %w : !braze.work<tensor<4xf32>>
  return %r, %s : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a wait must wait for a collective start.
func.func @wait_for_argument(%w: !braze.work<tensor<4xf32>>) -> tensor<4xf32> {
  // expected-error @+1 {{'braze.wait' op waits for a value that no collective start made}}
  %r = braze.wait %w : !braze.work<tensor<4xf32>>
  return %r : tensor<4xf32>
}

// -----

// Tests that the result's element type is the input's.
func.func @element_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'braze.all_reduce_start' op the result's element type 'f16' differs from the input's 'f32'}}
  %w = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : tensor<4xf32> -> !braze.work<tensor<4xf16>>
  %r = braze.wait %w : !braze.work<tensor<4xf16>>
  return %r : tensor<4xf16>
}
