//===- LayoutPasses.td - braze layout passes ---------------*- tablegen -*-===//
//
// The passes that decide how kernels see memory layouts: which views and
// concats a kernel reads through its index map, the order a kernel iterates
// relative to channels-last memory, and which of its dims merge into one
// loop. Included by Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_LAYOUT_PASSES
#define BRAZE_LAYOUT_PASSES

include "mlir/Pass/PassBase.td"

def BrazeFoldLayouts : Pass<"braze-fold-layouts", "::mlir::func::FuncOp"> {
  let summary = "Absorb permute, expand, slice, reshape and concat into their consumers, so no layout is copied on the host";
  let description = [{
    At run time a permute, expand or slice is a view (its source's strides),
    and a reshape is a view where torch's stride rule allows it and a copy
    otherwise: `reshape(permute(x))` that merges a head dim with the batch,
    or GQA's `reshape(expand(k))`. This pass removes those copies:

    - a `braze.bmm` whose operands are reshapes merging batch dims (a copy)
      becomes a batched product over the batch dims both operands split
      into, reading strided views (the runtime runs one library call per
      outer batch index when the batch dims have no single stride), where
      that makes at most `max-product-calls` calls: beyond, each call's
      cost from Python outweighs a copy (128 calls of 2 windows each took
      10x as long as a copy kernel and one call in MaxViT), and the
      merged batch is made by a copy kernel as below;
    - a `braze.kernel` reads the source of a permute, expand or slice input,
      and of a reshape input that is not a view of a contiguous tensor,
      through an index map in its body (the input's indices permuted, set
      to 0 where it broadcasts, scaled and offset where it is sliced,
      re-split where it is reshaped); a slice whose sliced dim is dynamic
      stays a view the kernel reads in place, as the kernel's shape checks
      take an input read at the point's own index to have the domain's
      extent;
    - a `braze.kernel` reads the pieces of a `braze.concat` input whose
      pieces have static sizes along its dim (rotary embeddings'
      rotate_half, a max pool's -inf padding) instead of the concat (a
      host-side torch.cat): each piece becomes an input, read at the index
      clamped into it, and a select picks the piece the index falls in;
      the pieces' own views fold in turn (an expanded constant is read as
      the constant). One piece may have a dynamic size (a KV cache's past
      length) where the kernel reads the concat's dim at a point index (the
      dim's extent is then the concat's length, from which the later
      pieces' starts follow) and the symbol ranges say the piece is never
      empty (every piece is read at every point);
    - a GEMM operand that a BLAS cannot read in place (no strided view has
      its layout, or neither matrix dim has unit stride), and any other
      reshape that would copy, becomes one copy `braze.kernel` that reads
      the view's source through its index map;
    - a concat that something other than a kernel reads whole (a graph
      output, attention's keys and values: a KV cache grown by one step)
      becomes one copy `braze.kernel` reading its pieces as above, where
      every shape is static but for at most one piece's length along the
      concat's dim (the kernel's extent there is that length plus the
      others', computed before it), and it has at most `max-copied-pieces`
      pieces (each costs every element a select); torch's cat would copy
      on one thread.

    Views and concats nothing reads any more are erased. A reshape whose dims do not
    split into groups of equal size (or whose dynamic dims do not map one to
    one) has no index map and is left as it is (a remark says so).

    ```mlir
    %p = braze.permute %q [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
    %m = braze.reshape %p : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
    %k = braze.reshape %kt : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
    %s = braze.bmm %m, %k : tensor<8x8x8xf32>, tensor<8x8x8xf32> -> tensor<8x8x8xf32>
    ```
    becomes
    ```mlir
    %p = braze.permute %q [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
    %b = braze.bmm %p, %kt : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
    %s = braze.reshape %b : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
    ```

    With `remarks=true` each batched product, copy kernel and layout left
    alone gets a remark saying why (the `fusion` log topic shows them).
  }];
  let dependentDialects = ["::braze::BrazeDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each batched product, copy kernel and layout left as is">,
    Option<"maxCopiedPieces", "max-copied-pieces", "int64_t", "4",
           "The most pieces a concat read whole may have to become a copy kernel">,
    Option<"maxProductCalls", "max-product-calls", "int64_t", "4",
           "The most library calls a batched product over strided views may "
           "make (beyond, a copy kernel makes the merged batch)">,
  ];
  let statistics = [
    Statistic<"numFoldedViews", "folded-views",
              "Views and concats read through a kernel's index map">,
    Statistic<"numBatchedProducts", "batched-products",
              "Batched products made to read strided batch dims">,
    Statistic<"numCopyKernels", "copy-kernels",
              "Layouts no view expresses, made by a copy kernel">,
  ];
}

def BrazeChannelsLast : Pass<"braze-channels-last", "::mlir::func::FuncOp"> {
  let summary = "Run 2-D convolutions and the pointwise kernels between them in NHWC order";
  let description = [{
    oneDNN runs most 2-D convolutions faster on channels-last (NHWC) memory
    than on PyTorch's default NCHW, a depthwise 3x3 up to 20x faster; but a
    convolution that converts its input to channels-last and its result back
    pays two copies of each activation. This pass keeps activations in
    channels-last memory from one convolution to the next:

    - every convolution with a 4-D input gets `memory_format =
      "channels_last"`: it runs on channels-last memory and its result is
      channels-last (a logical NCHW tensor with NHWC strides);
    - a kernel of rank 4 that reads such a value (a convolution's result, or
      the result of a kernel this pass handled) iterates in the value's
      memory order, as its reads of the value name the domain's dims: read
      at `[n, c, h, w]` (the domain in NCHW order, as lowered) its domain
      becomes `[N, H, W, C]` (reduction dims renumbered); read at `[n, c, h,
      w]` = `[d0, d3, d1, d2]` (a permute to NHWC that braze-fold-layouts
      absorbed: a LayerNorm over channels) it keeps its order. The value is
      read through its view in memory order (`braze.permute [0, 2, 3, 1]`
      of channels-last memory: contiguous); another 4-D input is read as it
      is when its reads follow the new order, else through the same
      permutation as the domain; a reordered kernel writes each 4-D result
      in its new order and hands it on through the inverse permutation
      (`braze.permute [0, 3, 1, 2]` from NHWC: channels-last again), and a
      kernel handled after it reads the result as written.

    Only the order of the points changes, never a value, nor the order in
    which a reduction adds its points: a kernel is reordered only where its
    reduced dims keep their relative order (NHWC order moves C behind H and
    W: not when it reduces over C together with H or W). A reduction over C
    alone (a LayerNorm over channels) becomes a row reduction, C innermost;
    one over H and W (a global average pool, the mean of a
    squeeze-excitation block) a column reduction, whose innermost dim C is
    parallel (the CPU emitter walks it in SIMD lanes). A kernel that reads
    no such value keeps its order.

    Before the reads decided the order, ConvNeXt's LayerNorm (already in
    NHWC order) was permuted again, to N, W, C, H: its result reached the
    next GEMM through a copy, 18 per call.

    ```mlir
    %y = braze.convolution %x, %w stride [1, 1] padding [1, 1] dilation [1, 1] groups 1
        : tensor<2x8x14x14xf32>, tensor<8x8x3x3xf32> -> tensor<2x8x14x14xf32>
    %r = braze.kernel ins(%y : tensor<2x8x14x14xf32>) domain [2, 8, 14, 14] reduce [] : tensor<2x8x14x14xf32> {...}
    ```
    becomes
    ```mlir
    %y = braze.convolution %x, %w stride [1, 1] padding [1, 1] dilation [1, 1] groups 1
        {memory_format = "channels_last"} : ...
    %v = braze.permute %y [0, 2, 3, 1] : tensor<2x8x14x14xf32> -> tensor<2x14x14x8xf32>
    %k = braze.kernel ins(%v : tensor<2x14x14x8xf32>) domain [2, 14, 14, 8] reduce [] : tensor<2x14x14x8xf32> {...}
    %r = braze.permute %k [0, 3, 1, 2] : tensor<2x14x14x8xf32> -> tensor<2x8x14x14xf32>
    ```
  }];
  let dependentDialects = ["::braze::BrazeDialect"];
  let statistics = [
    Statistic<"numConvolutions", "convolutions", "Convolutions run channels-last">,
    Statistic<"numKernels", "kernels", "Kernels made to iterate in NHWC order">,
  ];
}

def BrazeSplitDims : Pass<"braze-split-dims", "::mlir::func::FuncOp"> {
  let summary = "Split an iteration dim that a kernel takes apart with / and % into two dims";
  let description = [{
    A kernel that reads a reshape of a permuted tensor through an index
    map (braze-fold-layouts), as the copy before attention's output
    projection does (`o.transpose(1, 2).reshape(b, t, h * d)`), iterates
    over the merged dim and takes each index apart again: `j / d` and
    `j % d`. Every read through them is a gather, and no loop runs along
    the source's unit-stride dim. This pass makes the two parts loops
    again:

    - a parallel dim of static extent E whose index the body divides by or
      takes modulo one constant C (E a multiple of C, C at least
      `min-inner`: a shorter inner loop costs more than the arithmetic)
      becomes two dims of extents E / C and C; the quotient is the outer
      index, the remainder the inner one;
    - an input every read of which holds the index at one position is read
      through a `braze.reshape` that splits that position (splitting a dim
      is a view of any strided tensor); a result every store of which
      holds it at one position is written split and reshaped back (a view
      of a contiguous tensor);
    - any other use of the index reads `outer * C + inner`.

    The order of the points is unchanged (row-major over the pair), and no
    value changes. Run before braze-collapse-dims: a pair that some access
    holds apart (the reason the body took the index apart) never merges
    back.

    ```mlir
    %c = braze.kernel ins(%o : tensor<2x4x8x8xf32>) domain [16, 32] reduce [] : tensor<16x32xf32> {
    ^bb0(%i: index, %j: index, %ni: index, %nj: index, %a: tensor<2x4x8x8xf32>):
      %c8 = arith.constant 8 : index
      %b = arith.divsi %i, %c8 : index
      %t = arith.remsi %i, %c8 : index
      %h = arith.divsi %j, %c8 : index
      %d = arith.remsi %j, %c8 : index
      %v = tensor.extract %a[%b, %h, %t, %d] : tensor<2x4x8x8xf32>
      braze.store %v, 0 [%i, %j] : f32
    }
    ```
    becomes (with `min-inner=8`)
    ```mlir
    %k = braze.kernel ins(%o : tensor<2x4x8x8xf32>) domain [2, 8, 4, 8] reduce [] : tensor<2x8x4x8xf32> {
    ^bb0(%b: index, %t: index, %h: index, %d: index, %nb: index, %nt: index,
         %nh: index, %nd: index, %a: tensor<2x4x8x8xf32>):
      %v = tensor.extract %a[%b, %h, %t, %d] : tensor<2x4x8x8xf32>
      braze.store %v, 0 [%b, %t, %h, %d] : f32
    }
    %c = braze.reshape %k : tensor<2x8x4x8xf32> -> tensor<16x32xf32>
    ```
  }];
  let dependentDialects = ["::braze::BrazeDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"minInner", "min-inner", "int64_t", "16",
           "Split only where the inner extent C is at least this">,
  ];
  let statistics = [
    Statistic<"numSplit", "split-dims", "Dims split in two">,
  ];
}

def BrazeCollapseDims : Pass<"braze-collapse-dims", "::mlir::func::FuncOp"> {
  let summary = "Merge adjacent iteration dims of a kernel into one";
  let description = [{
    A kernel over an NCHW activation loops over W innermost; with W = 7 or
    14 that loop is too short to vectorize or to amortize its setup. When
    every tensor the kernel reads or writes holds two adjacent domain dims
    as one contiguous run (both indices side by side, in order, or neither
    of them), the dims become one: inputs are read through a `braze.reshape`
    that merges them (a view of a contiguous tensor), results are written
    merged and reshaped back, and the body indexes the pair with one index.

    Which kernels: those with a dynamic domain or at least `min-points`
    points (in a smaller one the loops take no time either way, and each
    reshape is a host step per call). Which pairs: in a kernel without reduction dims, the trailing dims; in a
    reduction kernel, the run of reduction dims that ends at its last one
    (the innermost reduction loop). Merging goes outward from there while
    the inner extent is static and shorter than `short-extent`, and stops at
    the first pair that cannot merge: a pair whose indices enter arithmetic
    (an iota, a triangle mask), that some tensor holds apart, transposed or
    at different positions in different accesses, that mixes a reduction
    dim with a parallel one, whose dynamic extents are used other than
    as their product (a mean's element count stays right: the product of
    the pair's extents becomes the merged extent), or that an input made by
    `braze.slice` does not hold as one run of memory (the slice cuts the
    pair's inner dim, or steps its outer dim by other than 1): a slice is a
    view the kernel reads in place, and merging there would copy it.

    ```mlir
    %y = braze.kernel ins(%x : tensor<8x16x7x7xf32>) domain [8, 16, 7, 7] reduce [2, 3]
        : tensor<8x16xf32> {
    ^bb0(%n: index, %c: index, %h: index, %w: index, %e0: index, %e1: index,
         %e2: index, %e3: index, %a: tensor<8x16x7x7xf32>):
      %v = tensor.extract %a[%n, %c, %h, %w] : tensor<8x16x7x7xf32>
      %s = braze.reduce "add" %v : f32 -> f32
      braze.store %s, 0 [%n, %c] : f32
    }
    ```
    becomes
    ```mlir
    %r = braze.reshape %x : tensor<8x16x7x7xf32> -> tensor<8x16x49xf32>
    %y = braze.kernel ins(%r : tensor<8x16x49xf32>) domain [8, 16, 49] reduce [2]
        : tensor<8x16xf32> {
    ^bb0(%n: index, %c: index, %hw: index, %e0: index, %e1: index,
         %e2: index, %a: tensor<8x16x49xf32>):
      %v = tensor.extract %a[%n, %c, %hw] : tensor<8x16x49xf32>
      %s = braze.reduce "add" %v : f32 -> f32
      braze.store %s, 0 [%n, %c] : f32
    }
    ```
    The order of the points is unchanged (row-major over the pair), so an
    argmax's linear index and every result are the same.

    First, each input drops the size-1 dims it is always read at 0 in (a
    per-channel `C x 1 x 1` scale becomes `C`, through a reshape): a dim
    that only broadcast then no longer hides which dim the innermost loop
    steps through, so an NHWC kernel reads its per-channel inputs with unit
    stride.
  }];
  let dependentDialects = ["::braze::BrazeDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"shortExtent", "short-extent", "int64_t", "128",
           "Merge while the inner dim's static extent is below this">,
    Option<"minPoints", "min-points", "int64_t", "4096",
           "Leave kernels with fewer points (a static domain) as they are">,
  ];
  let statistics = [
    Statistic<"numCollapsed", "collapsed-dims", "Pairs of dims merged">,
    Statistic<"numSqueezed", "squeezed-dims",
              "Size-1 dims dropped from inputs always read at 0">,
  ];
}

#endif // BRAZE_LAYOUT_PASSES
