// RUN: braze-opt %s -split-input-file -pass-pipeline='builtin.module(braze-plan-memory{allocator-fallback=false})' | FileCheck %s
// RUN: braze-opt %s -split-input-file -pass-pipeline='builtin.module(braze-plan-memory{in-place=false alignment=128 allocator-fallback=false})' | FileCheck %s --check-prefix=APART

// Tests that a pointwise kernel overwrites the buffer of an input that dies
// at it (same type, read and written at the point's own indices), and that
// a returned buffer gets its own allocation (offset -1; 64 bytes for the
// 4-byte sum).
// CHECK-LABEL: func.func @chain
// CHECK-SAME: braze.arena_bytes = 4096 : i64, braze.planned_peak_bytes = 4160 : i64
// CHECK: braze.kernel {{.*}} attributes {braze.offsets = array<i64: 0>}
// CHECK: braze.kernel {{.*}} attributes {braze.offsets = array<i64: 0>}
// CHECK: braze.kernel {{.*}} attributes {braze.offsets = array<i64: 0>}
// CHECK: braze.kernel {{.*}} attributes {braze.offsets = array<i64: -1>}
// APART-LABEL: func.func @chain
// APART-SAME: braze.arena_bytes = 8192 : i64
// APART: braze.offsets = array<i64: 0>
// APART: braze.offsets = array<i64: 4096>
// APART: braze.offsets = array<i64: 0>
// APART: braze.offsets = array<i64: -1>
func.func @chain(%x: tensor<1024xf32>) -> tensor<f32> {
  %a = braze.kernel ins(%x : tensor<1024xf32>) domain [1024] reduce [] : tensor<1024xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<1024xf32>):
    %v = tensor.extract %t[%i] : tensor<1024xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i] : f32
  }
  %b = braze.kernel ins(%a : tensor<1024xf32>) domain [1024] reduce [] : tensor<1024xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<1024xf32>):
    %v = tensor.extract %t[%i] : tensor<1024xf32>
    %w = arith.mulf %v, %v : f32
    braze.store %w, 0 [%i] : f32
  }
  %c = braze.kernel ins(%b, %x : tensor<1024xf32>, tensor<1024xf32>) domain [1024] reduce [] : tensor<1024xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<1024xf32>, %u: tensor<1024xf32>):
    %v = tensor.extract %t[%i] : tensor<1024xf32>
    %w = tensor.extract %u[%i] : tensor<1024xf32>
    %s = arith.addf %v, %w : f32
    braze.store %s, 0 [%i] : f32
  }
  %d = braze.kernel ins(%c : tensor<1024xf32>) domain [1024] reduce [0] : tensor<f32> {
  ^bb0(%i: index, %n: index, %t: tensor<1024xf32>):
    %v = tensor.extract %t[%i] : tensor<1024xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [] : f32
  }
  return %d : tensor<f32>
}

// -----

// Tests that an input still read later is not overwritten: %a and %b are
// both live at the last kernel, so %b takes its own offset; the returned
// result, which the arena cannot hold, takes over %a's allocation
// (`braze.reuse`), which leaves the arena.
// CHECK-LABEL: func.func @still_read
// CHECK-SAME: braze.arena_bytes = 4096 : i64, braze.planned_peak_bytes = 8192 : i64
// CHECK: braze.offsets = array<i64: -1>}
// CHECK: braze.offsets = array<i64: 0>}
// CHECK: braze.offsets = array<i64: -1>, braze.reuse = array<i64: 0>}
func.func @still_read(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = braze.kernel ins(%x : tensor<1024xf32>) domain [1024] reduce [] : tensor<1024xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<1024xf32>):
    %v = tensor.extract %t[%i] : tensor<1024xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i] : f32
  }
  %b = braze.kernel ins(%a : tensor<1024xf32>) domain [1024] reduce [] : tensor<1024xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<1024xf32>):
    %v = tensor.extract %t[%i] : tensor<1024xf32>
    %w = arith.mulf %v, %v : f32
    braze.store %w, 0 [%i] : f32
  }
  %c = braze.kernel ins(%a, %b : tensor<1024xf32>, tensor<1024xf32>) domain [1024] reduce [] : tensor<1024xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<1024xf32>, %u: tensor<1024xf32>):
    %v = tensor.extract %t[%i] : tensor<1024xf32>
    %w = tensor.extract %u[%i] : tensor<1024xf32>
    %s = arith.addf %v, %w : f32
    braze.store %s, 0 [%i] : f32
  }
  return %c : tensor<1024xf32>
}

// -----

// Tests that a kernel reading its input transposed, or reducing it into a
// smaller result, never writes over it; that a row-wise reduction kernel
// storing `x - max(x)` at the point writes over its dying input (%c takes
// %b's offset); and that a buffer born after another died reuses its bytes
// (%m takes %a's offset 0).
// CHECK-LABEL: func.func @not_in_place
// CHECK-SAME: braze.arena_bytes = 8192 : i64
// CHECK: braze.offsets = array<i64: 0>
// CHECK: braze.offsets = array<i64: 4096>
// CHECK: braze.offsets = array<i64: 4096>
// CHECK: braze.offsets = array<i64: 0>
// CHECK: braze.offsets = array<i64: -1>
func.func @not_in_place(%x: tensor<32x32xf32>) -> tensor<32xf32> {
  %a = braze.kernel ins(%x : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i, %j] : f32
  }
  %b = braze.kernel ins(%a : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%j, %i] : tensor<32x32xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  %c = braze.kernel ins(%b : tensor<32x32xf32>) domain [32, 32] reduce [1] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %m = braze.reduce "max" %v : f32 -> f32
    %d = arith.subf %v, %m : f32
    braze.store %d, 0 [%i, %j] : f32
  }
  %m = braze.kernel ins(%c : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%j, %i] : tensor<32x32xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  %s = braze.kernel ins(%m : tensor<32x32xf32>) domain [32, 32] reduce [1] : tensor<32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  return %s : tensor<32xf32>
}

// -----

// Tests the stages of reduction kernels: a softmax over a dying library
// result (the score matrix of decomposed attention) is written over it; a
// value stored beside the first reduction (`exp(x)`, needing no reduced
// value, so written in the first loop over the row) is not, because a later
// loop reads the row again; nor is a result stored at a reduction index of
// a value read elsewhere in the row (x[i, 0]).
// CHECK-LABEL: func.func @reduction_stages
// CHECK: braze.matmul
// CHECK-NEXT: braze.kernel
// CHECK-SAME: braze.offsets = array<i64: -1>, braze.reuse = array<i64: 0>
// CHECK: braze.matmul
// CHECK-NEXT: braze.kernel
// CHECK-SAME: braze.offsets = array<i64: -1, -1>}
// CHECK-NOT: braze.reuse
// CHECK: braze.matmul
// CHECK-NEXT: braze.kernel
// CHECK-SAME: braze.offsets = array<i64: -1>}
// CHECK-NOT: braze.reuse
// CHECK: return
func.func @reduction_stages(%x: tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>) {
  %m = braze.matmul %x, %x : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %softmax = braze.kernel ins(%m : tensor<32x32xf32>) domain [32, 32] reduce [1] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %max = braze.reduce "max" %v : f32 -> f32
    %d = arith.subf %v, %max : f32
    %e = math.exp %d : f32
    %sum = braze.reduce "add" %e : f32 -> f32
    %p = arith.divf %e, %sum : f32
    braze.store %p, 0 [%i, %j] : f32
  }
  %n = braze.matmul %softmax, %x : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %early:2 = braze.kernel ins(%n : tensor<32x32xf32>) domain [32, 32] reduce [1] : tensor<32x32xf32>, tensor<32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
    %max = braze.reduce "max" %v : f32 -> f32
    %sum = braze.reduce "add" %v : f32 -> f32
    %r = arith.subf %sum, %max : f32
    braze.store %r, 1 [%i] : f32
  }
  %o = braze.matmul %early#0, %x : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %first = braze.kernel ins(%o : tensor<32x32xf32>) domain [32, 32] reduce [1] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %w = tensor.extract %t[%i, %c0] : tensor<32x32xf32>
    %max = braze.reduce "max" %v : f32 -> f32
    %a = arith.addf %v, %w : f32
    %d = arith.subf %a, %max : f32
    braze.store %d, 0 [%i, %j] : f32
  }
  return %softmax, %early#0, %early#1, %first : tensor<32x32xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>
}

// -----

// Tests that a view keeps its buffer live (the reshape's reader, the last
// kernel, is where %a dies, so %b cannot overwrite it), that returned
// buffers are not planned, and that offsets are aligned
// (the 10-byte buffer takes 64 bytes, or 128 with alignment=128).
// CHECK-LABEL: func.func @views
// CHECK-SAME: braze.arena_bytes = 64 : i64
// CHECK: braze.offsets = array<i64: 0>
// CHECK: braze.offsets = array<i64: -1>
// CHECK: braze.offsets = array<i64: -1>
// APART-LABEL: func.func @views
// APART-SAME: braze.arena_bytes = 128 : i64
func.func @views(%x: tensor<10xi8>) -> (tensor<2xi8>, tensor<10xi8>) {
  %a = braze.kernel ins(%x : tensor<10xi8>) domain [10] reduce [] : tensor<10xi8> {
  ^bb0(%i: index, %n: index, %t: tensor<10xi8>):
    %v = tensor.extract %t[%i] : tensor<10xi8>
    %w = arith.addi %v, %v : i8
    braze.store %w, 0 [%i] : i8
  }
  %r = braze.reshape %a : tensor<10xi8> -> tensor<2x5xi8>
  %b = braze.kernel ins(%a : tensor<10xi8>) domain [10] reduce [] : tensor<10xi8> {
  ^bb0(%i: index, %n: index, %t: tensor<10xi8>):
    %v = tensor.extract %t[%i] : tensor<10xi8>
    %w = arith.muli %v, %v : i8
    braze.store %w, 0 [%i] : i8
  }
  %c = braze.kernel ins(%r : tensor<2x5xi8>) domain [2, 5] reduce [1] : tensor<2xi8> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<2x5xi8>):
    %v = tensor.extract %t[%i, %j] : tensor<2x5xi8>
    %s = braze.reduce "add" %v : i8 -> i8
    braze.store %s, 0 [%i] : i8
  }
  return %c, %b : tensor<2xi8>, tensor<10xi8>
}

// -----

// Tests that a buffer returned through a view is not planned, while one
// that is never read lives only at its kernel.
// CHECK-LABEL: func.func @returned_view
// CHECK: braze.offsets = array<i64: -1>
// CHECK: braze.offsets = array<i64: 0>
func.func @returned_view(%x: tensor<16xf32>) -> tensor<4x4xf32> {
  %a = braze.kernel ins(%x : tensor<16xf32>) domain [16] reduce [] : tensor<16xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<16xf32>):
    %v = tensor.extract %t[%i] : tensor<16xf32>
    braze.store %v, 0 [%i] : f32
  }
  %r = braze.reshape %a : tensor<16xf32> -> tensor<4x4xf32>
  %u = braze.kernel ins(%a : tensor<16xf32>) domain [16] reduce [] : tensor<16xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<16xf32>):
    %v = tensor.extract %t[%i] : tensor<16xf32>
    braze.store %v, 0 [%i] : f32
  }
  return %r : tensor<4x4xf32>
}

// -----

// Tests that the module records the largest planned peak of its functions,
// that a library call's result counts in the peak but is not placed, and
// that a pointwise kernel overwrites it where it dies (`braze.reuse`, its
// input number), even when the kernel's result is returned.
// CHECK-LABEL: module attributes {braze.planned_peak_bytes = 8192 : i64}
// CHECK-LABEL: func.func @gemm
// CHECK-SAME: braze.arena_bytes = 4096 : i64, braze.planned_peak_bytes = 8192 : i64
// CHECK: braze.offsets = array<i64: 0>
// CHECK: braze.matmul
// CHECK: attributes {braze.offsets = array<i64: -1>, braze.reuse = array<i64: 0>}
func.func @gemm(%x: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %a = braze.kernel ins(%x : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i, %j] : f32
  }
  %m = braze.matmul %a, %a : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %c = braze.kernel ins(%m : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i, %j] : f32
  }
  return %c : tensor<32x32xf32>
}

// -----

// Tests that a library result still read later is not overwritten, and that
// a transposed read of one is not either.
// CHECK-LABEL: func.func @gemm_live
// CHECK-NOT: braze.reuse
// CHECK: return
func.func @gemm_live(%x: tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>) {
  %m = braze.matmul %x, %x : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %c = braze.kernel ins(%m : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i, %j] : f32
  }
  %n = braze.matmul %c, %m : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %d = braze.kernel ins(%n : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%j, %i] : tensor<32x32xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  return %c, %d : tensor<32x32xf32>, tensor<32x32xf32>
}

// -----

// Tests that a kernel overwrites a dying buffer it reads through a reshape
// (the same bytes in the same order), but not through a permute.
// CHECK-LABEL: func.func @through_reshape
// CHECK: braze.reshape
// CHECK: attributes {braze.offsets = array<i64: -1>, braze.reuse = array<i64: 0>}
// CHECK: braze.permute
// CHECK: attributes {braze.offsets = array<i64: -1>} :
func.func @through_reshape(%x: tensor<16x32xf32>, %y: tensor<32x32xf32>) -> (tensor<512xf32>, tensor<32x16xf32>) {
  %m = braze.matmul %x, %y : tensor<16x32xf32>, tensor<32x32xf32> -> tensor<16x32xf32>
  %r = braze.reshape %m : tensor<16x32xf32> -> tensor<512xf32>
  %c = braze.kernel ins(%r : tensor<512xf32>) domain [512] reduce [] : tensor<512xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<512xf32>):
    %v = tensor.extract %t[%i] : tensor<512xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i] : f32
  }
  %k = braze.matmul %x, %y : tensor<16x32xf32>, tensor<32x32xf32> -> tensor<16x32xf32>
  %p = braze.permute %k [1, 0] : tensor<16x32xf32> -> tensor<32x16xf32>
  %d = braze.kernel ins(%p : tensor<32x16xf32>) domain [32, 16] reduce [] : tensor<32x16xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x16xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x16xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  return %c, %d : tensor<512xf32>, tensor<32x16xf32>
}

// -----

// Tests that a kernel overwrites a channels-last convolution's result it
// reads through the permute to NHWC (the order of the result's bytes).
// CHECK-LABEL: func.func @channels_last
// CHECK: braze.kernel {{.*}} attributes {braze.offsets = array<i64: -1>, braze.reuse = array<i64: 0>}
func.func @channels_last(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x3x3xf32>) -> tensor<2x8x14x14xf32> {
  %0 = braze.convolution %x, %w stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 memory_format "channels_last" : tensor<2x8x14x14xf32>, tensor<8x8x3x3xf32> -> tensor<2x8x14x14xf32>
  %1 = braze.permute %0 [0, 2, 3, 1] : tensor<2x8x14x14xf32> -> tensor<2x14x14x8xf32>
  %2 = braze.kernel ins(%1 : tensor<2x14x14x8xf32>) domain [2, 14, 14, 8] reduce [] : tensor<2x14x14x8xf32> {
  ^bb0(%i: index, %j: index, %k: index, %l: index, %ni: index, %nj: index, %nk: index, %nl: index, %t: tensor<2x14x14x8xf32>):
    %v = tensor.extract %t[%i, %j, %k, %l] : tensor<2x14x14x8xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j, %k, %l] : f32
  }
  %3 = braze.permute %2 [0, 3, 1, 2] : tensor<2x14x14x8xf32> -> tensor<2x8x14x14xf32>
  return %3 : tensor<2x8x14x14xf32>
}

// -----

// Tests that a fused GEMM's result and a combo's results are buffers in the
// arena like a kernel's (generated code writes them): the combo's two
// results get offsets, the fused GEMM's result gets one, and the LayerNorm
// kernel after it, storing a value that needs its row statistics, writes
// over it in place (the same offset); the fused GEMM never writes over its
// dying operands (it reads whole rows and columns), not even its residual
// %x read at (m, n).
// CHECK-LABEL: func.func @generated
// CHECK-SAME: braze.arena_bytes = 12288 : i64, braze.planned_peak_bytes = 16384 : i64
// CHECK: braze.combo
// CHECK-SAME: braze.offsets = array<i64: 0, 4096>
// CHECK: braze.fused_gemm
// CHECK-SAME: braze.offsets = array<i64: 8192>
// CHECK-NOT: braze.reuse
// CHECK: braze.kernel
// CHECK-SAME: braze.offsets = array<i64: 8192>
// CHECK: braze.kernel
// CHECK-SAME: braze.offsets = array<i64: -1>
func.func @generated(%x: tensor<32x32xf32>, %w: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %c:2 = braze.combo dispatch "sequential" schedules [{block = 64 : i64, cost = 64 : i64},
                                                    {block = 64 : i64, cost = 64 : i64}]
      : tensor<32x32xf32>, tensor<32x32xf32> {
    %0 = braze.kernel ins(%x : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
    ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
      %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
      %e = math.exp %v : f32
      braze.store %e, 0 [%i, %j] : f32
    }
    braze.combo_yield %0 : tensor<32x32xf32>
  }, {
    %1 = braze.kernel ins(%w : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
    ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
      %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
      %e = math.tanh %v : f32
      braze.store %e, 0 [%i, %j] : f32
    }
    braze.combo_yield %1 : tensor<32x32xf32>
  }
  %y = braze.fused_gemm %c#0, %c#1 extras(%x : tensor<32x32xf32>) indexing ["mn"] accumulator f32
      : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32> {
  ^bb0(%acc: f32, %res: f32):
    %sum = arith.addf %acc, %res : f32
    braze.gemm_yield %sum : f32
  }
  %n = braze.kernel ins(%y : tensor<32x32xf32>) domain [32, 32] reduce [1] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    %d = arith.subf %v, %s : f32
    braze.store %d, 0 [%i, %j] : f32
  }
  %r = braze.kernel ins(%n : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%j, %i] : tensor<32x32xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  return %r : tensor<32x32xf32>
}

// -----

// Tests that a returned result (which the arena cannot hold) takes over a
// dying generated buffer: the fused GEMM's result leaves the arena, and the
// LayerNorm-like kernel after it writes over it (`braze.reuse`); a returned
// result whose kernel reads its input transposed does not, and the
// generated buffer before it stays in the arena.
// CHECK-LABEL: func.func @returned_takes_over
// CHECK-SAME: braze.arena_bytes = 4096 : i64, braze.planned_peak_bytes = 12288 : i64
// CHECK: braze.fused_gemm
// CHECK-SAME: braze.offsets = array<i64: -1>
// CHECK: braze.kernel
// CHECK-SAME: braze.offsets = array<i64: -1>, braze.reuse = array<i64: 0>
// CHECK: braze.kernel
// CHECK-SAME: braze.offsets = array<i64: 0>}
// CHECK: braze.kernel
// CHECK-SAME: braze.offsets = array<i64: -1>}
func.func @returned_takes_over(%x: tensor<32x32xf32>, %w: tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>) {
  %y = braze.fused_gemm %x, %w extras(%x : tensor<32x32xf32>) indexing ["mn"] accumulator f32
      : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32> {
  ^bb0(%acc: f32, %res: f32):
    %sum = arith.addf %acc, %res : f32
    braze.gemm_yield %sum : f32
  }
  %n = braze.kernel ins(%y : tensor<32x32xf32>) domain [32, 32] reduce [1] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    %d = arith.subf %v, %s : f32
    braze.store %d, 0 [%i, %j] : f32
  }
  %e = braze.kernel ins(%x : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<32x32xf32>
    %a = math.exp %v : f32
    braze.store %a, 0 [%i, %j] : f32
  }
  %r = braze.kernel ins(%e : tensor<32x32xf32>) domain [32, 32] reduce [] : tensor<32x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<32x32xf32>):
    %v = tensor.extract %t[%j, %i] : tensor<32x32xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  return %n, %r : tensor<32x32xf32>, tensor<32x32xf32>
}
