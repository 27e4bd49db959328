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
#include "Transforms/ViewFolding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace braze {
#define GEN_PASS_DEF_BRAZECHANNELSLAST
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
// Logical NCHW dims in the NHWC order channels-last memory holds them in.
constexpr int64_t toLast[] = {0, 2, 3, 1};

bool isRank4(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() == 4;
}

/// The one domain dim `index` is computed from: the dim's index argument
/// itself, or integer arithmetic of it and constants (a pooling window's
/// strided read `2 * h + 1`, an upsampling's `h / 2`). Nothing when it
/// reads no dim, more than one, or anything else.
std::optional<int64_t> domainDimOf(KernelOp kernel, Value index) {
  Block &body = kernel.getBody().front();
  std::optional<int64_t> dim;
  SmallVector<Value> pending{index};
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    if (auto argument = dyn_cast<BlockArgument>(value)) {
      if (argument.getOwner() != &body ||
          argument.getArgNumber() >= kernel.getRank() ||
          (dim && *dim != argument.getArgNumber()))
        return std::nullopt;
      dim = argument.getArgNumber();
      continue;
    }
    Operation *def = value.getDefiningOp();
    if (!def || !isa<arith::ArithDialect>(def->getDialect()))
      return std::nullopt;
    pending.append(def->operand_begin(), def->operand_end());
  }
  return dim;
}

/// The domain dim each index of `access` reads (domainDimOf), each dim
/// once, or nothing.
std::optional<SmallVector<int64_t>> domainDims(KernelOp kernel,
                                               OperandRange access) {
  SmallVector<int64_t> dims;
  for (Value index : access) {
    std::optional<int64_t> dim = domainDimOf(kernel, index);
    if (!dim || llvm::is_contained(dims, *dim))
      return std::nullopt;
    dims.push_back(*dim);
  }
  return dims;
}

/// Rank-4 values whose memory order this pass knows: value -> its logical
/// dims from the outermost in memory to the innermost. A convolution's
/// result (logical NCHW in channels-last memory) holds them in toLast
/// order; a kernel's result, in the order it iterates them.
using MemoryOrders = llvm::DenseMap<Value, SmallVector<int64_t, 4>>;

/// The order in which `kernel` should iterate its domain (new dim k is old
/// dim order[k]): the memory order of its first known input, as the
/// kernel's reads of it name the domain's dims. A convolution's result read
/// at [d0, d1, d2, d3] (the domain in NCHW order, as lowered) gives toLast;
/// read at [d0, d3, d1, d2] (a LayerNorm over channels after a permute to
/// NHWC that braze-fold-layouts absorbed) the order the domain has; so does
/// a max pool whose NHWC result was absorbed, read at [d0, d3, 2*d1, 2*d2].
/// Where no read names the domain's dims, the input's own memory order.
SmallVector<int64_t> iterationOrder(KernelOp kernel,
                                    const MemoryOrders &memory) {
  std::optional<SmallVector<int64_t>> fallback;
  for (auto [number, input] : llvm::enumerate(kernel.getInputs())) {
    auto known = memory.find(input);
    if (known == memory.end())
      continue;
    for (Operation *user : kernel.getInputArgument(number).getUsers()) {
      auto extract = dyn_cast<tensor::ExtractOp>(user);
      std::optional<SmallVector<int64_t>> dims;
      if (extract && (dims = domainDims(kernel, extract.getIndices()))) {
        SmallVector<int64_t> order;
        for (int64_t dim : known->second)
          order.push_back((*dims)[dim]);
        return order;
      }
    }
    if (!fallback)
      fallback = SmallVector<int64_t>(ArrayRef<int64_t>(known->second));
  }
  return *fallback;
}

/// Whether every store of result `number` writes it at the domain's indices
/// in order (its dims are the domain's; a dim of extent 1 at any index).
bool storesInOrder(KernelOp kernel, unsigned number) {
  Block &body = kernel.getBody().front();
  auto type = cast<RankedTensorType>(kernel->getResult(number).getType());
  bool inOrder = true;
  body.walk([&](StoreOp store) {
    if (store.getResult() != number)
      return;
    for (auto [dim, index] : llvm::enumerate(store.getIndices()))
      inOrder &= type.getDimSize(dim) == 1 || index == body.getArgument(dim);
  });
  return inOrder;
}

/// Makes the kernel iterate in `order` (domain dim k becomes the old dim
/// order[k]) and read each input of known memory order through its view in
/// that order (contiguous), each access listing its indices in that order.
/// Another rank-4 input read other than at the new domain's indices in
/// order is seen through a permutation by `order`; each rank-4 result is
/// written in the new domain's order and handed on through the inverse
/// permutation (channels-last when `order` is toLast). Records the memory
/// order of the results written at the domain's indices. The body's values
/// are the same at every point; only the order of the points changes (and
/// of no reduction's points: see keepsReductionOrder).
void permuteKernel(KernelOp kernel, ArrayRef<int64_t> order,
                   MemoryOrders &memory, SmallVectorImpl<Value> &permutedBack) {
  Block &body = kernel.getBody().front();
  unsigned rank = kernel.getRank(); // 4
  Location loc = kernel.getLoc();
  OpBuilder builder(kernel);
  bool reorders = !isIdentityPermutation(order);

  // Per rank-4 input argument, the permutation its view applies.
  llvm::DenseMap<Value, SmallVector<int64_t, 4>> views;
  SmallVector<Value> inputs(kernel.getInputs());
  for (auto [number, input] : llvm::enumerate(inputs)) {
    if (!isRank4(input.getType()))
      continue;
    BlockArgument argument = kernel.getInputArgument(number);
    SmallVector<int64_t, 4> view;
    if (auto known = memory.find(input); known != memory.end()) {
      view = known->second;
    } else {
      // Read at the new domain's indices in order already: as it is.
      bool inOrder = llvm::all_of(argument.getUsers(), [&](Operation *user) {
        auto extract = dyn_cast<tensor::ExtractOp>(user);
        std::optional<SmallVector<int64_t>> dims;
        if (extract)
          dims = domainDims(kernel, extract.getIndices());
        return dims && ArrayRef<int64_t>(*dims) == order;
      });
      if (!inOrder)
        view.assign(order.begin(), order.end());
    }
    if (view.empty() || isIdentityPermutation(view))
      continue;
    auto type = permutedType(cast<RankedTensorType>(input.getType()), view);
    // A result this pass permuted back is read as written.
    auto back = input.getDefiningOp<PermuteOp>();
    if (back && back.getPermutation() == ArrayRef<int64_t>(invertPermutationVector(view)) &&
        back.getInput().getType() == type)
      input = back.getInput();
    else
      input = PermuteOp::create(builder, loc, type, input,
                                builder.getDenseI64ArrayAttr(view));
    argument.setType(type);
    views[argument] = view;
  }
  kernel.getInputsMutable().assign(inputs);

  // Accesses of the viewed inputs and of rank-4 results list their indices
  // in the view's order.
  body.walk([&](Operation *op) {
    OperandRange indices = {nullptr, 0};
    ArrayRef<int64_t> view;
    if (auto extract = dyn_cast<tensor::ExtractOp>(op);
        extract && views.count(extract.getTensor())) {
      indices = extract.getIndices();
      view = views.find(extract.getTensor())->second;
    } else if (auto store = dyn_cast<StoreOp>(op);
               store && reorders &&
               isRank4(kernel->getResult(store.getResult()).getType())) {
      indices = store.getIndices();
      view = order;
    }
    if (indices.empty())
      return;
    SmallVector<Value> old(indices);
    unsigned first = indices.getBeginOperandIndex();
    for (unsigned k = 0; k < rank; ++k)
      op->setOperand(first + k, old[view[k]]);
  });

  if (reorders) {
    // New index and extent arguments in the new order, then the old ones go.
    for (unsigned k = 0; k < rank; ++k)
      body.insertArgument(k, builder.getIndexType(), loc);
    for (unsigned k = 0; k < rank; ++k)
      body.insertArgument(2 * rank + k, builder.getIndexType(), loc);
    for (unsigned k = 0; k < rank; ++k) {
      body.getArgument(rank + order[k]).replaceAllUsesWith(body.getArgument(k));
      body.getArgument(3 * rank + order[k])
          .replaceAllUsesWith(body.getArgument(2 * rank + k));
    }
    // Now: new indices, old indices, new extents, old extents, inputs.
    for (unsigned k = 0; k < rank; ++k)
      body.eraseArgument(3 * rank);
    for (unsigned k = 0; k < rank; ++k)
      body.eraseArgument(rank);

    SmallVector<int64_t> domain, oldDomain(kernel.getStaticDomain());
    SmallVector<Value> dynamicDomain, oldDynamic(kernel.getDynamicDomain());
    SmallVector<Value> dynamicOf(rank);
    for (unsigned dim = 0, seen = 0; dim < rank; ++dim)
      if (ShapedType::isDynamic(oldDomain[dim]))
        dynamicOf[dim] = oldDynamic[seen++];
    for (int64_t dim : order) {
      domain.push_back(oldDomain[dim]);
      if (dynamicOf[dim])
        dynamicDomain.push_back(dynamicOf[dim]);
    }
    SmallVector<int64_t> reduce, position = invertPermutationVector(order);
    for (int64_t dim : kernel.getReduce())
      reduce.push_back(position[dim]); // where old dim `dim` now is
    llvm::sort(reduce);
    kernel.setStaticDomain(domain);
    kernel.setReduce(reduce);
    kernel.getDynamicDomainMutable().assign(dynamicDomain);
  }

  builder.setInsertionPointAfter(kernel);
  for (OpResult result : kernel->getResults()) {
    if (!isRank4(result.getType()))
      continue;
    bool inOrder = storesInOrder(kernel, result.getResultNumber());
    if (!reorders) {
      if (inOrder)
        memory[result].assign(order.begin(), order.end());
      continue;
    }
    auto original = cast<RankedTensorType>(result.getType());
    result.setType(permutedType(original, order));
    auto back = PermuteOp::create(builder, loc, original, result,
                                  builder.getDenseI64ArrayAttr(invertPermutationVector(order)));
    result.replaceAllUsesExcept(back.getResult(), back);
    if (inOrder)
      memory[back].assign(order.begin(), order.end());
    permutedBack.push_back(back);
  }
}

/// Whether each reduction of `kernel` adds its points in the same order when
/// the kernel iterates in `order`: the reduced dims keep their relative
/// order. In NHWC order (C moved behind H and W) that holds unless C is
/// reduced together with H or W: a reduction over C alone becomes a row
/// reduction (C innermost); one over H and W (a mean of an image, a
/// squeeze-excitation block) a column reduction, whose innermost dim C is
/// parallel and which the CPU emitter walks in SIMD lanes of consecutive
/// channels.
bool keepsReductionOrder(KernelOp kernel, ArrayRef<int64_t> order) {
  int64_t previous = -1;
  for (int64_t dim : order) {
    if (!llvm::is_contained(kernel.getReduce(), dim))
      continue;
    if (dim < previous)
      return false;
    previous = dim;
  }
  return true;
}

struct BrazeChannelsLastPass
    : braze::impl::BrazeChannelsLastBase<BrazeChannelsLastPass> {
  using BrazeChannelsLastBase::BrazeChannelsLastBase;

  void runOnOperation() override {
    MemoryOrders memory;
    SmallVector<Value> permutedBack;
    getOperation().walk([&](Operation *op) {
      if (auto convolution = dyn_cast<ConvolutionOp>(op)) {
        if (!isRank4(convolution.getInput().getType()))
          return;
        convolution.setMemoryFormat("channels_last");
        memory[convolution.getResult()].assign(std::begin(toLast),
                                               std::end(toLast));
        ++numConvolutions;
        return;
      }
      auto kernel = dyn_cast<KernelOp>(op);
      if (!kernel || kernel.getRank() != 4 ||
          llvm::none_of(kernel.getInputs(),
                        [&](Value input) { return memory.count(input); }))
        return;
      SmallVector<int64_t> order = iterationOrder(kernel, memory);
      if (!keepsReductionOrder(kernel, order))
        return;
      permuteKernel(kernel, order, memory, permutedBack);
      ++numKernels;
    });
    // Permutes back that only reordered kernels read: they read the result
    // as written instead (and so does a permute to NHWC after one, such as
    // braze-convolution-gemms' GEMM operand).
    for (Value back : permutedBack) {
      foldPermutesOf(back.getDefiningOp<PermuteOp>());
      if (back.use_empty())
        back.getDefiningOp()->erase();
    }
  }
};
} // namespace
