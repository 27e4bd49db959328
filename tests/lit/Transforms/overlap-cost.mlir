// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-overlap{mode=cost keep-peak=false max-inflight-bytes=6000 remarks=true}))' -split-input-file -verify-diagnostics | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-overlap{mode=cost}))' -split-input-file | FileCheck %s --check-prefix=PEAK
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-overlap{mode=fastest}))' -split-input-file 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-overlap{mode=cost link-bandwidth=0}))' -split-input-file 2>&1 | FileCheck %s --check-prefix=LINK

// MODE: error: braze-overlap: mode must be simple or cost, got 'fastest'
// LINK: error: braze-overlap: link-bandwidth must be positive, got 0

// Tests that the cost mode fills an all_reduce's gap with the compute that
// hides the most: the 4 KB all_reduce takes 10.33 us by estimate (10 us of
// latency), the 256x256 matmul 33.55 us, the neg 0.08 us; the matmul moves
// above the wait with the transpose it needs, the neg stays (the gap is
// full), and the add, which needs the result, stays after the wait.
// With keep-peak, moving the matmul would raise the block's peak of live
// bytes (the all_reduce's buffers live over it): only the neg moves.
// CHECK-LABEL: func.func @most_first
// CHECK: braze.all_reduce_start
// CHECK-NEXT: braze.permute
// CHECK-NEXT: braze.matmul
// CHECK-NEXT: braze.wait
// CHECK-NEXT: braze.add
// CHECK-NEXT: braze.neg
// PEAK-LABEL: func.func @most_first
// PEAK: braze.all_reduce_start
// PEAK-NEXT: braze.neg
// PEAK-NEXT: braze.wait
// PEAK-NEXT: braze.add
// PEAK-NEXT: braze.permute
func.func @most_first(%g: tensor<1024xf32>, %a: tensor<256x256xf32>, %b: tensor<256x256xf32>, %v: tensor<1024xf32>) -> (tensor<1024xf32>, tensor<1024xf32>, tensor<256x256xf32>) {
  // expected-remark @+1 {{moved up past 0 op(s)}}
  %w = braze.all_reduce_start %g "sum" group "dp" ranks [0, 1] : tensor<1024xf32> -> !braze.work<tensor<1024xf32>>
  // expected-remark @+3 {{moved down past 0 op(s); stopped by the first user of its result, 'braze.add'}}
  // expected-remark-re @+2 {{'braze.all_reduce_start' of group "dp" at loc({{.*}}) takes 10.33 us by estimate; 2 op(s) of compute moved above its wait; 10.33 us of it hidden}}
  // expected-remark @+1 {{is in flight over 2 op(s) of compute writing 524288 bytes}}
  %r = braze.wait %w : !braze.work<tensor<1024xf32>>
  %u = braze.add %r, %r : tensor<1024xf32>, tensor<1024xf32> -> tensor<1024xf32>
  %n = braze.neg %v : tensor<1024xf32>
  %t = braze.permute %b [1, 0] : tensor<256x256xf32> -> tensor<256x256xf32>
  // expected-remark-re @+1 {{'braze.matmul' moved above the wait of 'braze.all_reduce_start' of group "dp" at loc({{.*}}) with 1 op(s) it needs: 33.55 us by estimate}}
  %m = braze.matmul %a, %t : tensor<256x256xf32>, tensor<256x256xf32> -> tensor<256x256xf32>
  return %u, %n, %m : tensor<1024xf32>, tensor<1024xf32>, tensor<256x256xf32>
}

// -----

// Tests what the cost mode never moves above a wait: an op using its
// result, an op with effects (an extern call) and what needs its result,
// and compute past the next collective of the same group (the second
// all_reduce moves up past the neg, as in the simple mode).
// CHECK-LABEL: func.func @refusals
// CHECK: braze.all_reduce_start %arg0
// CHECK-NEXT: braze.wait
// CHECK-NEXT: braze.add
// CHECK-NEXT: braze.extern
// CHECK-NEXT: braze.all_reduce_start %arg1
// CHECK-NEXT: braze.neg
// CHECK-NEXT: braze.matmul
// CHECK-NEXT: braze.wait
func.func @refusals(%g: tensor<1024xf32>, %h: tensor<1024xf32>, %a: tensor<256x256xf32>) -> (tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<256x256xf32>) {
  // expected-remark @+1 {{moved up past 0 op(s)}}
  %w = braze.all_reduce_start %g "sum" group "dp" ranks [0, 1] : tensor<1024xf32> -> !braze.work<tensor<1024xf32>>
  // expected-remark @+3 {{stopped by the first user of its result, 'braze.add'}}
  // expected-remark @+2 {{takes 10.33 us by estimate; 0 op(s) of compute moved above its wait; 0.00 us of it hidden}}
  // expected-remark @+1 {{is in flight over 0 op(s)}}
  %r = braze.wait %w : !braze.work<tensor<1024xf32>>
  %u = braze.add %r, %r : tensor<1024xf32>, tensor<1024xf32> -> tensor<1024xf32>
  %e = braze.extern "aten.neg.default" (%h) args [0 : index] : (tensor<1024xf32>) -> tensor<1024xf32>
  %k = braze.neg %e : tensor<1024xf32>
  // expected-remark @+1 {{moved up past 1 op(s); stopped by 'braze.extern', an op with effects}}
  %v = braze.all_reduce_start %h "sum" group "dp" ranks [0, 1] : tensor<1024xf32> -> !braze.work<tensor<1024xf32>>
  %m = braze.matmul %a, %a : tensor<256x256xf32>, tensor<256x256xf32> -> tensor<256x256xf32>
  // expected-remark @+3 {{stopped by the first user of its result, 'func.return'}}
  // expected-remark @+2 {{takes 10.33 us by estimate; 0 op(s) of compute moved above its wait; 10.33 us of it hidden}}
  // expected-remark @+1 {{is in flight over 2 op(s)}}
  %s = braze.wait %v : !braze.work<tensor<1024xf32>>
  return %u, %k, %s, %m : tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<256x256xf32>
}

// -----

// Tests the bound on bytes in flight: hoisting the tp all_reduce above the
// dp one's wait, or sinking that wait below it, would put both 4 KB
// buffers in flight at once, more than max-inflight-bytes (6000): both
// steps are undone.
// CHECK-LABEL: func.func @inflight
// CHECK: braze.wait
// CHECK-NEXT: braze.all_reduce_start {{.*}} group "tp"
func.func @inflight(%g: tensor<1024xf32>, %h: tensor<1024xf32>) -> (tensor<1024xf32>, tensor<1024xf32>) {
  // expected-remark @+1 {{moved up past 0 op(s)}}
  %w = braze.all_reduce_start %g "sum" group "dp" ranks [0, 1] : tensor<1024xf32> -> !braze.work<tensor<1024xf32>>
  // expected-remark @+3 {{moved down past 0 op(s); stopped by max-inflight-bytes (one more step would put 8192 bytes of collectives in flight at once, above 6000)}}
  // expected-remark @+2 {{0.00 us of it hidden}}
  // expected-remark @+1 {{is in flight over 0 op(s)}}
  %r = braze.wait %w : !braze.work<tensor<1024xf32>>
  // expected-remark @+1 {{moved up past 0 op(s); stopped by max-inflight-bytes (one more step would put 8192 bytes of collectives in flight at once, above 6000)}}
  %v = braze.all_reduce_start %h "sum" group "tp" ranks [0, 1] : tensor<1024xf32> -> !braze.work<tensor<1024xf32>>
  // expected-remark @+3 {{stopped by the first user of its result, 'func.return'}}
  // expected-remark @+2 {{0.00 us of it hidden}}
  // expected-remark @+1 {{is in flight over 0 op(s)}}
  %s = braze.wait %v : !braze.work<tensor<1024xf32>>
  return %r, %s : tensor<1024xf32>, tensor<1024xf32>
}

// -----

// Tests a kernel's estimate: 256 KB read and 256 KB written at 100 GB/s
// (5.24 us) outweigh its 65536 exps at 1 Tflop/s; it hides half the
// all_reduce.
// CHECK-LABEL: func.func @kernel
// CHECK: braze.all_reduce_start
// CHECK-NEXT: braze.kernel
// CHECK: braze.wait
// CHECK-NEXT: braze.add
func.func @kernel(%g: tensor<1024xf32>, %x: tensor<65536xf32>) -> (tensor<1024xf32>, tensor<65536xf32>) {
  // expected-remark @+1 {{moved up past 0 op(s)}}
  %w = braze.all_reduce_start %g "sum" group "dp" ranks [0, 1] : tensor<1024xf32> -> !braze.work<tensor<1024xf32>>
  // expected-remark @+3 {{stopped by the first user of its result, 'braze.add'}}
  // expected-remark @+2 {{takes 10.33 us by estimate; 1 op(s) of compute moved above its wait; 5.24 us of it hidden}}
  // expected-remark @+1 {{is in flight over 1 op(s)}}
  %r = braze.wait %w : !braze.work<tensor<1024xf32>>
  %u = braze.add %r, %r : tensor<1024xf32>, tensor<1024xf32> -> tensor<1024xf32>
  // expected-remark @+1 {{'braze.kernel' moved above the wait of 'braze.all_reduce_start' of group "dp" at}}
  %e = braze.kernel ins(%x : tensor<65536xf32>) domain [65536] reduce [] : tensor<65536xf32> {
  ^bb0(%i: index, %n: index, %t: tensor<65536xf32>):
    %v = tensor.extract %t[%i] : tensor<65536xf32>
    %y = math.exp %v : f32
    braze.store %y, 0 [%i] : f32
  }
  return %u, %e : tensor<1024xf32>, tensor<65536xf32>
}
