//===- BrazeHostOps.td - ops the runtime runs through a library -*- tablegen -*-===//
//
// Ops that are not lowered to the kernel form: a convolution and an
// attention, which run in the vendor library (oneDNN and PyTorch's fused
// CPU attention through PyTorch on the CPU), and `extern`, any
// aten op braze has no lowering for, which runs through PyTorch so that one
// unsupported op never sends a whole graph back to eager. Fusion passes
// treat both as barriers.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_HOST_OPS
#define BRAZE_HOST_OPS

def Braze_ConvolutionOp : Braze_Op<"convolution", [Pure]> {
  let summary = "1-D, 2-D or 3-D convolution, plain or transposed, with groups";
  let description = [{
    PyTorch's `aten.convolution`: `input` is `N x C x spatial...`, `weight` is
    `O x C/groups x kernel...` (transposed: `C x O/groups x kernel...`),
    `bias` (optional) has one element per output channel. `stride`,
    `padding` and `dilation` have one entry per spatial dim;
    `output_padding` only matters when `transposed` is set. A static output
    dim must equal what the sizes give:
    `(in + 2 padding - dilation (kernel - 1) - 1) / stride + 1`, or for a
    transposed convolution
    `(in - 1) stride - 2 padding + dilation (kernel - 1) + output_padding + 1`.

    The runtime calls the vendor library; the pointwise ops that follow
    (bias, batch norm in inference, activation, residual) fuse into one
    kernel after it. `memory_format = "channels_last"` asks the runtime to
    run the library in that layout (the input and the weight converted
    unless they are in it; the result is in it too, a logical NCHW tensor
    with NHWC strides): faster for most shapes on oneDNN, set on every 2-D
    convolution by `braze-channels-last` (or by measurement,
    `braze-tune-convolutions`). It changes only the library's summation
    order and the result's strides, never its shape.

    ```mlir
    %y = braze.convolution %x, %w bias %b stride [2, 2] padding [3, 3]
        dilation [1, 1] groups 1
        : tensor<?x3x224x224xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>
        -> tensor<?x64x112x112xf32>
    ```
  }];
  let arguments = (ins Braze_FloatTensor:$input, Braze_FloatTensor:$weight,
                       Optional<Braze_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups,
                       UnitAttr:$transposed,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$output_padding,
                       OptionalAttr<StrAttr>:$memory_format);
  let results = (outs Braze_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? `stride` $stride `padding` $padding
    `dilation` $dilation `groups` $groups (`transposed` $transposed^
    `output_padding` $output_padding)? (`memory_format` $memory_format^)?
    attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Braze_ExternOp : Braze_Op<"extern",
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "an aten op that runs through PyTorch";
  let description = [{
    Calls the aten overload `target` (as `torch.ops` spells it, e.g.
    `aten.gather.default`) on the tensors' device. `arguments` are its
    positional arguments and `keywords` its keyword arguments, as attributes:
    an `index`-typed integer `k : index` stands for operand `k`; other
    integers, floats, `true`/`false` and strings are Python values; `unit`
    is `None`; arrays are lists; a type attribute is a dtype (`f32`); a
    dictionary `{device = "cpu"}`, `{layout = "strided"}` or
    `{memory_format = "contiguous_format"}` is that torch object. Results
    are the tensors (and sizes) the overload returns, in order; a `None` it
    returns is skipped.

    The frontend emits it for an op it has no lowering for, or a form of an
    op its lowering refuses, so the rest of the graph is still compiled.
    It may have effects (the overload is opaque to braze), so it is never
    moved, merged or removed, and fusion does not cross it; unless it is
    `pure`: the frontend marks an overload that mutates nothing and
    draws no random numbers (its schema and tags say so), which then has
    no effects, like any other pure op (the executor already ran such a
    call once, when the program is built, where its operands are known;
    braze-combo-kernels now sees that too).

    ```mlir
    %g = braze.extern "aten.gather.default" pure(%x, %i)
        args [0 : index, 1, 1 : index]
        : (tensor<2x8xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, StrAttr:$target,
                       ArrayAttr:$arguments,
                       OptionalAttr<DictionaryAttr>:$keywords,
                       UnitAttr:$pure);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    $target (`pure` $pure^)? `(` $inputs `)` `args` $arguments
    (`kwargs` $keywords^)? attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
}

def Braze_AttentionOp : Braze_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention, with an optional mask";
  let description = [{
    PyTorch's `scaled_dot_product_attention` in inference:
    `softmax(query @ key^T * scale + mask) @ value`. `query` is
    `batch... x L x E`, `key` `batch... x S x E`, `value` `batch... x S x Ev`,
    the result `batch... x L x Ev`; the batch dims of key and value
    broadcast against the query's, and with `gqa` a head dim (the one
    before L) of key and value may divide the query's (grouped-query
    attention: each key/value head serves that many query heads). `mask`
    (optional) broadcasts to `batch... x L x S`: `i1` keeps where true
    (false is minus infinity), a float is added. `causal` masks the upper
    triangle (key position after query position); it excludes `mask`.
    `scale` defaults to `1/sqrt(E)`. `softcap` (optional, positive) caps
    the scaled scores before the mask: `softcap * tanh(scores / softcap)`
    (Gemma 2's and Grok's attention logit soft-capping).

    A row whose keys are all masked is zero, as SDPA's is; with
    `masked_rows_nan` it is NaN, as `softmax` of a row of minus infinity is
    (`braze-form-attention` sets it on the attention it forms from
    `softmax(q @ k^T ...) @ v`, whose eager result that is).

    `result_order` (optional): the result is that value permuted (result
    dim `i` is its dim `result_order[i]`, as `braze.permute` reads a
    permutation), its last dim kept last. That is the order the result's
    reader wants: an output projection reads `[B, L, H, Ev]`
    (`transpose(1, 2)`), torch's multi-head attention `[L, B, H, Ev]`.
    `braze-order-attention` sets it where such a permute is the only
    reader; a flash attention's kernel then stores its rows there, and
    PyTorch's fused CPU attention already writes `[B, L, H, Ev]` memory,
    so no copy is made either way.

    The runtime calls the library (PyTorch's fused attention on the CPU,
    which never writes the L x S scores out); the ops around it fuse as
    usual.

    ```mlir
    %o = braze.attention %q, %k, %v mask %m scale 1.250000e-01
        : tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>, tensor<2x12x?x64xf32>,
          tensor<2x1x?x?xi1> -> tensor<2x12x?x64xf32>
    ```
  }];
  let arguments = (ins Braze_FloatTensor:$query, Braze_FloatTensor:$key,
                       Braze_FloatTensor:$value, Optional<Braze_Tensor>:$mask,
                       OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<F64Attr>:$softcap, UnitAttr:$causal,
                       UnitAttr:$gqa, UnitAttr:$masked_rows_nan,
                       OptionalAttr<DenseI64ArrayAttr>:$result_order);
  let results = (outs Braze_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? (`scale` $scale^)?
    (`softcap` $softcap^)? (`causal` $causal^)? (`gqa` $gqa^)? (`masked_rows_nan` $masked_rows_nan^)?
    (`result_order` $result_order^)? attr-dict `:` type($query) `,`
    type($key) `,` type($value) (`,` type($mask)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // BRAZE_HOST_OPS
