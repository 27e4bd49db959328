//===- BrazeScaledMm.td - a product of scaled 8-bit floats -*- tablegen -*-===//
//
// `braze.scaled_mm`: PyTorch's `_scaled_mm`, a product of fp8 matrices
// each with its dequantisation scale (one per tensor, or one per row of
// the product), an optional bias and a result type of its own.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_SCALED_MM
#define BRAZE_SCALED_MM

def Braze_ScaledMmOp : Braze_Op<"scaled_mm", [Pure, AttrSizedOperandSegments]> {
  let summary = "product of fp8 matrices scaled back to real values: "
                "(lhs * lhs_scale) x (rhs * rhs_scale) + bias";
  let description = [{
    `torch._scaled_mm(lhs, rhs, lhs_scale, rhs_scale, bias, scale_result,
    out_dtype, use_fast_accum)`: `lhs` is `[M, K]` and `rhs` `[K, N]`, each
    `f8E4M3FN` or `f8E5M2` (the two may differ). Their product is computed
    exactly as if each operand were first multiplied by its scale (the
    scales are f32 and commute with the K sum, so they multiply the f32
    accumulator); then `bias` (`[N]`, of the result's element type or f32)
    is added, and the value is rounded to the result's element type (f32,
    bf16, f16 or one of the fp8 types).

    The scales are either both per tensor (one element each: rank 0, `[1]`
    or `[1, 1]`; a global scale given at run time is such a tensor) or both
    row-wise (`lhs_scale` `[M, 1]`, `rhs_scale` `[1, N]`), as PyTorch
    requires. `scale_result` (one element) divides the result before it is
    rounded to an fp8 type; PyTorch ignores it for other result types, and
    so does this op. `fast_accum` is PyTorch's `use_fast_accum` (a hint to
    GPU libraries; the CPU accumulates in f32 either way).

    `braze-epilogue-fusion` makes a `braze.fused_gemm` of it (the scales as
    `lhs_scale`/`rhs_scale`, the bias in the epilogue); otherwise it runs
    through `torch._scaled_mm`.

    ```mlir
    %y = braze.scaled_mm %a, %b scales(%sa, %sb : tensor<?x1xf32>, tensor<1x32xf32>)
        bias(%bias : tensor<32xbf16>)
        : (tensor<?x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<?x32xbf16>
    ```
  }];
  let arguments = (ins Braze_Float8Tensor:$lhs, Braze_Float8Tensor:$rhs,
                       RankedTensorOf<[F32]>:$lhs_scale,
                       RankedTensorOf<[F32]>:$rhs_scale,
                       Optional<Braze_FloatTensor>:$bias,
                       Optional<RankedTensorOf<[F32]>>:$scale_result,
                       UnitAttr:$fast_accum);
  let results = (outs RankedTensorOf<[Braze_FloatElement, Braze_Float8Element]>:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `scales` `(` $lhs_scale `,` $rhs_scale `:` type($lhs_scale)
    `,` type($rhs_scale) `)` (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`scale_result` `(` $scale_result^ `:` type($scale_result) `)`)?
    (`fast_accum` $fast_accum^)? attr-dict
    `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the scales are one per row of the product ([M, 1] and
    /// [1, N]) rather than one per tensor.
    bool isRowWise();
  }];
}

#endif // BRAZE_SCALED_MM
