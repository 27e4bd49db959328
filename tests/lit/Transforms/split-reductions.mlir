// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(braze-split-reductions{remarks=true}))' | FileCheck %s
// RUN: not braze-opt %s -pass-pipeline='builtin.module(func.func(braze-split-reductions{min-chunk=0}))' 2>&1 | FileCheck %s --check-prefix=OPTIONS

// OPTIONS: braze-split-reductions: min-points must be at least 2 and max-outputs, target-rows, min-chunk at least 1

// Tests that a sum of 4M points to one value becomes 1024 chunks of 4096
// (no mask: they divide evenly), then a kernel that sums the chunks and
// stores what the original stored.
// CHECK-LABEL: func.func @sum_to_one
// CHECK: %[[P:[a-z0-9_]+]] = braze.kernel ins(%{{.*}} : tensor<4194304xf32>) domain [1024, 4096] reduce [1] : tensor<1024xf32> {
// CHECK-NEXT: ^bb0(%[[C:[a-z0-9_]+]]: index, %[[L:[a-z0-9_]+]]: index, %{{.*}}: index, %{{.*}}: index, %[[A:[a-z0-9_]+]]: tensor<4194304xf32>):
// CHECK: %[[START:[a-z0-9_]+]] = arith.muli %[[C]], %{{.*}} : index
// CHECK: %[[J:[a-z0-9_]+]] = arith.addi %[[START]], %[[L]] : index
// CHECK-NOT: arith.select
// CHECK: %[[V:[a-z0-9_]+]] = tensor.extract %[[A]][%[[J]]]
// CHECK: %[[R:[a-z0-9_]+]] = braze.reduce "add" %[[V]] : f32 -> f32
// CHECK: braze.store %[[R]], 0 [%[[C]]] : f32
// CHECK: %[[S:[a-z0-9_]+]] = braze.kernel ins(%[[P]] : tensor<1024xf32>) domain [1024] reduce [0] : tensor<f32> {
// CHECK: %[[Q:[a-z0-9_]+]] = tensor.extract
// CHECK: %[[T:[a-z0-9_]+]] = braze.reduce "add" %[[Q]] : f32 -> f32
// CHECK: %[[M:[a-z0-9_]+]] = arith.mulf %[[T]], %{{.*}} : f32
// CHECK: braze.store %[[M]], 0 [] : f32
// CHECK: return %[[S]]
func.func @sum_to_one(%x: tensor<4194304xf32>) -> tensor<f32> {
  %s = braze.kernel ins(%x : tensor<4194304xf32>) domain [4194304] reduce [0] : tensor<f32> {
  ^bb0(%j: index, %nj: index, %a: tensor<4194304xf32>):
    %v = tensor.extract %a[%j] : tensor<4194304xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    %h = arith.constant 0.5 : f32
    %m = arith.mulf %r, %h : f32
    braze.store %m, 0 [] : f32
  }
  return %s : tensor<f32>
}

// -----

// Tests that an argmax over rows of a prime length keeps each chunk's
// maximum and global index, masks the points past the end with -inf, and
// that the combining kernel reads the index of the first chunk holding the
// maximum; the bias read per row moves to the combining kernel.
// CHECK-LABEL: func.func @argmax_rows
// CHECK: %[[P:[a-z0-9_]+]]:3 = braze.kernel ins(%{{.*}} : tensor<3x100003xf32>) domain [3, 48, 2084] reduce [2] : tensor<3x48xf32>, tensor<3x48xi64>, tensor<3x48xf32> {
// CHECK-NEXT: ^bb0(%[[I:[a-z0-9_]+]]: index, %[[C:[a-z0-9_]+]]: index, %[[L:[a-z0-9_]+]]: index,
// CHECK: %[[VALID:[a-z0-9_]+]] = arith.cmpi slt, %{{.*}}, %{{.*}} : index
// CHECK: %[[J:[a-z0-9_]+]] = arith.minsi
// CHECK: %[[V:[a-z0-9_]+]] = tensor.extract %{{.*}}[%[[I]], %[[J]]]
// CHECK: %[[NEG:[a-z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MASKED:[a-z0-9_]+]] = arith.select %[[VALID]], %[[V]], %[[NEG]] : f32
// CHECK: %[[BEST:[a-z0-9_]+]] = braze.reduce "max" %[[MASKED]] : f32 -> f32
// CHECK: %[[AT:[a-z0-9_]+]] = braze.reduce "argmax" %[[MASKED]] : f32 -> i64
// CHECK: braze.store %[[BEST]], 0 [%[[I]], %[[C]]] : f32
// CHECK: %[[GLOBAL:[a-z0-9_]+]] = arith.addi %{{.*}}, %[[AT]] : i64
// CHECK: braze.store %[[GLOBAL]], 1 [%[[I]], %[[C]]] : i64
// CHECK-NOT: arith.select
// CHECK: braze.reduce "max" %[[MASKED]] : f32 -> f32
// CHECK: braze.store %{{.*}}, 2 [%[[I]], %[[C]]] : f32
// CHECK: braze.kernel ins(%[[P]]#0, %[[P]]#1, %[[P]]#2, %{{.*}} : tensor<3x48xf32>, tensor<3x48xi64>, tensor<3x48xf32>, tensor<3xf32>) domain [3, 48] reduce [1] : tensor<3xi64>, tensor<3xf32> {
// CHECK-NEXT: ^bb0(%[[I2:[a-z0-9_]+]]: index, %[[C2:[a-z0-9_]+]]: index, %{{.*}}: index, %{{.*}}: index, %[[VALUES:[a-z0-9_]+]]: tensor<3x48xf32>, %[[INDICES:[a-z0-9_]+]]: tensor<3x48xi64>, %[[MAXES:[a-z0-9_]+]]: tensor<3x48xf32>, %[[BIAS:[a-z0-9_]+]]: tensor<3xf32>):
// CHECK: %[[PV:[a-z0-9_]+]] = tensor.extract %[[VALUES]][%[[I2]], %[[C2]]]
// CHECK: %[[CHUNK:[a-z0-9_]+]] = braze.reduce "argmax" %[[PV]] : f32 -> i64
// CHECK: %[[CI:[a-z0-9_]+]] = arith.index_cast %[[CHUNK]] : i64 to index
// CHECK: %[[INDEX:[a-z0-9_]+]] = tensor.extract %[[INDICES]][%[[I2]], %[[CI]]]
// CHECK: %[[PM:[a-z0-9_]+]] = tensor.extract %[[MAXES]][%[[I2]], %[[C2]]]
// CHECK: %[[MAX:[a-z0-9_]+]] = braze.reduce "max" %[[PM]] : f32 -> f32
// CHECK: %[[B:[a-z0-9_]+]] = tensor.extract %[[BIAS]][%[[I2]]]
// CHECK: %[[SHIFTED:[a-z0-9_]+]] = arith.addf %[[MAX]], %[[B]] : f32
// CHECK: braze.store %[[INDEX]], 0 [%[[I2]]] : i64
// CHECK: braze.store %[[SHIFTED]], 1 [%[[I2]]] : f32
func.func @argmax_rows(%x: tensor<3x100003xf32>, %b: tensor<3xf32>) -> (tensor<3xi64>, tensor<3xf32>) {
  %s:2 = braze.kernel ins(%x, %b : tensor<3x100003xf32>, tensor<3xf32>) domain [3, 100003] reduce [1] : tensor<3xi64>, tensor<3xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<3x100003xf32>, %bb: tensor<3xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<3x100003xf32>
    %r = braze.reduce "argmax" %v : f32 -> i64
    %m = braze.reduce "max" %v : f32 -> f32
    %c = tensor.extract %bb[%i] : tensor<3xf32>
    %d = arith.addf %m, %c : f32
    braze.store %r, 0 [%i] : i64
    braze.store %d, 1 [%i] : f32
  }
  return %s#0, %s#1 : tensor<3xi64>, tensor<3xf32>
}

// -----

// Tests that several reduced dims (a column sum over [512, 256] to 2
// outputs) are one run of points, split back into the dims with divisions
// by constants, and that an i1 "or" masks with false and a min with +inf.
// CHECK-LABEL: func.func @two_reduced_dims
// CHECK: braze.kernel {{.*}} domain [2, 64, 2048] reduce [2] : tensor<2x64xi1>, tensor<2x64xf32>
// CHECK: %[[J1:[a-z0-9_]+]] = arith.remsi %{{.*}}, %{{.*}} : index
// CHECK: %[[J0:[a-z0-9_]+]] = arith.divsi %{{.*}}, %{{.*}} : index
// CHECK: tensor.extract %{{.*}}[%[[J0]], %[[J1]], %{{.*}}]
// CHECK: braze.reduce "or" %{{.*}} : i1 -> i1
// CHECK: braze.reduce "min" %{{.*}} : f32 -> f32
// CHECK: braze.kernel {{.*}} domain [2, 64] reduce [1] : tensor<2xi1>, tensor<2xf32>
// CHECK: braze.reduce "or"
// CHECK: braze.reduce "min"
func.func @two_reduced_dims(%x: tensor<512x256x2xf32>) -> (tensor<2xi1>, tensor<2xf32>) {
  %s:2 = braze.kernel ins(%x : tensor<512x256x2xf32>) domain [512, 256, 2] reduce [0, 1] : tensor<2xi1>, tensor<2xf32> {
  ^bb0(%j0: index, %j1: index, %k: index, %n0: index, %n1: index, %nk: index, %a: tensor<512x256x2xf32>):
    %v = tensor.extract %a[%j0, %j1, %k] : tensor<512x256x2xf32>
    %z = arith.constant 0.0 : f32
    %p = arith.cmpf ogt, %v, %z : f32
    %any = braze.reduce "or" %p : i1 -> i1
    %low = braze.reduce "min" %v : f32 -> f32
    braze.store %any, 0 [%k] : i1
    braze.store %low, 1 [%k] : f32
  }
  return %s#0, %s#1 : tensor<2xi1>, tensor<2xf32>
}

// -----

// Tests that a softmax's kernel (its sum reads the row's maximum, and it
// stores per point), a dynamic reduced extent, a row read per point and a
// kernel with reduction dims but no reduction are left whole, each with a
// remark; a short row and many outputs are left whole silently.
// CHECK-LABEL: func.func @left_whole
// CHECK-COUNT-6: braze.kernel
// CHECK-NOT: braze.kernel
func.func @left_whole(%x: tensor<2x100000xf32>, %y: tensor<?xf32>, %n: index, %z: tensor<1024x1024xf32>, %short: tensor<2x1000xf32>) -> (tensor<2xf32>, tensor<f32>, tensor<2x100000xf32>, tensor<2xf32>, tensor<1024xf32>, tensor<2xf32>) {
  // expected-remark @+1 {{not split: a reduction reads another one's result (as softmax's sum of exp(x - max) does); left as one kernel (a block tree)}}
  %a = braze.kernel ins(%x : tensor<2x100000xf32>) domain [2, 100000] reduce [1] : tensor<2xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<2x100000xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<2x100000xf32>
    %m = braze.reduce "max" %v : f32 -> f32
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    %s = braze.reduce "add" %e : f32 -> f32
    braze.store %s, 0 [%i] : f32
  }
  // expected-remark @+1 {{not split: the reduced extent is dynamic; left as one kernel (a block tree)}}
  %b = braze.kernel ins(%y : tensor<?xf32>) domain [%n] reduce [0] : tensor<f32> {
  ^bb0(%j: index, %nj: index, %t: tensor<?xf32>):
    %v = tensor.extract %t[%j] : tensor<?xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [] : f32
  }
  // expected-remark @+1 {{not split: it stores a value per reduction point; left as one kernel (a block tree)}}
  %c = braze.kernel ins(%x : tensor<2x100000xf32>) domain [2, 100000] reduce [1] : tensor<2x100000xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<2x100000xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<2x100000xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    %d = arith.divf %v, %s : f32
    braze.store %d, 0 [%i, %j] : f32
  }
  %d = braze.kernel ins(%short : tensor<2x1000xf32>) domain [2, 1000] reduce [1] : tensor<2xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<2x1000xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<2x1000xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [%i] : f32
  }
  %e = braze.kernel ins(%z : tensor<1024x1024xf32>) domain [1024, 1024] reduce [1] : tensor<1024xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<1024x1024xf32>):
    %v = tensor.extract %t[%i, %j] : tensor<1024x1024xf32>
    %s = braze.reduce "add" %v : f32 -> f32
    braze.store %s, 0 [%i] : f32
  }
  // expected-remark @+1 {{not split: it has no braze.reduce (nothing to compute in parts); left as one kernel (a block tree)}}
  %f = braze.kernel ins(%x : tensor<2x100000xf32>) domain [2, 100000] reduce [1] : tensor<2xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %t: tensor<2x100000xf32>):
    %c0 = arith.constant 0 : index
    %v = tensor.extract %t[%i, %c0] : tensor<2x100000xf32>
    braze.store %v, 0 [%i] : f32
  }
  return %a, %b, %c, %d, %e, %f : tensor<2xf32>, tensor<f32>, tensor<2x100000xf32>, tensor<2xf32>, tensor<1024xf32>, tensor<2xf32>
}
