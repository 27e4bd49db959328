//===- CustomSyntax.cpp - custom assembly of braze op operands ------------===//
//
// The parse/print pairs that ODS assembly formats name with `custom<...>`:
// slice bounds and iota terms, each a constant or an `index` operand, so a
// bound that depends on a symbol stays an SSA value.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace braze;

ParseResult braze::parseSliceBounds(
    OpAsmParser &parser,
    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &dynamicBounds,
    DenseI64ArrayAttr &staticBounds) {
  SmallVector<int64_t, 3> bounds;
  if (parser.parseLSquare())
    return failure();
  for (int which = 0; which < 3; ++which) {
    if (which > 0 && parser.parseColon())
      return failure();
    OpAsmParser::UnresolvedOperand operand;
    OptionalParseResult isOperand = parser.parseOptionalOperand(operand);
    if (isOperand.has_value()) {
      if (failed(*isOperand))
        return failure();
      dynamicBounds.push_back(operand);
      bounds.push_back(ShapedType::kDynamic);
      continue;
    }
    int64_t bound;
    if (parser.parseInteger(bound))
      return failure();
    bounds.push_back(bound);
  }
  if (parser.parseRSquare())
    return failure();
  staticBounds = parser.getBuilder().getDenseI64ArrayAttr(bounds);
  return success();
}

void braze::printSliceBounds(OpAsmPrinter &printer, Operation *,
                             OperandRange dynamicBounds,
                             DenseI64ArrayAttr staticBounds) {
  printer << "[";
  unsigned next = 0;
  for (auto [which, bound] : llvm::enumerate(staticBounds.asArrayRef())) {
    if (which > 0)
      printer << " : ";
    if (ShapedType::isDynamic(bound) && next < dynamicBounds.size())
      printer << dynamicBounds[next++];
    else
      printer << bound;
  }
  printer << "]";
}

ParseResult
braze::parseIotaTerm(OpAsmParser &parser,
                     std::optional<OpAsmParser::UnresolvedOperand> &dynamic,
                     FloatAttr &constant) {
  OpAsmParser::UnresolvedOperand operand;
  OptionalParseResult isOperand = parser.parseOptionalOperand(operand);
  if (isOperand.has_value()) {
    if (failed(*isOperand))
      return failure();
    dynamic = operand;
    return success();
  }
  double value;
  if (parser.parseFloat(value))
    return failure();
  constant = parser.getBuilder().getF64FloatAttr(value);
  return success();
}

void braze::printIotaTerm(OpAsmPrinter &printer, Operation *, Value dynamic,
                          FloatAttr constant) {
  if (dynamic)
    printer << dynamic;
  else
    printer.printFloat(constant.getValue());
}
