//===- BrazeDialect.h - the braze dialect -----------------------*- C++ -*-===//

#ifndef BRAZE_DIALECT_BRAZEDIALECT_H
#define BRAZE_DIALECT_BRAZEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "braze/BrazeDialect.h.inc"

#endif // BRAZE_DIALECT_BRAZEDIALECT_H
