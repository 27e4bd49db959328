//===- KernelEdits.h - edits of a braze.kernel -----------------*- C++ -*-===//
//
// Edits of a braze.kernel shared by the kernel-form passes: braze-collapse-dims
// (which merges two domain dims into one) and braze-split-dims (which splits
// one into two) read inputs and write results through braze.reshape views,
// which need the sizes of dynamic dims as values before the kernel;
// braze-fold-layouts and braze-inline-kernels add inputs, some of them ones
// the kernel has already.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_TRANSFORMS_KERNELEDITS_H
#define BRAZE_TRANSFORMS_KERNELEDITS_H

#include "Dialect/BrazeOps.h"

#include "mlir/IR/Builders.h"

namespace braze {
/// A tensor access's index operands (tensor.extract or braze.store).
mlir::OperandRange indicesOf(mlir::Operation *access);

/// The sizes operands a braze.reshape to `type` needs: one per dynamic dim
/// when there are several, none otherwise (`sizeOf` gives a dim's size).
llvm::SmallVector<mlir::Value>
reshapeSizes(mlir::RankedTensorType type,
             llvm::function_ref<mlir::Value(int64_t)> sizeOf);

/// The size of dim `position` of `tensor`, as a value.
mlir::Value sizeBefore(mlir::Value tensor, int64_t position,
                       mlir::OpBuilder &builder, mlir::Location loc);

/// The extent of domain dim `dim` of `kernel`, as a value before the kernel.
mlir::Value extentBefore(KernelOp kernel, unsigned dim,
                         mlir::OpBuilder &builder);

/// Makes each of `reshapes` (made by a pass, in order) that reads another
/// reshape read that one's input instead (only the row-major order matters),
/// so that reshaping twice makes one view per tensor, not a chain; erases
/// the reshapes nothing reads any more.
void shortenReshapeChains(llvm::ArrayRef<ReshapeOp> reshapes);

/// Reads each value `kernel` takes as several inputs through the first
/// (a max pool's windows all read its input; folded concats add the same
/// pieces again): fewer arguments, which some targets cap.
void mergeRepeatedInputs(KernelOp kernel);
} // namespace braze

#endif // BRAZE_TRANSFORMS_KERNELEDITS_H
