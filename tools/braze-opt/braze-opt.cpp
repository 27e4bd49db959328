//===- braze-opt.cpp - the braze optimizer driver -------------------------===//
//
// mlir-opt with the braze dialect and passes, plus the upstream dialects a
// braze program meets on its way down and their standard passes.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<braze::BrazeDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::linalg::LinalgDialect,
                  mlir::math::MathDialect, mlir::scf::SCFDialect,
                  mlir::tensor::TensorDialect>();
  braze::registerBrazePasses();
  mlir::registerTransformsPasses();
  mlir::registerLinalgPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "braze optimizer driver\n", registry));
}
