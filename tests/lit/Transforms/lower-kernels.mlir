// RUN: braze-opt %s -braze-lower-kernels -split-input-file -verify-diagnostics | FileCheck %s

// Tests that a softmax group becomes one kernel: a dynamic extent read from
// the input, broadcast loads, reductions as braze.reduce, one store.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[N:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x64xf32>
// CHECK: %[[K:.*]] = braze.kernel ins(%[[X]], %[[B]] : tensor<?x64xf32>, tensor<64xf32>) domain [%[[N]], 64] reduce [1] : tensor<?x64xf32> {
// CHECK: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[A:.*]]: tensor<?x64xf32>, %[[W:.*]]: tensor<64xf32>):
// CHECK:   %[[XV:.*]] = tensor.extract %[[A]][%[[I]], %[[J]]] : tensor<?x64xf32>
// CHECK:   %[[WV:.*]] = tensor.extract %[[W]][%[[J]]] : tensor<64xf32>
// CHECK:   %[[Y:.*]] = arith.addf %[[XV]], %[[WV]] : f32
// CHECK:   %[[M:.*]] = braze.reduce "max" %[[Y]] : f32 -> f32
// CHECK:   %[[D:.*]] = arith.subf %[[Y]], %[[M]] : f32
// CHECK:   %[[E:.*]] = math.exp %[[D]] : f32
// CHECK:   %[[S:.*]] = braze.reduce "add" %[[E]] : f32 -> f32
// CHECK:   %[[Q:.*]] = arith.divf %[[E]], %[[S]] : f32
// CHECK:   braze.store %[[Q]], 0 [%[[I]], %[[J]]] : f32
// CHECK: return %[[K]]
func.func @softmax(%x: tensor<?x64xf32>, %b: tensor<64xf32>) -> tensor<?x64xf32> {
  %r = braze.group ins(%x, %b) : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>, %w: tensor<64xf32>):
    %y = braze.add %a, %w : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
    %m = braze.max %y dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
    %d = braze.sub %y, %m : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
    %e = braze.exp %d : tensor<?x64xf32>
    %s = braze.sum %e dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
    %q = braze.div %e, %s : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
    braze.yield %q : tensor<?x64xf32>
  }
  return %r : tensor<?x64xf32>
}

// -----

// Tests that a lone op becomes a kernel of its own, that a splat constant
// input becomes a scalar constant, that a size-1 dim loads index 0, and that
// a mean divides by the reduced element count.
// CHECK-LABEL: func.func @lone_ops
// CHECK: braze.kernel ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<1x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32>
// CHECK:   %[[C0:.*]] = arith.constant 0 : index
// CHECK:   tensor.extract %{{.*}}[%[[C0]], %{{.*}}] : tensor<1x8xf32>
// CHECK:   arith.mulf
// CHECK: braze.kernel ins(%{{.*}} : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32>
// CHECK:   %[[V:.*]] = tensor.extract
// CHECK:   %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK:   arith.addf %[[V]], %[[HALF]] : f32
// CHECK: braze.kernel ins(%{{.*}} : tensor<4x8xf32>) domain [4, 8] reduce [0, 1] : tensor<f32>
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: index, %[[N0:.*]]: index, %[[N1:.*]]: index, %{{.*}}: tensor<4x8xf32>):
// CHECK:   %[[SUM:.*]] = braze.reduce "add" %{{.*}} : f32 -> f32
// CHECK:   %[[COUNT:.*]] = arith.muli %[[N0]], %[[N1]] : index
// CHECK:   %[[I64:.*]] = arith.index_cast %[[COUNT]] : index to i64
// CHECK:   %[[F:.*]] = arith.sitofp %[[I64]] : i64 to f32
// CHECK:   %[[MEAN:.*]] = arith.divf %[[SUM]], %[[F]] : f32
// CHECK:   braze.store %[[MEAN]], 0 [] : f32
func.func @lone_ops(%x: tensor<4x8xf32>, %s: tensor<1x8xf32>) -> tensor<f32> {
  %c = braze.constant dense<0.5> : tensor<f32>
  %m = braze.mul %x, %s : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %a = braze.add %m, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %r = braze.mean %a dims [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// Tests PyTorch's conversion rules and comparisons on i1 (unsigned).
// CHECK-LABEL: func.func @casts
// CHECK: arith.cmpf une, %{{.*}}, %{{.*}} : f32
// CHECK: arith.extui %{{.*}} : i1 to i64
// CHECK: arith.cmpi ult, %{{.*}}, %{{.*}} : i1
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @casts(%x: tensor<4xf32>, %b: tensor<4xi1>, %h: tensor<4xbf16>) -> (tensor<4xi1>, tensor<4xi64>, tensor<4xi1>, tensor<4xf16>) {
  %0 = braze.cast %x : tensor<4xf32> to tensor<4xi1>
  %1 = braze.cast %b : tensor<4xi1> to tensor<4xi64>
  %2 = braze.lt %b, %0 : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  %3 = braze.cast %h : tensor<4xbf16> to tensor<4xf16>
  return %0, %1, %2, %3 : tensor<4xi1>, tensor<4xi64>, tensor<4xi1>, tensor<4xf16>
}

// -----

// Tests that a rotary embedding (x * cos + rotate_half(x) * sin) is one
// kernel whose body calls math.cos and math.sin on the angle.
// CHECK-LABEL: func.func @rotary
// CHECK: braze.kernel
// CHECK-NOT: braze.kernel
// CHECK:   %[[COS:.*]] = math.cos %{{.*}} : f32
// CHECK:   arith.mulf %{{.*}}, %[[COS]] : f32
// CHECK:   %[[SIN:.*]] = math.sin %{{.*}} : f32
// CHECK:   arith.mulf %{{.*}}, %[[SIN]] : f32
// CHECK:   arith.addf
// CHECK:   braze.store
func.func @rotary(%x: tensor<8x4xf32>, %r: tensor<8x4xf32>, %t: tensor<8x1xf32>) -> tensor<8x4xf32> {
  %y = braze.group ins(%x, %r, %t) : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x1xf32>) -> tensor<8x4xf32> {
  ^bb0(%a: tensor<8x4xf32>, %rotated: tensor<8x4xf32>, %angle: tensor<8x1xf32>):
    %c = braze.cos %angle : tensor<8x1xf32>
    %ac = braze.mul %a, %c : tensor<8x4xf32>, tensor<8x1xf32> -> tensor<8x4xf32>
    %s = braze.sin %angle : tensor<8x1xf32>
    %rs = braze.mul %rotated, %s : tensor<8x4xf32>, tensor<8x1xf32> -> tensor<8x4xf32>
    %sum = braze.add %ac, %rs : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
    braze.yield %sum : tensor<8x4xf32>
  }
  return %y : tensor<8x4xf32>
}

// -----

// Tests that each unary math op becomes its upstream math op, rounding to
// nearest becoming roundeven (half to even, as torch.round).
// CHECK-LABEL: func.func @unary_math
// CHECK-DAG: math.expm1 %{{.*}} : f64
// CHECK-DAG: math.exp2 %{{.*}} : f64
// CHECK-DAG: math.log1p %{{.*}} : f64
// CHECK-DAG: math.log2 %{{.*}} : f64
// CHECK-DAG: math.tan %{{.*}} : f64
// CHECK-DAG: math.asin %{{.*}} : f64
// CHECK-DAG: math.acos %{{.*}} : f64
// CHECK-DAG: math.atan %{{.*}} : f64
// CHECK-DAG: math.sinh %{{.*}} : f64
// CHECK-DAG: math.cosh %{{.*}} : f64
// CHECK-DAG: math.floor %{{.*}} : f64
// CHECK-DAG: math.ceil %{{.*}} : f64
// CHECK-DAG: math.trunc %{{.*}} : f64
// CHECK-DAG: math.roundeven %{{.*}} : f64
// CHECK-DAG: math.atan2 %{{.*}}, %{{.*}} : f64
func.func @unary_math(%x: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) {
  %0 = braze.expm1 %x : tensor<4xf64>
  %1 = braze.exp2 %x : tensor<4xf64>
  %2 = braze.log1p %x : tensor<4xf64>
  %3 = braze.log2 %x : tensor<4xf64>
  %4 = braze.tan %x : tensor<4xf64>
  %5 = braze.asin %x : tensor<4xf64>
  %6 = braze.acos %x : tensor<4xf64>
  %7 = braze.atan %x : tensor<4xf64>
  %8 = braze.sinh %x : tensor<4xf64>
  %9 = braze.cosh %x : tensor<4xf64>
  %10 = braze.floor %x : tensor<4xf64>
  %11 = braze.ceil %x : tensor<4xf64>
  %12 = braze.trunc %x : tensor<4xf64>
  %13 = braze.round %x : tensor<4xf64>
  %14 = braze.atan2 %x, %x : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14 : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>
}

// -----

// Tests that remainder adds the divisor to a non-zero C remainder whose sign
// differs from the divisor's (floats and integers), and that fmod is the C
// remainder alone.
// CHECK-LABEL: func.func @remainders
// CHECK: %[[A:.*]] = tensor.extract
// CHECK: %[[B:.*]] = tensor.extract
// CHECK: %[[MOD:.*]] = arith.remf %[[A]], %[[B]] : f32
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[MODNEG:.*]] = arith.cmpf olt, %[[MOD]], %[[ZERO]] : f32
// CHECK: %[[BNEG:.*]] = arith.cmpf olt, %[[B]], %[[ZERO]] : f32
// CHECK: %[[DIFFER:.*]] = arith.xori %[[MODNEG]], %[[BNEG]] : i1
// CHECK: %[[NONZERO:.*]] = arith.cmpf une, %[[MOD]], %[[ZERO]] : f32
// CHECK: %[[ADJUST:.*]] = arith.andi %[[NONZERO]], %[[DIFFER]] : i1
// CHECK: %[[SUM:.*]] = arith.addf %[[MOD]], %[[B]] : f32
// CHECK: arith.select %[[ADJUST]], %[[SUM]], %[[MOD]] : f32
// CHECK: %[[IMOD:.*]] = arith.remsi %{{.*}}, %{{.*}} : i32
// CHECK: arith.cmpi slt, %[[IMOD]], %{{.*}} : i32
// CHECK: arith.cmpi ne, %[[IMOD]], %{{.*}} : i32
// CHECK: arith.addi %[[IMOD]], %{{.*}} : i32
// CHECK: arith.select
// CHECK: braze.kernel
// CHECK: arith.remf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: arith.select
// CHECK: braze.store
func.func @remainders(%a: tensor<4xf32>, %b: tensor<4xf32>, %i: tensor<4xi32>, %j: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) {
  %0 = braze.remainder %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = braze.remainder %i, %j : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  %2 = braze.fmod %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xi32>, tensor<4xf32>
}

// -----

// Tests that sign is (x > 0) - (x < 0) as selects, for floats (ordered
// compares: NaN gives 0) and integers.
// CHECK-LABEL: func.func @signs
// CHECK: %[[X:.*]] = tensor.extract
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[LT:.*]] = arith.cmpf olt, %[[X]], %[[ZERO]] : f32
// CHECK: %[[MINUS:.*]] = arith.constant -1.000000e+00 : f32
// CHECK: %[[NEG:.*]] = arith.select %[[LT]], %[[MINUS]], %[[ZERO]] : f32
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[X]], %[[ZERO]] : f32
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: arith.select %[[GT]], %[[ONE]], %[[NEG]] : f32
// CHECK: arith.cmpi slt, %{{.*}}, %{{.*}} : i64
// CHECK: arith.cmpi sgt, %{{.*}}, %{{.*}} : i64
func.func @signs(%x: tensor<4xf32>, %i: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>) {
  %0 = braze.sign %x : tensor<4xf32>
  %1 = braze.sign %i : tensor<4xi64>
  return %0, %1 : tensor<4xf32>, tensor<4xi64>
}

// -----

// Tests that a rank-dropping reduction stores without its reduced dims and a
// keepdim one at index 0 of them; argmax gives i64.
// CHECK-LABEL: func.func @stores
// CHECK: braze.kernel {{.*}} domain [3, 5] reduce [1] : tensor<3xi64>, tensor<3x1xf32>
// CHECK: ^bb0(%[[I:[^:]*]]: index, %{{.*}}: index,
// CHECK: %[[ARG:.*]] = braze.reduce "argmax" %{{.*}} : f32 -> i64
// CHECK: %[[MIN:.*]] = braze.reduce "min" %{{.*}} : f32 -> f32
// CHECK: braze.store %[[ARG]], 0 [%[[I]]] : i64
// CHECK: %[[Z:.*]] = arith.constant 0 : index
// CHECK: braze.store %[[MIN]], 1 [%[[I]], %[[Z]]] : f32
func.func @stores(%x: tensor<3x5xf32>) -> (tensor<3xi64>, tensor<3x1xf32>) {
  %r:2 = braze.group ins(%x) : (tensor<3x5xf32>) -> (tensor<3xi64>, tensor<3x1xf32>) {
  ^bb0(%a: tensor<3x5xf32>):
    %e = braze.exp %a : tensor<3x5xf32>
    %i = braze.argmax %e dims [1] : tensor<3x5xf32> -> tensor<3xi64>
    %m = braze.min %e dims [1] keepdim : tensor<3x5xf32> -> tensor<3x1xf32>
    braze.yield %i, %m : tensor<3xi64>, tensor<3x1xf32>
  }
  return %r#0, %r#1 : tensor<3xi64>, tensor<3x1xf32>
}

// -----

// Tests that ops outside the kernel form stay: matrix products and layout.
// CHECK-LABEL: func.func @untouched
// CHECK-NOT: braze.kernel
// CHECK: braze.matmul
// CHECK: braze.permute
func.func @untouched(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<4x2xf32> {
  %m = braze.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %p = braze.permute %m [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  return %p : tensor<4x2xf32>
}

// -----

// Tests that a group whose reductions reduce different dims is refused.
func.func @two_reductions(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = braze.group ins(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = braze.sum %a dims [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
    // expected-error @+1 {{'braze.max' op reduces dims [0] but its kernel already reduces [1]}}
    %m = braze.max %a dims [0] keepdim : tensor<4x8xf32> -> tensor<1x8xf32>
    %d = braze.sub %s, %m : tensor<4x1xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
    braze.yield %d : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

// Tests that a group whose ops have different ranks is refused.
func.func @ranks(%x: tensor<4x8xf32>, %v: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = braze.group ins(%x, %v) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %w: tensor<8xf32>):
    %e = braze.exp %w : tensor<8xf32>
    // expected-error @+1 {{'braze.add' op does not share its kernel's iteration domain}}
    %s = braze.add %a, %e : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    braze.yield %s : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

// Tests that a keepdim reduction over dims of extent 1 stores at 0 in the
// reduced dims: its value exists once per parallel point.
// CHECK-LABEL: func.func @keepdim_reduction_of_extent_one
// CHECK: braze.kernel {{.*}} domain [2, 16, 1, 1] reduce [2, 3]
// CHECK: ^bb0(%[[I:[^:]*]]: index, %[[J:[^:]*]]: index,
// CHECK: %[[S:.*]] = braze.reduce "add"
// CHECK: %[[Z0:.*]] = arith.constant 0 : index
// CHECK: %[[Z1:.*]] = arith.constant 0 : index
// CHECK: braze.store %{{.*}}, 0 [%[[I]], %[[J]], %[[Z0]], %[[Z1]]] : f32
func.func @keepdim_reduction_of_extent_one(%x: tensor<2x16x1x1xf32>) -> tensor<2x16x1x1xf32> {
  %0 = braze.mean %x dims [2, 3] keepdim : tensor<2x16x1x1xf32> -> tensor<2x16x1x1xf32>
  return %0 : tensor<2x16x1x1xf32>
}

// -----

// Tests that half-precision arithmetic is explicit: loads widen to f32, ops
// compute in f32, a reduction of bf16 accumulates in f32, and results are
// narrowed where they are stored.
// CHECK-LABEL: func.func @half_arithmetic
// CHECK: braze.kernel
// CHECK: %[[X:.*]] = tensor.extract %{{.*}} : tensor<4x8xbf16>
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[W]], %[[W]] : f32
// CHECK-NEXT: %[[E:.*]] = math.exp %[[M]] : f32
// CHECK-NEXT: %[[N:.*]] = arith.truncf %[[E]] : f32 to bf16
// CHECK-NEXT: braze.store %[[N]], 0
// CHECK: braze.kernel
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK-NEXT: %[[S:.*]] = braze.reduce "add" %{{.*}} : f32 -> f32
// CHECK-NEXT: %[[T:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK-NEXT: braze.store %[[T]], 0
func.func @half_arithmetic(%x: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4xbf16>) {
  %g = braze.group ins(%x) : (tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  ^bb0(%a: tensor<4x8xbf16>):
    %m = braze.mul %a, %a : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
    %e = braze.exp %m : tensor<4x8xbf16>
    braze.yield %e : tensor<4x8xbf16>
  }
  %s = braze.sum %x dims [1] : tensor<4x8xbf16> -> tensor<4xbf16>
  return %g, %s : tensor<4x8xbf16>, tensor<4xbf16>
}

// -----

// Tests that a conversion to a half type rounds explicitly (truncf, then
// extf back to f32) before the arithmetic that follows it, that a half
// constant becomes f32, and that a converted value that is only stored is
// stored as it is.
// CHECK-LABEL: func.func @half_conversions
// CHECK: %[[X:.*]] = tensor.extract %{{.*}} : tensor<4xf32>
// CHECK-NEXT: %[[H:.*]] = arith.truncf %[[X]] : f32 to f16
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[H]] : f16 to f32
// CHECK-NEXT: %[[C:.*]] = arith.constant 1.500000e+00 : f32
// CHECK-NEXT: %[[A:.*]] = arith.addf %[[W]], %[[C]] : f32
// CHECK-NEXT: %[[N:.*]] = arith.truncf %[[A]] : f32 to f16
// CHECK-NEXT: braze.store %[[N]], 0
// CHECK: braze.kernel
// CHECK: %[[Y:.*]] = tensor.extract %{{.*}} : tensor<4xf32>
// CHECK-NEXT: %[[Z:.*]] = arith.truncf %[[Y]] : f32 to bf16
// CHECK-NEXT: braze.store %[[Z]], 0
func.func @half_conversions(%x: tensor<4xf32>) -> (tensor<4xf16>, tensor<4xbf16>) {
  %g = braze.group ins(%x) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%a: tensor<4xf32>):
    %h = braze.cast %a : tensor<4xf32> to tensor<4xf16>
    %c = braze.constant dense<1.5> : tensor<4xf16>
    %s = braze.add %h, %c : tensor<4xf16>, tensor<4xf16> -> tensor<4xf16>
    braze.yield %s : tensor<4xf16>
  }
  %b = braze.cast %x : tensor<4xf32> to tensor<4xbf16>
  return %g, %b : tensor<4xf16>, tensor<4xbf16>
}
