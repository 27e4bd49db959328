//===- FlashAttention.cpp - the verifier of braze.flash_attention ---------===//

#include "Dialect/BrazeOps.h"

using namespace mlir;
using namespace braze;

std::optional<std::string> braze::whyHeadsCannotGroup(Value query, Value key,
                                                      Value mask, bool causal,
                                                      bool gqa) {
  auto queryType = cast<RankedTensorType>(query.getType());
  auto keyType = cast<RankedTensorType>(key.getType());
  int64_t rank = queryType.getRank();
  if (!gqa || rank < 3)
    return std::string("grouped query heads (gqa)");
  int64_t heads = queryType.getDimSize(rank - 3);
  int64_t keyHeads = keyType.getDimSize(rank - 3);
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(keyHeads) ||
      heads <= keyHeads)
    return std::string("more query heads than key/value heads, both static");
  if (queryType.getDimSize(rank - 2) != 1)
    return std::string("one query row");
  if (causal)
    return std::string("no causal mask");
  if (mask) {
    auto maskType = cast<RankedTensorType>(mask.getType());
    if (maskType.getRank() >= 3 &&
        maskType.getDimSize(maskType.getRank() - 3) != 1)
      return std::string("a mask the same for every head");
  }
  return std::nullopt;
}

LogicalResult FlashAttentionOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(),
                             getMask(), getResult(), getResultOrder(),
                             getCausal(), getGqa(),
                             getScale().convertToDouble(), getSoftcap())))
    return failure();
  if (getQBlock() < 1 || getKvBlock() < 1)
    return emitOpError("q_block and kv_block must be at least 1, got ")
           << getQBlock() << " and " << getKvBlock();
  if (getGroupedHeads()) {
    if (std::optional<std::string> why =
            whyHeadsCannotGroup(getQuery(), getKey(), getMask(), getCausal(),
                                getGqa()))
      return emitOpError("grouped_heads needs ") << *why;
  }
  return success();
}
