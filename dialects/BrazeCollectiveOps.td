//===- BrazeCollectiveOps.td - collectives in the IR ------*- tablegen -*-===//
//
// torch.distributed's functional collectives as braze ops: each `*_start`
// op issues one collective on a process group and returns a
// `!braze.work<T>`; `braze.wait` completes it and yields the result of type
// T. Collectives have effects (on the collective resource), so no pass
// removes, merges or hoists them as if they were compute; and within one
// group they form a total order: every rank issues the group's collectives
// in program order and waits for them in that same order.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_COLLECTIVE_OPS
#define BRAZE_COLLECTIVE_OPS

include "mlir/IR/AttrTypeBase.td"

def Braze_WorkType : TypeDef<Braze_Dialect, "Work"> {
  let mnemonic = "work";
  let summary = "an issued collective, not yet complete";
  let description = [{
    What a `*_start` op returns: a collective in flight whose result will be
    a `resultType` tensor. Its one use is the `braze.wait` that completes it.
  }];
  let parameters = (ins "::mlir::Type":$resultType);
  let assemblyFormat = "`<` $resultType `>`";
}

// Every collective reads and writes this one resource: the order between
// collectives (and between a start and its wait) is an effect passes keep.
def Braze_CollectiveResource : Resource<"::braze::CollectiveResource">;

// Marks the `*_start` ops (the C++ side finds `group`, `ranks`, `input`
// and `work` through it).
def Braze_CollectiveStartTrait : NativeOpTrait<"CollectiveStartTrait"> {
  let cppNamespace = "::braze";
}

class Braze_CollectiveStartOp<string mnemonic, dag extra, string extraFormat>
    : Braze_Op<mnemonic, [Braze_CollectiveStartTrait,
          MemoryEffects<[MemRead<Braze_CollectiveResource>,
                         MemWrite<Braze_CollectiveResource>]>]> {
  let arguments = !con((ins Braze_NumericTensor:$input), extra,
                       (ins StrAttr:$group, DenseI64ArrayAttr:$ranks));
  let results = (outs Braze_WorkType:$work);
  let assemblyFormat = "$input " # extraFormat # [{ `group` $group `ranks` $ranks
    attr-dict `:` type($input) `->` qualified(type($work))
  }];
  let hasVerifier = 1;
}

def Braze_AllReduceStartOp : Braze_CollectiveStartOp<"all_reduce_start",
    (ins StrAttr:$reduce), "$reduce"> {
  let summary = "start an all-reduce over a process group";
  let description = [{
    Every member of the group contributes `input`; each gets the elementwise
    `reduce` (`sum`, `avg`, `product`, `min`, `max`) of all of them.
    `group` names the process group (torch.distributed's group name) and
    `ranks` lists its members as global ranks, in group order; at run time
    the group is the braze.comm communicator registered for it
    (docs/distributed.md).

    ```mlir
    %w = braze.all_reduce_start %x "sum" group "0" ranks [0, 1]
        : tensor<8x16xf32> -> !braze.work<tensor<8x16xf32>>
    %y = braze.wait %w : !braze.work<tensor<8x16xf32>>
    ```
  }];
}

def Braze_AllGatherStartOp : Braze_CollectiveStartOp<"all_gather_start",
    (ins), ""> {
  let summary = "start an all-gather along dim 0";
  let description = [{
    The result is every member's `input` concatenated along dim 0 in group
    order (`all_gather_into_tensor`): dim 0 is `input`'s times the group's
    size, the other dims are `input`'s.

    ```mlir
    %w = braze.all_gather_start %x group "0" ranks [0, 1]
        : tensor<4x16xf32> -> !braze.work<tensor<8x16xf32>>
    ```
  }];
}

def Braze_ReduceScatterStartOp : Braze_CollectiveStartOp<"reduce_scatter_start",
    (ins StrAttr:$reduce), "$reduce"> {
  let summary = "start a reduce-scatter along dim 0";
  let description = [{
    The elementwise `reduce` of every member's `input`, of which member k
    keeps block k of dim 0 (`reduce_scatter_tensor`): dim 0 of the result
    is `input`'s divided by the group's size.

    ```mlir
    %w = braze.reduce_scatter_start %x "sum" group "0" ranks [0, 1]
        : tensor<8x16xf32> -> !braze.work<tensor<4x16xf32>>
    ```
  }];
}

def Braze_AllToAllStartOp : Braze_CollectiveStartOp<"all_to_all_start",
    (ins DenseI64ArrayAttr:$output_splits, DenseI64ArrayAttr:$input_splits),
    "`output_splits` $output_splits `input_splits` $input_splits"> {
  let summary = "start an all-to-all along dim 0, with uneven splits";
  let description = [{
    `all_to_all_single`: member k sends rows `input_splits[j]` (counted
    along dim 0, in order) to member j and receives `output_splits[j]` rows
    from member j, in group order. Empty split lists mean even splits of
    dim 0 (which the group's size must divide). A static dim 0 of the
    input (result) must equal the sum of the input (output) splits.

    ```mlir
    %w = braze.all_to_all_start %x output_splits [1, 5] input_splits [3, 3]
        group "0" ranks [0, 1] : tensor<6x4xf32> -> !braze.work<tensor<6x4xf32>>
    ```
  }];
}

def Braze_BroadcastStartOp : Braze_CollectiveStartOp<"broadcast_start",
    (ins I64Attr:$root), "`root` $root"> {
  let summary = "start a broadcast from one member";
  let description = [{
    Every member gets `root`'s `input`; `root` is a position in `ranks`
    (the group-local rank), not a global rank.

    ```mlir
    %w = braze.broadcast_start %x root 0 group "0" ranks [0, 1]
        : tensor<4xf32> -> !braze.work<tensor<4xf32>>
    ```
  }];
}

def Braze_WaitOp : Braze_Op<"wait", [
    MemoryEffects<[MemRead<Braze_CollectiveResource>,
                   MemWrite<Braze_CollectiveResource>]>,
    TypesMatchWith<"the result is the work's result type", "work", "result",
                   "::llvm::cast<::braze::WorkType>($_self).getResultType()">]> {
  let summary = "wait for an issued collective and take its result";
  let description = [{
    Blocks until the collective `work` comes from is complete on this rank,
    then yields its result. A start and its wait are in one block; waits of
    one group follow the order of their starts (the runtime completes a
    group's collectives in issue order, and a wait that jumped ahead would
    wait for a later collective before an earlier one).

    ```mlir
    %y = braze.wait %w : !braze.work<tensor<8x16xf32>>
    ```
  }];
  let arguments = (ins Braze_WorkType:$work);
  let results = (outs Braze_NumericTensor:$result);
  let assemblyFormat = "$work attr-dict `:` qualified(type($work))";
  let hasVerifier = 1;
}

#endif // BRAZE_COLLECTIVE_OPS
