// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-collapse-dims{min-points=1}))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-collapse-dims{min-points=1 short-extent=8}))' -split-input-file | FileCheck %s --check-prefix=SHORT
// RUN: braze-opt %s -braze-collapse-dims -split-input-file | FileCheck %s --check-prefix=DEFAULT

// Tests that a mean over a 7x7 image becomes one reduction loop over 49
// points: the input is reshaped, the product of the pair's extents (the
// mean's count) becomes the merged extent, the per-row store is unchanged.
// CHECK-LABEL: func.func @image_mean
// CHECK: %[[R:.*]] = braze.reshape %{{.*}} : tensor<8x16x7x7xf32> -> tensor<8x16x49xf32>
// CHECK: braze.kernel ins(%[[R]] : tensor<8x16x49xf32>) domain [8, 16, 49] reduce [2] : tensor<8x16x1x1xf32>
// CHECK: ^bb0(%[[N:.*]]: index, %[[C:.*]]: index, %[[P:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[E:.*]]: index, %[[A:.*]]: tensor<8x16x49xf32>):
// CHECK-NOT: arith.muli
// CHECK: tensor.extract %[[A]][%[[N]], %[[C]], %[[P]]] : tensor<8x16x49xf32>
// CHECK: arith.index_cast %[[E]] : index to i64
// CHECK: braze.store %{{.*}}, 0 [%[[N]], %[[C]], %{{.*}}, %{{.*}}] : f32
// SHORT-LABEL: func.func @image_mean
// SHORT: domain [8, 16, 49] reduce [2]
func.func @image_mean(%x: tensor<8x16x7x7xf32>) -> tensor<8x16x1x1xf32> {
  %y = braze.kernel ins(%x : tensor<8x16x7x7xf32>) domain [8, 16, 7, 7] reduce [2, 3] : tensor<8x16x1x1xf32> {
  ^bb0(%n: index, %c: index, %h: index, %w: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<8x16x7x7xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%n, %c, %h, %w] : tensor<8x16x7x7xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    %k = arith.muli %e2, %e3 : index
    %i = arith.index_cast %k : index to i64
    %f = arith.sitofp %i : i64 to f32
    %m = arith.divf %s, %f : f32
    braze.store %m, 0 [%n, %c, %c0, %c0] : f32
  }
  return %y : tensor<8x16x1x1xf32>
}

// -----

// Tests that a pointwise kernel whose tensors all hold every dim merges
// them all (7 -> 21 -> 42 points in one reshape, each below 128), and its result is
// reshaped back; with short-extent=8 only the first pair merges.
// CHECK-LABEL: func.func @all_dims
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x7xf32>)
// CHECK: %[[XX:.*]] = braze.reshape %[[X]] : tensor<2x3x7xf32> -> tensor<42xf32>
// CHECK: %[[K:.*]] = braze.kernel ins(%[[XX]] : tensor<42xf32>) domain [42] reduce [] : tensor<42xf32>
// CHECK: ^bb0(%[[I:.*]]: index, %{{.*}}: index, %[[A:.*]]: tensor<42xf32>):
// CHECK: tensor.extract %[[A]][%[[I]]] : tensor<42xf32>
// CHECK: braze.store %{{.*}}, 0 [%[[I]]] : f32
// CHECK: %[[B:.*]] = braze.reshape %[[K]] : tensor<42xf32> -> tensor<2x3x7xf32>
// CHECK-NOT: braze.reshape
// CHECK: return %[[B]]
// SHORT-LABEL: func.func @all_dims
// SHORT: domain [2, 21] reduce []
// With the default min-points (4096), a kernel of 42 points stays as it is,
// while the 6272-point image mean above merges.
// DEFAULT-LABEL: func.func @image_mean
// DEFAULT: domain [8, 16, 49] reduce [2]
// DEFAULT-LABEL: func.func @all_dims
// DEFAULT-NOT: braze.reshape
// DEFAULT: domain [2, 3, 7] reduce []
func.func @all_dims(%x: tensor<2x3x7xf32>) -> tensor<2x3x7xf32> {
  %y = braze.kernel ins(%x : tensor<2x3x7xf32>) domain [2, 3, 7] reduce [] : tensor<2x3x7xf32> {
  ^bb0(%i: index, %j: index, %k: index, %e0: index, %e1: index, %e2: index, %a: tensor<2x3x7xf32>):
    %v = tensor.extract %a[%i, %j, %k] : tensor<2x3x7xf32>
    %r = math.exp %v : f32
    braze.store %r, 0 [%i, %j, %k] : f32
  }
  return %y : tensor<2x3x7xf32>
}

// -----

// Tests that a per-channel input (it uses neither index of the pair) lets H
// and W merge, but stops the merge of C with H*W; its size-1 dims, always
// read at 0, are dropped.
// CHECK-LABEL: func.func @per_channel
// CHECK: %[[R:.*]] = braze.reshape %{{.*}} : tensor<2x8x7x7xf32> -> tensor<2x8x49xf32>
// CHECK-NOT: braze.reshape %{{.*}} -> tensor<2x392xf32>
// CHECK: braze.kernel ins(%[[R]], %{{.*}} : tensor<2x8x49xf32>, tensor<8xf32>) domain [2, 8, 49] reduce []
// CHECK: ^bb0(%{{[a-z0-9]+}}: index, %[[C:[a-z0-9]+]]: index,
// CHECK: tensor.extract %{{.*}}[%[[C]]] : tensor<8xf32>
func.func @per_channel(%x: tensor<2x8x7x7xf32>, %b: tensor<1x8x1x1xf32>) -> tensor<2x8x7x7xf32> {
  %y = braze.kernel ins(%x, %b : tensor<2x8x7x7xf32>, tensor<1x8x1x1xf32>) domain [2, 8, 7, 7] reduce [] : tensor<2x8x7x7xf32> {
  ^bb0(%n: index, %c: index, %h: index, %w: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x8x7x7xf32>, %bb: tensor<1x8x1x1xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%n, %c, %h, %w] : tensor<2x8x7x7xf32>
    %u = tensor.extract %bb[%c0, %c, %c0, %c0] : tensor<1x8x1x1xf32>
    %s = arith.addf %v, %u : f32
    braze.store %s, 0 [%n, %c, %h, %w] : f32
  }
  return %y : tensor<2x8x7x7xf32>
}

// -----

// Tests dynamic extents: the merged extent is their product, computed before
// the kernel, and reshapes with two dynamic dims list their sizes.
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x7xf32>, %[[B:.*]]: tensor<?x1x1xf32>, %[[N0:.*]]: index, %[[N1:.*]]: index)
// CHECK: %[[BS:.*]] = braze.reshape %[[B]] : tensor<?x1x1xf32> -> tensor<?xf32>
// CHECK: %[[D0:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x?x7xf32>
// CHECK: %[[D1:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x?x7xf32>
// CHECK: %[[M:.*]] = arith.muli %[[D1]], %{{.*}} : index
// CHECK: %[[R:.*]] = braze.reshape %[[X]] sizes [%[[D0]], %[[M]]] : tensor<?x?x7xf32> -> tensor<?x?xf32>
// CHECK: %[[E:.*]] = arith.muli %[[N1]], %{{.*}} : index
// CHECK: %[[K:.*]] = braze.kernel ins(%[[R]], %[[BS]] : tensor<?x?xf32>, tensor<?xf32>) domain [%[[N0]], %[[E]]] reduce []
// CHECK: braze.reshape %[[K]] sizes [%[[N0]], %[[N1]]] : tensor<?x?xf32> -> tensor<?x?x7xf32>
func.func @dynamic(%x: tensor<?x?x7xf32>, %b: tensor<?x1x1xf32>, %n0: index, %n1: index) -> tensor<?x?x7xf32> {
  %y = braze.kernel ins(%x, %b : tensor<?x?x7xf32>, tensor<?x1x1xf32>) domain [%n0, %n1, 7] reduce [] : tensor<?x?x7xf32> {
  ^bb0(%i: index, %j: index, %k: index, %e0: index, %e1: index, %e2: index, %a: tensor<?x?x7xf32>, %bb: tensor<?x1x1xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%i, %j, %k] : tensor<?x?x7xf32>
    %w = tensor.extract %bb[%i, %c0, %c0] : tensor<?x1x1xf32>
    %s = arith.addf %v, %w : f32
    braze.store %s, 0 [%i, %j, %k] : f32
  }
  return %y : tensor<?x?x7xf32>
}

// -----

// Tests that a dynamic reduced extent merges when the body uses it only in
// the product of the pair (a mean's count), and a result without the
// reduced dims (keepdim=False) is left as it is.
// CHECK-LABEL: func.func @dynamic_mean
// CHECK: %[[E:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK: braze.kernel ins(%{{.*}} : tensor<4x?xf32>) domain [4, %[[E]]] reduce [1] : tensor<4xf32>
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[N:.*]]: index,
// CHECK: arith.index_cast %[[N]] : index to i64
func.func @dynamic_mean(%x: tensor<4x?x7xf32>, %n: index) -> tensor<4xf32> {
  %y = braze.kernel ins(%x : tensor<4x?x7xf32>) domain [4, %n, 7] reduce [1, 2] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %k: index, %e0: index, %e1: index, %e2: index, %a: tensor<4x?x7xf32>):
    %v = tensor.extract %a[%i, %j, %k] : tensor<4x?x7xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    %c = arith.muli %e1, %e2 : index
    %ci = arith.index_cast %c : index to i64
    %cf = arith.sitofp %ci : i64 to f32
    %m = arith.divf %s, %cf : f32
    braze.store %m, 0 [%i] : f32
  }
  return %y : tensor<4xf32>
}

// -----

// Tests that a triangle mask (the pair's indices compared) is not merged.
// CHECK-LABEL: func.func @triangle
// CHECK-NOT: braze.reshape
// CHECK: domain [4, 7, 7] reduce []
func.func @triangle(%x: tensor<4x7x7xf32>) -> tensor<4x7x7xf32> {
  %y = braze.kernel ins(%x : tensor<4x7x7xf32>) domain [4, 7, 7] reduce [] : tensor<4x7x7xf32> {
  ^bb0(%b: index, %i: index, %j: index, %e0: index, %e1: index, %e2: index, %a: tensor<4x7x7xf32>):
    %v = tensor.extract %a[%b, %i, %j] : tensor<4x7x7xf32>
    %keep = arith.cmpi sle, %j, %i : index
    %zero = arith.constant 0.0 : f32
    %r = arith.select %keep, %v, %zero : f32
    braze.store %r, 0 [%b, %i, %j] : f32
  }
  return %y : tensor<4x7x7xf32>
}

// -----

// Tests that an input read transposed keeps the pair apart.
// CHECK-LABEL: func.func @transposed
// CHECK-NOT: braze.reshape
// CHECK: domain [7, 7] reduce []
func.func @transposed(%x: tensor<7x7xf32>, %t: tensor<7x7xf32>) -> tensor<7x7xf32> {
  %y = braze.kernel ins(%x, %t : tensor<7x7xf32>, tensor<7x7xf32>) domain [7, 7] reduce [] : tensor<7x7xf32> {
  ^bb0(%i: index, %j: index, %e0: index, %e1: index, %a: tensor<7x7xf32>, %b: tensor<7x7xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<7x7xf32>
    %u = tensor.extract %b[%j, %i] : tensor<7x7xf32>
    %s = arith.addf %v, %u : f32
    braze.store %s, 0 [%i, %j] : f32
  }
  return %y : tensor<7x7xf32>
}

// -----

// Tests that one tensor read at the pair and also elsewhere (a broadcast
// read of the same input) is not merged.
// CHECK-LABEL: func.func @read_two_ways
// CHECK-NOT: braze.reshape
// CHECK: domain [7, 7] reduce []
func.func @read_two_ways(%x: tensor<7x7xf32>) -> tensor<7x7xf32> {
  %y = braze.kernel ins(%x : tensor<7x7xf32>) domain [7, 7] reduce [] : tensor<7x7xf32> {
  ^bb0(%i: index, %j: index, %e0: index, %e1: index, %a: tensor<7x7xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%i, %j] : tensor<7x7xf32>
    %u = tensor.extract %a[%c0, %c0] : tensor<7x7xf32>
    %s = arith.addf %v, %u : f32
    braze.store %s, 0 [%i, %j] : f32
  }
  return %y : tensor<7x7xf32>
}

// -----

// Tests that a long inner dim, a pair of a parallel and a reduction dim, and
// a dynamic extent used alone are each left as they are.
// CHECK-LABEL: func.func @long_inner
// CHECK-NOT: braze.reshape
// CHECK: domain [4, 256] reduce []
func.func @long_inner(%x: tensor<4x256xf32>) -> tensor<4x256xf32> {
  %y = braze.kernel ins(%x : tensor<4x256xf32>) domain [4, 256] reduce [] : tensor<4x256xf32> {
  ^bb0(%i: index, %j: index, %e0: index, %e1: index, %a: tensor<4x256xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x256xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  return %y : tensor<4x256xf32>
}

// CHECK-LABEL: func.func @row_sum
// CHECK-NOT: braze.reshape
// CHECK: domain [4, 7] reduce [1]
func.func @row_sum(%x: tensor<4x7xf32>) -> tensor<4xf32> {
  %y = braze.kernel ins(%x : tensor<4x7xf32>) domain [4, 7] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %e0: index, %e1: index, %a: tensor<4x7xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x7xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [%i] : f32
  }
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @extent_alone
// CHECK-NOT: braze.reshape
// CHECK: domain [%{{.*}}, 7] reduce [0, 1]
func.func @extent_alone(%x: tensor<?x7xf32>, %n: index) -> tensor<f32> {
  %y = braze.kernel ins(%x : tensor<?x7xf32>) domain [%n, 7] reduce [0, 1] : tensor<f32> {
  ^bb0(%i: index, %j: index, %e0: index, %e1: index, %a: tensor<?x7xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x7xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    %ci = arith.index_cast %e0 : index to i64
    %cf = arith.sitofp %ci : i64 to f32
    %m = arith.divf %s, %cf : f32
    braze.store %m, 0 [] : f32
  }
  return %y : tensor<f32>
}

// -----

// Tests that an NHWC kernel's per-channel input 1x1x1xC becomes C, read at
// the innermost index, while a size-1 dim read at a domain index (of
// extent 1) is kept; W and C do not merge (the per-channel input holds C
// alone).
// CHECK-LABEL: func.func @nhwc_per_channel
// CHECK: %[[S:.*]] = braze.reshape %{{.*}} : tensor<1x1x1x16xf32> -> tensor<16xf32>
// CHECK-NOT: braze.reshape %{{.*}} : tensor<2x1x7x16xf32>
// CHECK: braze.kernel ins(%{{.*}}, %[[S]] : tensor<2x1x7x16xf32>, tensor<16xf32>) domain [2, 1, 7, 16] reduce []
// CHECK: ^bb0(%{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %[[C:[a-z0-9]+]]: index,
// CHECK: tensor.extract %{{.*}}[%[[C]]] : tensor<16xf32>
func.func @nhwc_per_channel(%x: tensor<2x1x7x16xf32>, %b: tensor<1x1x1x16xf32>) -> tensor<2x1x7x16xf32> {
  %y = braze.kernel ins(%x, %b : tensor<2x1x7x16xf32>, tensor<1x1x1x16xf32>) domain [2, 1, 7, 16] reduce [] : tensor<2x1x7x16xf32> {
  ^bb0(%n: index, %h: index, %w: index, %c: index, %e0: index, %e1: index, %e2: index, %e3: index, %a: tensor<2x1x7x16xf32>, %bb: tensor<1x1x1x16xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %a[%n, %h, %w, %c] : tensor<2x1x7x16xf32>
    %u = tensor.extract %bb[%c0, %c0, %c0, %c] : tensor<1x1x1x16xf32>
    %s = arith.mulf %v, %u : f32
    braze.store %s, 0 [%n, %h, %w, %c] : f32
  }
  return %y : tensor<2x1x7x16xf32>
}

// -----

// Tests that a slice along the outermost dim (`cache[:s]`) is one run of
// memory: the kernel reading it merges every dim, and the reshape is a view.
// CHECK-LABEL: func.func @slice_of_rows
// CHECK: %[[S:.*]] = braze.slice
// CHECK: %[[R:.*]] = braze.reshape %[[S]] : tensor<?x4x8xf32> -> tensor<?xf32>
// CHECK: braze.kernel ins(%[[R]] : tensor<?xf32>) domain [%{{.*}}] reduce []
func.func @slice_of_rows(%cache: tensor<64x4x8xf32>, %s: index) -> tensor<?x4x8xf32> {
  %window = braze.slice %cache dim 0 [0 : %s : 1] : tensor<64x4x8xf32> -> tensor<?x4x8xf32>
  %y = braze.kernel ins(%window : tensor<?x4x8xf32>) domain [%s, 4, 8] reduce [] : tensor<?x4x8xf32> {
  ^bb0(%i: index, %j: index, %k: index, %e0: index, %e1: index, %e2: index, %a: tensor<?x4x8xf32>):
    %v = tensor.extract %a[%i, %j, %k] : tensor<?x4x8xf32>
    %d = arith.addf %v, %v : f32
    braze.store %d, 0 [%i, %j, %k] : f32
  }
  return %y : tensor<?x4x8xf32>
}

// -----

// Tests that a slice along the inner dim of a pair keeps the pair apart: its
// rows are cut short, so merging them would copy the slice.
// CHECK-LABEL: func.func @slice_of_columns
// CHECK-NOT: braze.reshape
// CHECK: braze.kernel ins(%{{.*}} : tensor<4x7xf32>) domain [4, 7] reduce []
func.func @slice_of_columns(%x: tensor<4x16xf32>, %s: index, %e: index) -> tensor<4x7xf32> {
  %cut = braze.slice %x dim 1 [%s : %e : 1] : tensor<4x16xf32> -> tensor<4x7xf32>
  %y = braze.kernel ins(%cut : tensor<4x7xf32>) domain [4, 7] reduce [] : tensor<4x7xf32> {
  ^bb0(%i: index, %j: index, %e0: index, %e1: index, %a: tensor<4x7xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x7xf32>
    %d = arith.addf %v, %v : f32
    braze.store %d, 0 [%i, %j] : f32
  }
  return %y : tensor<4x7xf32>
}

// -----

// Tests that a slice with a step other than 1 keeps its sliced dim apart from
// the next one (`x[:, ::k]` steps over whole rows), while the dims before
// the sliced one are not held by the pair and do not matter.
// CHECK-LABEL: func.func @strided_slice
// CHECK-NOT: braze.reshape
// CHECK: braze.kernel ins(%{{.*}} : tensor<2x?x8xf32>) domain [2, %{{.*}}, 8] reduce []
func.func @strided_slice(%x: tensor<2x?x8xf32>, %k: index, %n: index) -> tensor<2x?x8xf32> {
  %every = braze.slice %x dim 1 [0 : 9223372036854775807 : %k] : tensor<2x?x8xf32> -> tensor<2x?x8xf32>
  %y = braze.kernel ins(%every : tensor<2x?x8xf32>) domain [2, %n, 8] reduce [] : tensor<2x?x8xf32> {
  ^bb0(%i: index, %j: index, %l: index, %e0: index, %e1: index, %e2: index, %a: tensor<2x?x8xf32>):
    %v = tensor.extract %a[%i, %j, %l] : tensor<2x?x8xf32>
    %d = arith.addf %v, %v : f32
    braze.store %d, 0 [%i, %j, %l] : f32
  }
  return %y : tensor<2x?x8xf32>
}
