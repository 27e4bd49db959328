// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(braze-plan-memory{remarks=true})' | FileCheck %s

// Tests that the arena is dropped when it would raise the peak: the arena
// holds %a's 16 KiB for the whole call, also while the two GEMM results
// (16 KiB each) live, whereas on the allocator %a is freed at the first
// GEMM (48 KiB against 32 KiB). Without the arena, the pointwise kernel
// after the second GEMM still writes over its dying result (`braze.reuse`).
// CHECK-LABEL: func.func @library_peak
// CHECK-SAME: braze.arena_bytes = 0 : i64, braze.planned_peak_bytes = 32768 : i64
// CHECK: braze.offsets = array<i64: -1>}
// CHECK: braze.matmul
// CHECK: braze.matmul
// CHECK: braze.offsets = array<i64: -1>, braze.reuse = array<i64: 0>}
// expected-remark @+1 {{@library_peak: arena 0 bytes for 0 placement(s), 1 buffer(s) in place; planned peak 32768 bytes (live buffers need at least 32768); every buffer on the allocator: an arena would hold 16384 bytes for the whole call, for a peak of 49152 bytes}}
func.func @library_peak(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %a = braze.kernel ins(%x : tensor<64x64xf32>) domain [64, 64] reduce [] : tensor<64x64xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<64x64xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<64x64xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i, %j] : f32
  }
  %m = braze.matmul %a, %x : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %n = braze.matmul %m, %x : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %b = braze.kernel ins(%n : tensor<64x64xf32>) domain [64, 64] reduce [] : tensor<64x64xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<64x64xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<64x64xf32>
    %w = math.tanh %v : f32
    braze.store %w, 0 [%i, %j] : f32
  }
  return %b : tensor<64x64xf32>
}

// -----

// Tests that the arena is kept when the allocator plans no lower peak: the
// chain %a -> %b runs in place at offset 0 and the 4-byte sum is returned
// (4096 + 64 bytes either way).
// CHECK-LABEL: func.func @arena_kept
// CHECK-SAME: braze.arena_bytes = 4096 : i64, braze.planned_peak_bytes = 4160 : i64
// CHECK: braze.offsets = array<i64: 0>}
// CHECK: braze.offsets = array<i64: 0>}
// CHECK: braze.offsets = array<i64: -1>}
// expected-remark @+1 {{@arena_kept: arena 4096 bytes for 1 placement(s), 1 buffer(s) in place; planned peak 4160 bytes (live buffers need at least 8192)}}
func.func @arena_kept(%x: tensor<1024xf32>) -> tensor<f32> {
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
  // expected-remark @+1 {{result #0 stays on the allocator: it is returned}}
  %d = braze.kernel ins(%b : tensor<1024xf32>) domain [1024] reduce [0] : tensor<f32> {
  ^bb0(%i: index, %n: index, %t: tensor<1024xf32>):
    %v = tensor.extract %t[%i] : tensor<1024xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [] : f32
  }
  return %d : tensor<f32>
}
