// RUN: braze-opt %s | braze-opt | FileCheck %s
// RUN: braze-opt %s --mlir-print-op-generic | braze-opt | FileCheck %s

// Tests that every braze op survives a print/parse round trip, in the custom
// form and through the generic form.

// CHECK-LABEL: func.func @pointwise_unary
func.func @pointwise_unary(%x: tensor<?x4xf32>, %i: tensor<3xi32>) {
  // CHECK: braze.neg %{{.*}} : tensor<?x4xf32>
  %0 = braze.neg %x : tensor<?x4xf32>
  // CHECK: braze.neg %{{.*}} : tensor<3xi32>
  %1 = braze.neg %i : tensor<3xi32>
  // CHECK: braze.abs %{{.*}} : tensor<?x4xf32>
  %2 = braze.abs %x : tensor<?x4xf32>
  // CHECK: braze.exp %{{.*}} : tensor<?x4xf32>
  %3 = braze.exp %x : tensor<?x4xf32>
  // CHECK: braze.log %{{.*}} : tensor<?x4xf32>
  %4 = braze.log %x : tensor<?x4xf32>
  // CHECK: braze.tanh %{{.*}} : tensor<?x4xf32>
  %5 = braze.tanh %x : tensor<?x4xf32>
  // CHECK: braze.sigmoid %{{.*}} : tensor<?x4xf32>
  %6 = braze.sigmoid %x : tensor<?x4xf32>
  // CHECK: braze.relu %{{.*}} : tensor<3xi32>
  %7 = braze.relu %i : tensor<3xi32>
  // CHECK: braze.gelu %{{.*}} : tensor<?x4xf32>
  %8 = braze.gelu %x : tensor<?x4xf32>
  // CHECK: braze.gelu %{{.*}} approximate "tanh" : tensor<?x4xf32>
  %9 = braze.gelu %x approximate "tanh" : tensor<?x4xf32>
  // CHECK: braze.silu %{{.*}} : tensor<?x4xf32>
  %10 = braze.silu %x : tensor<?x4xf32>
  // CHECK: braze.sqrt %{{.*}} : tensor<?x4xf32>
  %11 = braze.sqrt %x : tensor<?x4xf32>
  // CHECK: braze.rsqrt %{{.*}} : tensor<?x4xf32>
  %12 = braze.rsqrt %x : tensor<?x4xf32>
  // CHECK: braze.erf %{{.*}} : tensor<?x4xf32>
  %13 = braze.erf %x : tensor<?x4xf32>
  // CHECK: braze.expm1 %{{.*}} : tensor<?x4xf32>
  %14 = braze.expm1 %x : tensor<?x4xf32>
  // CHECK: braze.exp2 %{{.*}} : tensor<?x4xf32>
  %15 = braze.exp2 %x : tensor<?x4xf32>
  // CHECK: braze.log1p %{{.*}} : tensor<?x4xf32>
  %16 = braze.log1p %x : tensor<?x4xf32>
  // CHECK: braze.log2 %{{.*}} : tensor<?x4xf32>
  %17 = braze.log2 %x : tensor<?x4xf32>
  // CHECK: braze.sin %{{.*}} : tensor<?x4xf32>
  %18 = braze.sin %x : tensor<?x4xf32>
  // CHECK: braze.cos %{{.*}} : tensor<?x4xf32>
  %19 = braze.cos %x : tensor<?x4xf32>
  // CHECK: braze.tan %{{.*}} : tensor<?x4xf32>
  %20 = braze.tan %x : tensor<?x4xf32>
  // CHECK: braze.asin %{{.*}} : tensor<?x4xf32>
  %21 = braze.asin %x : tensor<?x4xf32>
  // CHECK: braze.acos %{{.*}} : tensor<?x4xf32>
  %22 = braze.acos %x : tensor<?x4xf32>
  // CHECK: braze.atan %{{.*}} : tensor<?x4xf32>
  %23 = braze.atan %x : tensor<?x4xf32>
  // CHECK: braze.sinh %{{.*}} : tensor<?x4xf32>
  %24 = braze.sinh %x : tensor<?x4xf32>
  // CHECK: braze.cosh %{{.*}} : tensor<?x4xf32>
  %25 = braze.cosh %x : tensor<?x4xf32>
  // CHECK: braze.floor %{{.*}} : tensor<?x4xf32>
  %26 = braze.floor %x : tensor<?x4xf32>
  // CHECK: braze.ceil %{{.*}} : tensor<?x4xf32>
  %27 = braze.ceil %x : tensor<?x4xf32>
  // CHECK: braze.trunc %{{.*}} : tensor<?x4xf32>
  %28 = braze.trunc %x : tensor<?x4xf32>
  // CHECK: braze.round %{{.*}} : tensor<?x4xf32>
  %29 = braze.round %x : tensor<?x4xf32>
  // CHECK: braze.sign %{{.*}} : tensor<?x4xf32>
  %30 = braze.sign %x : tensor<?x4xf32>
  // CHECK: braze.sign %{{.*}} : tensor<3xi32>
  %31 = braze.sign %i : tensor<3xi32>
  return
}

// CHECK-LABEL: func.func @compare_and_logic
func.func @compare_and_logic(%a: tensor<?x4xf32>, %b: tensor<4xf32>, %p: tensor<?x4xi1>, %q: tensor<1xi1>) {
  // CHECK: braze.eq %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  %0 = braze.eq %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  // CHECK: braze.ne %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  %1 = braze.ne %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  // CHECK: braze.lt %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  %2 = braze.lt %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  // CHECK: braze.le %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  %3 = braze.le %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  // CHECK: braze.gt %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  %4 = braze.gt %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  // CHECK: braze.ge %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  %5 = braze.ge %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xi1>
  // CHECK: braze.and %{{.*}}, %{{.*}} : tensor<?x4xi1>, tensor<1xi1> -> tensor<?x4xi1>
  %6 = braze.and %p, %q : tensor<?x4xi1>, tensor<1xi1> -> tensor<?x4xi1>
  // CHECK: braze.or %{{.*}}, %{{.*}} : tensor<?x4xi1>, tensor<1xi1> -> tensor<?x4xi1>
  %7 = braze.or %p, %q : tensor<?x4xi1>, tensor<1xi1> -> tensor<?x4xi1>
  // CHECK: braze.xor %{{.*}}, %{{.*}} : tensor<?x4xi1>, tensor<1xi1> -> tensor<?x4xi1>
  %8 = braze.xor %p, %q : tensor<?x4xi1>, tensor<1xi1> -> tensor<?x4xi1>
  // CHECK: braze.not %{{.*}} : tensor<?x4xi1>
  %9 = braze.not %p : tensor<?x4xi1>
  // CHECK: braze.any %{{.*}} dims [1] keepdim : tensor<?x4xi1> -> tensor<?x1xi1>
  %10 = braze.any %p dims [1] keepdim : tensor<?x4xi1> -> tensor<?x1xi1>
  // CHECK: braze.all %{{.*}} dims [0, 1] : tensor<?x4xi1> -> tensor<i1>
  %11 = braze.all %p dims [0, 1] : tensor<?x4xi1> -> tensor<i1>
  return
}

// CHECK-LABEL: func.func @pointwise_binary
func.func @pointwise_binary(%a: tensor<?x4xf32>, %b: tensor<4xf32>, %c: tensor<2x1x4xbf16>, %d: tensor<3x1xbf16>) {
  // CHECK: braze.add %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %0 = braze.add %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  // CHECK: braze.sub %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
  %1 = braze.sub %b, %a : tensor<4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
  // CHECK: braze.mul %{{.*}}, %{{.*}} : tensor<2x1x4xbf16>, tensor<3x1xbf16> -> tensor<2x3x4xbf16>
  %2 = braze.mul %c, %d : tensor<2x1x4xbf16>, tensor<3x1xbf16> -> tensor<2x3x4xbf16>
  // CHECK: braze.div %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
  %3 = braze.div %a, %a : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
  // CHECK: braze.pow %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %4 = braze.pow %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  // CHECK: braze.maximum %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %5 = braze.maximum %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  // CHECK: braze.minimum %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %6 = braze.minimum %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  // CHECK: braze.atan2 %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %7 = braze.atan2 %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  // CHECK: braze.remainder %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %8 = braze.remainder %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  // CHECK: braze.fmod %{{.*}}, %{{.*}} : tensor<2x1x4xbf16>, tensor<3x1xbf16> -> tensor<2x3x4xbf16>
  %9 = braze.fmod %c, %d : tensor<2x1x4xbf16>, tensor<3x1xbf16> -> tensor<2x3x4xbf16>
  return
}

// CHECK-LABEL: func.func @refined_result
func.func @refined_result(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) {
  // Inference gives ?x4; a frontend that knows the batch may state it.
  // CHECK: braze.add %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<8x4xf32>
  %0 = braze.add %a, %b : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<8x4xf32>
  return
}

// CHECK-LABEL: func.func @where_and_cast
func.func @where_and_cast(%c: tensor<4x1xi1>, %a: tensor<4x8xf32>, %b: tensor<8xf32>, %i: tensor<?xi64>) {
  // CHECK: braze.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x1xi1>, tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %0 = braze.where %c, %a, %b : tensor<4x1xi1>, tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: braze.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xf16>
  %1 = braze.cast %a : tensor<4x8xf32> to tensor<4x8xf16>
  // CHECK: braze.cast %{{.*}} : tensor<?xi64> to tensor<?xi1>
  %2 = braze.cast %i : tensor<?xi64> to tensor<?xi1>
  return
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<?x8x16xf32>, %i: tensor<4x5xi32>) {
  // CHECK: braze.sum %{{.*}} dims [1, 2] : tensor<?x8x16xf32> -> tensor<?xf32>
  %0 = braze.sum %x dims [1, 2] : tensor<?x8x16xf32> -> tensor<?xf32>
  // CHECK: braze.mean %{{.*}} dims [2] keepdim : tensor<?x8x16xf32> -> tensor<?x8x1xf32>
  %1 = braze.mean %x dims [2] keepdim : tensor<?x8x16xf32> -> tensor<?x8x1xf32>
  // CHECK: braze.max %{{.*}} dims [0] : tensor<4x5xi32> -> tensor<5xi32>
  %2 = braze.max %i dims [0] : tensor<4x5xi32> -> tensor<5xi32>
  // CHECK: braze.min %{{.*}} dims [0, 1] keepdim : tensor<4x5xi32> -> tensor<1x1xi32>
  %3 = braze.min %i dims [0, 1] keepdim : tensor<4x5xi32> -> tensor<1x1xi32>
  // CHECK: braze.argmax %{{.*}} dims [1] : tensor<?x8x16xf32> -> tensor<?x16xi64>
  %4 = braze.argmax %x dims [1] : tensor<?x8x16xf32> -> tensor<?x16xi64>
  return
}

// CHECK-LABEL: func.func @matrix_products
func.func @matrix_products(%a: tensor<?x64xf32>, %b: tensor<64x32xf32>, %bias: tensor<32xf32>,
                           %x: tensor<8x?x64xf16>, %y: tensor<8x64x?xf16>) {
  // CHECK: braze.matmul %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  %0 = braze.matmul %a, %b : tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  // CHECK: braze.bmm %{{.*}}, %{{.*}} : tensor<8x?x64xf16>, tensor<8x64x?xf16> -> tensor<8x?x?xf16>
  %1 = braze.bmm %x, %y : tensor<8x?x64xf16>, tensor<8x64x?xf16> -> tensor<8x?x?xf16>
  // CHECK: braze.addmm %{{.*}}, %{{.*}}, %{{.*}} : tensor<32xf32>, tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  %2 = braze.addmm %bias, %a, %b : tensor<32xf32>, tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  // CHECK: braze.addmm %{{.*}}, %{{.*}}, %{{.*}} {alpha = 2.000000e+00 : f64, beta = 5.000000e-01 : f64}
  %3 = braze.addmm %bias, %a, %b {alpha = 2.0 : f64, beta = 0.5 : f64} : tensor<32xf32>, tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
  return
}

// CHECK-LABEL: func.func @layout
func.func @layout(%x: tensor<?x8xf32>, %r: tensor<1x8xf32>, %n: index, %m: index) {
  // CHECK: braze.reshape %{{.*}} : tensor<?x8xf32> -> tensor<?x2x4xf32>
  %0 = braze.reshape %x : tensor<?x8xf32> -> tensor<?x2x4xf32>
  // CHECK: braze.reshape %{{.*}} sizes [%{{.*}}, %{{.*}}] : tensor<?x8xf32> -> tensor<?x?x8xf32>
  %1 = braze.reshape %x sizes [%n, %m] : tensor<?x8xf32> -> tensor<?x?x8xf32>
  // CHECK: braze.permute %{{.*}} [1, 0] : tensor<?x8xf32> -> tensor<8x?xf32>
  %2 = braze.permute %x [1, 0] : tensor<?x8xf32> -> tensor<8x?xf32>
  // CHECK: braze.expand %{{.*}} : tensor<1x8xf32> -> tensor<4x8xf32>
  %3 = braze.expand %r : tensor<1x8xf32> -> tensor<4x8xf32>
  // CHECK: braze.expand %{{.*}} sizes [%{{.*}}] : tensor<1x8xf32> -> tensor<2x?x8xf32>
  %4 = braze.expand %r sizes [%n] : tensor<1x8xf32> -> tensor<2x?x8xf32>
  // CHECK: braze.expand %{{.*}} : tensor<?x8xf32> -> tensor<3x?x8xf32>
  %5 = braze.expand %x : tensor<?x8xf32> -> tensor<3x?x8xf32>
  // CHECK: braze.slice %{{.*}} dim 1 [0 : 8 : 2] : tensor<?x8xf32> -> tensor<?x4xf32>
  %6 = braze.slice %x dim 1 [0 : 8 : 2] : tensor<?x8xf32> -> tensor<?x4xf32>
  // CHECK: braze.slice %{{.*}} dim 1 [3 : 100 : 1] : tensor<?x8xf32> -> tensor<?x5xf32>
  %7 = braze.slice %x dim 1 [3 : 100 : 1] : tensor<?x8xf32> -> tensor<?x5xf32>
  // CHECK: braze.slice %{{.*}} dim 0 [0 : %{{.*}} : 1] : tensor<?x8xf32> -> tensor<?x8xf32>
  %10 = braze.slice %x dim 0 [0 : %n : 1] : tensor<?x8xf32> -> tensor<?x8xf32>
  // CHECK: braze.slice %{{.*}} dim 1 [%{{.*}} : %{{.*}} : %{{.*}}] : tensor<?x8xf32> -> tensor<?x?xf32>
  %11 = braze.slice %x dim 1 [%n : %m : %m] : tensor<?x8xf32> -> tensor<?x?xf32>
  // CHECK: braze.slice %{{.*}} dim 1 [%{{.*}} : 9223372036854775807 : 1] : tensor<?x8xf32> -> tensor<?x?xf32>
  %12 = braze.slice %x dim 1 [%n : 9223372036854775807 : 1] : tensor<?x8xf32> -> tensor<?x?xf32>
  // Tests that a producer may declare the size a symbolic slice has (x[s-1] keeps one row).
  // CHECK: braze.slice %{{.*}} dim 0 [%{{.*}} : %{{.*}} : 1] : tensor<?x8xf32> -> tensor<1x8xf32>
  %13 = braze.slice %x dim 0 [%n : %m : 1] : tensor<?x8xf32> -> tensor<1x8xf32>
  // CHECK: braze.concat %{{.*}}, %{{.*}} dim 0 : tensor<?x8xf32>, tensor<1x8xf32> -> tensor<?x8xf32>
  %8 = braze.concat %x, %r dim 0 : tensor<?x8xf32>, tensor<1x8xf32> -> tensor<?x8xf32>
  // CHECK: braze.concat %{{.*}}, %{{.*}}, %{{.*}} dim 1 : tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32> -> tensor<1x24xf32>
  %9 = braze.concat %r, %r, %r dim 1 : tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32> -> tensor<1x24xf32>
  return
}

// CHECK-LABEL: func.func @take
func.func @take(%table: tensor<100x32xf32>, %ids: tensor<?x?xi64>, %rows: tensor<3xi32>) {
  // CHECK: braze.take %{{.*}}, %{{.*}} dim 0 : tensor<100x32xf32>, tensor<?x?xi64> -> tensor<?x?x32xf32>
  %0 = braze.take %table, %ids dim 0 : tensor<100x32xf32>, tensor<?x?xi64> -> tensor<?x?x32xf32>
  // CHECK: braze.take %{{.*}}, %{{.*}} dim 1 : tensor<100x32xf32>, tensor<3xi32> -> tensor<100x3xf32>
  %1 = braze.take %table, %rows dim 1 : tensor<100x32xf32>, tensor<3xi32> -> tensor<100x3xf32>
  return
}

// CHECK-LABEL: func.func @constants_and_parameters
func.func @constants_and_parameters(%n: index) {
  // CHECK: braze.iota start 0.000000e+00 step 1.000000e+00 : tensor<8xi64>
  %3 = braze.iota start 0.0 step 1.0 : tensor<8xi64>
  // CHECK: braze.iota start 1.000000e+00 step 5.000000e-01 sizes [%{{.*}}] : tensor<?xf32>
  %4 = braze.iota start 1.0 step 0.5 sizes [%n] : tensor<?xf32>
  // CHECK: braze.iota start %{{.*}} step 1.000000e+00 sizes [%{{.*}}] : tensor<?xi64>
  %5 = braze.iota start %n step 1.0 sizes [%n] : tensor<?xi64>
  // CHECK: braze.iota start 2.000000e+00 step %{{.*}} : tensor<4xi64>
  %6 = braze.iota start 2.0 step %n : tensor<4xi64>
  // CHECK: braze.constant dense<1.000000e+00> : tensor<4xf32>
  %0 = braze.constant dense<1.0> : tensor<4xf32>
  // CHECK: braze.constant dense<[1, 2, 3]> : tensor<3xi64>
  %1 = braze.constant dense<[1, 2, 3]> : tensor<3xi64>
  // CHECK: braze.parameter "fc1.weight" : tensor<4096x1024xf32>
  %2 = braze.parameter "fc1.weight" : tensor<4096x1024xf32>
  return
}

// CHECK-LABEL: func.func @group
func.func @group(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x1xf32>) {
  // CHECK: %{{.*}}:2 = braze.group ins(%{{.*}}, %{{.*}}) : (tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x1xf32>) {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<?x64xf32>, %[[B:.*]]: tensor<64xf32>):
  // CHECK-NEXT: %[[M:.*]] = braze.mul %[[A]], %[[B]]
  // CHECK-NEXT: %[[S:.*]] = braze.sum %[[M]] dims [1] keepdim
  // CHECK-NEXT: braze.yield %[[M]], %[[S]] : tensor<?x64xf32>, tensor<?x1xf32>
  %r:2 = braze.group ins(%x, %w) : (tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x1xf32>) {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<64xf32>):
    %m = braze.mul %a, %b : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
    %s = braze.sum %m dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
    braze.yield %m, %s : tensor<?x64xf32>, tensor<?x1xf32>
  }
  return %r#0, %r#1 : tensor<?x64xf32>, tensor<?x1xf32>
}

// -----

// CHECK-LABEL: func.func @kernel
// CHECK: braze.kernel ins(%{{.*}} : tensor<?x8xf32>) domain [%{{.*}}, 8] reduce [1] : tensor<?x8xf32>, tensor<?xi64> {
// CHECK: braze.reduce "max" %{{.*}} : f32 -> f32
// CHECK: braze.reduce "argmax" %{{.*}} : f32 -> i64
// CHECK: braze.store %{{.*}}, 0 [%{{.*}}, %{{.*}}] : f32
// CHECK: braze.store %{{.*}}, 1 [%{{.*}}] : i64
func.func @kernel(%x: tensor<?x8xf32>, %n: index) -> (tensor<?x8xf32>, tensor<?xi64>) {
  %r:2 = braze.kernel ins(%x : tensor<?x8xf32>) domain [%n, 8] reduce [1] : tensor<?x8xf32>, tensor<?xi64> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x8xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x8xf32>
    %m = braze.reduce "max" %v : f32 -> f32
    %k = braze.reduce "argmax" %v : f32 -> i64
    %d = arith.subf %v, %m : f32
    braze.store %d, 0 [%i, %j] : f32
    braze.store %k, 1 [%i] : i64
  }
  return %r#0, %r#1 : tensor<?x8xf32>, tensor<?xi64>
}

// -----

// Tests that convolutions (plain with bias, depthwise, transposed) and
// extern calls (operand references, lists, None, dtypes, keywords, tuple
// results) round-trip.
// CHECK-LABEL: func.func @library_ops
// CHECK: braze.convolution %{{.*}}, %{{.*}} bias %{{.*}} stride [2, 2] padding [3, 3] dilation [1, 1] groups 1 : tensor<?x3x32x32xf32>, tensor<8x3x7x7xf32>, tensor<8xf32> -> tensor<?x8x16x16xf32>
// CHECK: braze.convolution %{{.*}}, %{{.*}} stride [1] padding [1] dilation [2] groups 8 : tensor<2x8x10xf32>, tensor<8x1x3xf32> -> tensor<2x8x8xf32>
// CHECK: braze.convolution %{{.*}}, %{{.*}} stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 memory_format "channels_last" : tensor<2x8x5x5xf32>, tensor<4x8x1x1xf32> -> tensor<2x4x5x5xf32>
// CHECK: braze.convolution %{{.*}}, %{{.*}} stride [2, 2] padding [1, 1] dilation [1, 1] groups 1 transposed output_padding [1, 1] : tensor<1x8x5x5xf32>, tensor<8x4x3x3xf32> -> tensor<1x4x10x10xf32>
// CHECK: braze.extern "aten.index.Tensor"(%{{.*}}, %{{.*}}) args [0 : index, [unit, 1 : index]] : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<4x3xf32>
// CHECK: braze.extern "aten.cumsum.default"(%{{.*}}) args [0 : index, 1] kwargs {dtype = f64} : (tensor<4x6xf32>) -> tensor<4x6xf64>
// CHECK: braze.extern "aten.max_pool2d_with_indices.default"(%{{.*}}) args [0 : index, [2, 2], [2, 2], [0, 0], [1, 1], false] : (tensor<?x3x32x32xf32>) -> (tensor<?x3x16x16xf32>, tensor<?x3x16x16xi64>)
func.func @library_ops(%x: tensor<?x3x32x32xf32>, %w: tensor<8x3x7x7xf32>, %b: tensor<8xf32>,
                       %y: tensor<2x8x10xf32>, %dw: tensor<8x1x3xf32>,
                       %t: tensor<1x8x5x5xf32>, %tw: tensor<8x4x3x3xf32>,
                       %m: tensor<4x6xf32>, %i: tensor<3xi64>,
                       %t2: tensor<2x8x5x5xf32>, %pw: tensor<4x8x1x1xf32>) {
  %0 = braze.convolution %x, %w bias %b stride [2, 2] padding [3, 3] dilation [1, 1] groups 1
      : tensor<?x3x32x32xf32>, tensor<8x3x7x7xf32>, tensor<8xf32> -> tensor<?x8x16x16xf32>
  %1 = braze.convolution %y, %dw stride [1] padding [1] dilation [2] groups 8
      : tensor<2x8x10xf32>, tensor<8x1x3xf32> -> tensor<2x8x8xf32>
  %6 = braze.convolution %t2, %pw stride [1, 1] padding [0, 0] dilation [1, 1] groups 1 memory_format "channels_last"
      : tensor<2x8x5x5xf32>, tensor<4x8x1x1xf32> -> tensor<2x4x5x5xf32>
  %2 = braze.convolution %t, %tw stride [2, 2] padding [1, 1] dilation [1, 1] groups 1 transposed output_padding [1, 1]
      : tensor<1x8x5x5xf32>, tensor<8x4x3x3xf32> -> tensor<1x4x10x10xf32>
  %3 = braze.extern "aten.index.Tensor" (%m, %i) args [0 : index, [unit, 1 : index]]
      : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  %4 = braze.extern "aten.cumsum.default" (%m) args [0 : index, 1] kwargs {dtype = f64}
      : (tensor<4x6xf32>) -> tensor<4x6xf64>
  %5:2 = braze.extern "aten.max_pool2d_with_indices.default" (%x) args [0 : index, [2, 2], [2, 2], [0, 0], [1, 1], false]
      : (tensor<?x3x32x32xf32>) -> (tensor<?x3x16x16xf32>, tensor<?x3x16x16xi64>)
  return
}

// Tests that attention round-trips with a bool mask and a scale, causal
// with a soft cap, and grouped-query heads with a float mask.
// CHECK-LABEL: func.func @attention
// CHECK: braze.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale 1.250000e-01 : tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>, tensor<2x1x?x?xi1> -> tensor<2x12x?x64xf32>
// CHECK: braze.attention %{{.*}}, %{{.*}}, %{{.*}} softcap 5.000000e+01 causal : tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32> -> tensor<2x12x?x64xf32>
// CHECK: braze.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} gqa : tensor<2x12x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x32xf32>, tensor<8x8xf32> -> tensor<2x12x8x32xf32>
func.func @attention(%q: tensor<2x12x?x64xf32>, %k: tensor<2x12x?x64xf32>, %v: tensor<2x12x?x64xf32>, %m: tensor<2x1x?x?xi1>,
                     %gq: tensor<2x12x8x64xf32>, %gk: tensor<2x4x8x64xf32>, %gv: tensor<2x4x8x32xf32>, %fm: tensor<8x8xf32>) {
  %0 = braze.attention %q, %k, %v mask %m scale 0.125 : tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>, tensor<2x1x?x?xi1> -> tensor<2x12x?x64xf32>
  %1 = braze.attention %q, %k, %v softcap 50.0 causal : tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32> -> tensor<2x12x?x64xf32>
  %2 = braze.attention %gq, %gk, %gv mask %fm gqa : tensor<2x12x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x32xf32>, tensor<8x8xf32> -> tensor<2x12x8x32xf32>
  return
}
