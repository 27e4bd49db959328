// RUN: braze-opt %s -braze-channels-last -split-input-file | FileCheck %s

// Tests that a convolution runs channels-last and the pointwise kernel that
// reads its result iterates in NHWC order: 4-D tensors through permutes,
// accesses reordered, a per-channel input of lower rank indexed by the same
// channel index as before, the result permuted back.
// CHECK-LABEL: func.func @conv_bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x14x14xf32>, %[[W:.*]]: tensor<8x8x3x3xf32>, %[[B:.*]]: tensor<8x1x1xf32>, %[[R:.*]]: tensor<1x8x1x1xf32>)
// CHECK: %[[Y:.*]] = braze.convolution %[[X]], %[[W]] {{.*}} memory_format "channels_last"
// CHECK: %[[V:.*]] = braze.permute %[[Y]] [0, 2, 3, 1] : tensor<2x8x14x14xf32> -> tensor<2x14x14x8xf32>
// CHECK: %[[RV:.*]] = braze.permute %[[R]] [0, 2, 3, 1] : tensor<1x8x1x1xf32> -> tensor<1x1x1x8xf32>
// CHECK: %[[K:.*]] = braze.kernel ins(%[[V]], %[[B]], %[[RV]] : tensor<2x14x14x8xf32>, tensor<8x1x1xf32>, tensor<1x1x1x8xf32>) domain [2, 14, 14, 8] reduce [] : tensor<2x14x14x8xf32>
// CHECK: ^bb0(%[[N:.*]]: index, %[[H:.*]]: index, %[[WW:.*]]: index, %[[C:.*]]: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[A:.*]]: tensor<2x14x14x8xf32>, %[[BB:.*]]: tensor<8x1x1xf32>, %[[RR:.*]]: tensor<1x1x1x8xf32>):
// CHECK: tensor.extract %[[A]][%[[N]], %[[H]], %[[WW]], %[[C]]]
// CHECK: tensor.extract %[[BB]][%[[C]], %{{.*}}, %{{.*}}] : tensor<8x1x1xf32>
// CHECK: tensor.extract %[[RR]][%{{.*}}, %{{.*}}, %{{.*}}, %[[C]]] : tensor<1x1x1x8xf32>
// CHECK: braze.store %{{.*}}, 0 [%[[N]], %[[H]], %[[WW]], %[[C]]] : f32
// CHECK: %[[OUT:.*]] = braze.permute %[[K]] [0, 3, 1, 2] : tensor<2x14x14x8xf32> -> tensor<2x8x14x14xf32>
// CHECK: %[[Z:.*]] = braze.convolution %[[OUT]], %[[W]] {{.*}} memory_format "channels_last"
// CHECK: return %[[Z]]
func.func @conv_bias(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x3x3xf32>, %b: tensor<8x1x1xf32>, %r: tensor<1x8x1x1xf32>) -> tensor<2x8x14x14xf32> {
  %y = braze.convolution %x, %w stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x3x3xf32> -> tensor<2x8x14x14xf32>
  %k = braze.kernel ins(%y, %b, %r : tensor<2x8x14x14xf32>, tensor<8x1x1xf32>, tensor<1x8x1x1xf32>) domain [2, 8, 14, 14] reduce [] : tensor<2x8x14x14xf32> {
  ^bb0(%n: index, %c: index, %h: index, %ww: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x8x14x14xf32>, %bb: tensor<8x1x1xf32>, %rr: tensor<1x8x1x1xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%n, %c, %h, %ww] : tensor<2x8x14x14xf32>
    %u = tensor.extract %bb[%c, %c0, %c0] : tensor<8x1x1xf32>
    %s = arith.addf %v, %u : f32
    %q = tensor.extract %rr[%c0, %c, %c0, %c0] : tensor<1x8x1x1xf32>
    %t = arith.mulf %s, %q : f32
    braze.store %t, 0 [%n, %c, %h, %ww] : f32
  }
  %z = braze.convolution %k, %w stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x3x3xf32> -> tensor<2x8x14x14xf32>
  return %z : tensor<2x8x14x14xf32>
}

// -----

// Tests dynamic extents: they follow their dims into the NHWC order.
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: (%[[X:.*]]: tensor<?x8x?x14xf32>, %[[W:.*]]: tensor<8x8x1x1xf32>, %[[N:.*]]: index, %[[H:.*]]: index)
// CHECK: braze.kernel ins(%{{.*}} : tensor<?x?x14x8xf32>) domain [%[[N]], %[[H]], 14, 8] reduce []
// CHECK: braze.permute %{{.*}} [0, 3, 1, 2] : tensor<?x?x14x8xf32> -> tensor<?x8x?x14xf32>
func.func @dynamic(%x: tensor<?x8x?x14xf32>, %w: tensor<8x8x1x1xf32>, %n: index, %h: index) -> tensor<?x8x?x14xf32> {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<?x8x?x14xf32>, tensor<8x8x1x1xf32> -> tensor<?x8x?x14xf32>
  %k = braze.kernel ins(%y : tensor<?x8x?x14xf32>) domain [%n, 8, %h, 14] reduce [] : tensor<?x8x?x14xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<?x8x?x14xf32>):
    %v = tensor.extract %a[%i0, %i1, %i2, %i3] : tensor<?x8x?x14xf32>
    %r = math.exp %v : f32
    braze.store %r, 0 [%i0, %i1, %i2, %i3] : f32
  }
  return %k : tensor<?x8x?x14xf32>
}

// -----

// Tests that a reduction over C alone (a LayerNorm over channels) iterates
// in NHWC order, where C is innermost (a row reduction), with its reduction
// dim renumbered, the extents renumbered with their dims, and its keepdim
// result permuted back.
// CHECK-LABEL: func.func @channel_mean
// CHECK: braze.convolution {{.*}} memory_format "channels_last"
// CHECK: braze.kernel ins(%{{.*}} : tensor<2x14x14x8xf32>) domain [2, 14, 14, 8] reduce [3] : tensor<2x14x14x1xf32>, tensor<2x14x14xf32>
// CHECK: ^bb0(%[[N:[a-z0-9]+]]: index, %[[H:[a-z0-9]+]]: index, %[[W:[a-z0-9]+]]: index, %[[C:[a-z0-9]+]]: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %[[EC:[a-z0-9]+]]: index,
// CHECK: arith.index_cast %[[EC]] : index to i64
// CHECK: braze.store %{{.*}}, 0 [%[[N]], %[[H]], %[[W]], %{{.*}}] : f32
// CHECK: braze.store %{{.*}}, 1 [%[[N]], %[[H]], %[[W]]] : f32
// CHECK: braze.permute %{{.*}} [0, 3, 1, 2] : tensor<2x14x14x1xf32> -> tensor<2x1x14x14xf32>
func.func @channel_mean(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x1x1xf32>) -> (tensor<2x1x14x14xf32>, tensor<2x14x14xf32>) {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %k:2 = braze.kernel ins(%y : tensor<2x8x14x14xf32>) domain [2, 8, 14, 14] reduce [1] : tensor<2x1x14x14xf32>, tensor<2x14x14xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x8x14x14xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%i0, %i1, %i2, %i3] : tensor<2x8x14x14xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    %ci = arith.index_cast %e1 : index to i64
    %cf = arith.sitofp %ci : i64 to f32
    %m = arith.divf %s, %cf : f32
    braze.store %m, 0 [%i0, %c0, %i2, %i3] : f32
    braze.store %s, 1 [%i0, %i2, %i3] : f32
  }
  return %k#0, %k#1 : tensor<2x1x14x14xf32>, tensor<2x14x14xf32>
}

// -----

// Tests that a reduction over H and W (a global average pool) iterates in
// NHWC order, a column reduction with C innermost: its reduction dims are
// renumbered, H and W keep their order, and a result of lower rank is
// stored at the same indices as before.
// CHECK-LABEL: func.func @spatial_mean
// CHECK: braze.convolution {{.*}} memory_format "channels_last"
// CHECK: %[[V:.*]] = braze.permute %{{.*}} [0, 2, 3, 1] : tensor<2x8x14x14xf32> -> tensor<2x14x14x8xf32>
// CHECK: %[[K:.*]] = braze.kernel ins(%[[V]] : tensor<2x14x14x8xf32>) domain [2, 14, 14, 8] reduce [1, 2] : tensor<2x8xf32>
// CHECK: ^bb0(%[[N:[a-z0-9]+]]: index, %[[H:[a-z0-9]+]]: index, %[[W:[a-z0-9]+]]: index, %[[C:[a-z0-9]+]]: index,
// CHECK: tensor.extract %{{.*}}[%[[N]], %[[H]], %[[W]], %[[C]]]
// CHECK: braze.store %{{.*}}, 0 [%[[N]], %[[C]]] : f32
// CHECK-NOT: braze.permute
// CHECK: return %[[K]]
func.func @spatial_mean(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x1x1xf32>) -> tensor<2x8xf32> {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %k = braze.kernel ins(%y : tensor<2x8x14x14xf32>) domain [2, 8, 14, 14] reduce [2, 3] : tensor<2x8xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x8x14x14xf32>):
    %v = tensor.extract %a[%i0, %i1, %i2, %i3] : tensor<2x8x14x14xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [%i0, %i1] : f32
  }
  return %k : tensor<2x8xf32>
}

// -----

// Tests that a reduction over N, H and W (batch statistics per channel)
// iterates in NHWC order, its keepdim result permuted back.
// CHECK-LABEL: func.func @batch_statistics
// CHECK: braze.kernel ins(%{{.*}} : tensor<2x14x14x8xf32>) domain [2, 14, 14, 8] reduce [0, 1, 2] : tensor<1x1x1x8xf32>
// CHECK: braze.permute %{{.*}} [0, 3, 1, 2] : tensor<1x1x1x8xf32> -> tensor<1x8x1x1xf32>
func.func @batch_statistics(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x1x1xf32>) -> tensor<1x8x1x1xf32> {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %k = braze.kernel ins(%y : tensor<2x8x14x14xf32>) domain [2, 8, 14, 14] reduce [0, 2, 3] : tensor<1x8x1x1xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x8x14x14xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%i0, %i1, %i2, %i3] : tensor<2x8x14x14xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [%c0, %i1, %c0, %c0] : f32
  }
  return %k : tensor<1x8x1x1xf32>
}

// -----

// Tests that a reduction over C together with H and W keeps NCHW order: in
// NHWC order it would add its points in another order.
// CHECK-LABEL: func.func @reduction
// CHECK: braze.convolution {{.*}} memory_format "channels_last"
// CHECK-NOT: braze.permute
// CHECK: domain [2, 8, 14, 14] reduce [1, 2, 3]
func.func @reduction(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x1x1xf32>) -> tensor<2xf32> {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %k = braze.kernel ins(%y : tensor<2x8x14x14xf32>) domain [2, 8, 14, 14] reduce [1, 2, 3] : tensor<2xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x8x14x14xf32>):
    %v = tensor.extract %a[%i0, %i1, %i2, %i3] : tensor<2x8x14x14xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [%i0] : f32
  }
  return %k : tensor<2xf32>
}

// -----

// Tests that a kernel reading no channels-last value, and every kernel of a
// function without a 2-D convolution, keep their order; a 1-D convolution
// is left as it is.
// CHECK-LABEL: func.func @no_conv_result
// CHECK-NOT: braze.permute
// CHECK: braze.convolution {{.*}} memory_format "channels_last"
// CHECK-NOT: braze.permute
// CHECK: domain [2, 8, 14, 14] reduce []
func.func @no_conv_result(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x1x1xf32>) -> (tensor<2x8x14x14xf32>, tensor<2x8x14x14xf32>) {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %k = braze.kernel ins(%x : tensor<2x8x14x14xf32>) domain [2, 8, 14, 14] reduce [] : tensor<2x8x14x14xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x8x14x14xf32>):
    %v = tensor.extract %a[%i0, %i1, %i2, %i3] : tensor<2x8x14x14xf32>
    %r = math.exp %v : f32
    braze.store %r, 0 [%i0, %i1, %i2, %i3] : f32
  }
  return %y, %k : tensor<2x8x14x14xf32>, tensor<2x8x14x14xf32>
}

// CHECK-LABEL: func.func @conv1d
// CHECK-NOT: memory_format
// CHECK-NOT: braze.permute
// CHECK: return
func.func @conv1d(%x: tensor<2x8x14xf32>, %w: tensor<8x8x3xf32>) -> tensor<2x8x14xf32> {
  %y = braze.convolution %x, %w stride [1] padding [1] dilation [1] groups 1 : tensor<2x8x14xf32>, tensor<8x8x3xf32> -> tensor<2x8x14xf32>
  %k = braze.kernel ins(%y : tensor<2x8x14xf32>) domain [2, 8, 14] reduce [] : tensor<2x8x14xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %e0: index, %e1: index, %e2: index, %a: tensor<2x8x14xf32>):
    %v = tensor.extract %a[%i0, %i1, %i2] : tensor<2x8x14xf32>
    %r = math.exp %v : f32
    braze.store %r, 0 [%i0, %i1, %i2] : f32
  }
  return %k : tensor<2x8x14xf32>
}

// -----

// Tests that a kernel reading another reordered kernel's result reads its
// NHWC form directly: no permute back to NCHW and forward again, and the
// permute back that nothing else reads is gone.
// CHECK-LABEL: func.func @kernel_after_kernel
// CHECK: %[[V:.*]] = braze.permute %{{.*}} [0, 2, 3, 1] : tensor<2x8x14x14xf32> -> tensor<2x14x14x8xf32>
// CHECK: %[[A:.*]] = braze.kernel ins(%[[V]] : tensor<2x14x14x8xf32>) domain [2, 14, 14, 8]
// CHECK-NOT: braze.permute
// CHECK: %[[B:.*]] = braze.kernel ins(%[[A]] : tensor<2x14x14x8xf32>) domain [2, 14, 14, 8]
// CHECK: %[[OUT:.*]] = braze.permute %[[B]] [0, 3, 1, 2] : tensor<2x14x14x8xf32> -> tensor<2x8x14x14xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @kernel_after_kernel(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x1x1xf32>) -> tensor<2x8x14x14xf32> {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %a = braze.kernel ins(%y : tensor<2x8x14x14xf32>) domain [2, 8, 14, 14] reduce [] : tensor<2x8x14x14xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %e0: index, %e1: index, %e2: index, %e3: index, %t: tensor<2x8x14x14xf32>):
    %v = tensor.extract %t[%i0, %i1, %i2, %i3] : tensor<2x8x14x14xf32>
    %r = math.exp %v : f32
    braze.store %r, 0 [%i0, %i1, %i2, %i3] : f32
  }
  %b = braze.kernel ins(%a : tensor<2x8x14x14xf32>) domain [2, 8, 14, 14] reduce [] : tensor<2x8x14x14xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %e0: index, %e1: index, %e2: index, %e3: index, %t: tensor<2x8x14x14xf32>):
    %v = tensor.extract %t[%i0, %i1, %i2, %i3] : tensor<2x8x14x14xf32>
    %r = math.tanh %v : f32
    braze.store %r, 0 [%i0, %i1, %i2, %i3] : f32
  }
  return %b : tensor<2x8x14x14xf32>
}

// -----

// Tests that a kernel iterates in the memory order of what it reads, as its
// reads name the domain's dims: a LayerNorm over channels whose permute to
// NHWC braze-fold-layouts absorbed (its domain walks the convolution's
// channels-last memory in order already) keeps its order and reads the NHWC
// view in order, its result written as it is; the residual after it, in
// NCHW order over that NHWC result (the permute back absorbed), iterates in
// NHWC order, reads the result and an NHWC argument as they are, and hands
// its result to the next convolution channels-last.
// CHECK-LABEL: func.func @memory_order
// CHECK-SAME: %[[P:[a-z0-9]+]]: tensor<2x14x14x8xf32>
// CHECK: %[[Y:.*]] = braze.convolution
// CHECK: %[[V:.*]] = braze.permute %[[Y]] [0, 2, 3, 1] : tensor<2x8x14x14xf32> -> tensor<2x14x14x8xf32>
// CHECK: %[[LN:.*]] = braze.kernel ins(%[[V]], %{{.*}} : tensor<2x14x14x8xf32>, tensor<8xf32>) domain [2, 14, 14, 8] reduce [3] : tensor<2x14x14x8xf32>
// CHECK: ^bb0(%[[N:[a-z0-9]+]]: index, %[[H:[a-z0-9]+]]: index, %[[W:[a-z0-9]+]]: index, %[[C:[a-z0-9]+]]: index,
// CHECK: tensor.extract %{{.*}}[%[[N]], %[[H]], %[[W]], %[[C]]] : tensor<2x14x14x8xf32>
// CHECK: braze.store %{{.*}}, 0 [%[[N]], %[[H]], %[[W]], %[[C]]] : f32
// CHECK-NOT: braze.permute %[[LN]]
// CHECK: %[[V2:.*]] = braze.permute %[[Y]] [0, 2, 3, 1]
// CHECK: %[[R:.*]] = braze.kernel ins(%[[LN]], %[[V2]], %[[P]] : tensor<2x14x14x8xf32>, tensor<2x14x14x8xf32>, tensor<2x14x14x8xf32>) domain [2, 14, 14, 8] reduce [] : tensor<2x14x14x8xf32>
// CHECK: ^bb0(%[[N2:[a-z0-9]+]]: index, %[[H2:[a-z0-9]+]]: index, %[[W2:[a-z0-9]+]]: index, %[[C2:[a-z0-9]+]]: index,
// CHECK: tensor.extract %{{.*}}[%[[N2]], %[[H2]], %[[W2]], %[[C2]]]
// CHECK: tensor.extract %{{.*}}[%[[N2]], %[[H2]], %[[W2]], %[[C2]]]
// CHECK: tensor.extract %{{.*}}[%[[N2]], %[[H2]], %[[W2]], %[[C2]]]
// CHECK: braze.store %{{.*}}, 0 [%[[N2]], %[[H2]], %[[W2]], %[[C2]]] : f32
// CHECK: %[[OUT:.*]] = braze.permute %[[R]] [0, 3, 1, 2] : tensor<2x14x14x8xf32> -> tensor<2x8x14x14xf32>
// CHECK: braze.convolution %[[OUT]]
func.func @memory_order(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x1x1xf32>, %g: tensor<8xf32>, %p: tensor<2x14x14x8xf32>) -> tensor<2x8x14x14xf32> {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %ln = braze.kernel ins(%y, %g : tensor<2x8x14x14xf32>, tensor<8xf32>) domain [2, 14, 14, 8] reduce [3] : tensor<2x14x14x8xf32> {
  ^bb0(%n: index, %h: index, %ww: index, %c: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x8x14x14xf32>, %gg: tensor<8xf32>):
    %v = tensor.extract %a[%n, %c, %h, %ww] : tensor<2x8x14x14xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    %d = arith.subf %v, %s : f32
    %gv = tensor.extract %gg[%c] : tensor<8xf32>
    %m = arith.mulf %d, %gv : f32
    braze.store %m, 0 [%n, %h, %ww, %c] : f32
  }
  %r = braze.kernel ins(%ln, %y, %p : tensor<2x14x14x8xf32>, tensor<2x8x14x14xf32>, tensor<2x14x14x8xf32>) domain [2, 8, 14, 14] reduce [] : tensor<2x8x14x14xf32> {
  ^bb0(%n: index, %c: index, %h: index, %ww: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x14x14x8xf32>, %b: tensor<2x8x14x14xf32>, %pp: tensor<2x14x14x8xf32>):
    %v = tensor.extract %a[%n, %h, %ww, %c] : tensor<2x14x14x8xf32>
    %u = tensor.extract %b[%n, %c, %h, %ww] : tensor<2x8x14x14xf32>
    %q = tensor.extract %pp[%n, %h, %ww, %c] : tensor<2x14x14x8xf32>
    %s = arith.addf %v, %u : f32
    %t = arith.addf %s, %q : f32
    braze.store %t, 0 [%n, %c, %h, %ww] : f32
  }
  %z = braze.convolution %r, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  return %z : tensor<2x8x14x14xf32>
}

// -----

// Tests that reads at strided and offset indices name the domain's dims
// too: a max pool whose permute to NHWC braze-fold-layouts absorbed (domain
// N, H, W, C; reads at [n, c, 2h + dh, 2w + dw]) keeps its order, reads the
// convolution's NHWC view, and its result goes on as it is written; the same
// pool in NCHW order (domain N, C, H, W) is reordered to NHWC.
// CHECK-LABEL: func.func @strided_reads
// CHECK: %[[V:.*]] = braze.permute %{{.*}} [0, 2, 3, 1] : tensor<2x8x14x14xf32> -> tensor<2x14x14x8xf32>
// CHECK: %[[P:.*]] = braze.kernel ins(%[[V]] : tensor<2x14x14x8xf32>) domain [2, 7, 7, 8] reduce [] : tensor<2x7x7x8xf32>
// CHECK-NOT: braze.permute %[[P]]
// CHECK: %[[V2:.*]] = braze.permute %{{.*}} [0, 2, 3, 1] : tensor<2x8x14x14xf32> -> tensor<2x14x14x8xf32>
// CHECK: %[[Q:.*]] = braze.kernel ins(%[[V2]] : tensor<2x14x14x8xf32>) domain [2, 7, 7, 8] reduce [] : tensor<2x7x7x8xf32>
// CHECK: braze.permute %[[Q]] [0, 3, 1, 2] : tensor<2x7x7x8xf32> -> tensor<2x8x7x7xf32>
func.func @strided_reads(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x1x1xf32>) -> (tensor<2x7x7x8xf32>, tensor<2x8x7x7xf32>) {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %p = braze.kernel ins(%y : tensor<2x8x14x14xf32>) domain [2, 7, 7, 8] reduce [] : tensor<2x7x7x8xf32> {
  ^bb0(%n: index, %h: index, %ww: index, %c: index, %e0: index, %e1: index, %e2: index, %e3: index, %t: tensor<2x8x14x14xf32>):
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %h2 = arith.muli %h, %c2 : index
    %w2 = arith.muli %ww, %c2 : index
    %h3 = arith.addi %h2, %c1 : index
    %w3 = arith.addi %w2, %c1 : index
    %a = tensor.extract %t[%n, %c, %h2, %w2] : tensor<2x8x14x14xf32>
    %b = tensor.extract %t[%n, %c, %h3, %w3] : tensor<2x8x14x14xf32>
    %m = arith.maximumf %a, %b : f32
    braze.store %m, 0 [%n, %h, %ww, %c] : f32
  }
  %q = braze.kernel ins(%y : tensor<2x8x14x14xf32>) domain [2, 8, 7, 7] reduce [] : tensor<2x8x7x7xf32> {
  ^bb0(%n: index, %c: index, %h: index, %ww: index, %e0: index, %e1: index, %e2: index, %e3: index, %t: tensor<2x8x14x14xf32>):
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %h2 = arith.muli %h, %c2 : index
    %w2 = arith.muli %ww, %c2 : index
    %h3 = arith.addi %h2, %c1 : index
    %a = tensor.extract %t[%n, %c, %h2, %w2] : tensor<2x8x14x14xf32>
    %b = tensor.extract %t[%n, %c, %h3, %w2] : tensor<2x8x14x14xf32>
    %m = arith.maximumf %a, %b : f32
    braze.store %m, 0 [%n, %c, %h, %ww] : f32
  }
  return %p, %q : tensor<2x7x7x8xf32>, tensor<2x8x7x7xf32>
}

// -----

// Tests that an index computed from two of the domain's dims names none:
// with no read naming the dims, the kernel takes the input's memory order
// (NHWC), as a kernel in NCHW order would.
// CHECK-LABEL: func.func @mixed_index
// CHECK: braze.kernel ins(%{{.*}} : tensor<2x14x14x8xf32>) domain [2, 7, 8, 7] reduce [] : tensor<2x7x8x7xf32>
func.func @mixed_index(%x: tensor<2x8x14x14xf32>, %w: tensor<8x8x1x1xf32>) -> tensor<2x7x7x8xf32> {
  %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<2x8x14x14xf32>, tensor<8x8x1x1xf32> -> tensor<2x8x14x14xf32>
  %p = braze.kernel ins(%y : tensor<2x8x14x14xf32>) domain [2, 7, 7, 8] reduce [] : tensor<2x7x7x8xf32> {
  ^bb0(%n: index, %h: index, %ww: index, %c: index, %e0: index, %e1: index, %e2: index, %e3: index, %t: tensor<2x8x14x14xf32>):
    %hw = arith.addi %h, %ww : index
    %a = tensor.extract %t[%n, %c, %hw, %ww] : tensor<2x8x14x14xf32>
    braze.store %a, 0 [%n, %h, %ww, %c] : f32
  }
  return %p : tensor<2x7x7x8xf32>
}
