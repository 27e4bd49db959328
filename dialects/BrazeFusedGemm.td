//===- BrazeFusedGemm.td - a GEMM with its epilogue -------*- tablegen -*-===//
//
// `braze.fused_gemm`: one matrix product whose epilogue (bias, activation,
// residual, casts) runs on each accumulator element while it is in
// registers, instead of a round trip through memory per pointwise op.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_FUSED_GEMM
#define BRAZE_FUSED_GEMM

def Braze_FusedGemmOp : Braze_Op<"fused_gemm", [Pure, IsolatedFromAbove,
    AttrSizedOperandSegments, SingleBlock]> {
  let summary = "matrix product whose epilogue runs on each accumulator element";
  let description = [{
    `lhs` is `[B..., M, K]` (`[B..., K, M]` with `transpose_lhs`), `rhs` is
    `[B..., K, N]` (`[B..., N, K]` with `transpose_rhs`); the batch dims
    (none or several) are the same in both. M, N and K are static or
    dynamic (`?`), as the operand types say. The product accumulates in
    `accumulator` (f32 for f16/bf16/f32 inputs, or f64; i32 or i64 for
    integer inputs).

    `lhs` and `rhs` have one element type, with two exceptions: both may be
    8-bit floats (`f8E4M3FN`, `f8E5M2`, from `braze.scaled_mm`), and `rhs`
    may be an `i8` weight times float activations (a weight-only quantised
    linear layer). Either way each element is widened exactly to the type
    the product is computed in (see docs/cpu.md) and accumulated in f32.

    `lhs_scale` and `rhs_scale` (optional; f32, bf16 or f16) multiply the
    accumulator before the epilogue: a scalar (rank 0: a per-tensor scale,
    also a global scale given at run time) or one per row of the product
    (`[M]` for `lhs_scale`, `[N]` for `rhs_scale`: row-wise scales, or the
    per-output-channel scale of an int8 weight).

    The epilogue region runs once per element `(b..., m, n)` of the result.
    Its block takes the scaled accumulator element, then one element of each
    of `extras`, read as `indexing` says, entry by entry: `"mn"` (a tensor
    shaped like the product, or `[M, N]` shared by the batch), `"n"` (`[N]`,
    e.g. a bias), `"m"` (`[M]`) or `"scalar"` (rank 0). It yields one value
    per result with `braze.gemm_yield`.

    Results: first the outputs, `[B..., M, N]` each, whose element is the
    yielded value (of the output's element type); then one row statistic
    per entry of `reductions` (`"add"` or `"max"`, max propagating NaN),
    `[B..., M]` each: the reduction along N of the yielded value (of the
    statistic's element type, or f32 for an f16/bf16 statistic, which is
    accumulated in f32 and rounded once). A sum of squares is the `"add"`
    of a squared value. `braze-epilogue-fusion` forms them for the
    statistics a following softmax, LayerNorm or RMSNorm needs.

    ```mlir
    %y = braze.fused_gemm %x, %w extras(%bias : tensor<32xf32>) indexing ["n"]
        transpose_rhs accumulator f32
        : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32> {
    ^bb0(%acc: f32, %b: f32):
      %s = arith.addf %acc, %b : f32
      %zero = arith.constant 0.0 : f32
      %r = arith.maximumf %s, %zero : f32
      braze.gemm_yield %r : f32
    }
    ```

    A residual add with the row sum of squares an RMSNorm reads:

    ```mlir
    %y, %ss = braze.fused_gemm %x, %w extras(%res : tensor<?x32xf32>) indexing ["mn"]
        transpose_rhs accumulator f32 reductions ["add"]
        : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>, tensor<?xf32> {
    ^bb0(%acc: f32, %r: f32):
      %s = arith.addf %acc, %r : f32
      %q = arith.mulf %s, %s : f32
      braze.gemm_yield %s, %q : f32, f32
    }
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs,
                       Optional<AnyRankedTensor>:$lhs_scale,
                       Optional<AnyRankedTensor>:$rhs_scale,
                       Variadic<AnyRankedTensor>:$extras,
                       StrArrayAttr:$indexing,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       TypeAttr:$accumulator,
                       DefaultValuedAttr<StrArrayAttr, "{}">:$reductions);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$epilogue);
  let assemblyFormat = [{
    $lhs `,` $rhs
    (`lhs_scale` `(` $lhs_scale^ `:` type($lhs_scale) `)`)?
    (`rhs_scale` `(` $rhs_scale^ `:` type($rhs_scale) `)`)?
    `extras` `(` ($extras^ `:` type($extras))? `)` `indexing` $indexing
    (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    `accumulator` $accumulator (`reductions` $reductions^)? attr-dict
    `:` `(` type($lhs) `,` type($rhs) `)` `->` type($results) $epilogue
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of results shaped like the product ([B..., M, N]).
    unsigned getNumOutputs() { return getNumResults() - getReductions().size(); }
  }];
}

def Braze_GemmYieldOp : Braze_Op<"gemm_yield",
    [Pure, Terminator, HasParent<"FusedGemmOp">]> {
  let summary = "the values of a fused GEMM's epilogue at one element, one per result";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // BRAZE_FUSED_GEMM
