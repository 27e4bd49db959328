//===- CollectiveOps.cpp - verifiers of the collective ops ---------------===//

#include "Dialect/BrazeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace braze;

#define GET_TYPEDEF_CLASSES
#include "braze/BrazeTypes.cpp.inc"

void BrazeDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "braze/BrazeTypes.cpp.inc"
      >();
}

bool braze::isCollectiveStart(Operation *op) {
  return op->hasTrait<CollectiveStartTrait>();
}

bool braze::isCollective(Operation *op) {
  return isCollectiveStart(op) || isa<WaitOp>(op);
}

Operation *braze::startOfWait(Operation *op) {
  auto wait = dyn_cast<WaitOp>(op);
  return wait ? wait.getWork().getDefiningOp() : nullptr;
}

StringRef braze::collectiveGroup(Operation *op) {
  if (Operation *start = startOfWait(op))
    op = start;
  auto group = op ? op->getAttrOfType<StringAttr>("group") : StringAttr();
  return group ? group.getValue() : StringRef();
}

std::string braze::describeCollective(Operation *op) {
  std::string text;
  llvm::raw_string_ostream out(text);
  out << "'" << op->getName() << "'";
  if (Operation *start = startOfWait(op))
    out << " (of '" << start->getName() << "')";
  out << " of group \"" << collectiveGroup(op) << "\" at " << op->getLoc();
  return text;
}

//===----------------------------------------------------------------------===//
// Start ops
//===----------------------------------------------------------------------===//

/// A group's waits follow its starts' order: any wait of the group between
/// `start` and its `wait` must complete an earlier start.
static LogicalResult verifyWaitOrder(Operation *start, Operation *wait) {
  StringRef group = collectiveGroup(start);
  for (Operation *op = start->getNextNode(); op && op != wait;
       op = op->getNextNode()) {
    Operation *other = startOfWait(op);
    // A start in another block (IR that breaks dominance, reported by the
    // dominance check) has no order against this one.
    if (other && other->getBlock() == start->getBlock() &&
        collectiveGroup(other) == group && start->isBeforeInBlock(other))
      return start->emitOpError("is waited for after ")
             << describeCollective(op)
             << ", which completes a later collective of the same group; a "
                "group's waits must follow the order of its starts";
  }
  return success();
}

/// What every start op checks: the group, the reduction, the work's use and
/// that its result is a tensor of the input's element type. Returns the
/// result type, or null after an error.
static RankedTensorType verifyStart(Operation *op, ArrayRef<int64_t> ranks,
                                    std::optional<StringRef> reduce) {
  if (ranks.empty())
    return op->emitOpError("the group has no ranks"), nullptr;
  llvm::DenseSet<int64_t> seen;
  for (int64_t rank : ranks) {
    if (rank < 0)
      return op->emitOpError("rank ") << rank << " is negative", nullptr;
    if (!seen.insert(rank).second)
      return op->emitOpError("rank ") << rank << " is listed twice", nullptr;
  }
  if (reduce && !llvm::is_contained(
                    ArrayRef<StringRef>{"sum", "avg", "product", "min", "max"},
                    *reduce))
    return op->emitOpError("reduction \"")
               << *reduce
               << "\" is not one of sum, avg, product, min, max",
           nullptr;
  Value work = op->getResult(0);
  for (Operation *user : work.getUsers()) {
    if (!isa<WaitOp>(user))
      return op->emitOpError("its work is used by '")
                 << user->getName() << "'; only a braze.wait may use it",
             nullptr;
    if (user->getBlock() != op->getBlock())
      return op->emitOpError("its braze.wait is in another block"), nullptr;
  }
  if (!work.hasOneUse() && !work.use_empty())
    return op->emitOpError("its work is waited for more than once"), nullptr;
  if (!work.use_empty() && failed(verifyWaitOrder(op, *work.user_begin())))
    return nullptr;
  auto input = cast<RankedTensorType>(op->getOperand(0).getType());
  auto result = dyn_cast<RankedTensorType>(
      cast<WorkType>(work.getType()).getResultType());
  if (!result)
    return op->emitOpError("the work's result must be a ranked tensor"),
           nullptr;
  if (result.getElementType() != input.getElementType())
    return op->emitOpError("the result's element type ")
               << result.getElementType() << " differs from the input's "
               << input.getElementType(),
           nullptr;
  if (result.getRank() != input.getRank())
    return op->emitOpError("the result has rank ")
               << result.getRank() << ", the input " << input.getRank(),
           nullptr;
  return result;
}

/// Dims `from..` of `input` and `result` must agree where both are static.
static LogicalResult verifySameDims(Operation *op, RankedTensorType input,
                                    RankedTensorType result, int64_t from) {
  for (int64_t dim = from; dim < input.getRank(); ++dim) {
    int64_t in = input.getDimSize(dim), out = result.getDimSize(dim);
    if (!ShapedType::isDynamic(in) && !ShapedType::isDynamic(out) && in != out)
      return op->emitOpError("dim ")
             << dim << " of the result is " << out << " but the input's is "
             << in;
  }
  return success();
}

/// The result's dim 0 must be `expected` where both are known.
static LogicalResult verifyDim0(Operation *op, RankedTensorType result,
                                int64_t expected, StringRef why) {
  if (result.getRank() == 0)
    return op->emitOpError("needs a tensor of rank 1 or more");
  int64_t out = result.getDimSize(0);
  if (!ShapedType::isDynamic(out) && !ShapedType::isDynamic(expected) &&
      out != expected)
    return op->emitOpError("dim 0 of the result is ")
           << out << " but " << why << " gives " << expected;
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  RankedTensorType result = verifyStart(*this, getRanks(), getReduce());
  if (!result)
    return failure();
  return verifySameDims(*this, getInput().getType(), result, 0);
}

LogicalResult BroadcastStartOp::verify() {
  RankedTensorType result = verifyStart(*this, getRanks(), std::nullopt);
  if (!result)
    return failure();
  if (getRoot() < 0 || getRoot() >= static_cast<int64_t>(getRanks().size()))
    return emitOpError("root ") << getRoot() << " is not a position in a group of "
                                << getRanks().size();
  return verifySameDims(*this, getInput().getType(), result, 0);
}

LogicalResult AllGatherStartOp::verify() {
  RankedTensorType result = verifyStart(*this, getRanks(), std::nullopt);
  if (!result)
    return failure();
  auto input = getInput().getType();
  int64_t size = getRanks().size();
  int64_t in = input.getRank() ? input.getDimSize(0) : 0;
  int64_t expected = ShapedType::isDynamic(in) ? in : in * size;
  if (failed(verifyDim0(*this, result, expected,
                        "the input's dim 0 times the group's size")))
    return failure();
  return verifySameDims(*this, input, result, 1);
}

LogicalResult ReduceScatterStartOp::verify() {
  RankedTensorType result = verifyStart(*this, getRanks(), getReduce());
  if (!result)
    return failure();
  auto input = getInput().getType();
  int64_t size = getRanks().size();
  int64_t in = input.getRank() ? input.getDimSize(0) : 0;
  if (!ShapedType::isDynamic(in) && in % size != 0)
    return emitOpError("dim 0 of the input (") << in
           << ") is not a multiple of the group's size " << size;
  int64_t expected = ShapedType::isDynamic(in) ? in : in / size;
  if (failed(verifyDim0(*this, result, expected,
                        "the input's dim 0 over the group's size")))
    return failure();
  return verifySameDims(*this, input, result, 1);
}

LogicalResult AllToAllStartOp::verify() {
  RankedTensorType result = verifyStart(*this, getRanks(), std::nullopt);
  if (!result)
    return failure();
  auto input = getInput().getType();
  int64_t size = getRanks().size();
  ArrayRef<int64_t> outSplits = getOutputSplits(), inSplits = getInputSplits();
  if (input.getRank() == 0)
    return emitOpError("needs a tensor of rank 1 or more");
  int64_t in = input.getDimSize(0);
  if (outSplits.empty() != inSplits.empty())
    return emitOpError("give both split lists or neither (even splits)");
  if (outSplits.empty()) {
    if (!ShapedType::isDynamic(in) && in % size != 0)
      return emitOpError("even splits need dim 0 of the input (")
             << in << ") to be a multiple of the group's size " << size;
    if (failed(verifyDim0(*this, result, in, "an even split")))
      return failure();
    return verifySameDims(*this, input, result, 1);
  }
  for (auto [name, splits] :
       {std::pair<StringRef, ArrayRef<int64_t>>{"output_splits", outSplits},
        {"input_splits", inSplits}}) {
    if (static_cast<int64_t>(splits.size()) != size)
      return emitOpError() << name << " has " << splits.size()
                           << " entries for a group of " << size;
    if (llvm::any_of(splits, [](int64_t s) { return s < 0; }))
      return emitOpError() << name << " has a negative entry";
  }
  int64_t inSum = 0, outSum = 0;
  for (int64_t s : inSplits)
    inSum += s;
  for (int64_t s : outSplits)
    outSum += s;
  if (!ShapedType::isDynamic(in) && in != inSum)
    return emitOpError("dim 0 of the input is ")
           << in << " but input_splits add up to " << inSum;
  if (failed(verifyDim0(*this, result, outSum, "output_splits")))
    return failure();
  return verifySameDims(*this, input, result, 1);
}

//===----------------------------------------------------------------------===//
// WaitOp
//===----------------------------------------------------------------------===//

LogicalResult WaitOp::verify() {
  // Where the wait is and in which order is its start's to check (a
  // frontend may build the wait apart before it joins the start's block).
  Operation *start = getWork().getDefiningOp();
  if (!start || !isCollectiveStart(start))
    return emitOpError("waits for a value that no collective start made");
  return success();
}
