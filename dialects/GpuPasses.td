//===- GpuPasses.td - braze GPU scheduling passes ----------*- tablegen -*-===//
//
// The passes that only GPU targets run: braze-split-reductions and
// braze-gpu-schedule. Included by Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_GPU_PASSES
#define BRAZE_GPU_PASSES

include "mlir/Pass/PassBase.td"

def BrazeSplitReductions : Pass<"braze-split-reductions", "::mlir::func::FuncOp"> {
  let summary = "Split a long reduction with few outputs into two kernels";
  let description = [{
    A reduction kernel with few outputs and many reduced points gives a GPU
    few blocks to run (a sum of 4M elements to one value is one block
    looping over them all). This pass rewrites such a kernel into two
    `braze.kernel`s: the first computes partial reductions over `chunks`
    runs of consecutive reduced points into an `[outputs..., chunks]`
    intermediate per reduction, the second reduces the chunks and does the
    original kernel's stores (with what they compute from the reductions).

    A kernel is split when its parallel extents are static with at most
    `max-outputs` points in all, its reduced extents are static with at
    least `min-points` points, and `chunks` is at least 2, where `chunks`
    is the power of two covering `target-rows / outputs` (enough rows to
    fill a GPU's multiprocessors with blocks) but at most
    `points / min-chunk` (each chunk keeps a block's threads busy). The
    chunks are then evened out: every chunk but the last holds
    `ceil(points / chunks)` points, and the points past the end of the last
    are masked with the reduction's identity (0 for add and or, -inf or the
    lowest integer for max and argmax, +inf or the highest for min, true
    for and).

    Every reduction kind is associative in the kernel form: add (floats
    reassociate, as the GPU block tree already does), max and min (NaN
    propagates through both stages), and, or, and argmax, whose partials
    are each chunk's maximum and the global index of its first maximum;
    the combining kernel takes the first chunk holding the overall maximum
    (NaN counts as the maximum, ties go to the earlier chunk), so the
    result is the first maximum, as in one kernel.

    Only kernels where the split is sound are split; these are left as one
    kernel (with `remarks=true`, a remark says why):
    - a reduction that reads another's result (softmax's sum of
      exp(x - max) needs the whole row's maximum before any chunk starts);
    - a store per reduction point (a normalized row: each point needs the
      row's reductions);
    - a dynamic reduced extent (the chunked kernel would have to mask the
      last chunk against an extent the kernel form carries only as a domain
      dim).

    ```mlir
    %s = braze.kernel ins(%x : tensor<4194304xf32>) domain [4194304] reduce [0] : tensor<f32> {
    ^bb0(%j: index, %nj: index, %a: tensor<4194304xf32>):
      %v = tensor.extract %a[%j] : tensor<4194304xf32>
      %r = braze.reduce "add" %v : f32 -> f32
      braze.store %r, 0 [] : f32
    }
    ```
    becomes
    ```mlir
    %p = braze.kernel ins(%x : tensor<4194304xf32>) domain [1024, 4096] reduce [1] : tensor<1024xf32> {
    ^bb0(%c: index, %l: index, %nc: index, %nl: index, %a: tensor<4194304xf32>):
      %j = (%c * 4096 + %l)
      %v = tensor.extract %a[%j] : tensor<4194304xf32>
      %r = braze.reduce "add" %v : f32 -> f32
      braze.store %r, 0 [%c] : f32
    }
    %s = braze.kernel ins(%p : tensor<1024xf32>) domain [1024] reduce [0] : tensor<f32> {
    ^bb0(%c: index, %nc: index, %q: tensor<1024xf32>):
      %v = tensor.extract %q[%c] : tensor<1024xf32>
      %r = braze.reduce "add" %v : f32 -> f32
      braze.store %r, 0 [] : f32
    }
    ```
    The GPU targets run it before `braze-combo-kernels` and
    `braze-gpu-schedule` (which gives both kernels their launch shapes).
  }];
  let dependentDialects = ["::braze::BrazeDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"minPoints", "min-points", "int64_t", "65536",
           "Split only reductions over at least this many points">,
    Option<"maxOutputs", "max-outputs", "int64_t", "256",
           "Split only reductions with at most this many outputs (parallel points)">,
    Option<"targetRows", "target-rows", "int64_t", "1024",
           "Rows (blocks) the partial kernel aims for over all outputs">,
    Option<"minChunk", "min-chunk", "int64_t", "2048",
           "Fewest reduced points per chunk">,
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each kernel big enough to split that is left whole">,
  ];
  let statistics = [
    Statistic<"numSplit", "split", "Kernels split in two">,
  ];
}

def BrazeGpuSchedule : Pass<"braze-gpu-schedule", "::mlir::func::FuncOp"> {
  let summary = "Choose each kernel's GPU launch shape (a discardable attribute)";
  let description = [{
    Annotates every `braze.kernel` with `braze.schedule`, a dictionary that
    the GPU renderers honour (without it they choose their defaults):

    - `strategy = "points"`: a kernel without reductions, one thread per
      point, or per `elements` consecutive points when its domain is static
      with at least `vector-points` points (fewer, fuller threads; the
      default 4 x 256 threads x 1024 blocks still fills a GPU); `elements`
      is written only when above 1;
    - `strategy = "row_per_thread"`: a reduction whose rows are short (at most
      `short-row` reduction points, known statically): one thread computes a
      whole row, no shared memory, no barriers;
    - `strategy = "warp_tree"`: a reduction whose rows are of medium length
      (more than `short-row`, at most `warp-row` warps' worth of reduction
      points, known statically): one warp per row, its lanes stride over
      the points, then combine by warp shuffles; no shared memory, no
      barriers. Not on opencl: sub-groups are an extension there
      (cl_khr_subgroups, which PoCL's CPU device lacks) of a size the
      device chooses, so OpenCL takes a block tree instead;
    - `strategy = "block_tree"`: one block per row, its threads stride over
      the reduction points, then a tree through shared memory;
    - `threads`: threads per block, a power of two: `threads` for points,
      short rows and warp trees (`threads / warp` rows per block); for a
      block tree the smallest power of two covering the row, at least the
      target's warp (`target`: 32 on cuda, opencl and metal, 64 on hip) and
      at most `threads`; `threads` when the row is dynamic;
    - `index_bits = 32` (written only then): the domain and every tensor the
      kernel reads or writes have fewer than 2^31 - 2^24 elements (the
      margin covers the last block's threads past the end), so extents,
      point numbers and element offsets fit an `int`; the renderers index
      in 32 bits (and the runtime makes an input view that reaches further
      than 2^31 elements contiguous first). A dynamic size counts with its
      bound from the `braze.symbols` ranges the executor checks every call:
      a function argument's dim whose `braze.dims` entry is one symbol of
      bounded range, read with `tensor.dim` or through the kernel that
      wrote the tensor; derived expressions ("2*s0") and unbounded symbols
      keep 64 bits.

    Every `braze.fused_gemm` gets a shared-memory tiled GEMM's shape (the
    C-like renderers' form, codegen/gpu_gemm.py; Triton tunes its own
    tiles and ignores it):

    - `strategy = "tiled_gemm"`: one block per `tile[0] x tile[1]` tile of
      the product (per batch), K walked in blocks of `tile[2]` staged
      through shared memory; `strategy = "tiled_gemm_rows"` when the op has
      row statistics: one block per `tile[0]` whole rows, which walks the
      row's tiles along N so that it sees every element of its rows;
    - `threads = 256`, a 16 x 16 grid of threads, each computing a
      `tile[0] / 16 x tile[1] / 16` register tile;
    - `tile = [M, N, K]`: `gemm-tile` x `gemm-tile` x 16, the M side shrunk
      to the smallest power of two (at least 16) that covers a static M
      below it (a decode step's single row keeps 1 x 4 per thread instead
      of 4 x 4 mostly masked);
    - `index_bits = 32` as for kernels, when every operand and result has
      fewer than 2^31 - 2^24 elements (64-bit offsets cost nvcc registers
      enough to spill in a GELU epilogue).

    Long reductions with few outputs are split in two kernels before this
    pass (`braze-split-reductions`), and adjacent reduced dims are merged
    before it (`braze-collapse-dims`: the run ending at the last reduced
    dim, where every tensor holds it as one contiguous run and the inner
    extent is short). Dims are not reordered to put reduced dims innermost:
    a reduction over outer dims keeps its layout.

    ```mlir
    %s = braze.kernel ins(%x : tensor<4x300xf32>) domain [4, 300] reduce [1] : tensor<4xf32> {...}
    ```
    becomes, under `braze-gpu-schedule{target=cuda}`,
    ```mlir
    %s = braze.kernel ins(%x : tensor<4x300xf32>) domain [4, 300] reduce [1]
        attributes {braze.schedule = {index_bits = 32 : i64, strategy = "block_tree", threads = 256 : i64}}
        : tensor<4xf32> {...}
    ```
    and a row of 64 takes `strategy = "warp_tree", threads = 256`.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cuda\"",
           "The GPU target: cuda, hip, opencl or metal (sets the warp width)">,
    Option<"threads", "threads", "int64_t", "256",
           "Most threads per block (a power of two)">,
    Option<"shortRow", "short-row", "int64_t", "16",
           "Rows of at most this many reduction points take one thread each">,
    Option<"elements", "elements", "int64_t", "4",
           "Consecutive points per thread of a large pointwise kernel (a power of two)">,
    Option<"vectorPoints", "vector-points", "int64_t", "1048576",
           "Pointwise kernels of at least this many static points take `elements` per thread">,
    Option<"warpRow", "warp-row", "int64_t", "4",
           "Longer rows of at most this many warps' worth of reduction points take one warp each (0: none)">,
    Option<"gemmTile", "gemm-tile", "int64_t", "64",
           "A fused GEMM's output tile side (a power of two, at least 16; 16 x 16 threads)">,
  ];
  let statistics = [
    Statistic<"numScheduled", "kernels", "Kernels annotated">,
    Statistic<"numGemms", "gemms", "Fused GEMMs annotated">,
  ];
}

#endif // BRAZE_GPU_PASSES
