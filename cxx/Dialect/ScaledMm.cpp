//===- ScaledMm.cpp - the verifier of braze.scaled_mm ---------------------===//

#include "Dialect/BrazeOps.h"

using namespace mlir;
using namespace braze;

namespace {
/// A per-tensor scale: one element (rank 0, [1] or [1, 1]).
bool isSingleton(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getRank() <= 2 &&
         llvm::all_of(type.getShape(), [](int64_t d) { return d == 1; });
}
} // namespace

bool ScaledMmOp::isRowWise() {
  return !isSingleton(getLhsScale()) || !isSingleton(getRhsScale());
}

LogicalResult ScaledMmOp::verify() {
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  auto rhs = cast<RankedTensorType>(getRhs().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (lhs.getRank() != 2 || rhs.getRank() != 2 || result.getRank() != 2)
    return emitOpError("lhs, rhs and the result must be matrices (rank 2), "
                       "got ranks ")
           << lhs.getRank() << ", " << rhs.getRank() << " and "
           << result.getRank();
  int64_t m = lhs.getDimSize(0), k = lhs.getDimSize(1), n = rhs.getDimSize(1);
  if (!dimsAgree(k, rhs.getDimSize(0)))
    return emitOpError("contraction dim mismatch: lhs has K = ")
           << formatDim(k) << " but rhs has K = "
           << formatDim(rhs.getDimSize(0));
  if (!dimsAgree(m, result.getDimSize(0)) || !dimsAgree(n, result.getDimSize(1)))
    return emitOpError("result must be [M, N] = [")
           << formatDim(m) << ", " << formatDim(n) << "], got " << result;
  if (isRowWise()) {
    auto lhsScale = cast<RankedTensorType>(getLhsScale().getType());
    auto rhsScale = cast<RankedTensorType>(getRhsScale().getType());
    bool rowsFit = lhsScale.getRank() == 2 &&
                   dimsAgree(lhsScale.getDimSize(0), m) &&
                   lhsScale.getDimSize(1) == 1;
    bool columnsFit = rhsScale.getRank() == 2 && rhsScale.getDimSize(0) == 1 &&
                      dimsAgree(rhsScale.getDimSize(1), n);
    if (!rowsFit || !columnsFit)
      return emitOpError("scales must be both per tensor (one element: rank "
                         "0, [1] or [1, 1]) or both row-wise (lhs_scale [M, "
                         "1] = [")
             << formatDim(m) << ", 1], rhs_scale [1, N] = [1, "
             << formatDim(n) << "]), got " << lhsScale << " and " << rhsScale;
  }
  if (Value bias = getBias()) {
    auto type = cast<RankedTensorType>(bias.getType());
    if (type.getRank() != 1 || !dimsAgree(type.getDimSize(0), n))
      return emitOpError("bias must be [N] = [")
             << formatDim(n) << "], got " << type;
  }
  if (Value scale = getScaleResult(); scale && !isSingleton(scale))
    return emitOpError("scale_result must have one element (rank 0, [1] or "
                       "[1, 1]), got ")
           << scale.getType();
  return success();
}
