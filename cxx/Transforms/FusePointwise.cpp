//===- FusePointwise.cpp - the braze-fuse-pointwise pass ------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/IterationDomain.h"
#include "Transforms/Passes.h"

#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "braze-fuse-pointwise"

namespace braze {
#define GEN_PASS_DEF_BRAZEFUSEPOINTWISE
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
bool isFusible(Operation *op) {
  return op->hasTrait<PointwiseTrait>() || isReduction(op) ||
         isa<ExpandOp>(op);
}

/// A splat constant costs nothing to copy into every group that reads it.
bool isSplatConstant(Operation *op) {
  auto constant = dyn_cast_if_present<ConstantOp>(op);
  return constant && isa<SplatElementsAttr>(constant.getValue());
}

/// A reduction whose result broadcasts back over its input's domain.
bool keepsDims(Operation *op) { return op->hasAttr("keepdim"); }

/// Ops that evaluate a transcendental function (tens of instructions per
/// element, where other pointwise ops take one or two).
bool isTranscendental(Operation *op) {
  return isa<ExpOp, Expm1Op, Exp2Op, LogOp, Log1pOp, Log2Op, TanhOp, SigmoidOp,
             SiluOp, ErfOp, GeluOp, SinOp, CosOp, TanOp, AsinOp, AcosOp,
             AtanOp, SinhOp, CoshOp, PowOp, Atan2Op>(op);
}

/// Whether ops iterating over `domain` would run at least `times` times per
/// point when they iterate over `merged` instead: the product of the
/// extents `merged` broadcasts `domain` along (a per-channel value spread
/// over an image: H * W). A dynamic extent counts as large.
bool broadcastsInto(ArrayRef<int64_t> domain, ArrayRef<int64_t> merged,
                    int64_t times) {
  int64_t product = 1;
  for (auto [own, other] : llvm::zip_equal(domain, merged)) {
    if (own != 1 || other == 1)
      continue;
    if (ShapedType::isDynamic(other))
      return true;
    product *= other;
  }
  return product >= times;
}

/// From this many recomputations per point on, a transcendental costs more
/// inside the kernel that broadcasts it than computed once and read back.
constexpr int64_t kTranscendentalBroadcast = 4;

/// The fusion groups of one block, built by merging producers into
/// consumers in program order.
class Grouping {
public:
  Grouping(Block &block, bool remarks) : block(block), remarks(remarks) {}

  void build() {
    for (Operation &op : block) {
      if (!isFusible(&op))
        continue;
      groups.insert(&op);
      domains[&op] = SmallVector<int64_t>(domainOf(&op));
      reductions[&op] = reducedDims(&op);
      for (Value operand : op.getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || producer->getBlock() != &block ||
            !groups.contains(producer))
          continue;
        if (isReduction(producer) && !keepsDims(producer)) {
          // A rank-dropping result cannot broadcast back.
          refuse(producer, &op, "the reduction drops its dims (no keepdim)");
          continue;
        }
        tryMerge(producer, &op);
      }
    }
  }

  /// Groups of at least two ops, each with its ops in program order.
  SmallVector<SmallVector<Operation *>> fusedGroups() const {
    llvm::MapVector<Operation *, SmallVector<Operation *>> byLeader;
    for (Operation &op : block)
      if (groups.contains(&op))
        byLeader[groups.getLeaderValue(&op)].push_back(&op);
    SmallVector<SmallVector<Operation *>> result;
    for (auto &entry : byLeader)
      if (entry.second.size() > 1)
        result.push_back(std::move(entry.second));
    return result;
  }

private:
  void tryMerge(Operation *producer, Operation *consumer) {
    Operation *producerLeader = groups.getLeaderValue(producer);
    Operation *consumerLeader = groups.getLeaderValue(consumer);
    if (producerLeader == consumerLeader)
      return;
    std::optional<SmallVector<int64_t>> domain =
        mergeDomains(domains[producerLeader], domains[consumerLeader]);
    if (!domain)
      return refuse(producer, consumer, "their iteration domains differ");
    if (broadcastsInto(domains[producerLeader], *domain,
                       kTranscendentalBroadcast) &&
        llvm::any_of(block, [&](Operation &op) {
          return inGroup(&op, producerLeader) && isTranscendental(&op);
        }))
      // Computed once per point of its own domain instead.
      return refuse(producer, consumer,
                    "it would recompute a transcendental function at every "
                    "broadcast point");
    ArrayRef<int64_t> producerDims = reductions[producerLeader];
    ArrayRef<int64_t> consumerDims = reductions[consumerLeader];
    // One kernel loops over one set of reduction dims.
    if (!producerDims.empty() && !consumerDims.empty() &&
        producerDims != consumerDims)
      return refuse(producer, consumer, "their groups reduce different dims");
    if (joinedThroughOutsideOp(producerLeader, consumerLeader))
      return refuse(producer, consumer,
                    "a path through an op outside both groups joins them");
    SmallVector<int64_t> dims(producerDims.empty() ? consumerDims
                                                   : producerDims);
    groups.unionSets(producer, consumer);
    Operation *leader = groups.getLeaderValue(producer);
    domains[leader] = std::move(*domain);
    reductions[leader] = std::move(dims);
    if (remarks)
      consumer->emitRemark() << "'" << consumer->getName()
                             << "' fused with its producer '"
                             << producer->getName() << "'";
  }

  /// Explains (as a remark, when asked) why `consumer` did not join the
  /// group of `producer`.
  void refuse(Operation *producer, Operation *consumer, StringRef reason) {
    LLVM_DEBUG(llvm::dbgs() << "not fused (" << reason << "): " << *producer
                            << " / " << *consumer << "\n");
    if (remarks)
      consumer->emitRemark() << "'" << consumer->getName()
                             << "' not fused with its producer '"
                             << producer->getName() << "': " << reason;
  }

  bool inGroup(Operation *op, Operation *leader) const {
    return groups.contains(op) && groups.getLeaderValue(op) == leader;
  }

  /// Whether a value flows from group `from` to group `to` through an op in
  /// neither: merging them would make the fused kernel depend on itself.
  bool joinedThroughOutsideOp(Operation *from, Operation *to) const {
    SmallVector<Operation *> worklist;
    DenseSet<Operation *> seen;
    // Walks to the users of `op` outside both groups; true on reaching `to`
    // from such an op.
    auto visitUsers = [&](Operation *op, bool fromOutside) {
      for (Operation *user : op->getUsers()) {
        Operation *inBlock = block.findAncestorOpInBlock(*user);
        if (!inBlock || inGroup(inBlock, from))
          continue;
        if (inGroup(inBlock, to)) {
          if (fromOutside)
            return true;
          continue;
        }
        if (seen.insert(inBlock).second)
          worklist.push_back(inBlock);
      }
      return false;
    };
    for (Operation &op : block)
      if (inGroup(&op, from) && visitUsers(&op, /*fromOutside=*/false))
        return true;
    while (!worklist.empty())
      if (visitUsers(worklist.pop_back_val(), /*fromOutside=*/true))
        return true;
    return false;
  }

  Block &block;
  bool remarks;
  llvm::EquivalenceClasses<Operation *> groups;
  DenseMap<Operation *, SmallVector<int64_t>> domains;
  DenseMap<Operation *, SmallVector<int64_t>> reductions;
};

/// A group about to become a braze.group: the ops it takes over and the
/// pointwise ops it recomputes (copied in; the original stays for others).
struct GroupPlan {
  SmallVector<Operation *> members;
  SmallVector<Operation *> recomputed;

  bool contains(Operation *op) const {
    return llvm::is_contained(members, op) ||
           llvm::is_contained(recomputed, op);
  }
};

/// Copies into `plan` the pointwise producers outside it whose operands the
/// group already reads (or which read only splat constants), as long as each
/// is recomputed in at most `limit` groups. With `remarks`, each decision is
/// a remark on the producer.
void planRecomputation(MutableArrayRef<GroupPlan> plans, int64_t limit,
                       bool remarks, Pass::Statistic &counter) {
  if (limit <= 0)
    return;
  DenseMap<Operation *, int64_t> copies;
  for (GroupPlan &plan : plans) {
    DenseSet<Value> reads;
    for (Operation *op : plan.members)
      for (Value operand : op->getOperands())
        reads.insert(operand);
    // The group's domain: a transcendental producer that would be
    // recomputed at each of its broadcast points stays outside.
    std::optional<SmallVector<int64_t>> domain =
        SmallVector<int64_t>(domainOf(plan.members.front()));
    for (Operation *op : plan.members)
      if (domain)
        domain = mergeDomains(*domain, domainOf(op));
    for (Operation *op : plan.members) {
      for (Value operand : op->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || plan.contains(producer) ||
            !producer->hasTrait<PointwiseTrait>())
          continue;
        auto remark = [&](bool recomputed) {
          return producer->emitRemark()
                 << "'" << producer->getName() << "' "
                 << (recomputed ? "" : "not ")
                 << "recomputed in the group of '"
                 << plan.members.back()->getName() << "' at "
                 << plan.members.back()->getLoc();
        };
        if (copies[producer] >= limit) {
          if (remarks)
            remark(false) << ": already in " << limit << " group(s) (recompute-limit)";
          continue;
        }
        if (!domain || domainOf(producer).size() != domain->size()) {
          // A group's ops share one rank (braze-lower-kernels builds one
          // iteration domain from them).
          if (remarks)
            remark(false) << ": its rank differs from the group's";
          continue;
        }
        if (isTranscendental(producer) &&
            broadcastsInto(domainOf(producer), *domain,
                           kTranscendentalBroadcast)) {
          if (remarks)
            remark(false) << ": a transcendental function spread over a larger "
                        "domain";
          continue;
        }
        bool cheap = llvm::all_of(producer->getOperands(), [&](Value v) {
          return reads.contains(v) || isSplatConstant(v.getDefiningOp());
        });
        if (!cheap)
          continue;
        if (remarks)
          remark(true);
        plan.recomputed.push_back(producer);
        ++copies[producer];
        ++counter;
      }
    }
  }
}

/// Replaces the plan's ops by one braze.group and returns it.
GroupOp materialize(const GroupPlan &plan, OpBuilder &builder) {
  SmallVector<Operation *> cloned(plan.recomputed);
  llvm::append_range(cloned, plan.members);
  llvm::sort(cloned, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  auto inside = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && (plan.contains(def) || isSplatConstant(def));
  };
  llvm::SetVector<Value> inputs;
  for (Operation *op : cloned)
    for (Value operand : op->getOperands())
      if (!inside(operand))
        inputs.insert(operand);
  SmallVector<Value> outputs;
  for (Operation *op : plan.members)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !llvm::is_contained(plan.members, user);
          }))
        outputs.push_back(result);

  SmallVector<Location> locations;
  for (Operation *op : plan.members)
    locations.push_back(op->getLoc());
  builder.setInsertionPoint(plan.members.back());
  auto group = GroupOp::create(builder, builder.getFusedLoc(locations),
                               ValueRange(outputs).getTypes(),
                               inputs.getArrayRef());
  Block *body = builder.createBlock(&group.getBody());
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  for (Operation *op : cloned)
    for (Value operand : op->getOperands())
      if (!mapping.contains(operand) && isSplatConstant(operand.getDefiningOp()))
        builder.clone(*operand.getDefiningOp(), mapping);
  for (Operation *op : cloned)
    builder.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value output : outputs)
    yielded.push_back(mapping.lookup(output));
  YieldOp::create(builder, group.getLoc(), yielded);

  for (auto [output, result] : llvm::zip_equal(outputs, group.getResults()))
    output.replaceAllUsesWith(result);
  for (Operation *op : llvm::reverse(plan.members))
    op->erase();
  return group;
}

struct BrazeFusePointwisePass
    : braze::impl::BrazeFusePointwiseBase<BrazeFusePointwisePass> {
  using BrazeFusePointwiseBase::BrazeFusePointwiseBase;

  // 1. Group fusible ops block by block, merging each op with the groups of
  //    its producers when domains agree and no cycle forms.
  // 2. Plan bounded recomputation of cheap shared producers.
  // 3. Replace each group of two or more ops by a braze.group, then restore
  //    def-before-use order (a group's result may have had users above it),
  //    and drop the copied constants and recomputed producers left unused.
  void runOnOperation() override {
    OpBuilder builder(&getContext());
    // The function's blocks and those of its control-flow regions: each
    // region is isolated from above, so groups form inside one and never
    // across its boundary.
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) {
      if (isa<func::FuncOp, SwitchOp, WhileOp>(block->getParentOp()))
        blocks.push_back(block);
    });
    for (Block *region : blocks) {
      Block &block = *region;
      Grouping grouping(block, remarks);
      grouping.build();
      SmallVector<GroupPlan> plans;
      for (SmallVector<Operation *> &members : grouping.fusedGroups())
        plans.push_back({std::move(members), {}});
      planRecomputation(plans, recomputeLimit, remarks, numRecomputed);
      // Recomputed producers and the splat constants groups copied may have
      // no users left once the groups exist.
      // (Members of another group are erased by their own materialization.)
      DenseSet<Operation *> members;
      for (const GroupPlan &plan : plans)
        members.insert(plan.members.begin(), plan.members.end());
      llvm::SetVector<Operation *> maybeDead;
      for (const GroupPlan &plan : plans) {
        for (Operation *op : plan.recomputed)
          if (!members.contains(op))
            maybeDead.insert(op);
        for (Operation *op : plan.members)
          for (Value operand : op->getOperands())
            if (isSplatConstant(operand.getDefiningOp()))
              maybeDead.insert(operand.getDefiningOp());
      }
      // Consumers first: a producer group then sees which of its values are
      // still read outside (recomputation may have removed readers).
      for (const GroupPlan &plan : llvm::reverse(plans)) {
        numFusedOps += plan.members.size();
        materialize(plan, builder);
        ++numGroups;
      }
      for (Operation *op : llvm::reverse(maybeDead))
        if (op->use_empty())
          op->erase();
      if (!sortTopologically(&block)) {
        getOperation()->emitError("braze-fuse-pointwise created a cycle");
        return signalPassFailure();
      }
    }
  }
};
} // namespace
