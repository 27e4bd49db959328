//===- VerifyCollectiveOrder.cpp - the braze-verify-collective-order pass -===//
//
// Every rank must issue a group's collectives in one order. This pass rejects
// the IR that could make ranks disagree: a collective under control flow
// whose condition is rank-dependent, a start never waited for, and a group's
// order changed by a pass since the first run recorded it.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace braze {
#define GEN_PASS_DEF_BRAZEVERIFYCOLLECTIVEORDER
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
constexpr StringLiteral kOrderAttr = "braze.collective_order";

/// Which values may differ between ranks. A value is the same on every
/// rank when it is a constant, or the result of an all_reduce, all_gather
/// or broadcast (every member gets the same), or computed by ops free of
/// effects from such values alone.
class RankDependence {
public:
  bool dependent(Value value) {
    auto known = cache.find(value);
    if (known != cache.end())
      return known->second;
    cache[value] = true; // cycles (loop-carried values) count as dependent
    bool result = compute(value);
    cache[value] = result;
    return result;
  }

  /// The first operand of `op` that is rank-dependent, or null.
  /// The first operand of control-flow op `op` that decides what runs and
  /// depends on rank-dependent values. A braze.switch's branch depends on
  /// its index only (its inputs are data for the branch); for any other op
  /// every operand may decide (a loop's carried values feed its condition).
  OpOperand *firstDependentOperand(Operation *op) {
    MutableArrayRef<OpOperand> deciding = op->getOpOperands();
    if (auto choice = dyn_cast<SwitchOp>(op))
      deciding = choice.getIndexMutable();
    for (OpOperand &operand : deciding)
      if (dependent(operand.get()))
        return &operand;
    return nullptr;
  }

private:
  bool compute(Value value) {
    Operation *op = value.getDefiningOp();
    if (!op)
      return true; // function arguments and region arguments
    if (Operation *start = startOfWait(op))
      return !isa<AllReduceStartOp, AllGatherStartOp, BroadcastStartOp>(
          start);
    if (isa<ParameterOp>(op) || !isMemoryEffectFree(op) ||
        op->getNumRegions() != 0)
      return true;
    return llvm::any_of(op->getOperands(),
                        [&](Value operand) { return dependent(operand); });
  }

  DenseMap<Value, bool> cache;
};

struct BrazeVerifyCollectiveOrderPass
    : braze::impl::BrazeVerifyCollectiveOrderBase<
          BrazeVerifyCollectiveOrderPass> {
  using BrazeVerifyCollectiveOrderBase::BrazeVerifyCollectiveOrderBase;

  // 1. Collect the starts in program order, per group.
  // 2. Reject a collective under control flow with a rank-dependent
  //    operand, naming its group's neighbour that ranks would mispair.
  // 3. Reject a start never waited for.
  // 4. Record each start's position in its group, or check the recorded
  //    positions still increase.
  void runOnOperation() override {
    // A wait is in its start's block, so checking the starts covers both.
    SmallVector<Operation *> starts;
    getOperation()->walk([&](Operation *op) {
      if (isCollectiveStart(op))
        starts.push_back(op);
    });
    if (starts.empty())
      return;
    llvm::StringMap<SmallVector<Operation *>> byGroup;
    for (Operation *op : starts)
      byGroup[collectiveGroup(op)].push_back(op);

    bool ok = true;
    RankDependence ranks;
    for (auto &[group, ops] : byGroup)
      for (auto [index, op] : llvm::enumerate(ops))
        ok &= succeeded(checkControlFlow(op, ops, index, ranks));
    for (Operation *op : starts)
      if (op->getResult(0).use_empty()) {
        op->emitError() << describeCollective(op)
                        << " is never waited for: this rank would leave it "
                           "in flight while its peers go on";
        ok = false;
      }
    if (ok)
      for (auto &[group, ops] : byGroup)
        ok &= succeeded(recordOrCheck(ops));
    if (!ok)
      signalPassFailure();
  }

  /// A collective nested in an op whose operands are rank-dependent may be
  /// issued on some ranks and not others.
  LogicalResult checkControlFlow(Operation *op, ArrayRef<Operation *> group,
                                 size_t index, RankDependence &ranks) {
    Operation *function = getOperation();
    for (Operation *parent = op->getParentOp(); parent && parent != function;
         parent = parent->getParentOp()) {
      OpOperand *condition = ranks.firstDependentOperand(parent);
      if (!condition)
        continue;
      InFlightDiagnostic error = op->emitError();
      error << describeCollective(op) << " is under '" << parent->getName()
            << "' at " << parent->getLoc() << ", whose operand #"
            << condition->getOperandNumber()
            << " depends on rank-dependent values";
      Operation *neighbour = index + 1 < group.size() ? group[index + 1]
                             : index > 0              ? group[index - 1]
                                                      : nullptr;
      if (neighbour)
        error << ": ranks that skip or repeat it would pair "
              << describeCollective(neighbour) << " with a different collective";
      else
        error << ": ranks that skip or repeat it would leave their peers "
                 "waiting";
      return failure();
    }
    return success();
  }

  /// The first run numbers the group's starts; later runs check them.
  LogicalResult recordOrCheck(ArrayRef<Operation *> starts) {
    bool recorded = llvm::any_of(
        starts, [](Operation *op) { return op->hasAttr(kOrderAttr); });
    if (!recorded) {
      Builder builder(&getContext());
      for (auto [index, op] : llvm::enumerate(starts))
        op->setAttr(kOrderAttr, builder.getI64IntegerAttr(index));
      numRecorded += starts.size();
      return success();
    }
    Operation *previous = nullptr;
    int64_t previousOrder = -1;
    for (Operation *op : starts) {
      auto order = op->getAttrOfType<IntegerAttr>(kOrderAttr);
      if (!order) {
        InFlightDiagnostic error = op->emitError();
        error << describeCollective(op)
              << " has no recorded position in its group's order";
        if (previous)
          error << " (it follows " << describeCollective(previous) << ")";
        error << ": a pass added it after the order was recorded";
        return failure();
      }
      if (previous && order.getInt() <= previousOrder) {
        return op->emitError()
               << describeCollective(previous) << " (#" << previousOrder
               << " of its group) is issued before " << describeCollective(op)
               << " (#" << order.getInt()
               << "): the group's order changed since it was recorded, and "
                  "ranks whose pipelines differ would pair them wrongly";
      }
      previous = op;
      previousOrder = order.getInt();
      ++numChecked;
    }
    return success();
  }
};
} // namespace
