//===- ScalarLowering.h - braze's tensor ops as scalar arith/math -*- C++ -*-===//
//
// Shared by the passes that build scalar bodies: braze-lower-kernels (the
// body of a braze.kernel) and braze-epilogue-fusion (the epilogue of a
// braze.fused_gemm). One lowering, so a pointwise op computes the same in a
// kernel and in a GEMM's epilogue.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_TRANSFORMS_SCALARLOWERING_H
#define BRAZE_TRANSFORMS_SCALARLOWERING_H

#include "Dialect/BrazeOps.h"

#include "mlir/IR/Builders.h"

namespace braze {
/// Builds the scalar computation of braze's pointwise ops at the builder's
/// insertion point.
class ScalarLowering {
public:
  ScalarLowering(mlir::OpBuilder &builder, mlir::Location loc)
      : builder(builder), loc(loc) {}

  /// The scalar result of pointwise `op` on the scalars `args` (one per
  /// operand, in the operands' element types), or failure (with an error on
  /// `op`) when it has no scalar form.
  mlir::FailureOr<mlir::Value> lowerPointwise(mlir::Operation *op,
                                              mlir::ArrayRef<mlir::Value> args);
  /// Element conversion with PyTorch's rules (see braze.cast).
  mlir::Value convert(mlir::Value value, mlir::Type to);

  mlir::Value floatConstant(mlir::Type type, double value);
  mlir::Value intConstant(mlir::Type type, int64_t value);

private:
  mlir::OpBuilder &builder;
  mlir::Location loc;
};

inline bool isHalf(mlir::Type type) { return type.isF16() || type.isBF16(); }

/// Makes half-precision arithmetic explicit in a scalar body, so every target
/// rounds alike: f16/bf16 values are widened to f32 where they enter (a
/// `tensor.extract` or a block argument: `arith.extf` after it), every op
/// computes in f32, a conversion to a half type rounds explicitly
/// (`arith.truncf` to it, then `arith.extf` back), and a value is narrowed to
/// a half type where it leaves (`arith.truncf` before a braze.store or a
/// braze.gemm_yield operand that `storedAs` says holds that type). Half
/// constants become the same value in f32. The results are what they were:
/// PyTorch's rules round at the same places.
///
/// `storedAs(use)`: the element type an operand of an op that writes results
/// (braze.store, braze.gemm_yield) is written as; null for any other use.
void computeHalvesInF32(mlir::Block &body,
                        llvm::function_ref<mlir::Type(mlir::OpOperand &)> storedAs);

/// Drops the rounding of `arith.extf(arith.truncf(v))` in `body` where v is
/// a value of the narrow type already (a widened half, a maximum, minimum,
/// select, negation or absolute value of such values, a constant the narrow
/// type holds exactly): a ReLU's bf16 result computed inside the max pool
/// that reads it (braze-inline-kernels) needs no rounding. Same values; a
/// NaN keeps its payload instead of being made quiet.
void dropExactRoundings(mlir::Block &body);
} // namespace braze

#endif // BRAZE_TRANSFORMS_SCALARLOWERING_H
