//===- LowerAttention.cpp - the braze-lower-attention pass ----------------===//
//
// Each braze.attention becomes a braze.flash_attention (a generated kernel)
// with its schedule: the query rows per work item and the keys per block,
// and the order of its result: the one its only reader, a permute, wants.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace braze {
#define GEN_PASS_DEF_BRAZELOWERATTENTION
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// Whether a reshape from `from` to `to` changes only the dims before the
/// last three, all static with one element count: the reshape of a result
/// in [B..., H, L, Ev] order, done after it is permuted, gives the same
/// (and needs no size operands: at most one dynamic dim).
bool keepsLastThreeDims(RankedTensorType from, RankedTensorType to) {
  if (to.getRank() < 3 || to.getNumDynamicDims() > 1 ||
      from.getShape().take_back(3) != to.getShape().take_back(3))
    return false;
  auto leading = [](RankedTensorType type) -> std::optional<int64_t> {
    int64_t product = 1;
    for (int64_t size : type.getShape().drop_back(3)) {
      if (ShapedType::isDynamic(size))
        return std::nullopt;
      product *= size;
    }
    return product;
  };
  std::optional<int64_t> before = leading(from), after = leading(to);
  return before && after && *before == *after;
}

/// The permutation of `rank` dims that swaps the two before the last:
/// [B..., H, L, Ev] to [B..., L, H, Ev].
SmallVector<int64_t> swapHeadsAndRows(int64_t rank) {
  auto order = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(order[rank - 3], order[rank - 2]);
  return order;
}

/// The order in which the attention's result is wanted, with the reshapes
/// and the permute that read it so: each the only reader of the one before.
struct ResultOrder {
  SmallVector<int64_t> order; // result dim i is the attention's dim order[i]
  SmallVector<ReshapeOp> reshapes;
  PermuteOp permute;
};

/// The order a permute of attention result `result` ([B..., H, L, Ev])
/// wants, or nothing: a permute that reads the result directly and keeps
/// Ev last, or one after reshapes that together join or split only the
/// batch dims before the heads, and then swaps heads and rows.
std::optional<ResultOrder> orderOfReader(Value result) {
  auto type = cast<RankedTensorType>(result.getType());
  int64_t rank = type.getRank();
  SmallVector<ReshapeOp> reshapes;
  while (result.hasOneUse()) {
    Operation *reader = *result.getUsers().begin();
    if (auto reshape = dyn_cast<ReshapeOp>(reader)) {
      reshapes.push_back(reshape);
      result = reshape.getResult();
      continue;
    }
    auto permute = dyn_cast<PermuteOp>(reader);
    if (!permute)
      return std::nullopt;
    ArrayRef<int64_t> permutation = permute.getPermutation();
    if (reshapes.empty()) {
      if (permutation.back() != rank - 1 ||
          llvm::equal(permutation, llvm::seq<int64_t>(0, rank)))
        return std::nullopt;
      return ResultOrder{SmallVector<int64_t>(permutation), reshapes, permute};
    }
    // Through reshapes: the permute of the reshaped dims must be the swap.
    if (rank < 3 || permutation.size() < 3 ||
        !keepsLastThreeDims(type, cast<RankedTensorType>(result.getType())) ||
        permutation != ArrayRef<int64_t>(swapHeadsAndRows(permutation.size())))
      return std::nullopt;
    return ResultOrder{swapHeadsAndRows(rank), reshapes, permute};
  }
  return std::nullopt;
}

struct BrazeLowerAttentionPass
    : braze::impl::BrazeLowerAttentionBase<BrazeLowerAttentionPass> {
  using BrazeLowerAttentionBase::BrazeLowerAttentionBase;

  void runOnOperation() override {
    if (qBlock < 1 || kvBlock < 1) {
      getOperation()->emitError("braze-lower-attention: q-block and kv-block "
                                "must be at least 1, got ")
          << int64_t(qBlock) << " and " << int64_t(kvBlock);
      return signalPassFailure();
    }
    SmallVector<AttentionOp> attentions;
    getOperation()->walk([&](AttentionOp op) { attentions.push_back(op); });
    OpBuilder builder(&getContext());
    for (AttentionOp op : attentions) {
      auto query = cast<RankedTensorType>(op.getQuery().getType());
      // The library has no soft-capped attention (its realisation spells
      // the scores out in f32), so a capped one is lowered in any type.
      if (!halves && !op.getSoftcap() &&
          query.getElementType().getIntOrFloatBitWidth() == 16) {
        if (remarks)
          op->emitRemark("braze.attention kept: f16/bf16 attention stays the "
                         "library's (halves=false)");
        continue;
      }
      int64_t rank = query.getRank();
      int64_t length = query.getDimSize(rank - 2);
      int64_t keys =
          cast<RankedTensorType>(op.getKey().getType()).getDimSize(rank - 2);
      // A block never larger than the static extent it walks: a smaller
      // buffer, and a decode step (one query row) takes one row.
      int64_t rows = ShapedType::isDynamic(length)
                         ? int64_t(qBlock)
                         : std::min<int64_t>(qBlock, std::max<int64_t>(length, 1));
      int64_t columns = ShapedType::isDynamic(keys)
                            ? int64_t(kvBlock)
                            : std::min<int64_t>(kvBlock, std::max<int64_t>(keys, 1));
      if (!op.getScale() && query.isDynamicDim(rank - 1)) {
        if (remarks)
          op->emitRemark("braze.attention kept: its default scale needs a "
                         "static embedding size");
        continue;
      }
      double scale = op.getScale()
                         ? op.getScale()->convertToDouble()
                         : 1.0 / std::sqrt(double(query.getDimSize(rank - 1)));
      bool grouped =
          groupHeads && !whyHeadsCannotGroup(op.getQuery(), op.getKey(),
                                             op.getMask(), op.getCausal(),
                                             op.getGqa());
      std::optional<ResultOrder> reader =
          readerOrder ? orderOfReader(op.getResult()) : std::nullopt;
      auto type = cast<RankedTensorType>(op.getResult().getType());
      if (reader) {
        SmallVector<int64_t> shape;
        for (int64_t dim : reader->order)
          shape.push_back(type.getDimSize(dim));
        type = type.clone(shape);
      }
      builder.setInsertionPoint(op);
      auto flash = FlashAttentionOp::create(
          builder, op.getLoc(), type, op.getQuery(), op.getKey(),
          op.getValue(), op.getMask(), builder.getF64FloatAttr(scale),
          op.getSoftcapAttr(), op.getCausalAttr(), op.getGqaAttr(), op.getMaskedRowsNanAttr(),
          builder.getI64IntegerAttr(rows), builder.getI64IntegerAttr(columns),
          grouped ? builder.getUnitAttr() : UnitAttr(),
          reader ? builder.getDenseI64ArrayAttr(reader->order)
                 : DenseI64ArrayAttr());
      if (remarks)
        op->emitRemark() << "braze.attention lowered to braze.flash_attention "
                            "(q_block "
                         << rows << ", kv_block " << columns
                         << (grouped ? ", the query heads of a key/value head "
                                       "in one work item"
                                     : "")
                         << (reader ? ", in the order its permute reads" : "")
                         << ")";
      if (reader) {
        // The permute's value is the new result, once the dims before the
        // heads are given the permute's sizes.
        PermuteOp permute = reader->permute;
        Value ordered = flash.getResult();
        if (ordered.getType() != permute.getResult().getType()) {
          builder.setInsertionPoint(permute);
          ordered = ReshapeOp::create(builder, permute.getLoc(),
                                      permute.getResult().getType(), ordered,
                                      ValueRange());
        }
        permute.getResult().replaceAllUsesWith(ordered);
        permute->erase();
        for (ReshapeOp reshape : llvm::reverse(reader->reshapes))
          reshape->erase();
        ++numOrdered;
      } else {
        op.replaceAllUsesWith(flash.getResult());
      }
      op->erase();
      ++numLowered;
    }
  }
};
} // namespace
