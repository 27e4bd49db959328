//===- AttentionPasses.td - braze attention passes ---------*- tablegen -*-===//
//
// The passes that make attention one op and decide how it runs: forming
// braze.attention from products and a softmax spelled out, the order its
// result is written in, and its lowering to a generated flash-attention
// kernel with a schedule. Included by Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_ATTENTION_PASSES
#define BRAZE_ATTENTION_PASSES

def BrazeFormAttention : Pass<"braze-form-attention", "::mlir::func::FuncOp"> {
  let summary = "Form braze.attention from softmax(q @ k^T * scale + mask) @ v spelled out";
  let description = [{
    Attention written as two products and a softmax (as reference code,
    BERT's and GPT-2's eager attention and SDPA's math decomposition spell
    it) becomes one `braze.attention`, which never writes the L x S scores
    and weights out. The pattern, from the second product back:

    - `braze.bmm` or `braze.matmul` of the weights and `v`; the weights
      reshaped from the frame `[B..., L, S]` by merging batch dims (as a
      product of rank-4 tensors is captured), and cast back from f32 if the
      softmax ran in f32;
    - the softmax over the last dim as the frontend lowers it: `max`,
      `sub`, `exp`, `sum`, `div` (a cast to f32 before it allowed);
    - optional masks: `add` of a tensor (an additive mask, of q's element
      type; several are summed into one, as Swin's position bias and its
      shifted-window mask), or one `where` choosing minus infinity (a
      boolean mask, kept where the score is; a `not` of the condition is
      undone), or a `where` choosing a finite fill at or below -1e30 (HF's
      eager `masked_fill(mask, finfo.min)` in f32 or bf16), read as the
      additive mask `where(c, 0, fill)`: a score added to such a fill
      rounds to it, so the result is eager's, a row that keeps no key
      included (uniform weights); unlike the `where`, the sum does not hide
      a NaN or infinite score at a masked position;
    - an optional scale: `mul` or `div` by a scalar constant; where that
      constant multiplies a `tanh`, a soft cap (Gemma 2's and Grok's
      `cap * tanh(s / cap)`): the attention gets `softcap` cap, and the
      constant factors under the `tanh` (the model's scale and 1/cap, one
      or two `mul`/`div`) times cap are its scale;
    - the product `q @ k^T`; `k^T` is read through its `permute` of the
      last two dims, or permuted back.

    Reshapes that merge or split batch dims may come anywhere between the
    softmax and the product (a mask may be added to the scores viewed with
    finer batch dims: Swin adds its window mask to `[B*nW, H, L, L]`
    viewed as `[B, nW, H, L, L]`). The attention then runs over the finest
    batch dims a mask was added in, q, k and v reshaped to them, and each
    mask is read there: a batch dim it was added over becomes the dims it
    splits into (all of size 1 where the mask broadcasts over it), so the
    masks stay as small as they were. Summing masks first rounds
    `s + (m1 + m2)` instead of eager's `(s + m1) + m2`.

    The attention gets `masked_rows_nan`: a row whose keys are all masked is
    NaN, as the spelled-out softmax's is, and the scale found (1 when there
    is none). A product of a softmax that does not fit is left as it is,
    with a remark saying why, when:

    - the scores or the weights are read outside the pattern (returned
      attention weights);
    - the mask fills with a finite value above -1e30 (f16's -65504: a
      score added to it would move it) or selects between two tensors;
    - the scale is a tensor, not a constant; the scores pass through a
      `tanh` with no constant multiplying it, or one not above 0;
    - q, k or v has other batch dims than the scores, or the element types
      differ (an additive mask of another type than q);
    - the mask broadcasts the scores to a larger shape, or a mask was added
      in batch dims the finest ones do not split (`[8, 3]` viewed as
      `[2, 12]`), or a boolean mask comes with another mask.

    Then every `braze.attention` (formed here or captured from SDPA) whose
    key and value repeat their heads as grouped-query attention written
    out does (HF's `repeat_kv`: a size-1 dim inserted after the heads,
    expanded to the group, merged into the heads; the same static group for
    both) reads the unrepeated heads instead, with `gqa`: query head h
    reads key/value head h / group, as the repetition gives, and the
    repeated copy is never made.
  }];
  let dependentDialects = ["braze::BrazeDialect"];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each product of a softmax: formed, or left and why">,
  ];
  let statistics = [
    Statistic<"numFormed", "attentions", "Attentions formed">,
    Statistic<"numGrouped", "grouped", "Attentions reading grouped key/value heads in place">,
  ];
}

def BrazeOrderAttention : Pass<"braze-order-attention", "::mlir::func::FuncOp"> {
  let summary = "Give braze.attention the order its reader permutes the result to";
  let description = [{
    Where the only reader of a `braze.attention`'s result is a
    `braze.permute` that keeps Ev last (an output projection's
    `transpose(1, 2)` to `[B..., L, H, Ev]`, torch's multi-head attention's
    `[L, B, H, Ev]`), or a swap of heads and rows after reshapes that
    together change only the static dims before the heads (Swin's windows,
    whose attention runs over [B, W, H, N, E] and is read as
    [B * W, N, H * E]), the attention takes that order as its
    `result_order` and the permute goes. A flash attention's kernel then
    stores each row where it is read, and PyTorch's fused CPU attention
    writes `[B, L, H, Ev]` memory already: the transpose costs no copy.
    Any other reader (a second reader, a permute that moves Ev, reshapes
    that touch the heads) keeps the attention's own order.
  }];
  let dependentDialects = ["braze::BrazeDialect"];
  let options = [
    Option<"remarks", "remarks", "bool", "false", "Emit a remark for each attention">,
  ];
  let statistics = [
    Statistic<"numOrdered", "ordered", "Attentions given their reader's order">,
  ];
}

def BrazeLowerAttention : Pass<"braze-lower-attention", "::mlir::func::FuncOp"> {
  let summary = "Lower braze.attention to braze.flash_attention, a generated kernel";
  let description = [{
    On targets whose renderers spell `braze.flash_attention` (the CPU,
    Triton, the C-like GPU targets), each `braze.attention` becomes one,
    with its schedule: `q_block` query rows per work item (on the C-like
    GPU targets, one thread each) and `kv_block` keys per block of the
    online softmax, each at most the static extent it walks (a decode
    step's one query row takes a block of one row). The default scale
    (`1/sqrt(E)`) is written out; an attention whose E is dynamic and that
    has no scale stays a library call, with a remark.

    The defaults come from measurement (docs/cpu.md): 128 query rows keep a
    BERT-length sequence (128) in one item per head, whose scores are one
    GEMM; 512 keys per block keep the `q_block x kv_block` f32 scores
    (256 KiB) in L2. f16/bf16 attentions stay library calls unless
    `halves=true`: PyTorch's kernel (AMX GEMMs and a faster, less exact
    exp) ran them 1.3-1.7x faster than the generated one at 1 thread. A
    soft-capped one is lowered in any type: the library has no fused
    soft-capped attention, and its realisation writes the f32 scores out
    (Gemma 2 in bf16 on an AMX Xeon: see benchmarks/RESULTS.md).

    `group-heads=true` (the CPU target's) marks a decode step's
    grouped-query attention (one query row, no causal mask, a mask the same
    for every head) `grouped_heads`: one work item takes the query heads of
    a key/value head, so the keys and values are read once, not once per
    query head.

    A `result_order` (`braze-order-attention`'s) carries over: the kernel
    stores its rows in that order.
  }];
  let dependentDialects = ["braze::BrazeDialect"];
  let options = [
    Option<"qBlock", "q-block", "int64_t", "128", "Query rows per work item">,
    Option<"kvBlock", "kv-block", "int64_t", "512", "Keys per block of the online softmax">,
    Option<"halves", "halves", "bool", "false",
           "Lower f16/bf16 attentions too (off: they stay the library's, measured faster)">,
    Option<"groupHeads", "group-heads", "bool", "false",
           "Give a work item the query heads that share a key/value head (grouped_heads), where they can be grouped">,
    Option<"remarks", "remarks", "bool", "false", "Emit a remark for each attention">,
  ];
  let statistics = [
    Statistic<"numLowered", "lowered", "Attentions lowered to flash_attention">,
  ];
}

#endif // BRAZE_ATTENTION_PASSES
