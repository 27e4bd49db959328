/*===- Braze.h - C API of the braze dialect and passes ------------*- C -*-===*/

#ifndef BRAZE_CAPI_BRAZE_H
#define BRAZE_CAPI_BRAZE_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Braze, braze);

/// Adds every braze pass to MLIR's global pass registry, so textual pipelines
/// (`PassManager.parse`, `mlir-opt`-style flags) can name them. Idempotent.
MLIR_CAPI_EXPORTED void brazeRegisterPasses(void);

/// Parses `source` as a module, wrapping top-level ops in an implicit
/// `builtin.module` as mlir-opt does, with locations naming `sourceName`.
/// Diagnostics go to the context's handlers; returns a null module on error.
MLIR_CAPI_EXPORTED MlirModule brazeParseModule(MlirContext context,
                                               MlirStringRef source,
                                               MlirStringRef sourceName);

#ifdef __cplusplus
}
#endif

#endif /* BRAZE_CAPI_BRAZE_H */
