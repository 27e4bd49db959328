//===- ViewFolding.h - kernels read views and concats in place --*- C++ -*-===//
//
// At run time every op result that is not a view is contiguous, and views
// keep their source's strides; a reshape is a view when torch's stride rule
// allows it and a copy otherwise. `viewLayout` works out those strides (for
// static shapes, and for dynamic ones where the strides do not depend on the
// dynamic sizes); a kernel reads a view's source through the view's index
// map, and a concat's pieces through selects (`foldViewsIntoKernel`).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "Dialect/BrazeOps.h"

#include "mlir/IR/Builders.h"

namespace braze {
inline mlir::RankedTensorType typeOf(mlir::Value value) {
  return mlir::cast<mlir::RankedTensorType>(value.getType());
}

/// `type` with its dims in `order` (a permute's result type).
inline mlir::RankedTensorType permutedType(mlir::RankedTensorType type,
                                           llvm::ArrayRef<int64_t> order) {
  llvm::SmallVector<int64_t> shape;
  for (int64_t dim : order)
    shape.push_back(type.getDimSize(dim));
  return type.clone(shape);
}

inline bool isView(mlir::Operation *op) {
  return mlir::isa_and_present<PermuteOp, ExpandOp, SliceOp, ReshapeOp>(op);
}

/// The element strides a value has at run time (kDynamic where they depend
/// on a dynamic size); `contiguous` when they are row-major's.
struct Layout {
  llvm::SmallVector<int64_t> strides;
  bool contiguous = false;
};

/// torch's rule for `view`: the strides of `from` (with `layout`) reshaped to
/// `to`, or nothing when no view has that shape (torch then copies).
std::optional<llvm::SmallVector<int64_t>>
viewStrides(llvm::ArrayRef<int64_t> from, const Layout &layout,
            llvm::ArrayRef<int64_t> to);

/// The run-time layout of `value`, or nothing when a reshape on the way makes
/// a copy (or a slice has operand bounds: its strides are unknown here).
std::optional<Layout> viewLayout(mlir::Value value);

/// Whether a BLAS reads the last two dims of a tensor with `layout` and
/// `shape` in place: one of them has unit stride (or size 1).
bool isMatrixLayout(llvm::ArrayRef<int64_t> shape, const Layout &layout);

/// Whether a kernel can read `view`'s source through an index map.
bool hasIndexMap(mlir::Operation *view);

/// Folds every foldable view chain and concat of `kernel`'s inputs; returns
/// how many views and concats it folded.
unsigned foldViewsIntoKernel(KernelOp kernel);

/// A kernel copying `value` into a contiguous tensor, reading its views'
/// source (`dynamicSizes`: its dynamic dims, computed before it).
mlir::Value copyKernel(mlir::OpBuilder &builder, mlir::Location loc,
                       mlir::Value value, mlir::ValueRange dynamicSizes = {});

/// Folds the permutes that read `permute` by PermuteOp's folder: each
/// reads `permute`'s input through the composed order, or the input itself
/// where the two orders cancel (a permute into a layout and one out of it,
/// made by two passes, would otherwise be two views made on every call).
void foldPermutesOf(PermuteOp permute);

/// Whether a copy kernel can make `value`: its shape is static and it
/// would read no view that copies.
bool copyReadsInPlace(mlir::Value value);
} // namespace braze
