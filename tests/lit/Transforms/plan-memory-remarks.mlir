// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(braze-plan-memory{remarks=true allocator-fallback=false})'
// RUN: not braze-opt %s -pass-pipeline='builtin.module(braze-plan-memory{alignment=48})' 2>&1 | FileCheck %s --check-prefix=ALIGN

// Tests that the plan is explained: a buffer of dynamic size and a returned
// buffer stay on the allocator, and the function's arena and peak are told.
// ALIGN: braze-plan-memory: alignment must be a power of two, got 48
// expected-remark @+1 {{@dynamic: arena 0 bytes for 0 placement(s), 0 buffer(s) in place; planned peak 64 bytes}}
func.func @dynamic(%x: tensor<?xf32>, %n: index) -> tensor<f32> {
  // expected-remark @+1 {{result #0 stays on the allocator: its size is not static}}
  %a = braze.kernel ins(%x : tensor<?xf32>) domain [%n] reduce [] : tensor<?xf32> {
  ^bb0(%i: index, %e: index, %t: tensor<?xf32>):
    %v = tensor.extract %t[%i] : tensor<?xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i] : f32
  }
  // expected-remark @+1 {{result #0 stays on the allocator: it is returned}}
  %b = braze.kernel ins(%a : tensor<?xf32>) domain [%n] reduce [0] : tensor<f32> {
  ^bb0(%i: index, %e: index, %t: tensor<?xf32>):
    %v = tensor.extract %t[%i] : tensor<?xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [] : f32
  }
  return %b : tensor<f32>
}
