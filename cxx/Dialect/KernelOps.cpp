//===- KernelOps.cpp - verifiers of the kernel form -----------------------===//

#include "Dialect/BrazeOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace braze;

LogicalResult KernelOp::verify() {
  unsigned rank = getRank();
  if (getNumResults() == 0)
    return emitOpError("has no results");
  int64_t dynamicCount = llvm::count_if(getStaticDomain(), ShapedType::isDynamic);
  if (dynamicCount != static_cast<int64_t>(getDynamicDomain().size()))
    return emitOpError("has ")
           << dynamicCount << " dynamic extent(s) in its domain but "
           << getDynamicDomain().size() << " extent operand(s)";
  for (int64_t extent : getStaticDomain())
    if (!ShapedType::isDynamic(extent) && extent < 0)
      return emitOpError("has negative extent ") << extent << " in its domain";
  int64_t previous = -1;
  for (int64_t dim : getReduce()) {
    if (dim <= previous || dim >= static_cast<int64_t>(rank))
      return emitOpError("reduce dims must be strictly increasing and in [0, ")
             << rank << "), got [" << getReduce() << "]";
    previous = dim;
  }
  Block &body = getBody().front();
  unsigned expected = 2 * rank + getInputs().size();
  if (body.getNumArguments() != expected)
    return emitOpError("body must take ")
           << rank << " indices, " << rank << " extents and "
           << getInputs().size() << " input(s) (" << expected
           << " arguments), but takes " << body.getNumArguments();
  for (unsigned i = 0; i < 2 * rank; ++i)
    if (!body.getArgument(i).getType().isIndex())
      return emitOpError("body argument #") << i << " must be an index";
  for (auto [number, input] : llvm::enumerate(getInputs()))
    if (getInputArgument(number).getType() != input.getType())
      return emitOpError("input #")
             << number << " has type " << input.getType()
             << " but its body argument has type "
             << getInputArgument(number).getType();
  llvm::SmallBitVector stored(getNumResults());
  for (auto store : body.getOps<StoreOp>())
    if (store.getResult() >= 0 && store.getResult() < getNumResults())
      stored.set(store.getResult());
  if (!stored.all())
    return emitOpError("never stores result #") << stored.find_first_unset();
  return success();
}

LogicalResult ReduceOp::verify() {
  StringRef kind = getKind();
  Type type = getValue().getType();
  bool known = llvm::StringSwitch<bool>(kind)
                   .Cases({"add", "max", "min", "argmax"}, true)
                   .Cases({"and", "or"}, type.isInteger(1))
                   .Default(false);
  if (!known)
    return emitOpError("unknown reduction kind '")
           << kind << "' for " << type
           << " (add, max, min, argmax; and, or on i1)";
  Type expected = kind == "argmax"
                      ? Type(IntegerType::get(getContext(), 64))
                      : type;
  if (getResult().getType() != expected)
    return emitOpError("result must be ") << expected << " for '" << kind
                                          << "' of " << type;
  return success();
}

/// Whether `value` is computed from a `braze.reduce` without also reading
/// at a reduction index: such a value exists once per parallel point.
static bool isPerParallelPoint(Value value, KernelOp kernel) {
  Block &body = kernel.getBody().front();
  SmallVector<Value> work{value};
  llvm::SmallPtrSet<Operation *, 16> seen;
  bool reduced = false;
  while (!work.empty()) {
    Value next = work.pop_back_val();
    if (auto argument = dyn_cast<BlockArgument>(next)) {
      unsigned number = argument.getArgNumber();
      if (argument.getOwner() == &body && number < kernel.getRank() &&
          llvm::is_contained(kernel.getReduce(), static_cast<int64_t>(number)))
        return false;
      continue;
    }
    Operation *op = next.getDefiningOp();
    if (!seen.insert(op).second)
      continue;
    if (isa<ReduceOp>(op)) { // its operand's reduction indices are reduced
      reduced = true;
      continue;
    }
    llvm::append_range(work, op->getOperands());
  }
  return reduced;
}

LogicalResult StoreOp::verify() {
  auto kernel = cast<KernelOp>((*this)->getParentOp());
  int64_t number = getResult();
  if (number < 0 || number >= static_cast<int64_t>(kernel.getNumResults()))
    return emitOpError("stores result #")
           << number << " but the kernel has " << kernel.getNumResults()
           << " result(s)";
  auto type = cast<RankedTensorType>(kernel.getResult(number).getType());
  if (getIndices().size() != static_cast<size_t>(type.getRank()))
    return emitOpError("has ")
           << getIndices().size() << " index(es) for result #" << number
           << " of rank " << type.getRank();
  if (getValue().getType() != type.getElementType())
    return emitOpError("stores ")
           << getValue().getType() << " into result #" << number << " of "
           << type;
  // A reduction's value that reads nothing at a reduction index exists once
  // per parallel point: no loop over the reduction dims computes it, so it
  // cannot be stored at a reduction index.
  if (!isPerParallelPoint(getValue(), kernel))
    return success();
  for (auto [position, index] : llvm::enumerate(getIndices())) {
    auto argument = dyn_cast<BlockArgument>(index);
    if (!argument || argument.getOwner() != &kernel.getBody().front() ||
        argument.getArgNumber() >= kernel.getRank())
      continue;
    if (llvm::is_contained(kernel.getReduce(),
                           static_cast<int64_t>(argument.getArgNumber())))
      return emitOpError("stores a reduced value at the index of reduction "
                         "dim ")
             << argument.getArgNumber() << " (index #" << position
             << "); store it at 0 there";
  }
  return success();
}
