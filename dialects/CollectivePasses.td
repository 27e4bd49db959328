//===- CollectivePasses.td - braze passes on collectives --*- tablegen -*-===//
//
// The passes that see a program's collectives: the order verifier,
// gradient bucketing, and collective/compute overlap. Included by
// Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_COLLECTIVE_PASSES
#define BRAZE_COLLECTIVE_PASSES

def BrazeVerifyCollectiveOrder
    : Pass<"braze-verify-collective-order", "::mlir::func::FuncOp"> {
  let summary = "Prove every rank issues the same collectives in the same order";
  let description = [{
    A collective pairs up across ranks by its position in its group's
    sequence: if two ranks issue a group's collectives in different orders,
    or one rank skips one, they exchange the wrong buffers or hang. This
    pass rejects what could make the sequence differ between ranks:

    - a collective under control flow (an op with regions) whose deciding
      operands (a `braze.switch`'s index; every operand of other ops)
      depend on rank-dependent values: function arguments, parameters
      (shards differ per rank), results of `reduce_scatter` and
      `all_to_all`, and anything computed from them. Constants and the
      results of `all_reduce`, `all_gather` and `broadcast` are the same on
      every rank of their group;
    - a start that is never waited for (the rank would leave it in flight);
    - an order changed by a pass: the first run records each start's
      position in its group's sequence (`braze.collective_order`); every
      later run checks that the starts of each group still come in that
      order, and that no start appeared without one. Run it after every
      pass that moves collectives.

    Each error names both collectives and the reason:
    ```mlir
    %a = braze.all_gather_start %x group "0" ranks [0, 1] {braze.collective_order = 1 : i64} ...
    %b = braze.all_reduce_start %y "sum" group "0" ranks [0, 1] {braze.collective_order = 0 : i64} ...
    ```
    `error: 'braze.all_gather_start' of group "0" ... (#1 of its group) is
    issued before 'braze.all_reduce_start' ... (#0): the group's order
    changed since it was recorded`.

    Per-rank decisions that do not show in the IR (a pass choosing by a
    measurement taken on one rank) are caught at run time: the first call of
    a compiled program compares a fingerprint of each group's collective
    sequence across the group (docs/distributed.md).
  }];
  let dependentDialects = ["::braze::BrazeDialect"];
  let statistics = [
    Statistic<"numRecorded", "recorded", "Collectives given their position">,
    Statistic<"numChecked", "checked", "Collectives checked against it">,
  ];
}

def BrazeBucketCollectives
    : Pass<"braze-bucket-collectives", "::mlir::func::FuncOp"> {
  let summary = "Merge small all_reduces of one group into buckets";
  let description = [{
    Data-parallel training reduces every gradient with its own all_reduce;
    each pays the collective's latency, and a small one moves too few bytes
    to use the link. This pass merges runs of a block's all_reduce starts
    into buckets of at most `bucket-bytes` (DDP's default, 25 MiB): the
    members' inputs are flattened (`braze.reshape`) and concatenated
    (`braze.concat`) into one buffer, reduced by one start and one wait,
    and each member's result is sliced (`braze.slice`) and reshaped back
    before its first user. The bucket starts where its last member did
    (every input exists there).

    Going through each group's starts in program order, a start joins the
    open bucket of its group when it has the bucket's reduction, element
    type and ranks, a static shape, and fits within `bucket-bytes`; and
    when no data path leads from a member's result to it (a gradient
    computed from another all_reduce's result cannot be reduced with it).
    The ops between a member's wait and the bucket's start that use a
    member's result move below the bucket's wait, each to just before its
    first user; an op with effects among them (an extern call, another
    collective) cannot move, and the start then opens a new bucket instead.
    A start that cannot join closes the group's bucket, so a bucket never
    crosses another collective of its own group: the group's order stays
    the one recorded by `braze-verify-collective-order` (the bucket takes
    its first member's position) and is the same on every rank, since it
    is decided from the IR alone. A start larger than `bucket-bytes` stays
    on its own.

    ```mlir
    %w1 = braze.all_reduce_start %g1 "sum" group "dp" ranks [0, 1] : tensor<4x4xf32> -> !braze.work<tensor<4x4xf32>>
    %r1 = braze.wait %w1 : !braze.work<tensor<4x4xf32>>
    %w2 = braze.all_reduce_start %g2 "sum" group "dp" ranks [0, 1] : tensor<8xf32> -> !braze.work<tensor<8xf32>>
    %r2 = braze.wait %w2 : !braze.work<tensor<8xf32>>
    ```
    becomes
    ```mlir
    %f1 = braze.reshape %g1 : tensor<4x4xf32> -> tensor<16xf32>
    %c = braze.concat %f1, %g2 dim 0 : tensor<16xf32>, tensor<8xf32> -> tensor<24xf32>
    %w = braze.all_reduce_start %c "sum" group "dp" ranks [0, 1] : tensor<24xf32> -> !braze.work<tensor<24xf32>>
    %r = braze.wait %w : !braze.work<tensor<24xf32>>
    %s1 = braze.slice %r dim 0 [0 : 16 : 1] : tensor<24xf32> -> tensor<16xf32>
    %r1 = braze.reshape %s1 : tensor<16xf32> -> tensor<4x4xf32>
    %r2 = braze.slice %r dim 0 [16 : 24 : 1] : tensor<24xf32> -> tensor<8xf32>
    ```

    Run it before fusion (the concat and the slices are then fused and
    folded like any other op) and before `braze-overlap`, which then starts
    each bucket early and waits for it late. With `remarks=true` each
    bucket says what it merged, and each start that closed a bucket or
    stayed alone says why; braze routes them to the `fusion` log topic.
  }];
  let dependentDialects = ["::braze::BrazeDialect"];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "The most bytes one bucket reduces (at least 1)">,
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each bucket and for each start that closed one">,
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "Buckets of two or more all_reduces">,
    Statistic<"numMerged", "merged", "All_reduces merged into buckets">,
  ];
}

def BrazeOverlap : Pass<"braze-overlap", "::mlir::func::FuncOp"> {
  let summary = "Start collectives early and wait late, over independent compute";
  let description = [{
    Moves each collective start as early as its operands allow and each
    `braze.wait` as late as its users allow, one op at a time, so the
    compute in between runs while the collective is in flight. A move
    stops at:

    - the producer of the start's input, or the first user of the wait's
      result (a data dependency);
    - another start or wait of the same group (the group's order is what
      every rank agrees on; collectives of other groups may be crossed);
    - an op with effects that is not a collective (`braze.extern` may do
      anything, even a collective of its own);
    - with `keep-peak` (the default), a step that would raise the block's
      peak of live bytes: that step is undone. The model: each value is
      live from its definition to its last use, a start's input until its
      wait (the communicator reads it while the collective is in flight),
      the work's buffer from the start; dynamic dims count as 1.

    ```mlir
    %w = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : ...
    %r = braze.wait %w : !braze.work<tensor<64xf32>>
    %m = braze.matmul %a, %b : ...
    ```
    becomes
    ```mlir
    %w = braze.all_reduce_start %x "sum" group "0" ranks [0, 1] : ...
    %m = braze.matmul %a, %b : ...
    %r = braze.wait %w : !braze.work<tensor<64xf32>>
    ```

    With `max-inflight-bytes` (0: no bound), a step that would put more
    bytes of collectives in flight at once (the buffers of the collectives
    started and not yet waited for, across groups) is undone too.

    `mode=simple` (the default) moves only collectives. `mode=cost` then
    fills each collective's gap with compute from after its wait: it
    estimates the collective's time (the link's latency plus the bytes
    each rank sends, as a ring algorithm does, over `link-bandwidth`) and
    each op's time (the longer of its bytes over `memory-bandwidth` and its
    flops over `peak-flops`; a GEMM's flops from its shapes, a kernel's
    from its body; views are free), and, while the compute between the
    start and the wait hides less than the collective's time, moves above
    the wait the op from after it (up to the next collective of the same
    group) that hides the most, together with the ops after the wait it
    needs: never an op that uses the wait's result or has effects, never
    one that raises the peak of live bytes (with `keep-peak`). The
    estimates are the compile report's (`braze.report.cost`), with its
    defaults.

    ```mlir
    %w = braze.all_reduce_start %g "sum" group "0" ranks [0, 1] : ...
    %r = braze.wait %w : !braze.work<tensor<1024xf32>>
    %u = braze.add %r, %r : ...
    %m = braze.matmul %a, %b : ...
    ```
    becomes, with `mode=cost` (the matmul hides the all_reduce)
    ```mlir
    %w = braze.all_reduce_start %g "sum" group "0" ranks [0, 1] : ...
    %m = braze.matmul %a, %b : ...
    %r = braze.wait %w : !braze.work<tensor<1024xf32>>
    %u = braze.add %r, %r : ...
    ```

    With `remarks=true` each start and wait gets a remark saying how many
    ops it moved past, the bytes of compute it now overlaps, and what
    stopped it; in the cost mode each op moved above a wait says whose wait
    and its estimated time, and each wait how many ops moved above it and
    how much of the collective's estimated time is hidden. braze routes
    them to the `fusion` log topic.
  }];
  let dependentDialects = ["::braze::BrazeDialect"];
  let options = [
    Option<"mode", "mode", "std::string", "\"simple\"",
           "simple: move collectives only; cost: also move compute into their gaps by estimated time">,
    Option<"keepPeak", "keep-peak", "bool", "true",
           "Undo a step that raises the peak of live bytes">,
    Option<"maxInflightBytes", "max-inflight-bytes", "int64_t", "0",
           "Undo a step that puts more bytes of collectives in flight at once (0: no bound)">,
    Option<"linkBandwidth", "link-bandwidth", "double", "12.5e9",
           "Bytes per second each rank sends (cost mode)">,
    Option<"linkLatency", "link-latency", "double", "10e-6",
           "Seconds each collective takes beyond its bytes (cost mode)">,
    Option<"memoryBandwidth", "memory-bandwidth", "double", "100e9",
           "Bytes per second of the device's memory (cost mode)">,
    Option<"peakFlops", "peak-flops", "double", "1e12",
           "Flops per second of the device (cost mode)">,
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each collective: how far it moved and why it stopped">,
  ];
  let statistics = [
    Statistic<"numStartsMoved", "starts-moved", "Starts moved earlier">,
    Statistic<"numWaitsMoved", "waits-moved", "Waits moved later">,
    Statistic<"numPeakRefusals", "peak-refusals",
              "Steps undone because they raised the peak of live bytes">,
    Statistic<"numInflightRefusals", "inflight-refusals",
              "Steps undone because they passed max-inflight-bytes">,
    Statistic<"numComputeMoved", "compute-moved",
              "Compute ops moved above a wait (cost mode)">,
  ];
}

#endif // BRAZE_COLLECTIVE_PASSES
