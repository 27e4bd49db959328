// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-fold-layouts))' -split-input-file | FileCheck %s
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-fold-layouts{remarks=true}))' -split-input-file -verify-diagnostics -o /dev/null
// RUN: braze-opt %s -pass-pipeline='builtin.module(func.func(braze-fold-layouts{max-product-calls=16}))' -split-input-file | FileCheck %s --check-prefix=CALLS

// Tests that attention's scores product, whose operands merge the head dim
// into the batch (no stride does: a copy each), becomes a product over
// [batch, heads] reading the permuted views, reshaped back to the merged
// batch (a view of its contiguous result).
// CHECK-LABEL: func.func @scores
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x4x8xf32>, %[[K:.*]]: tensor<2x8x4x8xf32>)
// CHECK-DAG: %[[QT:.*]] = braze.permute %[[Q]] [0, 2, 1, 3]
// CHECK-DAG: %[[KT:.*]] = braze.permute %[[K]] [0, 2, 3, 1]
// CHECK: %[[S:.*]] = braze.bmm %[[QT]], %[[KT]] : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: %[[R:.*]] = braze.reshape %[[S]] : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
// CHECK: return %[[R]]
func.func @scores(%q: tensor<2x8x4x8xf32>, %k: tensor<2x8x4x8xf32>) -> tensor<8x8x8xf32> {
  %qt = braze.permute %q [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  %kt = braze.permute %k [0, 2, 3, 1] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  %qm = braze.reshape %qt : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %km = braze.reshape %kt : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  // expected-remark @+1 {{batched product over 2 batch dims reads strided views}}
  %s = braze.bmm %qm, %km : tensor<8x8x8xf32>, tensor<8x8x8xf32> -> tensor<8x8x8xf32>
  return %s : tensor<8x8x8xf32>
}

// -----

// Tests that grouped-query attention's K (2 KV heads, each shared by 3 query
// heads through an expand) is read with a zero batch stride: the merged
// batch of 12 splits into [2, 2, 3] in both operands, and the query splits
// its 6 heads into [2, 3] (a view).
// CHECK-LABEL: func.func @grouped_query
// CHECK-SAME: (%[[Q:.*]]: tensor<2x6x5x8xf32>, %[[K:.*]]: tensor<2x2x1x8x5xf32>)
// CHECK-DAG: %[[E:.*]] = braze.expand %[[K]] : tensor<2x2x1x8x5xf32> -> tensor<2x2x3x8x5xf32>
// CHECK-DAG: %[[QS:.*]] = braze.reshape %[[Q]] : tensor<2x6x5x8xf32> -> tensor<2x2x3x5x8xf32>
// CHECK: braze.bmm %[[QS]], %[[E]] : tensor<2x2x3x5x8xf32>, tensor<2x2x3x8x5xf32> -> tensor<2x2x3x5x5xf32>
// CHECK-NOT: braze.kernel
func.func @grouped_query(%q: tensor<2x6x5x8xf32>, %k: tensor<2x2x1x8x5xf32>) -> tensor<12x5x5xf32> {
  %e = braze.expand %k : tensor<2x2x1x8x5xf32> -> tensor<2x2x3x8x5xf32>
  %km = braze.reshape %e : tensor<2x2x3x8x5xf32> -> tensor<12x8x5xf32>
  %qm = braze.reshape %q : tensor<2x6x5x8xf32> -> tensor<12x5x8xf32>
  // expected-remark @+1 {{batched product over 3 batch dims reads strided views}}
  %s = braze.bmm %qm, %km : tensor<12x5x8xf32>, tensor<12x8x5xf32> -> tensor<12x5x5xf32>
  return %s : tensor<12x5x5xf32>
}

// -----

// Tests that a product whose operands' batches do not split alike ([2, 3]
// and [3, 2]) is left batched as it is, and its copying operand becomes one
// copy kernel that reads the permute's source with re-split indices.
// CHECK-LABEL: func.func @unaligned_batches
// CHECK-SAME: (%[[A:.*]]: tensor<3x2x4x4xf32>, %[[B:.*]]: tensor<3x2x4x4xf32>)
// CHECK: %[[C:.*]] = braze.kernel ins(%[[A]] : tensor<3x2x4x4xf32>) domain [6, 4, 4] reduce []
// CHECK-DAG: %[[B0:.*]] = arith.divsi %{{.*}}, %{{.*}} : index
// CHECK-DAG: %[[B1:.*]] = arith.remsi %{{.*}}, %{{.*}} : index
// CHECK: tensor.extract %{{.*}}[%[[B1]], %[[B0]], %{{.*}}, %{{.*}}] : tensor<3x2x4x4xf32>
// CHECK: braze.bmm %[[C]], %{{.*}} : tensor<6x4x4xf32>, tensor<6x4x4xf32>
func.func @unaligned_batches(%a: tensor<3x2x4x4xf32>, %b: tensor<3x2x4x4xf32>) -> tensor<6x4x4xf32> {
  %at = braze.permute %a [1, 0, 2, 3] : tensor<3x2x4x4xf32> -> tensor<2x3x4x4xf32>
  %am = braze.reshape %at : tensor<2x3x4x4xf32> -> tensor<6x4x4xf32>
  %bm = braze.reshape %b : tensor<3x2x4x4xf32> -> tensor<6x4x4xf32>
  // expected-remark @+2 {{batch dims of the operands do not split alike}}
  // expected-remark @+1 {{operand #0 is no strided view: one copy kernel makes it contiguous}}
  %s = braze.bmm %am, %bm : tensor<6x4x4xf32>, tensor<6x4x4xf32> -> tensor<6x4x4xf32>
  return %s : tensor<6x4x4xf32>
}

// -----

// Tests that a transposed weight (a view with unit stride in its first
// dim) stays a view: a BLAS reads it in place, so nothing is copied.
// CHECK-LABEL: func.func @transposed_weight
// CHECK: %[[T:.*]] = braze.permute
// CHECK: braze.matmul %{{.*}}, %[[T]]
// CHECK-NOT: braze.kernel
func.func @transposed_weight(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>) -> tensor<4x8xf32> {
  %t = braze.permute %w [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = braze.matmul %x, %t : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a GEMM operand with no unit stride (every other column) is
// made contiguous by a copy kernel that reads the slice's source at
// 2 * j + 1.
// CHECK-LABEL: func.func @strided_columns
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>,
// CHECK: %[[C:.*]] = braze.kernel ins(%[[X]] : tensor<4x32xf32>) domain [4, 16] reduce [] : tensor<4x16xf32>
// CHECK: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[A:.*]]: tensor<4x32xf32>):
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[M:.*]] = arith.muli %[[J]], %[[C2]] : index
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[P:.*]] = arith.addi %[[M]], %[[C1]] : index
// CHECK: tensor.extract %[[A]][%[[I]], %[[P]]] : tensor<4x32xf32>
// CHECK: braze.matmul %[[C]], %{{.*}} : tensor<4x16xf32>, tensor<16x8xf32>
func.func @strided_columns(%x: tensor<4x32xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %s = braze.slice %x dim 1 [1 : 32 : 2] : tensor<4x32xf32> -> tensor<4x16xf32>
  // expected-remark @+1 {{operand #0 has no unit stride: one copy kernel makes it contiguous}}
  %y = braze.matmul %s, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that attention's output, heads moved back beside the features and
// merged into them (no stride does), is made by one copy kernel that reads
// the product's result through the permutation, in place of the host copy.
// CHECK-LABEL: func.func @heads_merged
// CHECK-SAME: (%[[O:.*]]: tensor<2x4x8x8xf32>,
// CHECK: %[[C:.*]] = braze.kernel ins(%[[O]] : tensor<2x4x8x8xf32>) domain [16, 32] reduce [] : tensor<16x32xf32>
// CHECK: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[A:.*]]: tensor<2x4x8x8xf32>):
// CHECK-DAG: %[[B:.*]] = arith.divsi %[[I]], %{{.*}} : index
// CHECK-DAG: %[[T:.*]] = arith.remsi %[[I]], %{{.*}} : index
// CHECK-DAG: %[[H:.*]] = arith.divsi %[[J]], %{{.*}} : index
// CHECK-DAG: %[[D:.*]] = arith.remsi %[[J]], %{{.*}} : index
// CHECK: tensor.extract %[[A]][%[[B]], %[[H]], %[[T]], %[[D]]] : tensor<2x4x8x8xf32>
// CHECK: braze.addmm %{{.*}}, %[[C]], %{{.*}}
// CHECK-NOT: braze.permute
// CHECK-NOT: braze.reshape
func.func @heads_merged(%o: tensor<2x4x8x8xf32>, %w: tensor<32x32xf32>, %bias: tensor<32xf32>) -> tensor<16x32xf32> {
  %p = braze.permute %o [0, 2, 1, 3] : tensor<2x4x8x8xf32> -> tensor<2x8x4x8xf32>
  %m = braze.reshape %p : tensor<2x8x4x8xf32> -> tensor<16x32xf32>
  // expected-remark @+1 {{operand #1 is no strided view: one copy kernel makes it contiguous}}
  %y = braze.addmm %bias, %m, %w : tensor<32xf32>, tensor<16x32xf32>, tensor<32x32xf32> -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

// Tests that a kernel reads a permute, an expand and a slice through index
// maps (indices swapped, 0 where it broadcasts, 2 * i + 4), so no view is
// left; a reshape of a contiguous tensor stays a view the kernel reads.
// CHECK-LABEL: func.func @kernel_views
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<1x8xf32>, %[[S:.*]]: tensor<20x8xf32>, %[[F:.*]]: tensor<32xf32>)
// CHECK: %[[R:.*]] = braze.reshape %[[F]] : tensor<32xf32> -> tensor<4x8xf32>
// CHECK: braze.kernel ins(%[[X]], %[[B]], %[[S]], %[[R]] : tensor<8x4xf32>, tensor<1x8xf32>, tensor<20x8xf32>, tensor<4x8xf32>) domain [4, 8]
// CHECK: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[A0:.*]]: tensor<8x4xf32>, %[[A1:.*]]: tensor<1x8xf32>, %[[A2:.*]]: tensor<20x8xf32>, %[[A3:.*]]: tensor<4x8xf32>):
// CHECK: tensor.extract %[[A0]][%[[J]], %[[I]]] : tensor<8x4xf32>
// CHECK: %[[Z:.*]] = arith.constant 0 : index
// CHECK: tensor.extract %[[A1]][%[[Z]], %[[J]]] : tensor<1x8xf32>
// CHECK: %[[M:.*]] = arith.muli %[[I]], %{{.*}} : index
// CHECK: %[[P:.*]] = arith.addi %[[M]], %{{.*}} : index
// CHECK: tensor.extract %[[A2]][%[[P]], %[[J]]] : tensor<20x8xf32>
// CHECK: tensor.extract %[[A3]][%[[I]], %[[J]]] : tensor<4x8xf32>
// CHECK-NOT: braze.permute
// CHECK-NOT: braze.expand
// CHECK-NOT: braze.slice
func.func @kernel_views(%x: tensor<8x4xf32>, %b: tensor<1x8xf32>, %s: tensor<20x8xf32>, %f: tensor<32xf32>) -> tensor<4x8xf32> {
  %t = braze.permute %x [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %e = braze.expand %b : tensor<1x8xf32> -> tensor<4x8xf32>
  %c = braze.slice %s dim 0 [4 : 12 : 2] : tensor<20x8xf32> -> tensor<4x8xf32>
  %r = braze.reshape %f : tensor<32xf32> -> tensor<4x8xf32>
  %y = braze.kernel ins(%t, %e, %c, %r : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>, %a2: tensor<4x8xf32>, %a3: tensor<4x8xf32>):
    %v0 = tensor.extract %a0[%i, %j] : tensor<4x8xf32>
    %v1 = tensor.extract %a1[%i, %j] : tensor<4x8xf32>
    %v2 = tensor.extract %a2[%i, %j] : tensor<4x8xf32>
    %v3 = tensor.extract %a3[%i, %j] : tensor<4x8xf32>
    %s0 = arith.addf %v0, %v1 : f32
    %s1 = arith.addf %v2, %v3 : f32
    %s2 = arith.mulf %s0, %s1 : f32
    braze.store %s2, 0 [%i, %j] : f32
  }
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a reshape no view expresses, returned from the function, is
// made by a copy kernel (in bf16: widened and narrowed back, exactly).
// CHECK-LABEL: func.func @returned_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<4x6xbf16>)
// CHECK: %[[C:.*]] = braze.kernel ins(%[[X]] : tensor<4x6xbf16>) domain [3, 8] reduce [] : tensor<3x8xbf16>
// CHECK: arith.extf
// CHECK: arith.truncf
// CHECK: return %[[C]]
func.func @returned_reshape(%x: tensor<4x6xbf16>) -> tensor<3x8xbf16> {
  %t = braze.permute %x [1, 0] : tensor<4x6xbf16> -> tensor<6x4xbf16>
  // expected-remark @+1 {{no strided view has this shape: one copy kernel makes it}}
  %r = braze.reshape %t : tensor<6x4xbf16> -> tensor<3x8xbf16>
  return %r : tensor<3x8xbf16>
}

// -----

// Tests that a reshape of a transposed tensor with dynamic dims that do not
// map one to one has no index map: it is left as it is, and says so.
// CHECK-LABEL: func.func @dynamic_reshape
// CHECK: braze.permute
// CHECK: braze.reshape
// CHECK-NOT: braze.kernel
func.func @dynamic_reshape(%x: tensor<?x6xf32>, %w: tensor<6x4xf32>) -> tensor<?x4xf32> {
  %t = braze.permute %x [1, 0] : tensor<?x6xf32> -> tensor<6x?xf32>
  // expected-remark @+1 {{no strided view has this shape, and no copy kernel makes it (a dynamic shape, or no index map): left as is}}
  %r = braze.reshape %t : tensor<6x?xf32> -> tensor<?x6xf32>
  // expected-remark @+1 {{operand #0 needs a copy that no copy kernel makes (a dynamic shape, or no index map): left as is}}
  %y = braze.matmul %r, %w : tensor<?x6xf32>, tensor<6x4xf32> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// Tests that a kernel with a dynamic batch reads a reshape of a transposed
// tensor (a copy at run time) through an index map: the dynamic dim maps one
// to one, the static ones are re-split.
// CHECK-LABEL: func.func @dynamic_kernel
// CHECK-SAME: (%[[X:.*]]: tensor<?x8x4xf32>, %[[N:.*]]: index)
// CHECK: braze.kernel ins(%[[X]] : tensor<?x8x4xf32>) domain [%[[N]], 32]
// CHECK: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[A:.*]]: tensor<?x8x4xf32>):
// CHECK-DAG: %[[R:.*]] = arith.remsi %[[J]], %{{.*}} : index
// CHECK-DAG: %[[Q:.*]] = arith.divsi %[[J]], %{{.*}} : index
// CHECK: tensor.extract %[[A]][%[[I]], %[[R]], %[[Q]]] : tensor<?x8x4xf32>
func.func @dynamic_kernel(%x: tensor<?x8x4xf32>, %n: index) -> tensor<?x32xf32> {
  %t = braze.permute %x [0, 2, 1] : tensor<?x8x4xf32> -> tensor<?x4x8xf32>
  %r = braze.reshape %t : tensor<?x4x8xf32> -> tensor<?x32xf32>
  %y = braze.kernel ins(%r : tensor<?x32xf32>) domain [%n, 32] reduce [] : tensor<?x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x32xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x32xf32>
    %w = arith.mulf %v, %v : f32
    braze.store %w, 0 [%i, %j] : f32
  }
  return %y : tensor<?x32xf32>
}

// -----

// Tests that a slice with a dynamic sliced dim (a KV cache read up to a
// symbolic length) stays a view the kernel reads: its source is longer
// than the kernel's domain, which the kernel's shape checks would refuse.
// CHECK-LABEL: func.func @dynamic_slice
// CHECK: %[[V:.*]] = braze.slice
// CHECK: braze.kernel ins(%[[V]] : tensor<4x?xf32>)
func.func @dynamic_slice(%cache: tensor<4x64xf32>, %s: index) -> tensor<4x?xf32> {
  %v = braze.slice %cache dim 1 [0 : %s : 1] : tensor<4x64xf32> -> tensor<4x?xf32>
  %y = braze.kernel ins(%v : tensor<4x?xf32>) domain [4, %s] reduce [] : tensor<4x?xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x?xf32>):
    %x = tensor.extract %a[%i, %j] : tensor<4x?xf32>
    %w = arith.mulf %x, %x : f32
    braze.store %w, 0 [%i, %j] : f32
  }
  return %y : tensor<4x?xf32>
}

// -----

// Tests that attention's scores product over a dynamic sequence length
// (both matrix dims dynamic) becomes a product over [batch, heads] whose
// result is reshaped back with the two dynamic sizes listed, from the
// product's own dims.
// CHECK-LABEL: func.func @dynamic_scores
// CHECK: %[[S:.*]] = braze.bmm %{{.*}}, %{{.*}} : tensor<2x4x?x8xf32>, tensor<2x4x8x?xf32> -> tensor<2x4x?x?xf32>
// CHECK-DAG: %[[M:.*]] = tensor.dim %[[S]], %c2
// CHECK-DAG: %[[N:.*]] = tensor.dim %[[S]], %c3
// CHECK: braze.reshape %[[S]] sizes [%[[M]], %[[N]]] : tensor<2x4x?x?xf32> -> tensor<8x?x?xf32>
func.func @dynamic_scores(%q: tensor<2x?x4x8xf32>, %k: tensor<2x?x4x8xf32>, %s: index) -> tensor<8x?x?xf32> {
  %qt = braze.permute %q [0, 2, 1, 3] : tensor<2x?x4x8xf32> -> tensor<2x4x?x8xf32>
  %kt = braze.permute %k [0, 2, 3, 1] : tensor<2x?x4x8xf32> -> tensor<2x4x8x?xf32>
  %qm = braze.reshape %qt : tensor<2x4x?x8xf32> -> tensor<8x?x8xf32>
  %km = braze.reshape %kt : tensor<2x4x8x?xf32> -> tensor<8x8x?xf32>
  // expected-remark @+1 {{batched product over 2 batch dims reads strided views}}
  %r = braze.bmm %qm, %km : tensor<8x?x8xf32>, tensor<8x8x?xf32> -> tensor<8x?x?xf32>
  return %r : tensor<8x?x?xf32>
}

// -----

// Tests that a kernel reads a concat's pieces instead of the concat (a
// host-side copy): each piece becomes an input, read at the index clamped
// into it, and a select picks the piece the index falls in (rotary
// embeddings' rotate_half is such a concat).
// CHECK-LABEL: func.func @concat_pieces
// CHECK-SAME: (%[[A:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<4x5xf32>)
// CHECK-NOT: braze.concat
// CHECK: braze.kernel ins(%[[A]], %[[B]] : tensor<4x3xf32>, tensor<4x5xf32>) domain [4, 8]
// CHECK: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[PA:.*]]: tensor<4x3xf32>, %[[PB:.*]]: tensor<4x5xf32>):
// CHECK: %[[JB:.*]] = arith.subi %[[J]], %[[C3:.*]] : index
// CHECK: %[[JB0:.*]] = arith.maxsi %[[JB]], %{{.*}} : index
// CHECK: %[[VB:.*]] = tensor.extract %[[PB]][%[[I]], %[[JB0]]]
// CHECK: %[[JA:.*]] = arith.minsi %[[J]], %{{.*}} : index
// CHECK: %[[VA:.*]] = tensor.extract %[[PA]][%[[I]], %[[JA]]]
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[J]], %{{.*}} : index
// CHECK: %[[V:.*]] = arith.select %[[IN]], %[[VA]], %[[VB]] : f32
// CHECK: math.exp %[[V]]
func.func @concat_pieces(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>) -> tensor<4x8xf32> {
  %c = braze.concat %a, %b dim 1 : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<4x8xf32>
  %y = braze.kernel ins(%c : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<4x8xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<4x8xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a concat of pieces of one size (rotate_half's halves) is read
// at the index modulo the size, the piece selected by the index divided by
// it: no clamp, so braze-split-dims can make the two parts loops.
// CHECK-LABEL: func.func @concat_halves
// CHECK-SAME: (%[[A:.*]]: tensor<4x16xf32>, %[[B:.*]]: tensor<4x16xf32>)
// CHECK: braze.kernel ins(%[[A]], %[[B]] : tensor<4x16xf32>, tensor<4x16xf32>) domain [4, 32]
// CHECK: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[PA:.*]]: tensor<4x16xf32>, %[[PB:.*]]: tensor<4x16xf32>):
// CHECK-NOT: arith.maxsi
// CHECK-NOT: arith.minsi
// CHECK: %[[R:.*]] = arith.remsi %[[J]], %[[C16:.*]] : index
// CHECK: %[[VB:.*]] = tensor.extract %[[PB]][%[[I]], %[[R]]]
// CHECK: %[[R2:.*]] = arith.remsi %[[J]], %{{.*}} : index
// CHECK: %[[VA:.*]] = tensor.extract %[[PA]][%[[I]], %[[R2]]]
// CHECK: %[[Q:.*]] = arith.divsi %[[J]], %{{.*}} : index
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[Q]], %{{.*}} : index
// CHECK: %[[V:.*]] = arith.select %[[IN]], %[[VA]], %[[VB]] : f32
func.func @concat_halves(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x32xf32> {
  %c = braze.concat %a, %b dim 1 : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x32xf32>
  %y = braze.kernel ins(%c : tensor<4x32xf32>) domain [4, 32] reduce [] : tensor<4x32xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<4x32xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<4x32xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  return %y : tensor<4x32xf32>
}

// -----

// Tests a max pool's padding: a concat of a concat, their -inf pieces
// expanded constants. The kernel reads the input and the constant itself
// (the expands folded too; the constant once, though both concats have
// it); no concat nor expand is left.
// CHECK-LABEL: func.func @padding
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[M:.*]] = braze.constant dense<0xFF800000> : tensor<f32>
// CHECK-NOT: braze.concat
// CHECK-NOT: braze.expand
// CHECK: braze.kernel ins(%[[M]], %[[X]] : tensor<f32>, tensor<4x8xf32>) domain [5, 9]
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[PM:.*]]: tensor<f32>, %[[PX:.*]]: tensor<4x8xf32>):
// CHECK: tensor.extract %[[PX]]
// CHECK: tensor.extract %[[PM]][]
// CHECK: tensor.extract %[[PM]][]
// CHECK-NOT: braze.concat
func.func @padding(%x: tensor<4x8xf32>) -> tensor<5x9xf32> {
  %m = braze.constant dense<0xFF800000> : tensor<f32>
  %top = braze.expand %m : tensor<f32> -> tensor<1x8xf32>
  %rows = braze.concat %top, %x dim 0 : tensor<1x8xf32>, tensor<4x8xf32> -> tensor<5x8xf32>
  %left = braze.expand %m : tensor<f32> -> tensor<5x1xf32>
  %p = braze.concat %left, %rows dim 1 : tensor<5x1xf32>, tensor<5x8xf32> -> tensor<5x9xf32>
  %y = braze.kernel ins(%p : tensor<5x9xf32>) domain [5, 9] reduce [] : tensor<5x9xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<5x9xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<5x9xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  return %y : tensor<5x9xf32>
}

// -----

// Tests that a concat with a piece of dynamic size along its dim that may
// be empty (no range says otherwise; every piece is read at every point)
// stays, and that one also returned becomes a copy kernel for the return
// while the other kernel reads its pieces.
// CHECK-LABEL: func.func @concat_kept
// CHECK-SAME: (%[[A:.*]]: tensor<4x?xf32>, %[[B:.*]]: tensor<4x3xf32>
// CHECK: %[[D:.*]] = braze.concat %[[A]], %[[B]] dim 1
// CHECK: braze.kernel ins(%[[D]] : tensor<4x?xf32>)
// CHECK-NOT: braze.concat
// CHECK: %[[R:.*]] = braze.kernel ins(%[[B]] : tensor<4x3xf32>) domain [8, 3]
// CHECK: braze.kernel ins(%[[B]] : tensor<4x3xf32>) domain [8, 3]
// CHECK: return %{{.*}}, %{{.*}}, %[[R]]
func.func @concat_kept(%a: tensor<4x?xf32>, %b: tensor<4x3xf32>, %n: index) -> (tensor<4x?xf32>, tensor<8x3xf32>, tensor<8x3xf32>) {
  // expected-remark @+1 {{still read whole, but no copy kernel makes it (a piece of a dynamic length that may be 0): left as is}}
  %d = braze.concat %a, %b dim 1 : tensor<4x?xf32>, tensor<4x3xf32> -> tensor<4x?xf32>
  %y = braze.kernel ins(%d : tensor<4x?xf32>) domain [4, %n] reduce [] : tensor<4x?xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<4x?xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<4x?xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  // expected-remark @+1 {{still read whole: one copy kernel reads its 2 pieces}}
  %r = braze.concat %b, %b dim 0 : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %z = braze.kernel ins(%r : tensor<8x3xf32>) domain [8, 3] reduce [] : tensor<8x3xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<8x3xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<8x3xf32>
    %e = math.exp %v : f32
    braze.store %e, 0 [%i, %j] : f32
  }
  return %y, %z, %r : tensor<4x?xf32>, tensor<8x3xf32>, tensor<8x3xf32>
}

// -----

// Tests a KV cache grown by one step and returned: the concat, read whole,
// becomes one copy kernel reading the past and the new row (clamped and
// selected); no concat is left.
// CHECK-LABEL: func.func @kv_cache_step
// CHECK-SAME: (%[[PAST:.*]]: tensor<2x3x8x4xf32>, %[[NEW:.*]]: tensor<2x3x1x4xf32>)
// CHECK-NOT: braze.concat
// CHECK: %[[C:.*]] = braze.kernel ins(%[[PAST]], %[[NEW]] : tensor<2x3x8x4xf32>, tensor<2x3x1x4xf32>) domain [2, 3, 9, 4]
// CHECK: arith.minsi
// CHECK: arith.select
// CHECK-NOT: braze.concat
// CHECK: return %[[C]]
func.func @kv_cache_step(%past: tensor<2x3x8x4xf32>, %new: tensor<2x3x1x4xf32>) -> tensor<2x3x9x4xf32> {
  // expected-remark @+1 {{still read whole: one copy kernel reads its 2 pieces}}
  %c = braze.concat %past, %new dim 2 : tensor<2x3x8x4xf32>, tensor<2x3x1x4xf32> -> tensor<2x3x9x4xf32>
  return %c : tensor<2x3x9x4xf32>
}

// -----

// Tests a KV cache of a dynamic length (a symbol at least 2) grown by one
// step: one copy kernel over the concat's length (the past's plus 1), the
// new row read from the extent less 1 on; a kernel reading the concat at
// its points reads the pieces so too.
// CHECK-LABEL: func.func @dynamic_kv_cache_step
// CHECK-SAME: (%[[PAST:.*]]: tensor<2x?x4xf32> {{.*}}, %[[NEW:.*]]: tensor<2x1x4xf32>, %[[N:.*]]: index)
// CHECK: %[[DIM:.*]] = tensor.dim %[[PAST]], %{{.*}} : tensor<2x?x4xf32>
// CHECK: %[[LENGTH:.*]] = arith.addi %[[DIM]], %{{.*}} : index
// CHECK: %[[C:.*]] = braze.kernel ins(%[[PAST]], %[[NEW]] : tensor<2x?x4xf32>, tensor<2x1x4xf32>) domain [2, %[[LENGTH]], 4]
// CHECK: ^bb0(%{{[a-z0-9]+}}: index, %[[AT:[a-z0-9]+]]: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %[[EXTENT:[a-z0-9]+]]: index,
// CHECK: arith.subi %[[EXTENT]], %{{.*}} : index
// CHECK: arith.minsi %[[AT]], %{{.*}} : index
// CHECK: %[[START:.*]] = arith.subi %[[EXTENT]], %{{.*}} : index
// CHECK: arith.cmpi slt, %[[AT]], %[[START]] : index
// CHECK: arith.select
// CHECK: %[[Y:.*]] = braze.kernel ins(%[[PAST]], %[[NEW]] : tensor<2x?x4xf32>, tensor<2x1x4xf32>) domain [2, %[[N]], 4]
// CHECK-NOT: braze.concat
// CHECK: return %[[C]], %[[Y]]
module attributes {braze.symbols = {s0 = [2, -1]}} {
  func.func @dynamic_kv_cache_step(%past: tensor<2x?x4xf32> {braze.dims = [2, "s0", 4]}, %new: tensor<2x1x4xf32>, %n: index) -> (tensor<2x?x4xf32>, tensor<2x?x4xf32>) {
    // expected-remark @+1 {{still read whole: one copy kernel reads its 2 pieces}}
    %c = braze.concat %past, %new dim 1 : tensor<2x?x4xf32>, tensor<2x1x4xf32> -> tensor<2x?x4xf32>
    %y = braze.kernel ins(%c : tensor<2x?x4xf32>) domain [2, %n, 4] reduce [] : tensor<2x?x4xf32> {
    ^bb0(%i: index, %j: index, %k: index, %ni: index, %nj: index, %nk: index, %t: tensor<2x?x4xf32>):
      %v = tensor.extract %t[%i, %j, %k] : tensor<2x?x4xf32>
      %e = math.exp %v : f32
      braze.store %e, 0 [%i, %j, %k] : f32
    }
    return %c, %y : tensor<2x?x4xf32>, tensor<2x?x4xf32>
  }
}

// -----

// Tests concats no copy kernel makes: a past whose length may be 0 (every
// piece is read at every element), a past of a length no range bounds,
// two pieces of dynamic lengths, a dynamic dim other than the concat's,
// and more pieces than max-copied-pieces (4). All stay.
// CHECK-LABEL: func.func @concats_left
// CHECK-COUNT-5: braze.concat
// CHECK-NOT: braze.kernel
module attributes {braze.symbols = {s0 = [0, 64], s1 = [2, -1]}} {
  func.func @concats_left(%past: tensor<2x?x4xf32> {braze.dims = [2, "s0", 4]}, %unbounded: tensor<2x?x4xf32>,
                          %other: tensor<2x?x4xf32> {braze.dims = [2, "s1", 4]}, %rows: tensor<?x1x4xf32>,
                          %new: tensor<2x1x4xf32>, %a: tensor<2x4xf32>)
      -> (tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<?x2x4xf32>, tensor<10x4xf32>) {
    // expected-remark @+1 {{still read whole, but no copy kernel makes it (a piece of a dynamic length that may be 0): left as is}}
    %c = braze.concat %past, %new dim 1 : tensor<2x?x4xf32>, tensor<2x1x4xf32> -> tensor<2x?x4xf32>
    // expected-remark @+1 {{still read whole, but no copy kernel makes it (a piece of a dynamic length that may be 0): left as is}}
    %u = braze.concat %unbounded, %new dim 1 : tensor<2x?x4xf32>, tensor<2x1x4xf32> -> tensor<2x?x4xf32>
    // expected-remark @+1 {{still read whole, but no copy kernel makes it (more than one piece of a dynamic length): left as is}}
    %two = braze.concat %other, %other dim 1 : tensor<2x?x4xf32>, tensor<2x?x4xf32> -> tensor<2x?x4xf32>
    // expected-remark @+1 {{still read whole, but no copy kernel makes it (a dynamic dim other than the concat's): left as is}}
    %r = braze.concat %rows, %rows dim 1 : tensor<?x1x4xf32>, tensor<?x1x4xf32> -> tensor<?x2x4xf32>
    // expected-remark @+1 {{still read whole, but no copy kernel makes it (more than 4 pieces): left as is}}
    %d = braze.concat %a, %a, %a, %a, %a dim 0 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32> -> tensor<10x4xf32>
    return %c, %u, %two, %r, %d : tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<?x2x4xf32>, tensor<10x4xf32>
  }
}

// -----

// Tests windowed attention's scores ([batch, windows, heads] = [2, 8, 2],
// heads split from channels): no stride steps through windows and heads,
// so a batched product over strided views would make 2 x 8 = 16 library
// calls, above max-product-calls (4): each operand becomes one copy kernel
// and the product one call. With max-product-calls=16 the product reads
// the strided views.
// CHECK-LABEL: func.func @many_windows
// CHECK: %[[Q:.*]] = braze.kernel ins(%{{.*}} : tensor<2x8x5x2x4xf32>) domain [32, 5, 4]
// CHECK: %[[K:.*]] = braze.kernel ins(%{{.*}} : tensor<2x8x5x2x4xf32>) domain [32, 4, 5]
// CHECK: braze.bmm %[[Q]], %[[K]] : tensor<32x5x4xf32>, tensor<32x4x5xf32> -> tensor<32x5x5xf32>
// CALLS-LABEL: func.func @many_windows
// CALLS-NOT: braze.kernel
// CALLS: braze.bmm %{{.*}}, %{{.*}} : tensor<2x8x2x5x4xf32>, tensor<2x8x2x4x5xf32> -> tensor<2x8x2x5x5xf32>
func.func @many_windows(%q: tensor<2x8x5x2x4xf32>, %k: tensor<2x8x5x2x4xf32>) -> tensor<32x5x5xf32> {
  %qt = braze.permute %q [0, 1, 3, 2, 4] : tensor<2x8x5x2x4xf32> -> tensor<2x8x2x5x4xf32>
  %kt = braze.permute %k [0, 1, 3, 4, 2] : tensor<2x8x5x2x4xf32> -> tensor<2x8x2x4x5xf32>
  %qm = braze.reshape %qt : tensor<2x8x2x5x4xf32> -> tensor<32x5x4xf32>
  %km = braze.reshape %kt : tensor<2x8x2x4x5xf32> -> tensor<32x4x5xf32>
  // expected-remark @+3 {{a batched product over strided views would make 16 library calls: a copy kernel makes the merged batch}}
  // expected-remark @+2 {{operand #0 is no strided view: one copy kernel makes it contiguous}}
  // expected-remark @+1 {{operand #1 is no strided view: one copy kernel makes it contiguous}}
  %s = braze.bmm %qm, %km : tensor<32x5x4xf32>, tensor<32x4x5xf32> -> tensor<32x5x5xf32>
  return %s : tensor<32x5x5xf32>
}

// -----

// Tests a max pool with padding as it is lowered: -inf concatenated around
// its input (a concat of a concat), read at strided slices. The pool reads
// the input and the constant in place; once it does, the slices are not
// read, so neither concat is read whole and no copy kernel makes one.
// CHECK-LABEL: func.func @padded_pool
// CHECK: braze.constant
// CHECK-NEXT: braze.kernel ins(%{{.*}}, %{{.*}} : tensor<f32>, tensor<1x2x4x4xf32>) domain [1, 2, 2, 2]
// CHECK-NOT: braze.kernel
// CHECK: return
func.func @padded_pool(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %ninf = braze.constant dense<0xFF800000> : tensor<f32>
  %top = braze.expand %ninf : tensor<f32> -> tensor<1x2x1x4xf32>
  %rows = braze.concat %top, %x dim 2 : tensor<1x2x1x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x5x4xf32>
  %left = braze.expand %ninf : tensor<f32> -> tensor<1x2x5x1xf32>
  %padded = braze.concat %left, %rows dim 3 : tensor<1x2x5x1xf32>, tensor<1x2x5x4xf32> -> tensor<1x2x5x5xf32>
  %a0 = braze.slice %padded dim 2 [0 : 4 : 2] : tensor<1x2x5x5xf32> -> tensor<1x2x2x5xf32>
  %a = braze.slice %a0 dim 3 [0 : 4 : 2] : tensor<1x2x2x5xf32> -> tensor<1x2x2x2xf32>
  %b0 = braze.slice %padded dim 2 [1 : 5 : 2] : tensor<1x2x5x5xf32> -> tensor<1x2x2x5xf32>
  %b = braze.slice %b0 dim 3 [1 : 5 : 2] : tensor<1x2x2x5xf32> -> tensor<1x2x2x2xf32>
  %m = braze.kernel ins(%a, %b : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) domain [1, 2, 2, 2] reduce [] : tensor<1x2x2x2xf32> {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %e0: index, %e1: index, %e2: index, %e3: index, %p: tensor<1x2x2x2xf32>, %q: tensor<1x2x2x2xf32>):
    %u = tensor.extract %p[%i0, %i1, %i2, %i3] : tensor<1x2x2x2xf32>
    %v = tensor.extract %q[%i0, %i1, %i2, %i3] : tensor<1x2x2x2xf32>
    %r = arith.maximumf %u, %v : f32
    braze.store %r, 0 [%i0, %i1, %i2, %i3] : f32
  }
  return %m : tensor<1x2x2x2xf32>
}
