//===- Overlap.cpp - the braze-overlap pass -------------------------------===//
//
// Moves each collective start as early and each wait as late as the data
// allows, one op at a time, never past another collective of the same group
// nor an op with effects, and (with keep-peak) undoing any step that raises
// the block's peak of live bytes. The compute left between a start and its
// wait runs while the collective is in flight.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "llvm/ADT/DenseMap.h"

namespace braze {
#define GEN_PASS_DEF_BRAZEOVERLAP
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// Bytes of a value in the peak model: a work counts as the buffer its
/// collective writes; dynamic dims count as 1.
int64_t bytesOf(Type type) {
  if (auto work = dyn_cast<WorkType>(type))
    type = work.getResultType();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isIntOrFloat())
    return 0;
  int64_t elements = 1;
  for (int64_t dim : tensor.getShape())
    elements *= ShapedType::isDynamic(dim) ? 1 : dim;
  return elements *
         std::max<int64_t>(1, tensor.getElementType().getIntOrFloatBitWidth() / 8);
}

/// The peak, over `block`'s ops in their current order, of the bytes of the
/// values live there: from its definition to its last use, a start's input
/// until the start's wait (the communicator reads it meanwhile), and a work
/// until just before its wait (whose result is the same buffer).
int64_t peakBytes(Block &block) {
  DenseMap<Operation *, int64_t> position;
  int64_t count = 0;
  for (Operation &op : block)
    position[&op] = count++;
  std::vector<int64_t> delta(count + 2, 0);
  auto addValue = [&](Value value, int64_t from) {
    int64_t bytes = bytesOf(value.getType());
    if (bytes == 0)
      return;
    int64_t to = from;
    for (Operation *user : value.getUsers()) {
      Operation *inBlock = block.findAncestorOpInBlock(*user);
      if (!inBlock)
        continue;
      to = std::max(to, position[inBlock]);
      if (isCollectiveStart(inBlock))
        for (Operation *wait : inBlock->getResult(0).getUsers())
          to = std::max(to, position[wait]);
    }
    // A work's buffer becomes its wait's result there: count it once.
    if (isa<WorkType>(value.getType()) && to > from)
      --to;
    delta[from] += bytes;
    delta[to + 1] -= bytes;
  };
  for (BlockArgument argument : block.getArguments())
    addValue(argument, 0);
  for (Operation &op : block)
    for (Value result : op.getResults())
      addValue(result, position[&op]);
  int64_t live = 0, peak = 0;
  for (int64_t change : delta) {
    live += change;
    peak = std::max(peak, live);
  }
  return peak;
}

/// Why `moving` (a start going up, or a wait going down) may not swap with
/// its neighbour `other`; empty when it may.
std::string obstacle(Operation *moving, Operation *other, bool up) {
  std::string why;
  llvm::raw_string_ostream out(why);
  if (up) {
    for (Value operand : moving->getOperands())
      if (operand.getDefiningOp() == other)
        out << "its input's producer '" << other->getName() << "'";
  } else {
    for (Operation *user : moving->getResult(0).getUsers())
      if (other->isAncestor(user)) {
        out << "the first user of its result, '" << other->getName() << "'";
        break;
      }
  }
  if (!why.empty())
    return why;
  if (isCollective(other)) {
    if (collectiveGroup(other) == collectiveGroup(moving))
      out << describeCollective(other) << ", of the same group";
    return why;
  }
  if (other->hasTrait<OpTrait::IsTerminator>())
    out << "the end of the block";
  else if (!isMemoryEffectFree(other))
    out << "'" << other->getName() << "', an op with effects";
  return why;
}

struct BrazeOverlapPass : braze::impl::BrazeOverlapBase<BrazeOverlapPass> {
  using BrazeOverlapBase::BrazeOverlapBase;

  // 1. Per block with collectives, hoist each start (in program order) one
  //    op at a time until an obstacle, undoing a step that raises the peak.
  // 2. Sink each wait (in reverse order) the same way.
  // 3. With remarks, say how far each moved, what stopped it, and what
  //    compute now runs while its collective is in flight.
  void runOnOperation() override {
    getOperation()->walk([&](Block *block) {
      SmallVector<Operation *> starts, waits;
      for (Operation &op : *block) {
        if (isCollectiveStart(&op))
          starts.push_back(&op);
        else if (isa<WaitOp>(op))
          waits.push_back(&op);
      }
      for (Operation *start : starts)
        move(*block, start, /*up=*/true);
      for (Operation *wait : llvm::reverse(waits))
        move(*block, wait, /*up=*/false);
      if (remarks)
        for (Operation *wait : waits)
          remarkOverlap(wait);
    });
  }

  void move(Block &block, Operation *op, bool up) {
    int64_t steps = 0;
    std::string stop;
    int64_t peak = keepPeak ? peakBytes(block) : 0;
    while (true) {
      Operation *other = up ? op->getPrevNode() : op->getNextNode();
      if (!other) {
        stop = "the start of the block";
        break;
      }
      stop = obstacle(op, other, up);
      if (!stop.empty())
        break;
      if (up)
        op->moveBefore(other);
      else
        op->moveAfter(other);
      if (keepPeak) {
        int64_t after = peakBytes(block);
        if (after > peak) {
          if (up)
            op->moveAfter(other);
          else
            op->moveBefore(other);
          ++numPeakRefusals;
          llvm::raw_string_ostream(stop)
              << "the peak of live bytes (one more step would raise it from "
              << peak << " to " << after << ")";
          break;
        }
      }
      ++steps;
    }
    if (steps)
      ++(up ? numStartsMoved : numWaitsMoved);
    if (remarks)
      op->emitRemark() << describeCollective(op) << " moved "
                       << (up ? "up" : "down") << " past " << steps
                       << " op(s); stopped by " << stop;
  }

  /// What runs between a start and its wait once both have moved.
  void remarkOverlap(Operation *wait) {
    Operation *start = startOfWait(wait);
    int64_t ops = 0, bytes = 0;
    for (Operation *op = start->getNextNode(); op != wait;
         op = op->getNextNode()) {
      if (isCollective(op))
        continue;
      ++ops;
      for (Value result : op->getResults())
        bytes += bytesOf(result.getType());
    }
    wait->emitRemark() << describeCollective(start) << " is in flight over "
                       << ops << " op(s) of compute writing " << bytes
                       << " bytes";
  }
};
} // namespace
