//===- BrazeDialect.cpp - the braze dialect -------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"

using namespace mlir;
using namespace braze;

#include "braze/BrazeDialect.cpp.inc"

void BrazeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "braze/BrazeOps.cpp.inc"
      >();
  registerTypes();
}

Operation *BrazeDialect::materializeConstant(OpBuilder &builder,
                                             Attribute value, Type type,
                                             Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
