//===- IterationDomain.cpp - the domain a fusible op iterates over --------===//

#include "Transforms/IterationDomain.h"

using namespace mlir;

namespace braze {
ArrayRef<int64_t> domainOf(Operation *op) {
  Value shaped = isReduction(op) ? op->getOperand(0) : op->getResult(0);
  return cast<RankedTensorType>(shaped.getType()).getShape();
}

std::optional<SmallVector<int64_t>> mergeDomains(ArrayRef<int64_t> a,
                                                 ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return std::nullopt;
  SmallVector<int64_t> merged;
  for (auto [x, y] : llvm::zip_equal(a, b)) {
    if (x == y || y == 1) {
      merged.push_back(x);
    } else if (x == 1) {
      merged.push_back(y);
    } else if (ShapedType::isDynamic(x) || ShapedType::isDynamic(y)) {
      // The ops relating them broadcast, so the sizes agree at run time.
      merged.push_back(ShapedType::isDynamic(x) ? y : x);
    } else {
      return std::nullopt;
    }
  }
  return merged;
}

SmallVector<int64_t> reducedDims(Operation *op) {
  if (!isReduction(op))
    return {};
  return SmallVector<int64_t>(
      cast<DenseI64ArrayAttr>(op->getInherentAttr("dims").value())
          .asArrayRef());
}
} // namespace braze
