//===- Passes.td - braze passes ---------------------------*- tablegen -*-===//

#ifndef BRAZE_PASSES
#define BRAZE_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Simplification
//===----------------------------------------------------------------------===//

def BrazeSimplify : Pass<"braze-simplify"> {
  let summary = "Apply braze's folders, canonicalizations and algebraic rewrites";
  let description = [{
    Runs, to a fixed point, every braze op's folder and canonicalization
    pattern (x + 0, x * 1, x / 1, reshape of reshape, permute of permute,
    expand to the same shape, ...) together with algebraic rewrites that
    remove a negation:

    ```mlir
    %n = braze.neg %b : tensor<4xf32>
    %r = braze.add %a, %n : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    becomes
    ```mlir
    %r = braze.sub %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    (likewise `a - neg(b)` to `a + b` and `neg(a) * neg(b)` to `a * b`).
    The patterns apply to braze ops only; like `canonicalize`, the driver
    still folds any op it visits.
  }];
  let options = [
    Option<"maxIterations", "max-iterations", "int64_t", "10",
           "Rounds of the greedy rewrite driver before giving up">,
  ];
  let statistics = [
    Statistic<"numAlgebraicRewrites", "algebraic-rewrites",
              "Negations removed by algebraic rewrites">,
  ];
}

#endif // BRAZE_PASSES
