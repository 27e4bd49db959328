//===- IterationDomain.h - the domain a fusible op iterates over -*- C++ -*-===//
//
// Shared by fusion (which groups ops whose domains agree) and kernel lowering
// (which turns a group into one loop nest over the merged domain).
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_TRANSFORMS_ITERATIONDOMAIN_H
#define BRAZE_TRANSFORMS_ITERATIONDOMAIN_H

#include "Dialect/BrazeOps.h"

#include <optional>

namespace braze {
inline bool isReduction(mlir::Operation *op) {
  return op->hasTrait<ReductionTrait>();
}

/// The shape an op iterates over: its result's, or a reduction's input's.
mlir::ArrayRef<int64_t> domainOf(mlir::Operation *op);

/// Two domains fit one kernel when they have one rank and broadcast.
std::optional<llvm::SmallVector<int64_t>>
mergeDomains(mlir::ArrayRef<int64_t> a, mlir::ArrayRef<int64_t> b);

/// The dims a reduction reduces; empty for other ops.
llvm::SmallVector<int64_t> reducedDims(mlir::Operation *op);
} // namespace braze

#endif // BRAZE_TRANSFORMS_ITERATIONDOMAIN_H
