//===- Passes.h - braze passes ----------------------------------*- C++ -*-===//

#ifndef BRAZE_TRANSFORMS_PASSES_H
#define BRAZE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace braze {
#define GEN_PASS_DECL
#include "braze/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "braze/Passes.h.inc"
} // namespace braze

#endif // BRAZE_TRANSFORMS_PASSES_H
