//===- BrazeControlFlowOps.td - switch and while -------------*- tablegen -*-===//
//
// Control flow chosen at run time from a tensor value: `switch` runs one of
// N regions (torch.cond is its 2-way case), `while` repeats a region while a
// condition region yields true (torch.while_loop). Every region is isolated
// from above and sees only its block arguments, so passes treat each region
// as a function of its own: fusion and lowering work inside a region and
// never move a value across its boundary.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_CONTROL_FLOW_OPS
#define BRAZE_CONTROL_FLOW_OPS

def Braze_Selector : TensorRankOf<[I1, I8, I16, I32, I64], [0]>;

def Braze_SwitchOp : Braze_Op<"switch", [IsolatedFromAbove,
    RecursiveMemoryEffects]> {
  let summary = "runs one of N regions, chosen at run time by an index tensor";
  let description = [{
    `index` is a rank-0 integer (or `i1`) tensor read when the op runs; the
    branch with that number runs on `inputs` (its block arguments, in order)
    and yields the op's results. An index outside `[0, N)` is clamped to the
    nearest branch, as `jax.lax.switch` does, so a negative index runs
    branch 0 and one past the end runs the last branch. `torch.cond(pred,
    true_fn, false_fn, operands)` is the 2-way case with the predicate as
    the index: branch 0 is the false branch, branch 1 the true branch.

    Every branch takes the same argument types (the inputs' types) and
    yields values whose types are compatible with the results (a branch may
    know a dim that the result leaves `?`).

    ```mlir
    %r = braze.switch %i (%x) : (tensor<i64>, tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%a: tensor<4xf32>):
      %n = braze.neg %a : tensor<4xf32>
      braze.yield %n : tensor<4xf32>
    }, {
    ^bb0(%a: tensor<4xf32>):
      braze.yield %a : tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins Braze_Selector:$index, Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region VariadicRegion<SizedRegion<1>>:$branches);
  // `braze.switch %i(%x) : (tensor<i64>, T) -> R {...}, {...}`
  // Syntax: see ControlFlowOps.cpp (hand-written so that the regions belong
  // to the operation state while they are parsed; see the comment there).
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Braze_WhileOp : Braze_Op<"while", [IsolatedFromAbove,
    RecursiveMemoryEffects, AttrSizedOperandSegments]> {
  let summary = "repeats a region while a condition region yields true";
  let description = [{
    `torch.while_loop(cond_fn, body_fn, carried, extra)`. The carried values
    start as `inits`; `condition` runs on the carried values and `extras`
    and yields a rank-0 `i1` tensor; while it is true, `body` runs on the
    same arguments and yields the next carried values. The results are the
    carried values when the condition first yields false (the `inits` when
    it is false at once: zero iterations). `extras` are loop-invariant
    values both regions read (torch's `additional_inputs`).

    Both regions take the carried types then the extras' types; the body
    yields values compatible with the carried types, which are the results'.

    ```mlir
    %n, %y = braze.while (%zero, %x) extra (%limit)
        : (tensor<i64>, tensor<4xf32>, tensor<i64>) -> (tensor<i64>, tensor<4xf32>)
      condition {
    ^bb0(%i: tensor<i64>, %a: tensor<4xf32>, %l: tensor<i64>):
      %c = braze.lt %i, %l : tensor<i64>, tensor<i64> -> tensor<i1>
      braze.yield %c : tensor<i1>
    } do {
    ^bb0(%i: tensor<i64>, %a: tensor<4xf32>, %l: tensor<i64>):
      %one = braze.constant dense<1> : tensor<i64>
      %j = braze.add %i, %one : tensor<i64>, tensor<i64> -> tensor<i64>
      %b = braze.add %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      braze.yield %j, %b : tensor<i64>, tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inits, Variadic<AnyType>:$extras);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$condition, SizedRegion<1>:$body);
  // `braze.while (%init) extra (%e) : (T, E) -> T condition {...} do {...}`
  // Syntax: see ControlFlowOps.cpp (hand-written so that the regions belong
  // to the operation state while they are parsed; see the comment there).
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

#endif // BRAZE_CONTROL_FLOW_OPS
