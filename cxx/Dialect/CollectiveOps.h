//===- CollectiveOps.h - collectives in the IR ------------------*- C++ -*-===//
//
// What the collective ops share: the `!braze.work` type, the resource every
// collective reads and writes, the trait marking `*_start` ops, and the
// accessors passes use to read any start op.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_DIALECT_COLLECTIVEOPS_H
#define BRAZE_DIALECT_COLLECTIVEOPS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_TYPEDEF_CLASSES
#include "braze/BrazeTypes.h.inc"

namespace braze {
/// The effect every collective has: their relative order is observable
/// (every rank must issue a group's collectives in one order).
struct CollectiveResource
    : public mlir::SideEffects::Resource::Base<CollectiveResource> {
  llvm::StringRef getName() final { return "braze::Collective"; }
};

/// Marks the `*_start` ops: operand 0 is the input, result 0 the work, and
/// `group` / `ranks` name the process group.
template <typename ConcreteType>
class CollectiveStartTrait
    : public mlir::OpTrait::TraitBase<ConcreteType, CollectiveStartTrait> {};

/// True for a `*_start` op.
bool isCollectiveStart(mlir::Operation *op);
/// True for a `*_start` op or a `braze.wait`.
bool isCollective(mlir::Operation *op);
/// The group a start or wait belongs to (a wait's is its start's).
llvm::StringRef collectiveGroup(mlir::Operation *op);
/// The start a `braze.wait` completes, or null for another op.
mlir::Operation *startOfWait(mlir::Operation *op);
/// `'braze.all_reduce_start' at <loc>`: how diagnostics name a collective.
std::string describeCollective(mlir::Operation *op);
} // namespace braze

#endif // BRAZE_DIALECT_COLLECTIVEOPS_H
