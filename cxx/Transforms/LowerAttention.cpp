//===- LowerAttention.cpp - the braze-lower-attention pass ----------------===//
//
// Each braze.attention becomes a braze.flash_attention (a generated kernel)
// with its schedule: the query rows per work item and the keys per block.
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
      builder.setInsertionPoint(op);
      auto flash = FlashAttentionOp::create(
          builder, op.getLoc(), op.getType(), op.getQuery(), op.getKey(),
          op.getValue(), op.getMask(), builder.getF64FloatAttr(scale),
          op.getSoftcapAttr(), op.getCausalAttr(), op.getGqaAttr(), op.getMaskedRowsNanAttr(),
          builder.getI64IntegerAttr(rows), builder.getI64IntegerAttr(columns),
          grouped ? builder.getUnitAttr() : UnitAttr(),
          op.getResultOrderAttr());
      if (remarks)
        op->emitRemark() << "braze.attention lowered to braze.flash_attention "
                            "(q_block "
                         << rows << ", kv_block " << columns
                         << (grouped ? ", the query heads of a key/value head "
                                       "in one work item"
                                     : "")
                         << ")";
      op.replaceAllUsesWith(flash.getResult());
      op->erase();
      ++numLowered;
    }
  }
};
} // namespace
