//===- ComboKernels.cpp - the braze-combo-kernels pass --------------------===//
//
// Groups independent kernels of a function into braze.combo ops. See the
// pass's description in dialects/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Dialect/ComboOps.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "braze-combo-kernels"

namespace braze {
#define GEN_PASS_DEF_BRAZECOMBOKERNELS
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// The pass's options, as the grouping reads them.
struct Limits {
  int64_t maxSubKernels, maxArguments, maxReductionExtent, maxPoints,
      maxLiveBytes, maxLiveValues, maxBodyOps, pointwiseBlock,
      reductionPoints, dynamicExtent;
  bool perSubKernelBlocks;
  std::string dispatch;
};

/// What the grouping knows of one kernel.
struct KernelFacts {
  KernelOp op;
  bool reduces = false;
  int64_t points = 1;        // every point of the domain
  int64_t reductionExtent = 1;
  int64_t liveValues = 0;    // most scalar values live at once in the body
  int64_t bodyOps = 0;
  int64_t block = 1, rblock = 0, cost = 1;
  llvm::SmallSetVector<Value, 8> buffers; // inputs and results
  int64_t bytes = 0;                       // of those buffers
  // Reads only constants and parameters, through pure ops: the executor
  // runs it once, when the program is built, not on every call.
  bool invariant = false;
};

int64_t extentOf(int64_t extent, int64_t dynamicExtent) {
  return ShapedType::isDynamic(extent) ? dynamicExtent : extent;
}

int64_t bytesOf(Value value, int64_t dynamicExtent) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t elements = 1;
  for (int64_t dim : type.getShape())
    elements *= extentOf(dim, dynamicExtent);
  int64_t bits = type.getElementType().isIndex()
                     ? 64
                     : type.getElementType().getIntOrFloatBitWidth();
  return elements * std::max<int64_t>(1, bits / 8);
}

/// The register-pressure estimate of a kernel body: the most values (block
/// arguments other than the input tensors, and op results) live at once,
/// walking the body in order; a value lives from its definition to its last
/// use.
int64_t liveValues(KernelOp kernel) {
  Block &body = kernel.getBody().front();
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t at = 0;
  for (Operation &op : body)
    position[&op] = at++;
  // Per position, the values whose last use it is.
  SmallVector<int64_t> ending(at + 1, 0);
  int64_t live = 0, most = 0;
  auto lastUse = [&](Value value) {
    int64_t last = -1;
    for (Operation *user : value.getUsers())
      last = std::max(last, position.lookup(body.findAncestorOpInBlock(*user)));
    return last;
  };
  for (BlockArgument argument : body.getArguments()) {
    if (isa<TensorType>(argument.getType()))
      continue;
    int64_t last = lastUse(argument);
    if (last >= 0) {
      ++live;
      ++ending[last];
    }
  }
  most = live;
  for (Operation &op : body) {
    for (Value result : op.getResults()) {
      int64_t last = lastUse(result);
      if (last > position[&op]) {
        ++live;
        ++ending[last];
      }
    }
    most = std::max(most, live);
    live -= ending[position[&op]];
  }
  return most;
}

KernelFacts factsOf(KernelOp kernel, const Limits &limits) {
  KernelFacts facts;
  facts.op = kernel;
  facts.reduces = !kernel.getReduce().empty();
  for (auto [dim, extent] : llvm::enumerate(kernel.getStaticDomain())) {
    int64_t size = extentOf(extent, limits.dynamicExtent);
    facts.points *= size;
    if (llvm::is_contained(kernel.getReduce(), static_cast<int64_t>(dim)))
      facts.reductionExtent *= size;
  }
  facts.liveValues = liveValues(kernel);
  facts.bodyOps = static_cast<int64_t>(kernel.getBody().front().getOperations().size());
  for (Value value : kernel.getInputs())
    facts.buffers.insert(value);
  for (Value value : kernel.getResults())
    facts.buffers.insert(value);
  for (Value value : facts.buffers)
    facts.bytes += bytesOf(value, limits.dynamicExtent);
  // Blocks: RBLOCK scaled to the reduction; rows or points per item.
  if (facts.reduces) {
    facts.rblock = static_cast<int64_t>(
        llvm::PowerOf2Ceil(static_cast<uint64_t>(std::max<int64_t>(1, facts.reductionExtent))));
    facts.block = std::max<int64_t>(1, limits.reductionPoints / facts.rblock);
    facts.cost = facts.block * facts.reductionExtent * facts.bodyOps;
  } else {
    facts.block = limits.pointwiseBlock;
    facts.cost = facts.block * facts.bodyOps;
  }
  facts.cost = std::max<int64_t>(1, facts.cost);
  return facts;
}

/// Whether a kernel's innermost dim is parallel while it reduces (a column
/// reduction): its emitters block the innermost dim into lanes of their
/// own, which work items of whole parallel points would cut.
bool isColumnReduction(KernelOp kernel) {
  int64_t rank = kernel.getRank();
  return !kernel.getReduce().empty() && rank > 0 &&
         !llvm::is_contained(kernel.getReduce(), rank - 1);
}

/// The combo grouping of one block.
class ComboGrouping {
public:
  ComboGrouping(Block &block, const Limits &limits, bool remarks)
      : block(block), limits(limits), remarks(remarks) {}

  /// Forms the groups, in program order.
  void build() {
    for (Operation &op : block) {
      auto kernel = dyn_cast<KernelOp>(op);
      llvm::BitVector needs = kernelAncestors(&op, kernel != nullptr);
      bool callInvariant = isCallInvariant(&op);
      if (callInvariant)
        invariantOps.insert(&op);
      if (!kernel) {
        if (!isMemoryEffectFree(&op) && !op.hasTrait<OpTrait::IsTerminator>())
          open.clear(); // nothing moves across an op with side effects
        continue;
      }
      unsigned number = kernels.size();
      kernels.push_back(factsOf(kernel, limits));
      kernels.back().invariant = callInvariant;
      groupOf.push_back(-1);
      ancestors.push_back(needs);
      std::string reason = standaloneReason(kernels.back());
      if (!reason.empty()) {
        remark(kernel, "stays standalone: " + reason);
        continue;
      }
      bool placed = false;
      for (unsigned group : open) {
        std::string refusal = refusalReason(group, number);
        if (refusal.empty()) {
          groups[group].push_back(number);
          groupOf[number] = group;
          placed = true;
          break;
        }
        remark(kernel, "not grouped with kernel #" +
                           std::to_string(groups[group].front()) + ": " +
                           refusal);
      }
      if (!placed) {
        groupOf[number] = groups.size();
        open.push_back(groups.size());
        groups.push_back({number});
      }
    }
  }

  /// Replaces every group of two or more kernels by a combo.
  void materialize(Pass::Statistic &combos, Pass::Statistic &subKernels) {
    SmallVector<SmallVector<KernelOp>> formed;
    for (auto &members : groups) {
      if (members.size() < 2) {
        remark(kernels[members.front()].op,
               "stays standalone: no independent kernel to group with");
        continue;
      }
      SmallVector<KernelOp> ops;
      for (unsigned member : members)
        ops.push_back(kernels[member].op);
      formed.push_back(ops);
    }
    // Materialize groups in the order of their last member.
    llvm::sort(formed, [](auto &a, auto &b) {
      return a.back()->isBeforeInBlock(b.back());
    });
    for (auto &members : formed) {
      createCombo(members);
      ++combos;
      subKernels += members.size();
    }
  }

private:
  /// Whether `op` computes the same on every call: it is pure and reads only
  /// values of such ops of this block (constants and parameters at the
  /// roots), nothing an argument or a side effect reaches.
  bool isCallInvariant(Operation *op) {
    if (!isMemoryEffectFree(op) || op->hasTrait<OpTrait::IsTerminator>())
      return false;
    bool invariant = true;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        if (op->isAncestor(operand.getParentRegion()->getParentOp()))
          continue; // defined inside `op`
        Operation *producer = operand.getDefiningOp();
        invariant &= producer && producer->getBlock() == &block &&
                     invariantOps.contains(producer);
      }
    });
    return invariant;
  }

  /// The kernels (by number) that `op` depends on through any chain; it
  /// records them, and the op itself when `isKernel` (the next kernel
  /// number), as what a user of the op depends on.
  llvm::BitVector kernelAncestors(Operation *op, bool isKernel) {
    llvm::BitVector result(kernels.size() + 1);
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || !(producer = block.findAncestorOpInBlock(*producer)))
          continue;
        auto found = reached.find(producer);
        if (found == reached.end())
          continue;
        if (found->second.size() > result.size())
          result.resize(found->second.size());
        result |= found->second;
      }
    });
    llvm::BitVector own = result;
    own.resize(std::max<unsigned>(own.size(), kernels.size() + 1));
    if (isKernel)
      own.set(kernels.size());
    reached[op] = own;
    return result;
  }

  std::string standaloneReason(const KernelFacts &facts) {
    if (facts.reduces && facts.reductionExtent > limits.maxReductionExtent)
      return "reduces over " + std::to_string(facts.reductionExtent) +
             " points (max-reduction-extent " +
             std::to_string(limits.maxReductionExtent) + ")";
    if (facts.points > limits.maxPoints)
      return "has " + std::to_string(facts.points) +
             " points (max-points " + std::to_string(limits.maxPoints) + ")";
    if (isColumnReduction(facts.op))
      return "a column reduction (its innermost dim is parallel)";
    if (facts.liveValues > limits.maxLiveValues)
      return "register pressure: " + std::to_string(facts.liveValues) +
             " values live at once (max-live-values " +
             std::to_string(limits.maxLiveValues) + ")";
    if (facts.bodyOps > limits.maxBodyOps)
      return "register pressure: " + std::to_string(facts.bodyOps) +
             " ops in its body (max-body-ops " +
             std::to_string(limits.maxBodyOps) + ")";
    return "";
  }

  /// The groups `kernel` depends on, through any chain, with every group
  /// contracted to one node.
  llvm::BitVector groupAncestors(unsigned kernel) {
    llvm::BitVector seen(groups.size());
    SmallVector<unsigned> work;
    auto visitKernels = [&](const llvm::BitVector &bits) {
      for (unsigned ancestor : bits.set_bits()) {
        int group = groupOf[ancestor];
        if (group >= 0 && !seen.test(group)) {
          seen.set(group);
          work.push_back(group);
        }
      }
    };
    visitKernels(ancestors[kernel]);
    while (!work.empty()) {
      unsigned group = work.pop_back_val();
      for (unsigned member : groups[group])
        visitKernels(ancestors[member]);
    }
    return seen;
  }

  /// Why kernel `number` may not join `group` ("" when it may).
  std::string refusalReason(unsigned group, unsigned number) {
    const KernelFacts &facts = kernels[number];
    auto &members = groups[group];
    if (kernels[members.front()].invariant != facts.invariant)
      return facts.invariant
                 ? std::string("it reads only constants and parameters (it "
                               "runs once, when the program is built) and "
                               "the group runs on every call")
                 : std::string("the group reads only constants and "
                               "parameters (it runs once, when the program "
                               "is built) and it runs on every call");
    if (static_cast<int64_t>(members.size()) >= limits.maxSubKernels)
      return "the group has " + std::to_string(members.size()) +
             " sub-kernels (max-sub-kernels " +
             std::to_string(limits.maxSubKernels) + ")";
    for (unsigned member : members)
      if (ancestors[number].test(member))
        return "a data path leads from kernel #" + std::to_string(member) +
               " to it";
    llvm::BitVector through = groupAncestors(number);
    if (group < through.size() && through.test(group))
      return "a data path leads from the group to it through other groups";
    llvm::SmallSetVector<Value, 16> buffers;
    int64_t bytes = 0;
    bool mixes = false;
    for (unsigned member : members) {
      buffers.insert(kernels[member].buffers.begin(),
                     kernels[member].buffers.end());
      mixes |= kernels[member].reduces != facts.reduces;
    }
    buffers.insert(facts.buffers.begin(), facts.buffers.end());
    for (Value value : buffers)
      bytes += bytesOf(value, limits.dynamicExtent);
    if (static_cast<int64_t>(buffers.size()) > limits.maxArguments)
      return "the group would take " + std::to_string(buffers.size()) +
             " buffer arguments (max-arguments " +
             std::to_string(limits.maxArguments) + ")";
    if (bytes > limits.maxLiveBytes)
      return "the group's inputs and results would hold " +
             std::to_string(bytes) + " bytes (max-live-bytes " +
             std::to_string(limits.maxLiveBytes) + ")";
    if (mixes && !limits.perSubKernelBlocks)
      return "it would mix pointwise kernels and reductions without "
             "per-sub-kernel blocks";
    return "";
  }

  std::string chooseDispatch(ArrayRef<KernelOp> members) {
    if (limits.dispatch != "auto")
      return limits.dispatch;
    std::optional<int64_t> first;
    for (KernelOp kernel : members) {
      const KernelFacts &facts = factsFor(kernel);
      std::optional<int64_t> items = comboWorkItems(kernel, facts.block);
      if (!items || (first && *first != *items))
        return "sequential";
      first = items;
    }
    return "round_robin";
  }

  const KernelFacts &factsFor(KernelOp kernel) {
    for (const KernelFacts &facts : kernels)
      if (facts.op == kernel)
        return facts;
    llvm_unreachable("a member kernel has facts");
  }

  void createCombo(ArrayRef<KernelOp> members) {
    // Ops between the first and the last member that depend on an earlier
    // member move after the combo (build() closed groups at side effects,
    // so these are free of them). The first member is taken in the block's
    // current order: an earlier combo may have moved a member past another
    // (it depended on that combo), and the ops reading the member it passed
    // still have to follow the combo.
    Operation *last = members.back();
    Operation *first = *llvm::min_element(members, [](KernelOp a, KernelOp b) {
      return a->isBeforeInBlock(b);
    });
    llvm::SmallPtrSet<Value, 16> tainted;
    for (KernelOp member : members.drop_back())
      for (Value result : member.getResults())
        tainted.insert(result);
    SmallVector<Operation *> moved;
    for (Operation *op = first->getNextNode(); op && op != last;
         op = op->getNextNode()) {
      if (llvm::is_contained(members, op))
        continue;
      bool depends = false;
      op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          depends |= tainted.contains(operand);
      });
      if (!depends)
        continue;
      moved.push_back(op);
      for (Value result : op->getResults())
        tainted.insert(result);
    }
    Operation *after = last;
    for (Operation *op : moved) {
      op->moveAfter(after);
      after = op;
    }

    OpBuilder builder(last);
    SmallVector<Type> types;
    SmallVector<Attribute> schedules;
    for (KernelOp member : members) {
      llvm::append_range(types, member.getResultTypes());
      const KernelFacts &facts = factsFor(member);
      SmallVector<NamedAttribute> entries{
          builder.getNamedAttr("block", builder.getI64IntegerAttr(facts.block)),
          builder.getNamedAttr("cost", builder.getI64IntegerAttr(facts.cost))};
      if (facts.reduces)
        entries.push_back(builder.getNamedAttr(
            "rblock", builder.getI64IntegerAttr(facts.rblock)));
      schedules.push_back(builder.getDictionaryAttr(entries));
    }
    builder.setInsertionPointAfter(last);
    auto combo = ComboOp::create(builder, last->getLoc(), types,
                                 builder.getStringAttr(chooseDispatch(members)),
                                 builder.getArrayAttr(schedules),
                                 static_cast<unsigned>(members.size()));
    unsigned resultNumber = 0;
    for (auto [number, constMember] : llvm::enumerate(members)) {
      KernelOp member = constMember;
      Block *body = builder.createBlock(&combo.getSubkernels()[number]);
      for (Value result : member.getResults())
        result.replaceAllUsesWith(combo.getResult(resultNumber++));
      member->moveBefore(body, body->end());
      builder.setInsertionPointToEnd(body);
      ComboYieldOp::create(builder, member.getLoc(), member.getResults());
    }
    if (remarks)
      for (auto [number, member] : llvm::enumerate(members))
        KernelOp(member)->emitRemark() << "grouped as sub-kernel #" << number
                             << " of a combo of " << members.size()
                             << " kernels (dispatch " << combo.getDispatch()
                             << ")";
  }

  void remark(KernelOp kernel, const std::string &text) {
    if (remarks)
      kernel->emitRemark() << text;
  }

  Block &block;
  const Limits &limits;
  bool remarks;
  SmallVector<KernelFacts> kernels;
  SmallVector<int> groupOf;                      // kernel -> group, -1: none
  SmallVector<llvm::BitVector> ancestors;        // kernel -> kernels it needs
  SmallVector<SmallVector<unsigned>> groups;     // group -> member kernels
  SmallVector<unsigned> open;                    // groups kernels may join
  llvm::DenseMap<Operation *, llvm::BitVector> reached; // op -> kernels it needs (and itself)
  llvm::SmallPtrSet<Operation *, 32> invariantOps; // the same on every call
};

struct BrazeComboKernelsPass
    : braze::impl::BrazeComboKernelsBase<BrazeComboKernelsPass> {
  using BrazeComboKernelsBase::BrazeComboKernelsBase;

  void runOnOperation() override {
    auto fail = [&](const Twine &message) {
      emitError(getOperation().getLoc()) << "braze-combo-kernels: " << message;
      signalPassFailure();
    };
    if (dispatch != "auto" && !llvm::is_contained(kComboDispatchModes, dispatch))
      return fail("unknown dispatch '" + dispatch +
                  "' (auto, sequential, round_robin, flattened)");
    if (pointwiseBlock <= 0 || !llvm::isPowerOf2_64(pointwiseBlock))
      return fail("pointwise-block must be a positive power of two, got " +
                  Twine(static_cast<int64_t>(pointwiseBlock)));
    if (maxSubKernels < 2)
      return fail("max-sub-kernels must be at least 2, got " +
                  Twine(static_cast<int64_t>(maxSubKernels)));
    if (reductionPoints <= 0 || dynamicExtent <= 0)
      return fail("reduction-points and dynamic-extent must be positive");
    Limits limits{maxSubKernels,  maxArguments,    maxReductionExtent,
                  maxPoints,      maxLiveBytes,    maxLiveValues,
                  maxBodyOps,     pointwiseBlock,  reductionPoints,
                  dynamicExtent,  perSubKernelBlocks, dispatch};
    for (Block &block : getOperation().getBody()) {
      ComboGrouping grouping(block, limits, remarks);
      grouping.build();
      grouping.materialize(numCombos, numSubKernels);
    }
  }
};
} // namespace
