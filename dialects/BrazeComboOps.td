//===- BrazeComboOps.td - combo kernels --------------------*- tablegen -*-===//
//
// `braze.combo`: several independent kernels started as one launch (one
// OpenMP parallel region on the CPU, one grid on a GPU). braze-combo-kernels
// forms them; every emitter spells one.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_COMBO_OPS
#define BRAZE_COMBO_OPS

def Braze_ComboOp : Braze_Op<"combo", [RecursiveMemoryEffects]> {
  let summary = "independent kernels run as one launch";
  let description = [{
    Each region is one sub-kernel: a single block holding one `braze.kernel`
    (the kernel form, reading values defined before the combo) and a
    `braze.combo_yield` of that kernel's results. The combo's results are
    the yielded values of every region, in region order. No sub-kernel reads
    another's result (the regions see only values defined outside).

    A sub-kernel's work is cut into *work items*: `block` consecutive points
    of its domain (row-major) when it reduces nothing, else `block`
    consecutive parallel points, each with all of its reduction points. So
    sub-kernel k has `ceil(points_k / block_k)` items.

    `dispatch` says how the items of all sub-kernels form one launch:
    - `"sequential"`: sub-kernel 0's items, then sub-kernel 1's, ...: item i
      of sub-kernel k is launch item `start_k + i`;
    - `"round_robin"`: item i of sub-kernel k is launch item `i * K + k`
      (K sub-kernels); only for sub-kernels with equal, static item counts;
    - `"flattened"`: a `K x M` grid flattened (M the largest item count):
      item i of sub-kernel k is launch item `k * M + i`, slots past a
      sub-kernel's count idle; no search for the sub-kernel, one division.

    `schedules` holds one dictionary per sub-kernel:
    - `block` (power of two): points (parallel points with reductions) per
      work item;
    - `rblock` (power of two; only with reductions): reduction points a GPU
      program holds at once (the C++ emitter loops over every point);
    - `cost` (positive): the estimated cost of one work item, which the CPU
      emitter balances over its threads.

    ```mlir
    %a, %b = braze.combo dispatch "sequential" schedules [
        {block = 64 : i64, cost = 64 : i64},
        {block = 4 : i64, rblock = 32 : i64, cost = 256 : i64} ] : tensor<64xf32>, tensor<4xf32> {
      %0 = braze.kernel ins(%x : tensor<64xf32>) domain [64] reduce [] : tensor<64xf32> {...}
      braze.combo_yield %0 : tensor<64xf32>
    }, {
      %1 = braze.kernel ins(%y : tensor<4x32xf32>) domain [4, 32] reduce [1] : tensor<4xf32> {...}
      braze.combo_yield %1 : tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$dispatch, ArrayAttr:$schedules);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region VariadicRegion<SizedRegion<1>>:$subkernels);
  let assemblyFormat = [{
    `dispatch` $dispatch `schedules` $schedules attr-dict `:` type($results) $subkernels
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The kernel of sub-kernel `number`.
    KernelOp getSubKernel(unsigned number);
    /// Sub-kernel `number`'s schedule entry `key`.
    int64_t getScheduleEntry(unsigned number, llvm::StringRef key);
  }];
}

def Braze_ComboYieldOp : Braze_Op<"combo_yield", [Pure, Terminator,
    HasParent<"ComboOp">]> {
  let summary = "the results of one sub-kernel of a combo";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // BRAZE_COMBO_OPS
