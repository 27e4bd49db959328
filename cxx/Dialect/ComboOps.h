//===- ComboOps.h - work items of combo sub-kernels -------------*- C++ -*-===//
//
// What `braze.combo`'s verifier and braze-combo-kernels both need: how many
// work items a sub-kernel has for a given block.
//
//===----------------------------------------------------------------------===//

#ifndef BRAZE_DIALECT_COMBOOPS_H
#define BRAZE_DIALECT_COMBOOPS_H

#include "Dialect/BrazeOps.h"

#include <optional>

namespace braze {
/// The points a work item of `kernel` spans a block of: every point of its
/// domain when it reduces nothing, else its parallel points. nullopt when an
/// extent is dynamic.
std::optional<int64_t> comboBlockedPoints(KernelOp kernel);

/// ceil(points / block): the work items of `kernel` with `block`, nullopt
/// when its points are not static.
std::optional<int64_t> comboWorkItems(KernelOp kernel, int64_t block);

/// The dispatch modes `braze.combo` accepts.
inline constexpr llvm::StringLiteral kComboDispatchModes[] = {
    "sequential", "round_robin", "flattened"};
} // namespace braze

#endif // BRAZE_DIALECT_COMBOOPS_H
