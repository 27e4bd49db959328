//===- ControlFlowOps.cpp - verifiers of braze.switch and braze.while -----===//

#include "Dialect/BrazeOps.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace braze;

/// A value of type `given` may stand where `expected` is declared: the same
/// type, or a tensor of the same element type and rank whose dims agree
/// wherever both are static (a region may know a dim the op leaves `?`).
static bool isCompatible(Type expected, Type given) {
  if (expected == given)
    return true;
  auto want = dyn_cast<RankedTensorType>(expected);
  auto have = dyn_cast<RankedTensorType>(given);
  return want && have && want.getElementType() == have.getElementType() &&
         succeeded(verifyCompatibleShape(want, have));
}

/// Checks that `region`'s block takes exactly `types` and that its yield's
/// values are compatible with `yielded`; `what` names the region.
static LogicalResult verifyRegion(Operation *op, Region &region,
                                  TypeRange types, TypeRange yielded,
                                  const Twine &what) {
  Block &block = region.front();
  if (block.getArgumentTypes() != types)
    return op->emitOpError() << what << " takes " << block.getArgumentTypes()
                             << " but must take " << types;
  // (An empty block has no terminator to ask for.)
  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(block.back());
  if (!yield)
    return op->emitOpError() << what << " must end with braze.yield";
  TypeRange values = yield.getValues().getTypes();
  if (values.size() != yielded.size())
    return op->emitOpError()
           << what << " yields " << values.size() << " value(s) but "
           << yielded.size() << " are expected";
  for (auto [number, pair] : llvm::enumerate(llvm::zip_equal(yielded, values))) {
    auto [expected, given] = pair;
    if (!isCompatible(expected, given))
      return op->emitOpError()
             << what << " yields " << given << " as value #" << number
             << " where " << expected << " is expected";
  }
  return success();
}

LogicalResult SwitchOp::verify() {
  if (getBranches().empty())
    return emitOpError("needs at least one branch");
  for (auto [number, branch] : llvm::enumerate(getBranches()))
    if (failed(verifyRegion(*this, branch, getInputs().getTypes(),
                            getResultTypes(),
                            "branch #" + Twine(number))))
      return failure();
  return success();
}

LogicalResult WhileOp::verify() {
  if (getInits().size() != getNumResults())
    return emitOpError("carries ")
           << getInits().size() << " value(s) but has " << getNumResults()
           << " result(s)";
  for (auto [number, pair] :
       llvm::enumerate(llvm::zip_equal(getInits(), getResultTypes()))) {
    auto [init, result] = pair;
    if (!isCompatible(result, init.getType()))
      return emitOpError("carried value #")
             << number << " starts as " << init.getType()
             << " but the result is " << result;
  }
  SmallVector<Type> arguments(getResultTypes());
  llvm::append_range(arguments, getExtras().getTypes());
  auto predicate = RankedTensorType::get({}, IntegerType::get(getContext(), 1));
  if (failed(verifyRegion(*this, getCondition(), arguments, {predicate},
                          "the condition")))
    return failure();
  return verifyRegion(*this, getBody(), arguments, getResultTypes(),
                      "the body");
}

//===----------------------------------------------------------------------===//
// Syntax
//
// Each region is added to the operation state before it is parsed. The
// generated parser held them in unique_ptrs freed as soon as a later token
// failed, while a forward reference from outside the op (in malformed input)
// could still use a value defined in them: MLIR then aborted with "operation
// destroyed but still has uses" instead of reporting the syntax error.
//===----------------------------------------------------------------------===//

/// `: (operand types) -> result types`, then the operands resolved.
static ParseResult parseSignature(OpAsmParser &parser, OperationState &result,
                                  ArrayRef<OpAsmParser::UnresolvedOperand> operands) {
  FunctionType type;
  if (parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(type))
    return failure();
  result.addTypes(type.getResults());
  return parser.resolveOperands(operands, type.getInputs(), parser.getNameLoc(),
                                result.operands);
}

ParseResult SwitchOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand, 4> operands(1);
  if (parser.parseOperand(operands[0]) || parser.parseLParen() ||
      parser.parseOperandList(operands) || parser.parseRParen() ||
      parseSignature(parser, result, operands))
    return failure();
  do {
    if (parser.parseRegion(*result.addRegion()))
      return failure();
  } while (succeeded(parser.parseOptionalComma()));
  return success();
}

void SwitchOp::print(OpAsmPrinter &printer) {
  printer << " " << getIndex() << "(" << getInputs() << ")";
  printer.printOptionalAttrDict((*this)->getAttrs());
  printer << " : ";
  printer.printFunctionalType(getOperation()->getOperandTypes(), getResultTypes());
  for (auto [number, branch] : llvm::enumerate(getBranches())) {
    printer << (number ? ", " : " ");
    printer.printRegion(branch);
  }
}

ParseResult WhileOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand, 4> inits, extras;
  if (parser.parseLParen() || parser.parseOperandList(inits) || parser.parseRParen())
    return failure();
  if (succeeded(parser.parseOptionalKeyword("extra")) &&
      (parser.parseLParen() || parser.parseOperandList(extras) || parser.parseRParen()))
    return failure();
  llvm::copy(ArrayRef<int32_t>({static_cast<int32_t>(inits.size()),
                                static_cast<int32_t>(extras.size())}),
             result.getOrAddProperties<Properties>().operandSegmentSizes.begin());
  SmallVector<OpAsmParser::UnresolvedOperand, 8> operands(inits.begin(), inits.end());
  operands.append(extras);
  if (parseSignature(parser, result, operands))
    return failure();
  Region *condition = result.addRegion();
  Region *body = result.addRegion();
  return failure(parser.parseKeyword("condition") || parser.parseRegion(*condition) ||
                 parser.parseKeyword("do") || parser.parseRegion(*body));
}

void WhileOp::print(OpAsmPrinter &printer) {
  printer << "(" << getInits() << ")";
  if (!getExtras().empty())
    printer << " extra(" << getExtras() << ")";
  printer.printOptionalAttrDict((*this)->getAttrs(), {"operandSegmentSizes"});
  printer << " : ";
  printer.printFunctionalType(getOperation()->getOperandTypes(), getResultTypes());
  printer << " condition ";
  printer.printRegion(getCondition());
  printer << " do ";
  printer.printRegion(getBody());
}
