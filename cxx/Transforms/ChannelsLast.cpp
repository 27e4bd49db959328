//===- ChannelsLast.cpp - the braze-channels-last pass --------------------===//
//
// Runs a network's 2-D convolutions in channels-last memory (NHWC) and the
// pointwise kernels between them in the same order, so no tensor is
// converted between the two layouts on its way from one convolution to the
// next.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace braze {
#define GEN_PASS_DEF_BRAZECHANNELSLAST
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
// Logical NCHW to the NHWC order channels-last memory holds it in, and back.
constexpr int64_t toLast[] = {0, 2, 3, 1};
constexpr int64_t toFirst[] = {0, 3, 1, 2};

RankedTensorType permuted(RankedTensorType type, ArrayRef<int64_t> order) {
  SmallVector<int64_t> shape;
  for (int64_t dim : order)
    shape.push_back(type.getDimSize(dim));
  return type.clone(shape);
}

bool isRank4(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() == 4;
}

/// Makes the kernel iterate and write in NHWC order: domain dim k becomes
/// the old dim toLast[k], every rank-4 tensor it reads or writes is seen
/// through a permutation to NHWC (a view of a channels-last tensor) and its
/// accesses list their indices in that order. The body's values are the
/// same at every point; only the order of the points changes (and of no
/// reduction's points: see keepsReductionOrder).
void permuteKernel(KernelOp kernel, SmallVectorImpl<Value> &lastValues) {
  Block &body = kernel.getBody().front();
  unsigned rank = kernel.getRank(); // 4
  Location loc = kernel.getLoc();
  OpBuilder builder(kernel);

  SmallVector<Value> inputs(kernel.getInputs());
  for (auto [number, input] : llvm::enumerate(inputs)) {
    if (!isRank4(input.getType()))
      continue;
    auto type = permuted(cast<RankedTensorType>(input.getType()), toLast);
    // A result this pass permuted back to NCHW is read in NHWC as written.
    auto back = input.getDefiningOp<PermuteOp>();
    if (back && back.getPermutation() == ArrayRef<int64_t>(toFirst) &&
        back.getInput().getType() == type)
      input = back.getInput();
    else
      input = PermuteOp::create(builder, loc, type, input,
                                builder.getDenseI64ArrayAttr(toLast));
    kernel.getInputArgument(number).setType(type);
  }
  kernel.getInputsMutable().assign(inputs);

  // New index and extent arguments in NHWC order, then the old ones go.
  for (unsigned k = 0; k < rank; ++k)
    body.insertArgument(k, builder.getIndexType(), loc);
  for (unsigned k = 0; k < rank; ++k)
    body.insertArgument(2 * rank + k, builder.getIndexType(), loc);
  for (unsigned k = 0; k < rank; ++k) {
    body.getArgument(rank + toLast[k]).replaceAllUsesWith(body.getArgument(k));
    body.getArgument(3 * rank + toLast[k])
        .replaceAllUsesWith(body.getArgument(2 * rank + k));
  }
  // Now: new indices, old indices, new extents, old extents, inputs.
  for (unsigned k = 0; k < rank; ++k)
    body.eraseArgument(3 * rank);
  for (unsigned k = 0; k < rank; ++k)
    body.eraseArgument(rank);

  // Accesses of rank-4 tensors list their indices in NHWC order.
  body.walk([&](Operation *op) {
    OperandRange indices = {nullptr, 0};
    if (auto extract = dyn_cast<tensor::ExtractOp>(op);
        extract && isRank4(extract.getTensor().getType()))
      indices = extract.getIndices();
    else if (auto store = dyn_cast<StoreOp>(op);
             store && isRank4(kernel->getResult(store.getResult()).getType()))
      indices = store.getIndices();
    if (indices.empty())
      return;
    SmallVector<Value> old(indices);
    unsigned first = indices.getBeginOperandIndex();
    for (unsigned k = 0; k < rank; ++k)
      op->setOperand(first + k, old[toLast[k]]);
  });

  SmallVector<int64_t> domain, oldDomain(kernel.getStaticDomain());
  SmallVector<Value> dynamicDomain, oldDynamic(kernel.getDynamicDomain());
  SmallVector<Value> dynamicOf(rank);
  for (unsigned dim = 0, seen = 0; dim < rank; ++dim)
    if (ShapedType::isDynamic(oldDomain[dim]))
      dynamicOf[dim] = oldDynamic[seen++];
  for (int64_t dim : toLast) {
    domain.push_back(oldDomain[dim]);
    if (dynamicOf[dim])
      dynamicDomain.push_back(dynamicOf[dim]);
  }
  SmallVector<int64_t> reduce;
  for (int64_t dim : kernel.getReduce())
    reduce.push_back(toFirst[dim]); // where old dim `dim` now is
  llvm::sort(reduce);
  kernel.setStaticDomain(domain);
  kernel.setReduce(reduce);
  kernel.getDynamicDomainMutable().assign(dynamicDomain);

  builder.setInsertionPointAfter(kernel);
  for (OpResult result : kernel->getResults()) {
    if (!isRank4(result.getType()))
      continue;
    auto original = cast<RankedTensorType>(result.getType());
    result.setType(permuted(original, toLast));
    auto back = PermuteOp::create(builder, loc, original, result,
                                  builder.getDenseI64ArrayAttr(toFirst));
    result.replaceAllUsesExcept(back.getResult(), back);
    lastValues.push_back(back);
  }
}

/// Whether each reduction of `kernel` adds its points in the same order when
/// the kernel iterates in NHWC order: the permutation only moves C behind H
/// and W, so it does unless C is reduced together with H or W. A reduction
/// over C alone becomes a row reduction (C innermost); one over H and W (a
/// mean of an image, a squeeze-excitation block) a column reduction, whose
/// innermost dim C is parallel and which the CPU emitter walks in SIMD lanes
/// of consecutive channels.
bool keepsReductionOrder(KernelOp kernel) {
  ArrayRef<int64_t> reduce = kernel.getReduce();
  bool channels = llvm::is_contained(reduce, 1);
  bool image = llvm::is_contained(reduce, 2) || llvm::is_contained(reduce, 3);
  return !(channels && image);
}

struct BrazeChannelsLastPass
    : braze::impl::BrazeChannelsLastBase<BrazeChannelsLastPass> {
  using BrazeChannelsLastBase::BrazeChannelsLastBase;

  void runOnOperation() override {
    // Values held in channels-last memory: results of the convolutions and
    // of the kernels made to write in NHWC order.
    llvm::DenseSet<Value> last;
    SmallVector<Value> made, permutedBack;
    bool any = false;
    getOperation().walk([&](Operation *op) {
      if (auto convolution = dyn_cast<ConvolutionOp>(op)) {
        if (!isRank4(convolution.getInput().getType()))
          return;
        convolution.setMemoryFormat("channels_last");
        last.insert(convolution.getResult());
        ++numConvolutions;
        any = true;
        return;
      }
      auto kernel = dyn_cast<KernelOp>(op);
      if (!any || !kernel || kernel.getRank() != 4 ||
          !keepsReductionOrder(kernel) ||
          llvm::none_of(kernel.getInputs(),
                        [&](Value input) { return last.contains(input); }))
        return;
      made.clear();
      permuteKernel(kernel, made);
      last.insert(made.begin(), made.end());
      permutedBack.append(made);
      ++numKernels;
    });
    // Permutes back to NCHW that only reordered kernels read: they read the
    // NHWC result instead.
    for (Value back : permutedBack)
      if (back.use_empty())
        back.getDefiningOp()->erase();
  }
};
} // namespace
