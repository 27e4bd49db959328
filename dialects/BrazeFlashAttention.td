//===- BrazeFlashAttention.td - attention as one kernel ----*- tablegen -*-===//
//
// `braze.flash_attention`: one attention realised as a generated kernel
// that walks the keys in blocks with an online softmax, so the L x S
// scores never reach memory.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_FLASH_ATTENTION
#define BRAZE_FLASH_ATTENTION

def Braze_FlashAttentionOp : Braze_Op<"flash_attention", [Pure]> {
  let summary = "attention as one generated kernel: blocks of keys, an online softmax";
  let description = [{
    Computes what `braze.attention` with the same operands and attributes
    computes (`softmax(query @ key^T * scale + mask) @ value`; `mask`,
    `softcap`, `causal`, `gqa` and `masked_rows_nan` as there), with `scale` given
    explicitly. `braze-lower-attention` makes it from `braze.attention` on
    targets whose renderers spell it, and decides its schedule:

    - `q_block`: the query rows one work item takes (the items are batch x
      heads x query blocks, spread over the threads);
    - `kv_block`: the keys scored at a time. Per block, the scores are one
      GEMM into a buffer of `q_block x kv_block`, scaled and masked there;
      each row's running max and sum are updated (the earlier sum and
      accumulator rescaled by `exp(old max - new max)`), and the
      probabilities times the value block are added to an accumulator;
    - `grouped_heads` (with `gqa`, one query row, no `causal`, and a mask
      that is the same for every head): a work item takes the query heads
      that share a key/value head, as its rows, so that it reads each key
      and value once for all of them (a decode step's grouped-query
      attention). A schedule for the CPU's emitter; the values are the
      same up to rounding, and other emitters may ignore it.

    - `result_order`, as `braze.attention`'s (`braze-order-attention`
      sets it there): rows stored where the result's reader wants them.

    Everything accumulates in f32 (f64 for f64 inputs): f16/bf16 blocks are
    widened once, and the output rounded once. A row with no key kept has
    sum 0: zero, or NaN with `masked_rows_nan`.

    ```mlir
    %o = braze.flash_attention %q, %k, %v mask %m scale 1.250000e-01
        q_block 128 kv_block 512
        : tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>,
          tensor<2x1x1x?xf32> -> tensor<2x12x?x64xf32>
    ```
  }];
  let arguments = (ins Braze_FloatTensor:$query, Braze_FloatTensor:$key,
                       Braze_FloatTensor:$value, Optional<Braze_Tensor>:$mask,
                       F64Attr:$scale, OptionalAttr<F64Attr>:$softcap,
                       UnitAttr:$causal, UnitAttr:$gqa,
                       UnitAttr:$masked_rows_nan, I64Attr:$q_block,
                       I64Attr:$kv_block, UnitAttr:$grouped_heads,
                       OptionalAttr<DenseI64ArrayAttr>:$result_order);
  let results = (outs Braze_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? `scale` $scale
    (`softcap` $softcap^)? (`causal` $causal^)? (`gqa` $gqa^)? (`masked_rows_nan` $masked_rows_nan^)?
    `q_block` $q_block `kv_block` $kv_block (`grouped_heads` $grouped_heads^)?
    (`result_order` $result_order^)? attr-dict `:` type($query) `,`
    type($key) `,` type($value) (`,` type($mask)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // BRAZE_FLASH_ATTENTION
