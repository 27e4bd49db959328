//===- InlineKernels.cpp - the braze-inline-kernels pass ------------------===//
//
// Computes a pointwise kernel's value inside the one kernel that reads it,
// where the reads were hidden from braze-fuse-pointwise by layout ops that
// braze-fold-layouts has since folded (rotary embeddings' negated half,
// behind the concat of rotate_half; a ReLU read by a max pool through the
// strided slices of its window).
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/CostModel.h"
#include "Transforms/KernelEdits.h"
#include "Transforms/ScalarLowering.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace braze {
#define GEN_PASS_DEF_BRAZEINLINEKERNELS
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// A domain's size: the product of its static extents and its dynamic
/// extents' values (compared as values: two kernels over one `?` agree).
struct DomainSize {
  int64_t fixed = 1;
  SmallVector<Value> dynamic;

  explicit DomainSize(KernelOp kernel) {
    for (int64_t extent : kernel.getStaticDomain())
      if (!ShapedType::isDynamic(extent))
        fixed *= extent;
    dynamic.assign(kernel.getDynamicDomain().begin(),
                   kernel.getDynamicDomain().end());
    llvm::sort(dynamic, [](Value a, Value b) {
      return a.getAsOpaquePointer() < b.getAsOpaquePointer();
    });
  }
};

/// Whether a reader can compute `producer`'s value at any of its points: one
/// result, stored once at the point's own indices, no reduction dims, and
/// no dynamic extent read in the body (its value lives outside the reader).
bool isInlinable(KernelOp producer) {
  if (producer->getNumResults() != 1 || !producer.getReduce().empty())
    return false;
  Block &body = producer.getBody().front();
  auto stores = llvm::to_vector(body.getOps<StoreOp>());
  if (stores.size() != 1)
    return false;
  for (auto [dim, index] : llvm::enumerate(stores.front().getIndices()))
    if (index != producer.getIndex(dim))
      return false;
  for (auto [dim, extent] : llvm::enumerate(producer.getStaticDomain()))
    if (ShapedType::isDynamic(extent) && !producer.getExtent(dim).use_empty())
      return false;
  return true;
}

/// The reads of `producer`'s result to inline: the one use of the result is
/// a kernel input that only tensor.extract ops read, in a kernel where
/// computing the producer's value at every read evaluates each of its
/// points at most `maxEvaluations` times on average, and where the roofline
/// (CostModel's machine) says the evaluations beyond one per point take less
/// time than the result's trip through memory (written once, read once).
/// Sets `consumer` and `number`; empty where the producer stays.
SmallVector<tensor::ExtractOp> readsToInline(KernelOp producer,
                                             int64_t maxEvaluations,
                                             KernelOp &consumer,
                                             unsigned &number) {
  Value result = producer->getResult(0);
  if (!result.hasOneUse())
    return {};
  OpOperand &use = *result.use_begin();
  consumer = dyn_cast<KernelOp>(use.getOwner());
  if (!consumer)
    return {};
  // (A tensor is only ever one of the inputs, never a dynamic extent.)
  number = use.getOperandNumber() - consumer.getInputs().getBeginOperandIndex();
  SmallVector<tensor::ExtractOp> reads;
  for (Operation *user : consumer.getInputArgument(number).getUsers()) {
    auto read = dyn_cast<tensor::ExtractOp>(user);
    if (!read)
      return {};
    reads.push_back(read);
  }
  DomainSize produced(producer), consumed(consumer);
  // Per value of the dynamic extents, which both domains share.
  double evaluations = static_cast<double>(reads.size()) * consumed.fixed;
  if (reads.empty() || produced.dynamic != consumed.dynamic ||
      evaluations > static_cast<double>(maxEvaluations) * produced.fixed)
    return {};
  Machine machine;
  double recomputing = (evaluations - produced.fixed) * pointFlops(producer) /
                       machine.peakFlops;
  double roundTrip = 2.0 * tensorBytes(result.getType()) / machine.memoryBandwidth;
  if (recomputing > roundTrip)
    return {};
  return reads;
}

/// Replaces each of `reads` (of `consumer`'s input `number`, the result of
/// `producer`) by the producer's body evaluated at the read's indices; the
/// producer's inputs become the consumer's.
void inlineReads(KernelOp producer, KernelOp consumer, unsigned number,
                 ArrayRef<tensor::ExtractOp> reads) {
  Block &from = producer.getBody().front(), &to = consumer.getBody().front();
  Location loc = consumer.getLoc();
  IRMapping inputs;
  for (auto [input, value] : llvm::enumerate(producer.getInputs())) {
    inputs.map(producer.getInputArgument(input),
               to.addArgument(value.getType(), loc));
    consumer.getInputsMutable().append(value);
  }
  for (tensor::ExtractOp read : reads) {
    OpBuilder builder(read);
    IRMapping mapping = inputs;
    for (auto [dim, extent] : llvm::enumerate(producer.getStaticDomain())) {
      mapping.map(producer.getIndex(dim), read.getIndices()[dim]);
      if (!ShapedType::isDynamic(extent) && !producer.getExtent(dim).use_empty())
        mapping.map(producer.getExtent(dim),
                    arith::ConstantIndexOp::create(builder, loc, extent));
    }
    for (Operation &op : from) {
      if (auto store = dyn_cast<StoreOp>(op))
        read.replaceAllUsesWith(mapping.lookup(store.getValue()));
      else
        builder.clone(op, mapping);
    }
    read.erase();
  }
  dropExactRoundings(to);
  to.eraseArgument(consumer.getInputArgument(number).getArgNumber());
  consumer.getInputsMutable().erase(number);
  mergeRepeatedInputs(consumer);
  producer.erase();
}

struct BrazeInlineKernelsPass
    : braze::impl::BrazeInlineKernelsBase<BrazeInlineKernelsPass> {
  using BrazeInlineKernelsBase::BrazeInlineKernelsBase;

  void runOnOperation() override {
    SmallVector<KernelOp> kernels;
    getOperation().walk([&](KernelOp kernel) { kernels.push_back(kernel); });
    for (KernelOp producer : kernels) {
      KernelOp consumer;
      unsigned number;
      if (!isInlinable(producer))
        continue;
      SmallVector<tensor::ExtractOp> reads =
          readsToInline(producer, maxEvaluations, consumer, number);
      if (!reads.empty()) {
        inlineReads(producer, consumer, number, reads);
        ++numInlined;
      }
    }
  }
};
} // namespace
