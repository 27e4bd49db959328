//===- Simplify.cpp - the braze-simplify pass -----------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#include <cmath>

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

/// bmm(x, expand(w)) with one [K, N] matrix w broadcast over the batch ->
/// reshape(matmul(reshape(x, [B*M, K]), w), [B, M, N]): one GEMM instead of
/// B small ones that each read w again.
struct BmmOfBroadcastMatrix : CountedPattern<BmmOp> {
  using CountedPattern::CountedPattern;
  LogicalResult rewrite(BmmOp op, PatternRewriter &rewriter) const override {
    auto expand = op.getRhs().getDefiningOp<ExpandOp>();
    if (!expand)
      return failure();
    Value matrix = expand.getInput();
    auto matrixType = cast<RankedTensorType>(matrix.getType());
    if (matrixType.getRank() == 3 && matrixType.getDimSize(0) == 1)
      matrixType = RankedTensorType::get(matrixType.getShape().drop_front(),
                                         matrixType.getElementType());
    else if (matrixType.getRank() != 2)
      return failure();
    auto lhsType = cast<RankedTensorType>(op.getLhs().getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    int64_t batch = lhsType.getDimSize(0), rows = lhsType.getDimSize(1);
    int64_t flatRows = ShapedType::isDynamic(batch) || ShapedType::isDynamic(rows)
                           ? ShapedType::kDynamic
                           : batch * rows;
    Type element = lhsType.getElementType();
    auto flatType = RankedTensorType::get({flatRows, lhsType.getDimSize(2)}, element);
    auto productType =
        RankedTensorType::get({flatRows, matrixType.getDimSize(1)}, element);
    // A reshape infers one dynamic dim from the element count, not more.
    auto inferable = [](RankedTensorType type) {
      return llvm::count_if(type.getShape(), ShapedType::isDynamic) <= 1;
    };
    if ((ShapedType::isDynamic(batch) && ShapedType::isDynamic(rows)) ||
        !inferable(flatType) || !inferable(productType) ||
        !inferable(resultType) || !inferable(matrixType))
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "bmm of a broadcast matrix -> matmul: " << op
                            << "\n");
    Location loc = op.getLoc();
    if (matrixType != matrix.getType())
      matrix = ReshapeOp::create(rewriter, loc, matrixType, matrix, ValueRange{});
    Value flat =
        ReshapeOp::create(rewriter, loc, flatType, op.getLhs(), ValueRange{});
    Value product =
        MatmulOp::create(rewriter, loc, productType, flat, matrix);
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, resultType, product,
                                           ValueRange{});
    return success();
  }
};

/// A permute that moves only dims of size 1 keeps the elements' row-major
/// order: it is a reshape (einsum's captures insert and move unit dims
/// around products; as reshapes they compose with the ones beside them).
struct PermuteOfUnitDims : CountedPattern<PermuteOp> {
  using CountedPattern::CountedPattern;
  LogicalResult rewrite(PermuteOp op, PatternRewriter &rewriter) const override {
    auto inputType = cast<RankedTensorType>(op.getInput().getType());
    ArrayRef<int64_t> shape = inputType.getShape();
    int64_t previous = -1;
    for (int64_t source : op.getPermutation()) {
      if (shape[source] == 1)
        continue;
      if (source < previous)
        return failure(); // two dims that are not units swap
      previous = source;
    }
    // A reshape infers one dynamic dim from the element count, not more.
    if (llvm::count_if(shape, ShapedType::isDynamic) > 1)
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "permute of unit dims -> reshape: " << op
                            << "\n");
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), op.getInput(),
                                           ValueRange{});
    return success();
  }
};

/// The value of an integer constant (a splat braze.constant), if `value`
/// is one.
std::optional<int64_t> integerSplat(Value value) {
  APInt constant;
  if (!matchPattern(value, m_ConstantInt(&constant)))
    return std::nullopt;
  return constant.getSExtValue();
}

/// take(x, fmod(iota + c, n)) along a dim of static size n, the iota of
/// step 1 from s with s + c >= 0 and at most n indices: a rotation, which
/// is a slice, or two slices concatenated (`torch.roll` as export
/// decomposes it: Swin's shifted windows). Kernels read the pieces of a
/// concat in place; a take is a gather on the host.
struct TakeOfRotatedIota : CountedPattern<TakeOp> {
  using CountedPattern::CountedPattern;
  LogicalResult rewrite(TakeOp op, PatternRewriter &rewriter) const override {
    auto indices = cast<RankedTensorType>(op.getIndices().getType());
    auto table = cast<RankedTensorType>(op.getTable().getType());
    int64_t dim = op.getDim();
    int64_t size = table.getDimSize(dim);
    if (indices.getRank() != 1 || indices.isDynamicDim(0) ||
        ShapedType::isDynamic(size) || indices.getDimSize(0) > size ||
        indices.getDimSize(0) == 0)
      return failure();
    auto fmod = op.getIndices().getDefiningOp<FmodOp>();
    if (!fmod || integerSplat(fmod.getRhs()) != size)
      return failure();
    // The iota, through an optional add of a constant on either side.
    Value base = fmod.getLhs();
    int64_t offset = 0;
    if (auto add = base.getDefiningOp<AddOp>()) {
      std::optional<int64_t> constant = integerSplat(add.getRhs());
      base = add.getLhs();
      if (!constant) {
        constant = integerSplat(add.getLhs());
        base = add.getRhs();
      }
      if (!constant)
        return failure();
      offset = *constant;
    }
    auto iota = base.getDefiningOp<IotaOp>();
    if (!iota || iota.getDynamicStart() || iota.getDynamicStep() ||
        iota.getStep().convertToDouble() != 1.0 ||
        base.getType() != op.getIndices().getType())
      return failure();
    double start = iota.getStart().convertToDouble();
    if (start != std::floor(start) || start + double(offset) < 0)
      return failure(); // fmod of a negative index is negative: out of range
    int64_t first = (int64_t(start) + offset) % size;
    int64_t count = indices.getDimSize(0);
    int64_t head = std::min(count, size - first); // before the wrap
    Location loc = op.getLoc();
    auto piece = [&](int64_t begin, int64_t length) -> Value {
      SmallVector<int64_t> shape(table.getShape());
      shape[dim] = length;
      return SliceOp::create(rewriter, loc, table.clone(shape), op.getTable(),
                             dim, ValueRange{},
                             ArrayRef<int64_t>{begin, begin + length, 1});
    };
    LLVM_DEBUG(llvm::dbgs() << "take of a rotated iota -> slices: " << op
                            << "\n");
    Value rotated = piece(first, head);
    if (head < count)
      rotated = ConcatOp::create(rewriter, loc, op.getType(),
                                 ValueRange{rotated, piece(0, count - head)},
                                 dim);
    rewriter.replaceOp(op, rotated);
    return success();
  }
};

struct BrazeSimplifyPass
    : braze::impl::BrazeSimplifyBase<BrazeSimplifyPass> {
  using BrazeSimplifyBase::BrazeSimplifyBase;

  // 1. Gather the canonicalization patterns of every braze op.
  // 2. Add the algebraic rewrites, the broadcast-matrix product, permutes
  //    of unit dims and takes of rotated iotas.
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
    patterns.add<BmmOfBroadcastMatrix>(context, numBroadcastProducts);
    patterns.add<PermuteOfUnitDims>(context, numUnitPermutes);
    patterns.add<TakeOfRotatedIota>(context, numRotations);

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
