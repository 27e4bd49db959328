//===- ConvolutionGemms.cpp - the braze-convolution-gemms pass ------------===//
//
// A small 1x1 convolution becomes a GEMM over channels-last rows, and the
// pointwise ops after it move into the product's frame, where
// braze-epilogue-fusion can take them.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"
#include "Transforms/ViewFolding.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace braze {
#define GEN_PASS_DEF_BRAZECONVOLUTIONGEMMS
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// Why `conv` is not a 1x1 convolution this pass computes as a GEMM, or
/// nothing when it is. `oneByOne` is set when its kernel is 1 in every
/// spatial dim (the convolutions a remark is about).
std::optional<std::string> whyNot(ConvolutionOp conv, int64_t maxWork,
                                  bool &oneByOne) {
  auto input = cast<RankedTensorType>(conv.getInput().getType());
  auto weight = cast<RankedTensorType>(conv.getWeight().getType());
  oneByOne = weight.hasStaticShape() &&
             llvm::all_of(weight.getShape().drop_front(2),
                          [](int64_t size) { return size == 1; });
  if (!oneByOne)
    return std::string("its kernel is not 1x1");
  if (conv.getTransposed())
    return std::string("it is transposed");
  if (conv.getGroups() != 1)
    return std::string("it has groups");
  if (!llvm::all_of(conv.getStride(), [](int64_t s) { return s == 1; }))
    return std::string("its stride is not 1");
  if (!llvm::all_of(conv.getPadding(), [](int64_t p) { return p == 0; }))
    return std::string("it is padded");
  if (!input.hasStaticShape())
    return std::string("its input shape is dynamic");
  Type element = input.getElementType();
  if (weight.getElementType() != element ||
      (conv.getBias() &&
       cast<RankedTensorType>(conv.getBias().getType()).getElementType() !=
           element))
    return std::string("its operands' element types differ");
  int64_t work = weight.getDimSize(0);
  for (int64_t size : input.getShape())
    work *= size;
  if (work > maxWork)
    return "its " + std::to_string(work) +
           " multiply-adds are more than max-work (" +
           std::to_string(maxWork) + "): the library's convolution is faster";
  return std::nullopt;
}

/// `value` permuted by `order` (lower ranks broadcast as numpy aligns them,
/// a scalar stays one); a value permuted by the inverse of `order` is its
/// input.
Value inFrame(Value value, ArrayRef<int64_t> order, OpBuilder &builder,
              Location loc) {
  if (auto permute = value.getDefiningOp<PermuteOp>();
      permute &&
      permute.getPermutation() == ArrayRef<int64_t>(invertPermutationVector(order)))
    return permute.getInput();
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == 0)
    return value;
  int64_t rank = order.size();
  if (type.getRank() < rank) {
    SmallVector<int64_t> shape(rank - type.getRank(), 1);
    llvm::append_range(shape, type.getShape());
    value = builder.createOrFold<ReshapeOp>(loc, type.clone(shape), value,
                                            ValueRange{});
    type = cast<RankedTensorType>(value.getType());
  }
  auto frameType = permutedType(type, order);
  // Moving only dims of size 1 (a per-channel [1, C, 1, 1]) keeps the
  // elements' order: a reshape, which folds into the reshapes around it
  // instead of a view made on every call.
  SmallVector<int64_t> kept;
  for (int64_t dim : order)
    if (type.getDimSize(dim) != 1)
      kept.push_back(dim);
  if (llvm::is_sorted(kept))
    return builder.createOrFold<ReshapeOp>(loc, frameType, value, ValueRange{});
  return builder.createOrFold<PermuteOp>(loc, frameType, value,
                                         builder.getDenseI64ArrayAttr(order));
}

/// A clone of pointwise `op` that computes in the frame `order` permutes
/// to (its operands permuted alike), before `op`.
Operation *inFrame(Operation *op, ArrayRef<int64_t> order, OpBuilder &builder) {
  Location loc = op->getLoc();
  builder.setInsertionPoint(op);
  SmallVector<Value> operands;
  for (Value operand : op->getOperands())
    operands.push_back(inFrame(operand, order, builder, loc));
  Operation *moved = builder.clone(*op);
  moved->setOperands(operands);
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  moved->getResult(0).setType(permutedType(type, order));
  return moved;
}

/// Whether `op` is a pointwise op on static tensors of at most `rank` dims
/// with one result of `rank` dims (it does not broadcast the value it reads
/// to more dims).
bool sinkable(Operation *op, int64_t rank) {
  if (!op->hasTrait<PointwiseTrait>() || op->getNumResults() != 1)
    return false;
  auto fits = [&](Value value) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    return type && type.hasStaticShape() && type.getRank() <= rank;
  };
  Value result = op->getResult(0);
  return fits(result) && cast<RankedTensorType>(result.getType()).getRank() == rank &&
         llvm::all_of(op->getOperands(), fits);
}

struct BrazeConvolutionGemmsPass
    : braze::impl::BrazeConvolutionGemmsBase<BrazeConvolutionGemmsPass> {
  using BrazeConvolutionGemmsBase::BrazeConvolutionGemmsBase;

  void runOnOperation() override {
    if (maxWork <= 0)
      return;
    SmallVector<ConvolutionOp> convolutions;
    getOperation()->walk([&](ConvolutionOp op) { convolutions.push_back(op); });
    OpBuilder builder(&getContext());
    llvm::DenseSet<Operation *> backs;
    for (ConvolutionOp conv : convolutions) {
      bool oneByOne = false;
      if (std::optional<std::string> why = whyNot(conv, maxWork, oneByOne)) {
        if (remarks && oneByOne)
          conv->emitRemark("1x1 convolution left to the library: ") << *why;
        continue;
      }
      backs.insert(asGemm(conv, builder));
      ++numConvolutions;
    }
    if (backs.empty())
      return;
    // In program order, so an op's operands are in the product's frame
    // before the op is looked at.
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops)
      if (PermuteOp back = frameOf(op, backs)) {
        backs.insert(sink(op, back, builder));
        ++numSunk;
      }
    for (Operation *back : backs) {
      foldPermutesOf(cast<PermuteOp>(back));
      if (back->use_empty())
        back->erase();
    }
  }

  /// The permute back from a product's frame that `op`, a pointwise op it
  /// can move into that frame, reads; or null.
  static PermuteOp frameOf(Operation *op,
                           const llvm::DenseSet<Operation *> &backs) {
    for (Value operand : op->getOperands()) {
      auto back = operand.getDefiningOp<PermuteOp>();
      if (back && backs.contains(back) &&
          sinkable(op, back.getPermutation().size()))
        return back;
    }
    return nullptr;
  }

  /// Replaces `conv` by a GEMM over its channels-last rows; returns the
  /// permute from the product's frame back to the convolution's.
  Operation *asGemm(ConvolutionOp conv, OpBuilder &builder) {
    Location loc = conv.getLoc();
    builder.setInsertionPoint(conv);
    auto input = cast<RankedTensorType>(conv.getInput().getType());
    auto weight = cast<RankedTensorType>(conv.getWeight().getType());
    int64_t rank = input.getRank();
    // Channels to the end: [N, spatial..., C].
    SmallVector<int64_t> toLast{0};
    for (int64_t dim = 2; dim < rank; ++dim)
      toLast.push_back(dim);
    toLast.push_back(1);
    auto lastType = permutedType(input, toLast);
    Value rows = builder.createOrFold<PermuteOp>(
        loc, lastType, conv.getInput(), builder.getDenseI64ArrayAttr(toLast));
    auto rowsPermute = rows.getDefiningOp<PermuteOp>();
    int64_t pixels = input.getNumElements() / input.getDimSize(1);
    int64_t channels = input.getDimSize(1), outputs = weight.getDimSize(0);
    Type element = input.getElementType();
    rows = builder.createOrFold<ReshapeOp>(
        loc, RankedTensorType::get({pixels, channels}, element), rows,
        ValueRange{});
    Value matrix = ReshapeOp::create(
        builder, loc, RankedTensorType::get({outputs, channels}, element),
        conv.getWeight(), ValueRange{});
    matrix = PermuteOp::create(
        builder, loc, RankedTensorType::get({channels, outputs}, element),
        matrix, builder.getDenseI64ArrayAttr({1, 0}));
    auto productType = RankedTensorType::get({pixels, outputs}, element);
    Value product =
        conv.getBias()
            ? AddmmOp::create(builder, loc, productType, conv.getBias(), rows,
                              matrix, builder.getF64FloatAttr(1.0),
                              builder.getF64FloatAttr(1.0))
                  .getResult()
            : MatmulOp::create(builder, loc, productType, rows, matrix)
                  .getResult();
    auto resultType = cast<RankedTensorType>(conv.getType());
    product = ReshapeOp::create(builder, loc, permutedType(resultType, toLast),
                                product, ValueRange{});
    auto back = PermuteOp::create(
        builder, loc, resultType, product,
        builder.getDenseI64ArrayAttr(invertPermutationVector(toLast)));
    conv.replaceAllUsesWith(back.getResult());
    conv->erase();
    if (rowsPermute)
      hoist(rowsPermute, builder);
    return back;
  }

  /// `op` computed in the frame `back` permutes from; returns the permute
  /// of its result back.
  PermuteOp sink(Operation *op, PermuteOp back, OpBuilder &builder) {
    Operation *moved = inFrame(
        op, invertPermutationVector(back.getPermutation()), builder);
    auto next = PermuteOp::create(builder, op->getLoc(),
                                  op->getResult(0).getType(),
                                  moved->getResult(0), back.getPermutationAttr());
    op->getResult(0).replaceAllUsesWith(next.getResult());
    op->erase();
    return next;
  }

  /// Moves `permute` (into a GEMM's channels-last rows) above the pointwise
  /// ops that compute its input for it alone, and those before them: the
  /// kernel they become then computes the rows in their order, reading a
  /// convolution's result through its channels-last view (a GEMM operand
  /// permuted after the kernel was a strided copy).
  void hoist(PermuteOp permute, OpBuilder &builder) {
    SmallVector<PermuteOp> work{permute};
    while (!work.empty()) {
      PermuteOp next = work.pop_back_val();
      Value input = next.getInput();
      Operation *def = input.getDefiningOp();
      ArrayRef<int64_t> order = next.getPermutation();
      if (!def || !input.hasOneUse() || !sinkable(def, order.size()))
        continue;
      Operation *moved = inFrame(def, order, builder);
      next.replaceAllUsesWith(moved->getResult(0));
      next->erase();
      def->erase();
      ++numHoisted;
      for (Value operand : moved->getOperands())
        if (auto above = operand.getDefiningOp<PermuteOp>();
            above && above.getPermutation() == order)
          work.push_back(above);
    }
  }
};
} // namespace
