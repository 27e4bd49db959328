//===- BrazeModule.cpp - the braze._braze Python extension ----------------===//
//
// A thin binding: everything goes through the C API and the upstream
// bindings' capsules, so this module shares the single MLIR copy that lives in
// the `mlir` package's libMLIRPythonCAPI.so.
//
//===----------------------------------------------------------------------===//

#include "CAPI/Braze.h"
#include "mlir-c/Diagnostics.h"
#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"

#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace nb = nanobind;

namespace {
/// One diagnostic as plain data: (severity, location, message, notes).
struct CollectedDiagnostic {
  std::string severity, location, message;
  std::vector<CollectedDiagnostic> notes;

  nb::tuple toPython() const {
    nb::list pythonNotes;
    for (const CollectedDiagnostic &note : notes)
      pythonNotes.append(note.toPython());
    return nb::make_tuple(severity, location, message, pythonNotes);
  }
};

void appendText(MlirStringRef text, void *userData) {
  static_cast<std::string *>(userData)->append(text.data, text.length);
}

CollectedDiagnostic collect(MlirDiagnostic diagnostic) {
  CollectedDiagnostic result;
  switch (mlirDiagnosticGetSeverity(diagnostic)) {
  case MlirDiagnosticError:
    result.severity = "error";
    break;
  case MlirDiagnosticWarning:
    result.severity = "warning";
    break;
  case MlirDiagnosticNote:
    result.severity = "note";
    break;
  case MlirDiagnosticRemark:
    result.severity = "remark";
    break;
  }
  mlirLocationPrint(mlirDiagnosticGetLocation(diagnostic), appendText,
                    &result.location);
  mlirDiagnosticPrint(diagnostic, appendText, &result.message);
  for (intptr_t i = 0, e = mlirDiagnosticGetNumNotes(diagnostic); i < e; ++i)
    result.notes.push_back(collect(mlirDiagnosticGetNote(diagnostic, i)));
  return result;
}

/// Collects diagnostics in C++ while attached. Verification may emit them from
/// MLIR's worker threads; a Python handler would need the GIL there, which the
/// calling thread holds: a deadlock.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MlirContext context) : context(context) {
    id = mlirContextAttachDiagnosticHandler(context, &handle, this, nullptr);
  }
  ~DiagnosticCollector() { mlirContextDetachDiagnosticHandler(context, id); }

  nb::list toPython() const {
    nb::list result;
    for (const CollectedDiagnostic &diagnostic : diagnostics)
      result.append(diagnostic.toPython());
    return result;
  }

private:
  static MlirLogicalResult handle(MlirDiagnostic diagnostic, void *userData) {
    auto *self = static_cast<DiagnosticCollector *>(userData);
    std::lock_guard<std::mutex> lock(self->mutex);
    self->diagnostics.push_back(collect(diagnostic));
    return mlirLogicalResultSuccess();
  }

  MlirContext context;
  MlirDiagnosticHandlerID id;
  std::mutex mutex;
  std::vector<CollectedDiagnostic> diagnostics;
};
} // namespace

NB_MODULE(_braze, m) {
  m.doc() = "Native part of braze: dialect and pass registration, parsing.";

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
         const std::string &sourceName) {
        MlirModule module;
        nb::list diagnostics;
        {
          DiagnosticCollector collector(context);
          {
            nb::gil_scoped_release release;
            module = brazeParseModule(
                context, mlirStringRefCreate(source.data(), source.size()),
                mlirStringRefCreate(sourceName.data(), sourceName.size()));
          }
          diagnostics = collector.toPython();
        }
        nb::object result =
            mlirModuleIsNull(module) ? nb::none() : nb::cast(module);
        return nb::make_tuple(result, diagnostics);
      },
      nb::arg("context"), nb::arg("source"), nb::arg("source_name"),
      "Parses a module: (module or None, [(severity, location, message, "
      "notes)]).");

  m.def("register_passes", &brazeRegisterPasses,
        "Adds every braze pass to MLIR's global pass registry.");
}
