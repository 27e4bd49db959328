//===- BucketCollectives.cpp - the braze-bucket-collectives pass ----------===//
//
// Merges runs of small all_reduce starts of one group (same reduction,
// element type and ranks) into buckets of at most `bucket-bytes`: the inputs
// flattened and concatenated, one start, one wait, and each member's result
// sliced back out. A start joins only when no data path leads from a
// member's result to it, and the ops that must move below the bucket's wait
// are free of effects; a start that cannot join closes its group's bucket,
// so a bucket never crosses another collective of its group.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace braze {
#define GEN_PASS_DEF_BRAZEBUCKETCOLLECTIVES
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
constexpr StringLiteral kOrderAttr = "braze.collective_order";

/// Elements and bytes of a static tensor of int or float elements; nullopt
/// for anything else (a dynamic shape cannot be given a place in a bucket).
std::optional<std::pair<int64_t, int64_t>> staticSize(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() ||
      !tensor.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t elements = tensor.getNumElements();
  int64_t width = tensor.getElementType().getIntOrFloatBitWidth();
  return std::make_pair(elements, elements * std::max<int64_t>(1, width / 8));
}

/// The ops between a bucket's first member and a candidate start that use a
/// member's result (through any chain of ops): they must move below the
/// bucket's wait. Also says whether the candidate itself uses one.
struct Cone {
  SmallVector<Operation *> ops;
  Operation *effects = nullptr; // the first op of the cone with effects
  bool reachesCandidate = false;
};

/// The open bucket of one group: its members in program order.
struct Bucket {
  SmallVector<AllReduceStartOp> members;
  int64_t bytes = 0;
};

struct BrazeBucketCollectivesPass
    : braze::impl::BrazeBucketCollectivesBase<BrazeBucketCollectivesPass> {
  using BrazeBucketCollectivesBase::BrazeBucketCollectivesBase;

  // 1. Per block, go through the collective starts in program order,
  //    keeping one open bucket per group.
  // 2. An all_reduce joins its group's bucket when it matches, fits, does
  //    not depend on a member's result and leaves only effect-free ops to
  //    move; otherwise the bucket is rewritten (when it has two or more
  //    members) and the start opens the next one, or stays alone.
  // 3. Any other start of the group closes the group's bucket.
  void runOnOperation() override {
    if (bucketBytes < 1) {
      getOperation().emitError()
          << "braze-bucket-collectives: bucket-bytes must be at least 1, got "
          << static_cast<int64_t>(bucketBytes);
      return signalPassFailure();
    }
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) { blocks.push_back(block); });
    for (Block *block : blocks)
      bucketBlock(*block);
  }

  void bucketBlock(Block &block) {
    SmallVector<Operation *> starts;
    for (Operation &op : block)
      if (isCollectiveStart(&op))
        starts.push_back(&op);
    // Rewriting a bucket moves only its own collectives and ops free of
    // effects, so the other groups' open buckets stay valid.
    llvm::MapVector<StringRef, Bucket> open;
    for (Operation *op : starts) {
      StringRef group = collectiveGroup(op);
      auto start = dyn_cast<AllReduceStartOp>(op);
      std::string refusal = start ? reasonNotAlone(start) : std::string();
      if (!start || !refusal.empty()) {
        if (start && remarks)
          start.emitRemark() << describeCollective(op)
                             << " is not bucketed: " << refusal;
        close(open, group);
        continue;
      }
      auto found = open.find(group);
      if (found != open.end()) {
        std::string why = reasonNotJoining(found->second, start);
        if (why.empty()) {
          found->second.members.push_back(start);
          found->second.bytes += staticSize(start.getInput().getType())->second;
          continue;
        }
        if (remarks)
          start.emitRemark() << describeCollective(op)
                             << " starts a new bucket: " << why;
        close(open, group);
      }
      Bucket &bucket = open[group];
      bucket.members.push_back(start);
      bucket.bytes = staticSize(start.getInput().getType())->second;
    }
    for (auto &[group, bucket] : open)
      if (bucket.members.size() > 1)
        rewrite(bucket);
  }

  void close(llvm::MapVector<StringRef, Bucket> &open, StringRef group) {
    auto found = open.find(group);
    if (found == open.end())
      return;
    if (found->second.members.size() > 1)
      rewrite(found->second);
    open.erase(found);
  }

  /// Why `start` cannot be in any bucket; empty when it can.
  std::string reasonNotAlone(AllReduceStartOp start) {
    std::string why;
    llvm::raw_string_ostream out(why);
    auto size = staticSize(start.getInput().getType());
    if (!size)
      out << "its input " << start.getInput().getType()
          << " has a dynamic shape or non-numeric elements";
    else if (size->second > bucketBytes)
      out << "its " << size->second << " bytes exceed bucket-bytes ("
          << bucketBytes << ")";
    else if (!start.getWork().hasOneUse())
      out << "it is not waited for exactly once";
    return why;
  }

  /// Why `start` cannot join `bucket`; empty when it can.
  std::string reasonNotJoining(Bucket &bucket, AllReduceStartOp start) {
    std::string why;
    llvm::raw_string_ostream out(why);
    AllReduceStartOp first = bucket.members.front();
    auto type = cast<RankedTensorType>(start.getInput().getType());
    Type element = first.getInput().getType().getElementType();
    int64_t bytes = staticSize(type)->second;
    if (start.getReduce() != first.getReduce())
      out << "its reduction \"" << start.getReduce() << "\" differs from the "
          << "bucket's \"" << first.getReduce() << "\"";
    else if (type.getElementType() != element)
      out << "its element type " << type.getElementType()
          << " differs from the bucket's " << element;
    else if (start.getRanks() != first.getRanks())
      out << "its ranks differ from the bucket's";
    else if (bucket.bytes + bytes > bucketBytes)
      out << "the bucket's " << bucket.bytes << " bytes and its " << bytes
          << " would exceed bucket-bytes (" << bucketBytes << ")";
    if (!why.empty())
      return why;
    Cone cone = coneBefore(bucket, start);
    if (cone.reachesCandidate)
      out << "its input depends on the result of a member of the bucket";
    else if (cone.effects)
      out << "'" << cone.effects->getName() << "' at "
          << cone.effects->getLoc()
          << " uses a member's result and has effects, so it cannot move "
             "below the bucket's wait";
    return why;
  }

  /// Walks from the bucket's first member to `end`, following the members'
  /// results through every op (and every op nested in one) that uses them.
  Cone coneBefore(Bucket &bucket, Operation *end) {
    DenseSet<Value> tainted;
    DenseSet<Operation *> waits;
    for (AllReduceStartOp member : bucket.members)
      waits.insert(*member.getWork().user_begin());
    Cone cone;
    auto usesTainted = [&](Operation *op) {
      return op
          ->walk([&](Operation *nested) {
            return llvm::any_of(nested->getOperands(),
                                [&](Value v) { return tainted.contains(v); })
                       ? WalkResult::interrupt()
                       : WalkResult::advance();
          })
          .wasInterrupted();
    };
    for (Operation *op = bucket.members.front()->getNextNode(); op != end;
         op = op->getNextNode()) {
      if (waits.contains(op)) {
        tainted.insert(op->getResult(0));
        continue;
      }
      if (!usesTainted(op))
        continue;
      cone.ops.push_back(op);
      if (!cone.effects && !isMemoryEffectFree(op))
        cone.effects = op;
      for (Value result : op->getResults())
        tainted.insert(result);
    }
    cone.reachesCandidate = usesTainted(end);
    return cone;
  }

  /// One start and one wait for the whole bucket, where its last member
  /// starts; each member's result sliced out before its first user.
  void rewrite(Bucket &bucket) {
    SmallVector<AllReduceStartOp> &members = bucket.members;
    AllReduceStartOp first = members.front(), last = members.back();
    Cone cone = coneBefore(bucket, last);
    assert(!cone.effects && !cone.reachesCandidate && "checked when joining");

    OpBuilder builder(last);
    Type element = first.getInput().getType().getElementType();
    SmallVector<Location> locations;
    SmallVector<Value> flat;
    SmallVector<int64_t> elements;
    for (AllReduceStartOp member : members) {
      locations.push_back(member.getLoc());
      Value input = member.getInput();
      int64_t count = staticSize(input.getType())->first;
      auto type = RankedTensorType::get({count}, element);
      if (input.getType() != type)
        input = ReshapeOp::create(builder, member.getLoc(), type, input,
                                  ValueRange{});
      flat.push_back(input);
      elements.push_back(count);
    }
    Location loc = builder.getFusedLoc(locations);
    int64_t total = 0;
    for (int64_t count : elements)
      total += count;
    auto bufferType = RankedTensorType::get({total}, element);
    Value buffer = ConcatOp::create(builder, loc, bufferType, flat, 0);
    auto merged = AllReduceStartOp::create(
        builder, loc, WorkType::get(&getContext(), bufferType), buffer,
        first.getReduce(), first.getGroup(), first.getRanks());
    // The bucket takes its first member's place in the group's order.
    if (Attribute order = first->getAttr(kOrderAttr))
      merged->setAttr(kOrderAttr, order);
    auto wait = WaitOp::create(builder, loc, bufferType, merged.getWork());
    // Where every member is waited for after the last start, the bucket is
    // waited for where the first of them was: the group's waits keep the
    // order of its starts (an earlier start's wait may lie in between).
    Operation *earliestWait = nullptr;
    for (AllReduceStartOp member : members) {
      Operation *memberWait = *member.getWork().user_begin();
      if (!earliestWait || memberWait->isBeforeInBlock(earliestWait))
        earliestWait = memberWait;
    }
    if (last->isBeforeInBlock(earliestWait))
      wait->moveBefore(earliestWait);

    // The cone moves below the wait, then (last first) each op of it down
    // to just before its first user or the next op of the cone, whichever
    // comes first (their order is kept), so braze-overlap can sink the wait
    // past the compute that does not need the bucket.
    Operation *after = wait;
    for (Operation *op : cone.ops) {
      op->moveAfter(after);
      after = op;
    }
    Operation *next = nullptr;
    for (Operation *op : llvm::reverse(cone.ops)) {
      Operation *user = firstUser(op->getResults());
      if (next && (!user || next->isBeforeInBlock(user)))
        user = next;
      if (user)
        op->moveBefore(user);
      next = op;
    }

    if (remarks)
      first.emitRemark() << describeCollective(first) << " and "
                         << members.size() - 1
                         << " later all_reduce(s) reduced as one bucket of "
                         << bucket.bytes << " bytes, started at "
                         << last.getLoc();
    int64_t offset = 0;
    for (auto [member, count] : llvm::zip(members, elements)) {
      Operation *memberWait = *member.getWork().user_begin();
      Value result = memberWait->getResult(0);
      if (Operation *user = firstUser(result)) {
        builder.setInsertionPoint(user);
        Value piece = SliceOp::create(
            builder, member.getLoc(), RankedTensorType::get({count}, element),
            wait.getResult(), 0, ValueRange{},
            ArrayRef<int64_t>{offset, offset + count, 1});
        if (piece.getType() != result.getType())
          piece = ReshapeOp::create(builder, member.getLoc(), result.getType(),
                                    piece, ValueRange{});
        result.replaceAllUsesWith(piece);
      }
      offset += count;
      memberWait->erase();
      member->erase();
    }
    ++numBuckets;
    numMerged += members.size();
  }

  /// The first op of the block (in program order) that uses any of
  /// `values`, directly or in a nested op; null when none does.
  static Operation *firstUser(ValueRange values) {
    Operation *first = nullptr;
    for (Value value : values)
      for (Operation *user : value.getUsers()) {
        Operation *op = value.getParentBlock()->findAncestorOpInBlock(*user);
        if (op && (!first || op->isBeforeInBlock(first)))
          first = op;
      }
    return first;
  }
};
} // namespace
