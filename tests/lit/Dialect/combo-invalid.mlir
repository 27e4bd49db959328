// RUN: braze-opt %s -split-input-file -verify-diagnostics

// Each test breaks one rule of braze.combo's verifier. The kernels are
// copies of one (x -> x) kernel over tensor<8xf32>.

// Tests that an unknown dispatch is named.
func.func @unknown_dispatch(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'braze.combo' op has unknown dispatch 'zigzag' (expected sequential, round_robin or flattened)}}
  %a, %b = braze.combo dispatch "zigzag" schedules [{block = 8 : i64, cost = 1 : i64}, {block = 8 : i64, cost = 1 : i64}] : tensor<8xf32>, tensor<8xf32> {
    %0 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<8xf32>
  }, {
    %1 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %1 : tensor<8xf32>
  }
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a combo needs two sub-kernels.
func.func @one(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'braze.combo' op must hold at least 2 sub-kernels, holds 1}}
  %a = braze.combo dispatch "sequential" schedules [{block = 8 : i64, cost = 1 : i64}] : tensor<8xf32> {
    %0 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<8xf32>
  }
  return %a : tensor<8xf32>
}

// -----

// Tests that every sub-kernel needs a schedule.
func.func @schedules(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'braze.combo' op has 2 sub-kernel(s) but 1 schedule(s)}}
  %a, %b = braze.combo dispatch "sequential" schedules [{block = 8 : i64, cost = 1 : i64}] : tensor<8xf32>, tensor<8xf32> {
    %0 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<8xf32>
  }, {
    %1 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %1 : tensor<8xf32>
  }
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a block must be a power of two.
func.func @block(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'braze.combo' op schedule #1 entry 'block' must be a power of two, got 6}}
  %a, %b = braze.combo dispatch "sequential" schedules [{block = 8 : i64, cost = 1 : i64}, {block = 6 : i64, cost = 1 : i64}] : tensor<8xf32>, tensor<8xf32> {
    %0 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<8xf32>
  }, {
    %1 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %1 : tensor<8xf32>
  }
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that rblock belongs to reductions only, and unknown entries are named.
func.func @rblock(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'braze.combo' op schedule #0 has an 'rblock' but its kernel reduces nothing}}
  %a, %b = braze.combo dispatch "sequential" schedules [{block = 8 : i64, cost = 1 : i64, rblock = 8 : i64}, {block = 8 : i64, cost = 1 : i64}] : tensor<8xf32>, tensor<8xf32> {
    %0 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<8xf32>
  }, {
    %1 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %1 : tensor<8xf32>
  }
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

func.func @unknown_entry(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'braze.combo' op schedule #0 has unknown entry 'warps' (expected block, rblock, cost)}}
  %a, %b = braze.combo dispatch "sequential" schedules [{block = 8 : i64, cost = 1 : i64, warps = 4 : i64}, {block = 8 : i64, cost = 1 : i64}] : tensor<8xf32>, tensor<8xf32> {
    %0 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<8xf32>
  }, {
    %1 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %1 : tensor<8xf32>
  }
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that round-robin needs equal static work items (1 and 2 here).
func.func @unequal(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'braze.combo' op dispatch round_robin needs equal work items, but sub-kernel #1 has 2 and the first has 1}}
  %a, %b = braze.combo dispatch "round_robin" schedules [{block = 8 : i64, cost = 1 : i64}, {block = 4 : i64, cost = 1 : i64}] : tensor<8xf32>, tensor<8xf32> {
    %0 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<8xf32>
  }, {
    %1 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %1 : tensor<8xf32>
  }
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a sub-kernel holds exactly one kernel.
func.func @not_a_kernel(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'braze.combo' op sub-kernel #1 must hold exactly one braze.kernel and a braze.combo_yield of its results}}
  %a, %b = braze.combo dispatch "sequential" schedules [{block = 8 : i64, cost = 1 : i64}, {block = 8 : i64, cost = 1 : i64}] : tensor<8xf32>, tensor<8xf32> {
    %0 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<8xf32>
  }, {
    %1 = braze.exp %x : tensor<8xf32>
    braze.combo_yield %1 : tensor<8xf32>
  }
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that the results are the yielded values' types.
func.func @result_types(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'braze.combo' op yields 'tensor<8xf32>', 'tensor<8xf32>' but its results are 'tensor<8xf32>', 'tensor<4xf32>'}}
  %a, %b = braze.combo dispatch "sequential" schedules [{block = 8 : i64, cost = 1 : i64}, {block = 8 : i64, cost = 1 : i64}] : tensor<8xf32>, tensor<4xf32> {
    %0 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %0 : tensor<8xf32>
  }, {
    %1 = braze.kernel ins(%x : tensor<8xf32>) domain [8] reduce [] : tensor<8xf32> {
    ^bb0(%i: index, %ni: index, %t: tensor<8xf32>):
      %v = tensor.extract %t[%i] : tensor<8xf32>
      braze.store %v, 0 [%i] : f32
    }
    braze.combo_yield %1 : tensor<8xf32>
  }
  return %a, %b : tensor<8xf32>, tensor<4xf32>
}
