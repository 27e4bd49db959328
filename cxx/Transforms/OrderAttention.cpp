//===- OrderAttention.cpp - the braze-order-attention pass ----------------===//
//
// A braze.attention whose only reader permutes its result (after reshapes of
// the batch dims, possibly) takes that order as its own `result_order`, and
// the permute goes: the kernel or the library writes the rows where they
// are read, so no copy is made between them.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/Builders.h"

namespace braze {
#define GEN_PASS_DEF_BRAZEORDERATTENTION
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

struct BrazeOrderAttentionPass
    : braze::impl::BrazeOrderAttentionBase<BrazeOrderAttentionPass> {
  using BrazeOrderAttentionBase::BrazeOrderAttentionBase;

  void runOnOperation() override {
    SmallVector<AttentionOp> attentions;
    getOperation()->walk([&](AttentionOp op) {
      if (!op.getResultOrder())
        attentions.push_back(op);
    });
    OpBuilder builder(&getContext());
    for (AttentionOp op : attentions) {
      std::optional<ResultOrder> reader = orderOfReader(op.getResult());
      if (!reader) {
        if (remarks)
          op->emitRemark("braze.attention kept in its own order: its only "
                         "reader is not a permute of it that keeps Ev last");
        continue;
      }
      auto type = cast<RankedTensorType>(op.getResult().getType());
      // The result takes the permute's order; the reshapes and the permute,
      // its only readers, go, and one reshape gives the dims before the
      // heads the permute's sizes where they differ.
      op.getResult().setType(
          type.clone(applyPermutation(type.getShape(), reader->order)));
      op.setResultOrder(reader->order);
      PermuteOp permute = reader->permute;
      Value ordered = op.getResult();
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
      if (remarks)
        op->emitRemark() << "braze.attention writes the order its permute "
                            "reads (result_order ["
                         << reader->order << "])";
      ++numOrdered;
    }
  }
};
} // namespace
