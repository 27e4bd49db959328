//===- FlashAttention.cpp - the verifier of braze.flash_attention ---------===//

#include "Dialect/BrazeOps.h"

using namespace mlir;
using namespace braze;

LogicalResult FlashAttentionOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(),
                             getMask(), getResult(), getCausal(), getGqa(),
                             getScale().convertToDouble())))
    return failure();
  if (getQBlock() < 1 || getKvBlock() < 1)
    return emitOpError("q_block and kv_block must be at least 1, got ")
           << getQBlock() << " and " << getKvBlock();
  return success();
}
