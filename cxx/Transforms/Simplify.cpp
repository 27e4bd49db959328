//===- Simplify.cpp - the braze-simplify pass -----------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "braze-simplify"

namespace braze {
#define GEN_PASS_DEF_BRAZESIMPLIFY
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// Counts successful rewrites into the pass's statistic.
template <typename OpT>
struct CountedPattern : OpRewritePattern<OpT> {
  CountedPattern(MLIRContext *context, Pass::Statistic &counter)
      : OpRewritePattern<OpT>(context), counter(counter) {}

  LogicalResult matchAndRewrite(OpT op,
                                PatternRewriter &rewriter) const final {
    if (failed(rewrite(op, rewriter)))
      return failure();
    ++counter;
    return success();
  }

  virtual LogicalResult rewrite(OpT op, PatternRewriter &rewriter) const = 0;

  Pass::Statistic &counter;
};

/// a + neg(b) -> a - b, and neg(a) + b -> b - a.
struct AddOfNeg : CountedPattern<AddOp> {
  using CountedPattern::CountedPattern;
  LogicalResult rewrite(AddOp op, PatternRewriter &rewriter) const override {
    Value kept = op.getLhs();
    auto neg = op.getRhs().getDefiningOp<NegOp>();
    if (!neg) {
      kept = op.getRhs();
      neg = op.getLhs().getDefiningOp<NegOp>();
    }
    if (!neg)
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "add of neg -> sub: " << op << "\n");
    rewriter.replaceOpWithNewOp<SubOp>(op, op.getType(), kept, neg.getInput());
    return success();
  }
};

/// a - neg(b) -> a + b.
struct SubOfNeg : CountedPattern<SubOp> {
  using CountedPattern::CountedPattern;
  LogicalResult rewrite(SubOp op, PatternRewriter &rewriter) const override {
    auto neg = op.getRhs().getDefiningOp<NegOp>();
    if (!neg)
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "sub of neg -> add: " << op << "\n");
    rewriter.replaceOpWithNewOp<AddOp>(op, op.getType(), op.getLhs(),
                                       neg.getInput());
    return success();
  }
};

/// neg(a) * neg(b) -> a * b.
struct MulOfNegs : CountedPattern<MulOp> {
  using CountedPattern::CountedPattern;
  LogicalResult rewrite(MulOp op, PatternRewriter &rewriter) const override {
    auto lhs = op.getLhs().getDefiningOp<NegOp>();
    auto rhs = op.getRhs().getDefiningOp<NegOp>();
    if (!lhs || !rhs)
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "mul of negs -> mul: " << op << "\n");
    rewriter.replaceOpWithNewOp<MulOp>(op, op.getType(), lhs.getInput(),
                                       rhs.getInput());
    return success();
  }
};

struct BrazeSimplifyPass
    : braze::impl::BrazeSimplifyBase<BrazeSimplifyPass> {
  using BrazeSimplifyBase::BrazeSimplifyBase;

  // 1. Gather the canonicalization patterns of every braze op.
  // 2. Add the algebraic rewrites.
  // 3. Run the greedy driver, which also applies every op's folder.
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    Dialect *braze = context->getLoadedDialect<BrazeDialect>();
    if (braze)
      braze->getCanonicalizationPatterns(patterns);
    for (RegisteredOperationName op : context->getRegisteredOperations())
      if (&op.getDialect() == braze)
        op.getCanonicalizationPatterns(patterns, context);
    patterns.add<AddOfNeg, SubOfNeg, MulOfNegs>(context, numAlgebraicRewrites);

    GreedyRewriteConfig config;
    int64_t rounds = maxIterations;
    config.setMaxIterations(rounds);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      getOperation()->emitWarning()
          << "braze-simplify did not converge in " << rounds << " iterations";
  }
};
} // namespace
