//===- SizeBounds.h - what the symbol ranges say about sizes ----*- C++ -*-===//
//
// The ranges of the shape symbols (`braze.symbols` on the module or the
// function: [min, max], max -1 when unbounded), which the executor checks
// on every call, applied to sizes: a function argument's dim (or index
// argument) whose `braze.dims` entry is one symbol.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "Dialect/BrazeOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

namespace braze {
class SizeBounds {
public:
  explicit SizeBounds(mlir::func::FuncOp func);

  /// The most `size` (an index value) can be: a constant, a `tensor.dim`
  /// of a bounded dim, or a bounded index argument; kDynamic where nothing
  /// bounds it (derived expressions such as "2*s0" are not evaluated).
  int64_t of(mlir::Value size);
  /// The most dim `position` of `tensor` can be: static, a function
  /// argument's bounded dim, or the extent of the kernel that made it.
  int64_t ofDim(mlir::Value tensor, int64_t position);
  /// The most the extent of `kernel`'s dim `dim` can be.
  int64_t extent(KernelOp kernel, unsigned dim);
  /// The least dim `position` of `tensor` can be: static, or a function
  /// argument's dim of a symbol with a range; 0 where nothing says more.
  int64_t leastOfDim(mlir::Value tensor, int64_t position);

private:
  /// The range of the symbol of dim `position` of function argument
  /// `argument`, if it has one.
  std::optional<std::pair<int64_t, int64_t>>
  argumentRange(mlir::BlockArgument argument, int64_t position);

  mlir::func::FuncOp func;
  // Per symbol: min, max (kDynamic: unbounded).
  llvm::StringMap<std::pair<int64_t, int64_t>> ranges;
};
} // namespace braze
