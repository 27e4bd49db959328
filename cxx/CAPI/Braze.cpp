//===- Braze.cpp - C API of the braze dialect and passes ------------------===//

#include "CAPI/Braze.h"
#include "Dialect/BrazeDialect.h"
#include "Transforms/Passes.h"
#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Braze, braze, braze::BrazeDialect)

void brazeRegisterPasses(void) {
  // The registry rejects a second registration of the same flag, and Python
  // may import the module from several entry points.
  static bool registered = [] {
    braze::registerBrazePasses();
    return true;
  }();
  (void)registered;
}

MlirModule brazeParseModule(MlirContext context, MlirStringRef source,
                            MlirStringRef sourceName) {
  mlir::ParserConfig config(unwrap(context));
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(unwrap(source), config,
                                              unwrap(sourceName));
  return wrap(module.release());
}
