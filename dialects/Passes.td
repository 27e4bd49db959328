//===- Passes.td - braze passes ---------------------------*- tablegen -*-===//

#ifndef BRAZE_PASSES
#define BRAZE_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Simplification
//===----------------------------------------------------------------------===//

def BrazeSimplify : Pass<"braze-simplify"> {
  let summary = "Apply braze's folders, canonicalizations and algebraic rewrites";
  let description = [{
    Runs, to a fixed point, every braze op's folder and canonicalization
    pattern (x + 0, x * 1, x / 1, reshape of reshape, permute of permute,
    expand to the same shape, ...) together with algebraic rewrites that
    remove a negation:

    ```mlir
    %n = braze.neg %b : tensor<4xf32>
    %r = braze.add %a, %n : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    becomes
    ```mlir
    %r = braze.sub %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    (likewise `a - neg(b)` to `a + b` and `neg(a) * neg(b)` to `a * b`).

    A batched product whose right operand is one matrix broadcast over the
    batch becomes one GEMM, as `aten.matmul` computes it (B small products
    that each read the whole matrix again were 3x slower, in ViT's
    attention projections):
    ```mlir
    %e = braze.expand %w : tensor<768x2304xf32> -> tensor<197x768x2304xf32>
    %r = braze.bmm %x, %e : tensor<197x2x768xf32>, tensor<197x768x2304xf32> -> tensor<197x2x2304xf32>
    ```
    becomes
    ```mlir
    %f = braze.reshape %x : tensor<197x2x768xf32> -> tensor<394x768xf32>
    %m = braze.matmul %f, %w : tensor<394x768xf32>, tensor<768x2304xf32> -> tensor<394x2304xf32>
    %r = braze.reshape %m : tensor<394x2304xf32> -> tensor<197x2x2304xf32>
    ```
    It needs at most one dynamic dim in each reshape.

    A permute that moves only dims of size 1 (einsum's captures insert and
    move them around products) keeps the row-major order of the elements,
    so it becomes a reshape, which composes with the reshapes beside it
    (MaxViT's attention scores, `[256, 49, 49]` reshaped to
    `[2, 64, 2, 49, 1, 49]`, permuted to `[..., 49, 49, 1]` and reshaped to
    `[2, 64, 2, 49, 49]`, become one reshape the attention pass reads).

    A `take` along a dim of static size n whose indices are
    `fmod(iota + c, n)` (an iota of step 1, at most n indices, `iota start +
    c >= 0`) rotates the dim: it becomes a slice, or two slices
    concatenated, which kernels read in place instead of a gather on the
    host. That is `torch.roll` as export decomposes it (Swin's shifted
    windows).
    The patterns apply to braze ops only; like `canonicalize`, the driver
    still folds any op it visits.
  }];
  let options = [
    Option<"maxIterations", "max-iterations", "int64_t", "10",
           "Rounds of the greedy rewrite driver before giving up">,
  ];
  let statistics = [
    Statistic<"numAlgebraicRewrites", "algebraic-rewrites",
              "Negations removed by algebraic rewrites">,
    Statistic<"numBroadcastProducts", "broadcast-products",
              "Batched products of a broadcast matrix made one GEMM">,
    Statistic<"numUnitPermutes", "unit-permutes",
              "Permutes of unit dims made reshapes">,
    Statistic<"numRotations", "rotations",
              "Takes of rotated iotas made slices">,
  ];
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def BrazeFusePointwise : Pass<"braze-fuse-pointwise", "::mlir::func::FuncOp"> {
  let summary = "Group pointwise ops and reductions into braze.group kernels";
  let description = [{
    Vertical fusion: a pointwise op joins the group of the pointwise ops and
    reductions that produce its operands, so that chains such as softmax,
    LayerNorm, RMSNorm and GELU-after-bias each become one `braze.group`
    (one kernel). The rules:

    - fusible ops are pointwise ops (arithmetic, math, comparisons, logic,
      `where`, `cast`), reductions, and `expand`; splat constants are copied
      into the groups that use them;
    - the ops of a group share one iteration domain: their domains (the
      result shape, or the input shape of a reduction) have one rank and
      broadcast together;
    - a reduction's result feeds other ops of its group only with `keepdim`
      (it then broadcasts back over the domain), and all reductions of a
      group reduce the same dims (a kernel has one set of reduction loops);
    - matrix products, layout changes and anything else stay outside (GEMM
      epilogues are `braze-epilogue-fusion`'s job);
    - no group may depend on itself through an op outside it;
    - a group computing a transcendental function (exp, sigmoid, tanh, erf,
      sin, ...) does not join a group that broadcasts its domain 4 times or
      more (a squeeze-excitation scale spread over an image, rotary angles
      over the heads), nor is such an op recomputed there: it would run once
      per broadcast point instead of once per point of its own domain;
    - `recompute-limit` > 0 lets a pointwise op whose result several groups
      read be recomputed in up to that many groups, instead of being written
      to memory and read back.

    ```mlir
    %m = braze.max %x dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
    %d = braze.sub %x, %m : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
    %e = braze.exp %d : tensor<?x64xf32>
    ```
    becomes
    ```mlir
    %e = braze.group ins(%x) : (tensor<?x64xf32>) -> tensor<?x64xf32> {
    ^bb0(%a: tensor<?x64xf32>):
      %m = braze.max %a dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
      %d = braze.sub %a, %m : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
      %e = braze.exp %d : tensor<?x64xf32>
      braze.yield %e : tensor<?x64xf32>
    }
    ```

    With `remarks=true` the pass explains itself: a remark on each consumer
    for each producer it was or was not fused with (naming the rule that
    refused it), and on each shared producer for each group it was or was
    not recomputed in. braze routes them to the `fusion` log topic
    (docs/observability.md).
  }];
  let dependentDialects = ["::braze::BrazeDialect"];
  let options = [
    Option<"recomputeLimit", "recompute-limit", "int64_t", "0",
           "Most groups a shared pointwise op may be recomputed in (0: none)">,
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each fusion decision: fused, or refused and why">,
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Fusion groups formed">,
    Statistic<"numFusedOps", "fused-ops", "Ops moved into fusion groups">,
    Statistic<"numRecomputed", "recomputed-ops",
              "Pointwise ops copied into an extra group">,
  ];
}

// The attention passes (in pipeline order): braze-form-attention,
// braze-order-attention, braze-lower-attention.
include "AttentionPasses.td"

def BrazeConvolutionGemms : Pass<"braze-convolution-gemms", "::mlir::func::FuncOp"> {
  let summary = "Compute small 1x1 convolutions as GEMMs over channels-last rows";
  let description = [{
    A convolution whose kernel is 1 in every spatial dim (stride 1, no
    padding, one group, not transposed) multiplies each pixel's channels by
    the same [O, C] matrix: in channels-last order it is the GEMM
    `[N * spatial, C] x [C, O]`. oneDNN's convolution pays a fixed cost per
    call of about 40-90 us on the CPU measured (2 threads: a
    squeeze-excitation block's [2, 64, 1, 1] -> 240 channels took 100 us as a
    convolution, 13 us as addmm), so a convolution of at most `max-work`
    multiply-adds (static shapes) becomes:

    - `braze.permute` of the input to channels-last order, reshaped to
      `[N * spatial, C]`;
    - `braze.matmul` (`braze.addmm` with a bias) by the transposed `[O, C]`
      weight, so braze-epilogue-fusion can take what follows;
    - the product reshaped to `[N, spatial..., O]` and permuted back to the
      convolution's `[N, O, spatial...]`.

    Then the layouts move so that no copy is left:

    - the permute back moves below the pointwise ops that read it (a batch
      norm, an activation, a residual add), which compute in the product's
      channels-last frame, their other operands permuted alike (a
      per-channel `[O, 1, 1]` becomes a `[1, 1, 1, O]` reshape): the GEMM's
      epilogue can take them, and the permute lands before whatever else
      reads the chain (the next convolution; a permute into channels-last
      after it cancels, here or in braze-channels-last);
    - the permute to channels-last moves above the pointwise ops that
      compute the input for this GEMM alone (the batch norm and activation
      after a depthwise convolution): their kernel then writes the rows in
      their order, reading the convolution's result through its
      channels-last view. Left after that kernel, braze-fold-layouts made
      it a copy that read the convolution's result with strides known only
      at run time: a gather per element (depthwise convolution, batch norm,
      ReLU, 1x1 convolution, batch norm, SiLU took 1.3-2.3x the time it took
      with the library's 1x1 convolution; with the kernel writing the rows,
      0.84-1.10x).

    The sums are the same products in another order; a bias is added to the
    f32 accumulator, as the library's convolution does. Larger
    convolutions stay the library's: on the zoo's EfficientNet-B0, GEMMs of
    25088 rows ran slower than oneDNN's convolutions (docs/cpu.md).
    `max-work=0` turns the pass off. With `remarks=true` a 1x1 convolution
    left alone gets a remark saying why.

    ```mlir
    %y = braze.convolution %x, %w stride [1, 1] padding [0, 0] dilation [1, 1] groups 1
        : tensor<2x16x7x7xf32>, tensor<32x16x1x1xf32> -> tensor<2x32x7x7xf32>
    %r = braze.relu %y : tensor<2x32x7x7xf32>
    ```
    becomes
    ```mlir
    %p = braze.permute %x [0, 2, 3, 1] : tensor<2x16x7x7xf32> -> tensor<2x7x7x16xf32>
    %a = braze.reshape %p : tensor<2x7x7x16xf32> -> tensor<98x16xf32>
    %v = braze.reshape %w : tensor<32x16x1x1xf32> -> tensor<32x16xf32>
    %t = braze.permute %v [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
    %m = braze.matmul %a, %t : tensor<98x16xf32>, tensor<16x32xf32> -> tensor<98x32xf32>
    %s = braze.reshape %m : tensor<98x32xf32> -> tensor<2x7x7x32xf32>
    %q = braze.relu %s : tensor<2x7x7x32xf32>
    %r = braze.permute %q [0, 3, 1, 2] : tensor<2x7x7x32xf32> -> tensor<2x32x7x7xf32>
    ```
  }];
  let dependentDialects = ["::braze::BrazeDialect"];
  let options = [
    Option<"maxWork", "max-work", "int64_t", "1 << 23",
           "The most multiply-adds of a convolution computed as a GEMM (0: none)">,
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each 1x1 convolution left to the library">,
  ];
  let statistics = [
    Statistic<"numConvolutions", "convolutions", "Convolutions computed as GEMMs">,
    Statistic<"numSunk", "sunk-ops", "Pointwise ops moved into a product's frame">,
    Statistic<"numHoisted", "hoisted-ops", "Pointwise ops moved into a GEMM operand's frame">,
  ];
}

def BrazeEpilogueFusion : Pass<"braze-epilogue-fusion", "::mlir::func::FuncOp"> {
  let summary = "Fuse the bias, pointwise chain and row statistics after a GEMM into braze.fused_gemm";
  let description = [{
    A `braze.matmul`, `braze.addmm`, `braze.bmm` or `braze.scaled_mm` of
    floats, with what follows it, becomes one `braze.fused_gemm`: its
    epilogue runs on each product element while it is in registers instead
    of a round trip through memory per op. The epilogue takes over,
    following the product's users in program order:

    - `addmm`'s bias (`alpha`, `beta` included) and `scaled_mm`'s, added in
      the accumulator before the one rounding to the element type, as
      torch.addmm and torch._scaled_mm do;
    - `scaled_mm`'s scales, as `lhs_scale` and `rhs_scale` (a per-tensor
      scale as a scalar, row-wise `[M, 1]`/`[1, N]` scales as `[M]`/`[N]`
      vectors); the 8-bit float operands are read in place;
    - pointwise ops (casts included) whose result has the product's shape,
      their other operands read as extras: indexed by (m, n) (a residual),
      by n (a bias), by m (a per-row value, e.g. a `[M, 1]` tensor) or a
      scalar, through an `expand` if there is one; splat constants become
      constants of the epilogue;
    - reshapes of a 2-D product that only split its rows (`[B*S, N]` to
      `[B, S, N]`, as nn.Linear on 3-D input is captured): their users are
      read in the product's frame;
    - row statistics: `sum`, `mean` (its sum, divided by N after) and `max`
      over N of an epilogue value, the statistic a following softmax,
      LayerNorm or RMSNorm computes first (a sum of squares is the sum of a
      squared value), as extra results of the fused GEMM.

    A `matmul`/`addmm` whose weight is an int8 tensor dequantised for it
    alone (`w.to(dtype)`, perhaps times a scale per output channel, perhaps
    transposed: `x @ (w.to(dtype) * s[:, None]).t()`, `F.linear(x,
    w.to(dtype) * s[:, None])`) reads the int8 weight in place: the scale
    becomes `rhs_scale` (it commutes with the sum over K), so the
    dequantised weight is never made. A scale along K, or a dequantised
    weight something else also reads, leaves the chain as it is (with a
    remark).

    A value of the epilogue that something else reads (the pre-activation
    an op outside needs, the residual stream after a LayerNorm) becomes an
    extra output. A GEMM is left as it is when nothing follows it that the
    epilogue can take, unless it is a `scaled_mm` or reads an int8 weight
    (the scales are an epilogue of their own), or its M is static and at
    most `decode-rows`: a decode shape, for which the target's fused GEMM
    reads the weight once for all rows (the CPU's GEMV), where the
    library's GEMM read it at half the speed (docs/cpu.md). With
    `half-products=false` a GEMM of f16/bf16 operands is left as it is
    unless its M is such a decode shape or it reads an int8 weight or is a
    `scaled_mm` (the CPU: its fused GEMM calls MKL's half GEMM per panel,
    which ran 0.75x of the library's oneDNN GEMM plus a kernel). A `scaled_mm` rounding to an
    8-bit float is left to `torch._scaled_mm` (the CPU's fused GEMMs store
    no 8-bit floats). A consumer is refused, with a remark saying why,
    when:

    - it needs a row statistic of the epilogue first (the normalisation
      after a mean or a max: the statistic is fused, the normalisation stays
      a kernel);
    - another operand depends on the product through an op outside the
      epilogue (it could only run after the fused GEMM);
    - an operand broadcasts in a way none of the indexings reads (per batch
      but not per row), or it broadcasts the product to a larger shape;
    - it reduces other dims than N, or is a reduction other than sum, mean
      or max;
    - dtypes would change eager's rounding: the mean of an f16/bf16 value
      (eager divides the f32 sum and rounds once; a rounded statistic
      divided again would round twice); an integer product (exact in
      integers, left to the library).

    With `extra-outputs=false`, a GEMM one of whose epilogue values has
    both an epilogue user and another one is not fused. The f16/bf16
    product is rounded to its element type before the epilogue (as the
    library's result would be), then the epilogue computes in f32 like a
    kernel (braze-lower-kernels' rules), and rounds where it stores.

    The pass runs before `braze-fuse-pointwise`: it sees each op of the
    chain on its own (a LayerNorm's mean, its normalisation) and takes the
    statistic without the normalisation; `braze-fuse-pointwise` then groups
    what is left as usual.

    ```mlir
    %t = braze.permute %w [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
    %y = braze.addmm %b, %x, %t : tensor<32xf32>, tensor<?x64xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
    %r = braze.relu %y : tensor<?x32xf32>
    ```
    becomes
    ```mlir
    %r = braze.fused_gemm %x, %w extras(%b : tensor<32xf32>) indexing ["n"] transpose_rhs accumulator f32
        : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32> {
    ^bb0(%acc: f32, %bias: f32):
      %s = arith.addf %acc, %bias : f32
      %zero = arith.constant 0.0 : f32
      %m = arith.maximumf %s, %zero : f32
      braze.gemm_yield %m : f32
    }
    ```

    With `remarks=true` each GEMM gets a remark saying what its epilogue
    took (or why nothing), and each refused consumer one saying why; braze
    routes them to the `fusion` log topic.
  }];
  let dependentDialects = ["::braze::BrazeDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
  let options = [
    Option<"bias", "bias", "bool", "true",
           "Fuse addmm's bias (off: addmm stays a library call)">,
    Option<"pointwise", "pointwise", "bool", "true",
           "Fuse pointwise ops and casts after the product">,
    Option<"reductions", "reductions", "bool", "true",
           "Fuse row statistics (sum, mean, max over N) of epilogue values">,
    Option<"extraOutputs", "extra-outputs", "bool", "true",
           "Write epilogue values other ops read as extra outputs (off: such "
           "a GEMM is not fused)">,
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each GEMM and each refused consumer">,
    Option<"decodeRows", "decode-rows", "int64_t", "0",
           "A GEMM with nothing after it to fuse becomes a fused GEMM all the "
           "same when its M is static and at most this (a decode shape, whose "
           "weight the target's fused GEMM reads once for all rows; 0: never)">,
    Option<"halfProducts", "half-products", "bool", "true",
           "Fuse GEMMs of f16/bf16 operands (off: such a GEMM is fused only "
           "at a decode shape, or for its int8 weight or scaled_mm's scales; "
           "for a target whose library half GEMM outruns its fused GEMM)">,
  ];
  let statistics = [
    Statistic<"numFused", "fused-gemms", "GEMMs fused with their epilogue">,
    Statistic<"numEpilogueOps", "epilogue-ops", "Ops moved into epilogues">,
    Statistic<"numStatistics", "statistics", "Row statistics fused">,
    Statistic<"numExtraOutputs", "extra-outputs", "Epilogue values written as extra outputs">,
  ];
}

//===----------------------------------------------------------------------===//
// Lowering to the kernel form
//===----------------------------------------------------------------------===//

def BrazeLowerKernels : Pass<"braze-lower-kernels", "::mlir::func::FuncOp"> {
  let summary = "Lower fusion groups and lone pointwise ops to braze.kernel";
  let description = [{
    Every `braze.group`, and every pointwise op or reduction outside a group,
    becomes one `braze.kernel`: the iteration domain is the group's (its ops'
    broadcast domains; the reduced dims of its reductions are the kernel's
    reduction dims), dynamic extents are read with `tensor.dim` from an input
    that has them, inputs are read with `tensor.extract` at broadcast indices,
    each tensor op becomes its scalar `arith`/`math` computation, reductions
    become `braze.reduce` (a mean divides the sum by the reduced element
    count) and each group result becomes a `braze.store`.

    ```mlir
    %e = braze.group ins(%x) : (tensor<?x64xf32>) -> tensor<?x64xf32> {
    ^bb0(%a: tensor<?x64xf32>):
      %m = braze.max %a dims [1] keepdim : tensor<?x64xf32> -> tensor<?x1xf32>
      %d = braze.sub %a, %m : tensor<?x64xf32>, tensor<?x1xf32> -> tensor<?x64xf32>
      braze.yield %d : tensor<?x64xf32>
    }
    ```
    becomes
    ```mlir
    %c0 = arith.constant 0 : index
    %n = tensor.dim %x, %c0 : tensor<?x64xf32>
    %e = braze.kernel ins(%x : tensor<?x64xf32>) domain [%n, 64] reduce [1]
        : tensor<?x64xf32> {
    ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<?x64xf32>):
      %v = tensor.extract %a[%i, %j] : tensor<?x64xf32>
      %m = braze.reduce "max" %v : f32 -> f32
      %d = arith.subf %v, %m : f32
      braze.store %d, 0 [%i, %j] : f32
    }
    ```

    Half-precision arithmetic is explicit, so every target rounds alike: an
    f16/bf16 load is widened with `arith.extf` to f32, the ops compute in f32
    (a reduction of bf16 accumulates in f32), a conversion to a half type
    rounds with `arith.truncf` and continues in f32 after an `arith.extf`,
    and a half result is narrowed with `arith.truncf` where it is stored.

    Layout ops, matrix products, constants and parameters stay as they are:
    they are views or library calls for the runtime. A group that is not one
    domain (ranks differ, or reductions over different dims) is an error.
  }];
  let dependentDialects = ["::braze::BrazeDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "Kernels created">,
  ];
}

// The passes that decide how kernels see memory layouts (after lowering, in
// pipeline order): braze-fold-layouts, braze-channels-last,
// braze-split-dims, braze-collapse-dims.
include "LayoutPasses.td"

def BrazeInlineKernels : Pass<"braze-inline-kernels", "::mlir::func::FuncOp"> {
  let summary = "Compute a pointwise kernel's value inside the one kernel that reads it";
  let description = [{
    braze-fuse-pointwise fuses a producer into its consumer only where the
    consumer reads it directly; a layout op between them (a concat, a
    slice, a permute) keeps them apart. Once braze-fold-layouts has folded
    that op into the consumer's index map, the producer is a kernel whose
    result the consumer reads at some indices: rotary embeddings' `-x[...,
    d/2:]`, one kernel, read by the rotary kernel through rotate_half's
    concat; a convolution's ReLU, read by the max pool after it at the nine
    strided slices of its window. This pass evaluates the producer's body
    at the consumer's reads instead, so the value never goes through memory
    and the launch is gone:

    - the producer has one result, stored once at the point's own indices,
      no reduction dims, and reads no dynamic extent in its body;
    - its result has one use, a kernel input that only `tensor.extract` ops
      read;
    - the reads times the consumer's points are at most `max-evaluations`
      times the producer's points (static extents multiplied, dynamic ones
      compared as values), so on average no point of the producer is
      computed more than that many times over: a select between
      rotate_half's halves computes the negated half at every point, twice
      its points; a 3x3 max pool at stride 2 computes the ReLU 2.25 times;
    - the roofline of braze's cost model (CostModel.h, its default machine:
      100 GB/s, 1 Tflop/s) says the evaluations beyond one per point take
      less time than the result takes to be written and read once: a cheap
      body is recomputed, a long chain of math read many times is not.

    The producer's inputs become the consumer's (each tensor once), its
    body is cloned in front of each read with its indices the read's, and
    the producer is erased.

    ```mlir
    %n = braze.kernel ins(%x : tensor<4x8xf32>) domain [4, 8] reduce [] : tensor<4x8xf32> {
    ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<4x8xf32>):
      %v = tensor.extract %a[%i, %j] : tensor<4x8xf32>
      %m = arith.negf %v : f32
      braze.store %m, 0 [%i, %j] : f32
    }
    %y = braze.kernel ins(%n : tensor<4x8xf32>) domain [4, 16] reduce [] : tensor<4x16xf32> {
    ^bb0(%i: index, %j: index, %ni: index, %nj: index, %b: tensor<4x8xf32>):
      %c8 = arith.constant 8 : index
      %r = arith.remsi %j, %c8 : index
      %v = tensor.extract %b[%i, %r] : tensor<4x8xf32>
      braze.store %v, 0 [%i, %j] : f32
    }
    ```
    becomes one kernel that reads `%x[%i, %r]` and negates it.
  }];
  let dependentDialects = ["::braze::BrazeDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"maxEvaluations", "max-evaluations", "int64_t", "9",
           "Inline only where the reads times the consumer's points are at most this many times the producer's points (9: a 3x3 window at stride 1)">,
  ];
  let statistics = [
    Statistic<"numInlined", "inlined-kernels", "Kernels computed inside their reader">,
  ];
}

// The passes that only GPU targets run: braze-split-reductions,
// braze-gpu-schedule.
include "GpuPasses.td"

// The passes that see collectives: braze-verify-collective-order,
// braze-bucket-collectives, braze-overlap.
include "CollectivePasses.td"

//===----------------------------------------------------------------------===//
// Combo kernels
//===----------------------------------------------------------------------===//

def BrazeComboKernels : Pass<"braze-combo-kernels", "mlir::func::FuncOp"> {
  let summary = "Group independent small kernels into combo kernels";
  let description = [{
    Groups `braze.kernel`s with no data path between them, in either
    direction and through any chain of ops or other combos, into
    `braze.combo` ops: one launch (one OpenMP parallel region on the CPU,
    one grid on a GPU) instead of one per kernel. Kernels are taken in
    program order; each joins the first open group that accepts it. A
    kernel stays standalone when
    - it reduces over more than `max-reduction-extent` points, or has more
      than `max-points` points (it fills the machine alone);
    - its body is heavy: more than `max-live-values` scalar values live at
      once (a register-pressure estimate) or more than `max-body-ops` ops.
    It does not join a group when a data path links it with a member (also
    through other groups: grouping must leave the program acyclic), when
    the group has `max-sub-kernels` sub-kernels or would pass
    `max-arguments` buffer arguments (inputs and results, each distinct
    value once; a target with fewer argument slots sets less: 250 on the
    CPU and Triton, and on CUDA and HIP, whose launches take 4 KB of
    parameters; 100 on OpenCL, whose full profile guarantees 1 KB; 29 on
    Metal, whose 31 buffer slots also hold `sizes` and `failed`), when the
    bytes the group's inputs and results hold together (all live during
    the launch) would pass `max-live-bytes`, when it would mix pointwise
    kernels and reductions without `per-sub-kernel-blocks`, or when one
    side reads only constants and parameters (through pure ops) and the
    other does not: the executor runs the first kind once, when the
    program is built (a batch norm's scale and shift), and in a combo with
    per-call kernels it would run on every call. An op with side effects
    ends every open group (nothing moves across it).

    Each sub-kernel keeps its own blocks: `block` = `pointwise-block` points
    per work item without reductions; with reductions `rblock` is the
    reduction's extent rounded up to a power of two and `block` =
    `reduction-points / rblock` rows (at least 1). `cost` estimates a work
    item (points times body ops). `dispatch` is `round_robin` when every
    sub-kernel has the same static number of work items, else `sequential`
    (the option `dispatch` forces one). A dynamic extent counts as
    `dynamic-extent` in the size estimates.

    The combo is placed at its last member; ops between its members that
    depend on an earlier member move after it.

    ```mlir
    %a = braze.kernel ins(%x : tensor<64xf32>) domain [64] reduce [] : tensor<64xf32> {...}
    %b = braze.kernel ins(%y : tensor<32xf32>) domain [32] reduce [] : tensor<32xf32> {...}
    ```
    becomes
    ```mlir
    %a, %b = braze.combo dispatch "sequential" schedules [{block = 1024 : i64, cost = 128 : i64},
        {block = 1024 : i64, cost = 64 : i64} ] : tensor<64xf32>, tensor<32xf32> {
      %0 = braze.kernel ins(%x : tensor<64xf32>) domain [64] reduce [] : tensor<64xf32> {...}
      braze.combo_yield %0 : tensor<64xf32>
    }, {
      %1 = braze.kernel ins(%y : tensor<32xf32>) domain [32] reduce [] : tensor<32xf32> {...}
      braze.combo_yield %1 : tensor<32xf32>
    }
    ```

    With `remarks=true` every decision is a remark on the kernel: grouped
    (with whom), refused by a group (and why), or standalone (and why).
    braze routes them to the `fusion` log topic (docs/observability.md).
  }];
  let dependentDialects = ["::braze::BrazeDialect"];
  let options = [
    Option<"maxSubKernels", "max-sub-kernels", "int64_t", "8",
           "Most sub-kernels per combo">,
    Option<"maxArguments", "max-arguments", "int64_t", "250",
           "Most buffer arguments (distinct inputs and results) per combo">,
    Option<"maxReductionExtent", "max-reduction-extent", "int64_t", "2048",
           "Kernels reducing over more points stay standalone">,
    Option<"maxPoints", "max-points", "int64_t", "1048576",
           "Kernels with more points in their domain stay standalone">,
    Option<"maxLiveBytes", "max-live-bytes", "int64_t", "67108864",
           "Most bytes a combo's inputs and results may hold together">,
    Option<"maxLiveValues", "max-live-values", "int64_t", "48",
           "Kernels with more scalar values live at once stay standalone">,
    Option<"maxBodyOps", "max-body-ops", "int64_t", "160",
           "Kernels with more ops in their body stay standalone">,
    Option<"perSubKernelBlocks", "per-sub-kernel-blocks", "bool", "true",
           "Each sub-kernel keeps its own blocks (else pointwise kernels and "
           "reductions are not mixed)">,
    Option<"pointwiseBlock", "pointwise-block", "int64_t", "1024",
           "Points per work item of a pointwise sub-kernel (a power of two)">,
    Option<"reductionPoints", "reduction-points", "int64_t", "4096",
           "Points (rows times rblock) per work item of a reduction">,
    Option<"dynamicExtent", "dynamic-extent", "int64_t", "1024",
           "What a dynamic extent counts as in size estimates">,
    Option<"dispatch", "dispatch", "std::string", "\"auto\"",
           "auto, sequential, round_robin or flattened">,
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each decision: grouped, or refused and why">,
  ];
  let statistics = [
    Statistic<"numCombos", "combos", "Combo kernels formed">,
    Statistic<"numSubKernels", "sub-kernels", "Kernels moved into combos">,
  ];
}

//===----------------------------------------------------------------------===//
// Memory planning
//===----------------------------------------------------------------------===//

def BrazePlanMemory : Pass<"braze-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Place each function's intermediate kernel buffers in one arena (liveness, reuse, in-place)";
  let description = [{
    Runs on the scheduled kernel form (after `braze-lower-kernels` and the
    layout passes); the op order is the order the executor runs them. Per
    function:

    1. Liveness: every result of a `braze.kernel`, a `braze.fused_gemm` or
       a `braze.combo` (generated code writes them, so the runtime can carve
       them from the arena) is a buffer that lives from its op to the last
       op reading it, directly or through a
       value that may alias it. Results of views, extern calls, collectives
       (their work handles included, so a buffer stays live until its
       `wait`) and any op not known to return fresh memory may alias every
       buffer among their operands; scalars (`index`, integers, floats)
       never do. Uses inside nested regions count at their parent op.
    2. Buffers that reach `func.return` are not planned: a result handed to
       the caller gets its own allocation. Buffers whose size is not static
       fall back to the allocator.
    3. In place: a kernel writes a result into the buffer of an input of
       the same type when that input's buffer dies at this kernel and the
       kernel reads it and stores the result at exactly the point's indices
       (so each element is read before it is written); with reduction dims,
       only a result whose stored value needs a reduced value (written in
       the last loop over a row, after every read of the row: a softmax
       over a dying score matrix, a LayerNorm over a dying GEMM result).
       Fused GEMMs and combos never write in place (a GEMM reads whole rows
       and columns; a combo's sub-kernels run at once). A returned result
       (which the arena cannot hold) that may be written over a dying
       generated buffer takes that buffer over instead: the buffer leaves
       the arena, the runtime allocates it and the result gets
       `braze.reuse`;
       the input may be a view reading the buffer in its own order
       (reshapes, permutes composing to the identity, a channels-last
       convolution's result through its permute to NHWC). Over a library
       call's result the kernel gets `braze.reuse` (its input number).
    4. Offsets: buffers (in-place chains as one) are placed greedily, largest
       first, at the lowest `alignment`-aligned offset that overlaps no
       placed buffer whose lifetime overlaps its own.
    5. The arena is held for the whole call, so beside large library results
       (which torch allocates and frees as they die) it can raise the peak:
       the same function is also planned with every buffer on the
       allocator (each kernel free to take over a dying input), and that
       plan is kept when its peak is lower (`allocator-fallback`).

    Results: `braze.offsets` on each kernel, fused GEMM and combo (the arena byte offset of each
    result, -1 for one left to the allocator), and on each function
    `braze.arena_bytes` and `braze.planned_peak_bytes` (the arena plus the
    most bytes of static non-arena buffers (returned kernel results, GEMM,
    convolution and attention results) live at once); the module carries
    the largest `braze.planned_peak_bytes` of its functions.

    ```mlir
    %a = braze.kernel ins(%x : tensor<1024xf32>) ... : tensor<1024xf32> {...}
    %b = braze.kernel ins(%a : tensor<1024xf32>) ... : tensor<1024xf32> {...}
    %c = braze.kernel ins(%b, %x : ...) ... : tensor<1024xf32> {...}
    return %c
    ```
    becomes (`%b` overwrites `%a` in place; `%c` is returned)
    ```mlir
    %a = braze.kernel ... attributes {braze.offsets = array<i64: 0>} ...
    %b = braze.kernel ... attributes {braze.offsets = array<i64: 0>} ...
    %c = braze.kernel ... attributes {braze.offsets = array<i64: -1>} ...
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", "64",
           "Byte alignment of every buffer's offset (a power of two)">,
    Option<"inPlace", "in-place", "bool", "true",
           "Let kernels overwrite a dying input">,
    Option<"remarks", "remarks", "bool", "false",
           "Explain the plan as remarks (sizes, peak, buffers left to the allocator)">,
    Option<"allocatorFallback", "allocator-fallback", "bool", "true",
           "Leave every buffer to the allocator when that plans a lower peak than an arena">,
  ];
  let statistics = [
    Statistic<"numPlanned", "planned", "Buffers placed in an arena">,
    Statistic<"numInPlace", "in-place", "Buffers written over a dying input">,
    Statistic<"numAllocator", "allocator", "Kernel buffers left to the allocator">,
  ];
}

#endif // BRAZE_PASSES
