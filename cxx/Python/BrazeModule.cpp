//===- BrazeModule.cpp - the braze._braze Python extension ----------------===//
//
// A thin binding: everything goes through the C API and the upstream
// bindings' capsules, so this module shares the single MLIR copy that lives in
// the `mlir` package's libMLIRPythonCAPI.so.
//
//===----------------------------------------------------------------------===//

#include "CAPI/Braze.h"
#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"

namespace nb = nanobind;

NB_MODULE(_braze, m) {
  m.doc() = "Native part of braze: dialect and pass registration.";

  m.def(
      "register_dialect",
      [](MlirDialectRegistry registry) {
        mlirDialectHandleInsertDialect(mlirGetDialectHandle__braze__(),
                                       registry);
      },
      nb::arg("registry"),
      "Adds the braze dialect to an mlir.ir.DialectRegistry.");

  m.def(
      "parse_module",
      [](MlirContext context, const std::string &source,
         const std::string &sourceName) -> nb::object {
        MlirModule module = brazeParseModule(
            context, mlirStringRefCreate(source.data(), source.size()),
            mlirStringRefCreate(sourceName.data(), sourceName.size()));
        if (mlirModuleIsNull(module))
          return nb::none();
        return nb::cast(module);
      },
      nb::arg("context"), nb::arg("source"), nb::arg("source_name"),
      "Parses a module (None on error; diagnostics go to the context).");

  m.def("register_passes", &brazeRegisterPasses,
        "Adds every braze pass to MLIR's global pass registry.");
}
