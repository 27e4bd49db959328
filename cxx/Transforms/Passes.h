//===- Passes.h - braze passes ----------------------------------*- C++ -*-===//

#ifndef BRAZE_TRANSFORMS_PASSES_H
#define BRAZE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace braze {
#define GEN_PASS_DECL
#include "braze/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "braze/Passes.h.inc"
} // namespace braze

#endif // BRAZE_TRANSFORMS_PASSES_H
