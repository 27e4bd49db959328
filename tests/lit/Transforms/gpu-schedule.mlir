// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=cuda}))' | FileCheck %s
// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=hip threads=128}))' | FileCheck %s --check-prefix=HIP
// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=opencl}))' | FileCheck %s --check-prefix=CL
// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=cuda warp-row=0}))' | FileCheck %s --check-prefix=NOWARP
// RUN: braze-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(braze-gpu-schedule{target=metal gemm-tile=32}))' | FileCheck %s --check-prefix=SMALL

// Tests that a kernel without reductions takes one thread per point, a row
// of at most 4 warps' worth of points (128 on cuda, 256 on hip) a warp
// tree of `threads` (a warp per row), and a longer static row a block tree
// sized to the row (at least a warp, at most `threads`). OpenCL, which has
// no warp shuffles here, and warp-row=0 take block trees instead. Every
// kernel is static and small: 32-bit indexing.
// CHECK-LABEL: func.func @shapes
// CHECK: braze.kernel {{.*}} reduce [] attributes {braze.schedule = {index_bits = 32 : i64, strategy = "points", threads = 256 : i64}}
// CHECK: braze.kernel {{.*}} reduce [1] attributes {braze.schedule = {index_bits = 32 : i64, strategy = "warp_tree", threads = 256 : i64}}
// CHECK: braze.kernel {{.*}} reduce [1] attributes {braze.schedule = {index_bits = 32 : i64, strategy = "block_tree", threads = 256 : i64}}
// CHECK: braze.kernel {{.*}} reduce [1] attributes {braze.schedule = {index_bits = 32 : i64, strategy = "block_tree", threads = 256 : i64}}
// HIP-LABEL: func.func @shapes
// HIP: {index_bits = 32 : i64, strategy = "points", threads = 128 : i64}
// HIP: {index_bits = 32 : i64, strategy = "warp_tree", threads = 128 : i64}
// HIP: {index_bits = 32 : i64, strategy = "block_tree", threads = 128 : i64}
// HIP: {index_bits = 32 : i64, strategy = "warp_tree", threads = 128 : i64}
// CL-LABEL: func.func @shapes
// CL: {index_bits = 32 : i64, strategy = "points", threads = 256 : i64}
// CL: {index_bits = 32 : i64, strategy = "block_tree", threads = 64 : i64}
// CL: {index_bits = 32 : i64, strategy = "block_tree", threads = 256 : i64}
// CL: {index_bits = 32 : i64, strategy = "block_tree", threads = 256 : i64}
// NOWARP-LABEL: func.func @shapes
// NOWARP: {index_bits = 32 : i64, strategy = "points", threads = 256 : i64}
// NOWARP: {index_bits = 32 : i64, strategy = "block_tree", threads = 64 : i64}
func.func @shapes(%x: tensor<4x40xf32>, %y: tensor<4x5000xf32>, %z: tensor<4x129xf32>) -> (tensor<4x40xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %e = braze.kernel ins(%x : tensor<4x40xf32>) domain [4, 40] reduce [] : tensor<4x40xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x40xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x40xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  %s = braze.kernel ins(%x : tensor<4x40xf32>) domain [4, 40] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x40xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x40xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  %t = braze.kernel ins(%y : tensor<4x5000xf32>) domain [4, 5000] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x5000xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x5000xf32>
    %r = braze.reduce "max" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  %u = braze.kernel ins(%z : tensor<4x129xf32>) domain [4, 129] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x129xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x129xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  return %e, %s, %t, %u : tensor<4x40xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that short static rows take one thread each, and that a dynamic row
// takes a block tree of `threads`.
// CHECK-LABEL: func.func @short_and_dynamic_rows
// CHECK: reduce [1] attributes {braze.schedule = {strategy = "row_per_thread", threads = 256 : i64}}
// CHECK: reduce [1] attributes {braze.schedule = {strategy = "block_tree", threads = 256 : i64}}
func.func @short_and_dynamic_rows(%x: tensor<?x10xf32>, %y: tensor<4x?xf32>, %n: index) -> (tensor<?xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x10xf32>
  %s = braze.kernel ins(%x : tensor<?x10xf32>) domain [%m, 10] reduce [1] : tensor<?xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x10xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x10xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  %t = braze.kernel ins(%y : tensor<4x?xf32>) domain [4, %n] reduce [1] : tensor<4xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x?xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<4x?xf32>
    %r = braze.reduce "add" %v : f32 -> f32
    braze.store %r, 0 [%i] : f32
  }
  return %s, %t : tensor<?xf32>, tensor<4xf32>
}

// -----

// Tests that a static pointwise kernel of at least 1M points takes 4 points
// per thread, and that a tensor of 2^31 elements keeps 64-bit indexing.
// CHECK-LABEL: func.func @large
// CHECK: reduce [] attributes {braze.schedule = {elements = 4 : i64, index_bits = 32 : i64, strategy = "points", threads = 256 : i64}}
// CHECK: reduce [] attributes {braze.schedule = {elements = 4 : i64, strategy = "points", threads = 256 : i64}}
// CHECK: reduce [1] attributes {braze.schedule = {strategy = "block_tree", threads = 256 : i64}}
func.func @large(%x: tensor<1048576xf32>, %y: tensor<65536x32768xi8>) -> (tensor<1048576xf32>, tensor<65536x32768xi8>, tensor<65536xi8>) {
  %e = braze.kernel ins(%x : tensor<1048576xf32>) domain [1048576] reduce [] : tensor<1048576xf32> {
  ^bb0(%i: index, %n: index, %a: tensor<1048576xf32>):
    %v = tensor.extract %a[%i] : tensor<1048576xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i] : f32
  }
  %f = braze.kernel ins(%y : tensor<65536x32768xi8>) domain [65536, 32768] reduce [] : tensor<65536x32768xi8> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<65536x32768xi8>):
    %v = tensor.extract %a[%i, %j] : tensor<65536x32768xi8>
    braze.store %v, 0 [%i, %j] : i8
  }
  %g = braze.kernel ins(%y : tensor<65536x32768xi8>) domain [65536, 32768] reduce [1] : tensor<65536xi8> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<65536x32768xi8>):
    %v = tensor.extract %a[%i, %j] : tensor<65536x32768xi8>
    %r = braze.reduce "max" %v : i8 -> i8
    braze.store %r, 0 [%i] : i8
  }
  return %e, %f, %g : tensor<1048576xf32>, tensor<65536x32768xi8>, tensor<65536xi8>
}

// -----

// Tests that dynamic extents bounded by `braze.symbols` ranges index in 32
// bits: S is at most 4096 rows of 64, through tensor.dim of the argument
// and through the kernel that made the second kernel's input; U is
// unbounded, so its kernel keeps 64 bits.
// CHECK-LABEL: func.func @bounded
// CHECK: braze.schedule = {index_bits = 32 : i64, strategy = "points", threads = 256 : i64}
// CHECK: braze.schedule = {index_bits = 32 : i64, strategy = "warp_tree", threads = 256 : i64}
// CHECK: braze.schedule = {strategy = "points", threads = 256 : i64}
module attributes {braze.symbols = {S = [8, 4096, 8], U = [2, -1]}} {
func.func @bounded(%x: tensor<?x64xf32> {braze.dims = ["S", 64]}, %y: tensor<?x64xf32> {braze.dims = ["U", 64]}) -> (tensor<?x64xf32>, tensor<?xf32>, tensor<?x64xf32>) {
  %c0 = arith.constant 0 : index
  %s = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = braze.kernel ins(%x : tensor<?x64xf32>) domain [%s, 64] reduce [] : tensor<?x64xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x64xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x64xf32>
    %w = math.exp %v : f32
    braze.store %w, 0 [%i, %j] : f32
  }
  %r = braze.kernel ins(%e : tensor<?x64xf32>) domain [%s, 64] reduce [1] : tensor<?xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x64xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x64xf32>
    %t = braze.reduce "add" %v : f32 -> f32
    braze.store %t, 0 [%i] : f32
  }
  %u = tensor.dim %y, %c0 : tensor<?x64xf32>
  %f = braze.kernel ins(%y : tensor<?x64xf32>) domain [%u, 64] reduce [] : tensor<?x64xf32> {
  ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x64xf32>):
    %v = tensor.extract %a[%i, %j] : tensor<?x64xf32>
    braze.store %v, 0 [%i, %j] : f32
  }
  return %e, %r, %f : tensor<?x64xf32>, tensor<?xf32>, tensor<?x64xf32>
}
}

// -----

// Tests that a fused GEMM takes 64 x 64 tiles of 16 x 16 threads, K in
// blocks of 16 (a dynamic M the whole tile); a static M below the tile a
// smaller M side, the smallest power of two covering it but at least 16 (3
// rows take 16, 20 rows 32); row statistics a block per tile of whole rows
// (tiled_gemm_rows), M read from a transposed lhs's last dim; gemm-tile=32
// halves the tile. Static operands and results index in 32 bits; an
// unbounded dynamic M keeps 64.
// CHECK-LABEL: func.func @gemms
// CHECK: braze.fused_gemm {{.*}} {braze.schedule = {strategy = "tiled_gemm", threads = 256 : i64, tile = array<i64: 64, 64, 16>}}
// CHECK: braze.fused_gemm {{.*}} {braze.schedule = {index_bits = 32 : i64, strategy = "tiled_gemm", threads = 256 : i64, tile = array<i64: 16, 64, 16>}}
// CHECK: braze.fused_gemm {{.*}} {braze.schedule = {index_bits = 32 : i64, strategy = "tiled_gemm_rows", threads = 256 : i64, tile = array<i64: 32, 64, 16>}}
// HIP-LABEL: func.func @gemms
// HIP: tile = array<i64: 64, 64, 16>
// SMALL-LABEL: func.func @gemms
// SMALL: {braze.schedule = {strategy = "tiled_gemm", threads = 256 : i64, tile = array<i64: 32, 32, 16>}}
// SMALL: {braze.schedule = {index_bits = 32 : i64, strategy = "tiled_gemm", threads = 256 : i64, tile = array<i64: 16, 32, 16>}}
// SMALL: {braze.schedule = {index_bits = 32 : i64, strategy = "tiled_gemm_rows", threads = 256 : i64, tile = array<i64: 32, 32, 16>}}
func.func @gemms(%x: tensor<?x40xf32>, %w: tensor<24x40xf32>, %one: tensor<3x40xf32>, %xt: tensor<40x20xf32>)
    -> (tensor<?x24xf32>, tensor<3x24xf32>, tensor<20x24xf32>, tensor<20xf32>) {
  %y = braze.fused_gemm %x, %w extras() indexing [] transpose_rhs accumulator f32
      : (tensor<?x40xf32>, tensor<24x40xf32>) -> tensor<?x24xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  %z = braze.fused_gemm %one, %w extras() indexing [] transpose_rhs accumulator f32
      : (tensor<3x40xf32>, tensor<24x40xf32>) -> tensor<3x24xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  %t, %s = braze.fused_gemm %xt, %w extras() indexing [] transpose_lhs transpose_rhs accumulator f32
      reductions ["add"] : (tensor<40x20xf32>, tensor<24x40xf32>) -> tensor<20x24xf32>, tensor<20xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc, %acc : f32, f32
  }
  return %y, %z, %t, %s : tensor<?x24xf32>, tensor<3x24xf32>, tensor<20x24xf32>, tensor<20xf32>
}

// -----

// Tests that a fused GEMM whose dynamic M is bounded by a `braze.symbols`
// range indexes in 32 bits, and one whose bound is too large keeps 64.
// CHECK-LABEL: func.func @bounded_gemms
// CHECK: braze.fused_gemm {{.*}} {braze.schedule = {index_bits = 32 : i64, strategy = "tiled_gemm", threads = 256 : i64, tile = array<i64: 64, 64, 16>}}
// CHECK: braze.fused_gemm {{.*}} {braze.schedule = {strategy = "tiled_gemm", threads = 256 : i64, tile = array<i64: 64, 64, 16>}}
module attributes {braze.symbols = {S = [1, 4096, 1], L = [1, 100000000, 1]}} {
func.func @bounded_gemms(%x: tensor<?x40xf32> {braze.dims = ["S", 40]}, %y: tensor<?x40xf32> {braze.dims = ["L", 40]},
                         %w: tensor<24x40xf32>) -> (tensor<?x24xf32>, tensor<?x24xf32>) {
  %a = braze.fused_gemm %x, %w extras() indexing [] transpose_rhs accumulator f32
      : (tensor<?x40xf32>, tensor<24x40xf32>) -> tensor<?x24xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  %b = braze.fused_gemm %y, %w extras() indexing [] transpose_rhs accumulator f32
      : (tensor<?x40xf32>, tensor<24x40xf32>) -> tensor<?x24xf32> {
  ^bb0(%acc: f32):
    braze.gemm_yield %acc : f32
  }
  return %a, %b : tensor<?x24xf32>, tensor<?x24xf32>
}
}
