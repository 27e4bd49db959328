//===- BrazeOps.h - braze operations ----------------------------*- C++ -*-===//

#ifndef BRAZE_DIALECT_BRAZEOPS_H
#define BRAZE_DIALECT_BRAZEOPS_H

#include "Dialect/BrazeDialect.h"
#include "Dialect/CollectiveOps.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <optional>
#include <string>

namespace braze {
/// Ops that compute each result element from the operand elements at the same
/// (broadcast) position.
template <typename ConcreteType>
class PointwiseTrait
    : public mlir::OpTrait::TraitBase<ConcreteType, PointwiseTrait> {};

/// Reductions over the `dims` of their `input`, keeping them with `keepdim`.
template <typename ConcreteType>
class ReductionTrait
    : public mlir::OpTrait::TraitBase<ConcreteType, ReductionTrait> {};

/// True when every type in `actual` equals the one in `inferred`, except that
/// a dim inferred dynamic may be static in `actual` (a frontend may know it).
bool isRefinementOf(mlir::TypeRange inferred, mlir::TypeRange actual);

/// `[start : end : step]` of `braze.slice`: each bound an integer or an
/// `index` operand (ShapedType::kDynamic in `staticBounds`).
mlir::ParseResult parseSliceBounds(
    mlir::OpAsmParser &parser,
    llvm::SmallVectorImpl<mlir::OpAsmParser::UnresolvedOperand> &dynamicBounds,
    mlir::DenseI64ArrayAttr &staticBounds);
void printSliceBounds(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                      mlir::OperandRange dynamicBounds,
                      mlir::DenseI64ArrayAttr staticBounds);

/// `braze.iota`'s start or step: an `index` operand or an f64 constant.
mlir::ParseResult
parseIotaTerm(mlir::OpAsmParser &parser,
              std::optional<mlir::OpAsmParser::UnresolvedOperand> &dynamic,
              mlir::FloatAttr &constant);
void printIotaTerm(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                   mlir::Value dynamic, mlir::FloatAttr constant);

/// A dim for messages: its size, or `?` when dynamic.
std::string formatDim(int64_t size);

/// Whether two dims can be one size (equal, or either dynamic).
bool dimsAgree(int64_t a, int64_t b);

/// Whether `type` is an 8-bit float (f8E4M3FN, f8E5M2: braze.scaled_mm's).
bool isFloat8(mlir::Type type);

/// The operand and result checks braze.attention and braze.flash_attention
/// share (shapes, element types, the mask, `causal` against a mask, the
/// scale, the soft cap, the result's order). With `resultOrder`, `result`
/// is the attention's value permuted (result dim i is its dim
/// resultOrder[i], the last kept last).
mlir::LogicalResult
verifyAttention(mlir::Operation *op, mlir::Value query, mlir::Value key,
                mlir::Value value, mlir::Value mask, mlir::Value result,
                std::optional<llvm::ArrayRef<int64_t>> resultOrder,
                bool causal, bool gqa, std::optional<double> scale,
                std::optional<mlir::APFloat> softcap);

/// Why an attention's query heads that share a key/value head cannot be one
/// work item's rows (braze.flash_attention's `grouped_heads`), or nothing
/// when they can: grouped heads (`gqa`, more query heads than key/value
/// heads), one query row, not `causal`, and a mask the same for every head.
std::optional<std::string> whyHeadsCannotGroup(mlir::Value query,
                                               mlir::Value key,
                                               mlir::Value mask, bool causal,
                                               bool gqa);
} // namespace braze

#define GET_OP_CLASSES
#include "braze/BrazeOps.h.inc"

#endif // BRAZE_DIALECT_BRAZEOPS_H
