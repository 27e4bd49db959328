//===- Overlap.cpp - the braze-overlap pass -------------------------------===//
//
// Moves each collective start as early and each wait as late as the data
// allows, one op at a time, never past another collective of the same group
// nor an op with effects, and undoing any step that raises the block's peak
// of live bytes (keep-peak) or passes the bound on bytes in flight. The
// compute left between a start and its wait runs while the collective is in
// flight; in the cost mode, compute from after the wait is moved into that
// gap, the op hiding the most estimated time first.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/CostModel.h"
#include "Transforms/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"

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
  return tensorBytes(type);
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

/// The most bytes of collectives in flight at once over `block`'s ops in
/// their current order: each start's buffer from the start to its wait.
int64_t inflightPeak(Block &block) {
  int64_t live = 0, peak = 0;
  for (Operation &op : block) {
    if (isCollectiveStart(&op))
      peak = std::max(peak, live += bytesOf(op.getResult(0).getType()));
    else if (isa<WaitOp>(op))
      live -= bytesOf(op.getResult(0).getType());
  }
  return peak;
}

/// Puts `block`'s ops back in the order `order` lists them in.
void restoreOrder(Block &block, ArrayRef<Operation *> order) {
  for (Operation *op : order)
    op->moveBefore(&block, block.end());
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
  //    op at a time until an obstacle, undoing a step that raises the peak
  //    or passes the bound on bytes in flight.
  // 2. Sink each wait (in reverse order) the same way.
  // 3. In the cost mode, fill each collective's gap with compute from after
  //    its wait until the estimated collective time is hidden.
  // 4. With remarks, say how far each moved, what stopped it, and what
  //    compute now runs while its collective is in flight.
  void runOnOperation() override {
    if (failed(readOptions()))
      return signalPassFailure();
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) { blocks.push_back(block); });
    for (Block *block : blocks) {
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
      if (mode == "cost")
        for (Operation *wait : waits)
          fill(*block, wait);
      if (remarks)
        for (Operation *wait : waits)
          remarkOverlap(wait);
    }
  }

  LogicalResult readOptions() {
    auto fail = [&]() {
      return getOperation().emitError() << "braze-overlap: ";
    };
    if (mode != "simple" && mode != "cost")
      return fail() << "mode must be simple or cost, got '" << mode << "'";
    if (maxInflightBytes < 0)
      return fail() << "max-inflight-bytes must be 0 (no bound) or more, got "
                    << static_cast<int64_t>(maxInflightBytes);
    for (auto [name, value] :
         {std::pair<StringRef, double>{"link-bandwidth", linkBandwidth},
          {"memory-bandwidth", memoryBandwidth},
          {"peak-flops", peakFlops}})
      if (!(value > 0))
        return fail() << name << " must be positive, got " << value;
    if (!(linkLatency >= 0))
      return fail() << "link-latency must be 0 or more, got "
                    << static_cast<double>(linkLatency);
    machine = {memoryBandwidth, peakFlops, linkBandwidth, linkLatency};
    return success();
  }

  void move(Block &block, Operation *op, bool up) {
    int64_t steps = 0;
    std::string stop;
    int64_t peak = keepPeak ? peakBytes(block) : 0;
    int64_t inflight = maxInflightBytes ? inflightPeak(block) : 0;
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
      stop = boundPassed(block, peak, inflight);
      if (!stop.empty()) {
        if (up)
          op->moveAfter(other);
        else
          op->moveBefore(other);
        break;
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

  /// Which bound the block's current order passes, given the peaks before
  /// the step (empty: none); counts the refusal.
  std::string boundPassed(Block &block, int64_t peak, int64_t inflight) {
    std::string why;
    llvm::raw_string_ostream out(why);
    if (keepPeak) {
      int64_t after = peakBytes(block);
      if (after > peak) {
        ++numPeakRefusals;
        out << "the peak of live bytes (one more step would raise it from "
            << peak << " to " << after << ")";
        return why;
      }
    }
    if (maxInflightBytes) {
      int64_t after = inflightPeak(block);
      if (after > maxInflightBytes && after > inflight) {
        ++numInflightRefusals;
        out << "max-inflight-bytes (one more step would put " << after
            << " bytes of collectives in flight at once, above "
            << maxInflightBytes << ")";
      }
    }
    return why;
  }

  /// The ops `op` needs moved with it above `wait`: itself and its
  /// producers after the wait, in program order. Empty when one of them uses
  /// the wait's result, is a collective or has effects.
  SmallVector<Operation *> withProducers(Operation *op, Operation *wait) {
    SmallVector<Operation *> needed, work{op};
    DenseSet<Operation *> seen{op};
    while (!work.empty()) {
      Operation *next = work.pop_back_val();
      if (isCollective(next) || !isMemoryEffectFree(next) ||
          next->hasTrait<OpTrait::IsTerminator>())
        return {};
      needed.push_back(next);
      WalkResult walked = next->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands()) {
          Operation *producer = operand.getDefiningOp();
          Operation *inBlock =
              producer ? wait->getBlock()->findAncestorOpInBlock(*producer)
                       : nullptr;
          if (inBlock == wait)
            return WalkResult::interrupt();
          if (inBlock && wait->isBeforeInBlock(inBlock) &&
              !next->isAncestor(inBlock) && seen.insert(inBlock).second)
            work.push_back(inBlock);
        }
        return WalkResult::advance();
      });
      if (walked.wasInterrupted())
        return {};
    }
    llvm::sort(needed, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    return needed;
  }

  /// Moves compute from after `wait` (up to the next collective of its
  /// group) above it, the op hiding the most first, until the compute in
  /// the gap covers the collective's estimated time.
  void fill(Block &block, Operation *wait) {
    Operation *start = startOfWait(wait);
    StringRef group = collectiveGroup(start);
    double needed = collectiveSeconds(start, machine), hidden = 0;
    for (Operation *op = start->getNextNode(); op != wait;
         op = op->getNextNode())
      if (!isCollective(op))
        hidden += computeSeconds(op, machine);
    int64_t peak = keepPeak ? peakBytes(block) : 0;
    int64_t moved = 0;
    DenseSet<Operation *> refused;
    while (hidden < needed) {
      SmallVector<Operation *> best;
      double bestGain = 0, bestSeconds = 0;
      for (Operation *op = wait->getNextNode(); op; op = op->getNextNode()) {
        if (isCollective(op) && collectiveGroup(op) == group)
          break;
        if (refused.contains(op))
          continue;
        SmallVector<Operation *> candidate = withProducers(op, wait);
        double seconds = 0;
        for (Operation *moving : candidate)
          seconds += computeSeconds(moving, machine);
        // Strictly more: the earliest of equals wins (a stable order).
        double gain = std::min(seconds, needed - hidden);
        if (gain > bestGain) {
          best = std::move(candidate);
          bestGain = gain;
          bestSeconds = seconds;
        }
      }
      if (best.empty())
        break;
      SmallVector<Operation *> order;
      for (Operation &op : block)
        order.push_back(&op);
      for (Operation *op : best)
        op->moveBefore(wait);
      if (keepPeak && peakBytes(block) > peak) {
        restoreOrder(block, order);
        refused.insert(best.back());
        ++numPeakRefusals;
        continue;
      }
      hidden += bestSeconds;
      moved += best.size();
      if (remarks) {
        std::string text;
        llvm::raw_string_ostream(text)
            << "'" << best.back()->getName() << "' moved above the wait of "
            << describeCollective(start) << " with " << best.size() - 1
            << " op(s) it needs: " << llvm::format("%.2f", bestSeconds * 1e6)
            << " us by estimate";
        best.back()->emitRemark() << text;
      }
    }
    numComputeMoved += moved;
    if (!remarks)
      return;
    std::string text;
    llvm::raw_string_ostream(text)
        << describeCollective(start) << " takes "
        << llvm::format("%.2f", needed * 1e6) << " us by estimate; " << moved
        << " op(s) of compute moved above its wait; "
        << llvm::format("%.2f", std::min(hidden, needed) * 1e6)
        << " us of it hidden";
    wait->emitRemark() << text;
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

  Machine machine;
};
} // namespace
