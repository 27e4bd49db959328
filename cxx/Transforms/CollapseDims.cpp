//===- CollapseDims.cpp - the braze-collapse-dims pass --------------------===//
//
// Merges two adjacent dims of a kernel's iteration domain into one when every
// tensor the kernel reads or writes holds them as one contiguous run, so that
// a short innermost loop (7x7 images, a W of 14) becomes one long loop.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/KernelEdits.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace braze {
#define GEN_PASS_DEF_BRAZECOLLAPSEDIMS
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
int64_t product(int64_t a, int64_t b) {
  if (ShapedType::isDynamic(a) || ShapedType::isDynamic(b))
    return ShapedType::kDynamic;
  return a * b;
}

/// `type` with dims `position` and `position + 1` as one.
RankedTensorType merged(RankedTensorType type, int64_t position) {
  SmallVector<int64_t> shape(type.getShape());
  shape[position] = product(shape[position], shape[position + 1]);
  shape.erase(shape.begin() + position + 1);
  return type.clone(shape);
}

/// An input that is a slice: at run time a view whose dims keep the source's
/// strides, so it is one run over two dims only when neither is cut short
/// from inside: the view of `x[:, :s]` breaks between dims 0 and 1, and a
/// step other than 1 also breaks between the sliced dim and the next.
struct SlicedInput {
  int64_t dim;
  bool unitStep;

  /// Whether the view holds dims `position` and `position + 1` as one run.
  bool keepsRun(int64_t position) const {
    return dim != position + 1 && (dim != position || unitStep);
  }
};

/// Where a tensor's accesses hold the pair of domain dims being merged.
struct Holding {
  static constexpr int64_t unseen = -2;
  static constexpr int64_t unused = -1; // no access uses either index
  int64_t position = unseen;            // else: the pair's first position
  bool consistent = true;
};

class Collapser {
public:
  Collapser(KernelOp kernel, int64_t shortExtent, int64_t minPoints,
            SmallVectorImpl<ReshapeOp> &reshapes)
      : kernel(kernel), shortExtent(shortExtent), minPoints(minPoints),
        reshapes(reshapes) {}

  /// Merges pairs of dims from the innermost one of the kernel's loop nest
  /// outward while the inner extent is short and a merge is possible.
  /// Returns the number of merges.
  int64_t run();
  /// Unit dims dropped from inputs by run().
  int64_t squeezed = 0;

private:
  void squeezeUnitDims();
  bool canMerge(unsigned dim);
  void merge(unsigned dim);

  KernelOp kernel;
  int64_t shortExtent, minPoints;
  SmallVectorImpl<ReshapeOp> &reshapes; // every reshape made
  // Found by canMerge, used by merge: where each input and result that uses
  // the pair holds it, and the body's products of the pair's extents.
  DenseMap<unsigned, int64_t> inputPositions, resultPositions;
  SmallVector<Operation *> extentProducts;
  // Inputs that are slices, by input number, in the input's current dims.
  DenseMap<unsigned, SlicedInput> slicedInputs;
};

int64_t Collapser::run() {
  int64_t merges = 0;
  // A kernel this small runs its loops in no time either way, and each
  // reshape costs a host step per call.
  int64_t points = 1;
  for (int64_t extent : kernel.getStaticDomain())
    points = product(points, extent);
  if (!ShapedType::isDynamic(points) && points < minPoints)
    return 0;
  for (auto [number, input] : llvm::enumerate(kernel.getInputs()))
    if (auto slice = input.getDefiningOp<SliceOp>())
      slicedInputs[number] = {static_cast<int64_t>(slice.getDim()),
                              slice.getStaticBound(2) == 1};
  squeezeUnitDims();
  ArrayRef<int64_t> reduce = kernel.getReduce();
  // Reduction kernels: the run of reduction dims ending at the last one (the
  // innermost reduction loop); pointwise kernels: the trailing dims. The
  // parallel points of a reduction kernel are one flattened loop already.
  bool reduced = !reduce.empty();
  int64_t dim = reduced ? reduce.back()
                        : static_cast<int64_t>(kernel.getRank()) - 1;
  while (dim >= 1) {
    int64_t inner = kernel.getStaticDomain()[dim];
    if (ShapedType::isDynamic(inner) || inner >= shortExtent)
      break;
    bool outerReduced =
        llvm::is_contained(kernel.getReduce(), static_cast<int64_t>(dim - 1));
    if (outerReduced != reduced || !canMerge(dim - 1))
      break;
    merge(dim - 1);
    ++merges;
    --dim;
  }
  return merges;
}

/// Whether `index` is the constant 0.
bool isZero(Value index) {
  auto constant = index.getDefiningOp<arith::ConstantIndexOp>();
  return constant && constant.value() == 0;
}

/// Drops each size-1 dim an input is always read at 0 in (a per-channel
/// scale `C x 1 x 1`, a broadcast row): a view without it, whose remaining
/// dims keep their strides, so a dim the innermost loop steps through (C in
/// NHWC order) becomes the input's own innermost, unit-stride dim.
void Collapser::squeezeUnitDims() {
  Block &body = kernel.getBody().front();
  unsigned rank = kernel.getRank();
  OpBuilder builder(kernel);
  SmallVector<Value> inputs(kernel.getInputs());
  for (auto [number, input] : llvm::enumerate(inputs)) {
    auto type = cast<RankedTensorType>(input.getType());
    BlockArgument argument = body.getArgument(2 * rank + number);
    SmallVector<tensor::ExtractOp> reads;
    for (Operation *user : argument.getUsers())
      if (auto extract = dyn_cast<tensor::ExtractOp>(user))
        reads.push_back(extract);
    if (reads.size() != static_cast<size_t>(
                            std::distance(argument.use_begin(), argument.use_end())))
      continue; // read other than by tensor.extract
    SmallVector<int64_t> kept;
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      if (type.getDimSize(dim) != 1 ||
          llvm::any_of(reads, [&](tensor::ExtractOp read) {
            return !isZero(read.getIndices()[dim]);
          }))
        kept.push_back(dim);
    if (kept.size() == static_cast<size_t>(type.getRank()))
      continue;
    if (auto sliced = slicedInputs.find(number); sliced != slicedInputs.end()) {
      // A dropped dim is never stepped: only a kept sliced dim still cuts.
      auto position = llvm::find(kept, sliced->second.dim);
      if (position == kept.end())
        slicedInputs.erase(sliced);
      else
        sliced->second.dim = position - kept.begin();
    }
    SmallVector<int64_t> shape;
    for (int64_t dim : kept)
      shape.push_back(type.getDimSize(dim));
    auto squeezedType = type.clone(shape);
    SmallVector<Value> sizes = reshapeSizes(squeezedType, [&](int64_t target) {
      return sizeBefore(input, kept[target], builder, kernel.getLoc());
    });
    auto reshape =
        ReshapeOp::create(builder, kernel.getLoc(), squeezedType, input, sizes);
    reshapes.push_back(reshape);
    inputs[number] = reshape;
    argument.setType(squeezedType);
    for (tensor::ExtractOp read : reads) {
      SmallVector<Value> indices;
      for (int64_t dim : kept)
        indices.push_back(read.getIndices()[dim]);
      read.getIndicesMutable().assign(indices);
    }
    squeezed += type.getRank() - kept.size();
  }
  kernel.getInputsMutable().assign(inputs);
}

bool Collapser::canMerge(unsigned dim) {
  Block &body = kernel.getBody().front();
  unsigned rank = kernel.getRank();
  BlockArgument outer = kernel.getIndex(dim), inner = kernel.getIndex(dim + 1);
  inputPositions.clear();
  resultPositions.clear();
  extentProducts.clear();
  // The pair's indices may only index tensors, never enter arithmetic.
  for (BlockArgument index : {outer, inner})
    for (OpOperand &use : index.getUses()) {
      Operation *user = use.getOwner();
      if (!isa<tensor::ExtractOp, StoreOp>(user) ||
          use.getOperandNumber() < indicesOf(user).getBeginOperandIndex())
        return false;
    }
  // Each access uses both indices side by side, in order, or neither; all
  // accesses of one tensor hold them at one position.
  DenseMap<unsigned, Holding> inputs, results;
  auto record = [&](Holding &holding, Operation *access) {
    OperandRange indices = indicesOf(access);
    int64_t position = Holding::unused, uses = 0;
    for (auto [number, index] : llvm::enumerate(indices)) {
      uses += index == outer || index == inner;
      if (index == outer && number + 1 < indices.size() &&
          indices[number + 1] == inner)
        position = number;
    }
    if (uses != 0 && (uses != 2 || position == Holding::unused))
      holding.consistent = false;
    else if (holding.position == Holding::unseen)
      holding.position = position;
    else if (holding.position != position)
      holding.consistent = false;
  };
  for (Operation &op : body) {
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      auto argument = dyn_cast<BlockArgument>(extract.getTensor());
      if (!argument || argument.getArgNumber() < 2 * rank)
        return false;
      record(inputs[argument.getArgNumber() - 2 * rank], &op);
    } else if (auto store = dyn_cast<StoreOp>(op)) {
      // Reshaping a result back needs each of its dynamic sizes: the extent
      // of the domain dim its stores index it by.
      auto type = cast<RankedTensorType>(
          kernel->getResult(store.getResult()).getType());
      for (auto [position, index] : llvm::enumerate(store.getIndices())) {
        auto argument = dyn_cast<BlockArgument>(index);
        if (type.isDynamicDim(position) &&
            (!argument || argument.getArgNumber() >= rank))
          return false;
      }
      record(results[store.getResult()], &op);
    }
  }
  for (auto [held, positions] : {std::pair{&inputs, &inputPositions},
                                 std::pair{&results, &resultPositions}})
    for (auto &[number, holding] : *held) {
      if (!holding.consistent)
        return false;
      if (holding.position >= 0)
        (*positions)[number] = holding.position;
    }
  // Merging where a slice's view is no run would make the reshape a copy.
  for (auto [number, position] : inputPositions) {
    auto sliced = slicedInputs.find(number);
    if (sliced != slicedInputs.end() && !sliced->second.keepsRun(position))
      return false;
  }
  // The extents: their product becomes the merged extent; either alone is
  // a constant when static, and has no value once merged when dynamic.
  BlockArgument outerExtent = kernel.getExtent(dim),
                innerExtent = kernel.getExtent(dim + 1);
  bool dynamic = ShapedType::isDynamic(kernel.getStaticDomain()[dim]) ||
                 ShapedType::isDynamic(kernel.getStaticDomain()[dim + 1]);
  for (BlockArgument extent : {outerExtent, innerExtent})
    for (Operation *user : extent.getUsers()) {
      auto multiply = dyn_cast<arith::MulIOp>(user);
      bool ofPair = multiply &&
                    ((multiply.getLhs() == outerExtent &&
                      multiply.getRhs() == innerExtent) ||
                     (multiply.getLhs() == innerExtent &&
                      multiply.getRhs() == outerExtent));
      if (ofPair) {
        if (!llvm::is_contained(extentProducts, user))
          extentProducts.push_back(user);
      } else if (dynamic) {
        return false;
      }
    }
  return true;
}

void Collapser::merge(unsigned dim) {
  Block &body = kernel.getBody().front();
  unsigned rank = kernel.getRank();
  Location loc = kernel.getLoc();
  OpBuilder builder(kernel);
  SmallVector<int64_t> domain(kernel.getStaticDomain());

  // Inputs are read through a reshape that merges the pair.
  SmallVector<Value> inputs(kernel.getInputs());
  for (auto [number, position] : inputPositions) {
    Value input = inputs[number];
    auto type = merged(cast<RankedTensorType>(input.getType()), position);
    SmallVector<Value> sizes = reshapeSizes(type, [&](int64_t target) {
      if (target != position)
        return sizeBefore(input, target < position ? target : target + 1,
                          builder, loc);
      return arith::MulIOp::create(
                 builder, loc, sizeBefore(input, position, builder, loc),
                 sizeBefore(input, position + 1, builder, loc))
          .getResult();
    });
    auto reshape = ReshapeOp::create(builder, loc, type, input, sizes);
    reshapes.push_back(reshape);
    inputs[number] = reshape;
    kernel.getInputArgument(number).setType(type);
    if (auto sliced = slicedInputs.find(number);
        sliced != slicedInputs.end() && sliced->second.dim > position)
      --sliced->second.dim; // (the sliced dim is never the pair's inner one)
  }

  // One extent operand for the pair when the merged extent is dynamic.
  Value mergedExtent;
  if (ShapedType::isDynamic(product(domain[dim], domain[dim + 1])))
    mergedExtent =
        arith::MulIOp::create(builder, loc, extentBefore(kernel, dim, builder),
                              extentBefore(kernel, dim + 1, builder));
  SmallVector<Value> dynamicDomain;
  unsigned seen = 0;
  for (auto [number, extent] : llvm::enumerate(domain)) {
    Value operand = ShapedType::isDynamic(extent)
                        ? kernel.getDynamicDomain()[seen++]
                        : Value();
    if (number == dim && mergedExtent)
      dynamicDomain.push_back(mergedExtent);
    else if (number != dim && number != dim + 1 && operand)
      dynamicDomain.push_back(operand);
  }

  // Results are written merged and reshaped back for their users.
  builder.setInsertionPointAfter(kernel);
  for (auto [number, position] : resultPositions) {
    OpResult result = kernel->getResult(number);
    auto original = cast<RankedTensorType>(result.getType());
    StoreOp store;
    for (StoreOp candidate : body.getOps<StoreOp>())
      if (candidate.getResult() == static_cast<int64_t>(number))
        store = candidate;
    SmallVector<Value> sizes = reshapeSizes(original, [&](int64_t target) {
      auto index = cast<BlockArgument>(store.getIndices()[target]);
      return extentBefore(kernel, index.getArgNumber(), builder);
    });
    result.setType(merged(original, position));
    auto back = ReshapeOp::create(builder, loc, original, result, sizes);
    reshapes.push_back(back);
    result.replaceAllUsesExcept(back.getResult(), back);
  }
  kernel.getInputsMutable().assign(inputs);
  kernel.getDynamicDomainMutable().assign(dynamicDomain);

  // The body: accesses index the pair with the outer index alone, which now
  // runs over the merged extent, held by the outer extent argument.
  BlockArgument inner = kernel.getIndex(dim + 1);
  for (Operation *access : llvm::to_vector(inner.getUsers())) {
    OperandRange indices = indicesOf(access);
    unsigned first = indices.getBeginOperandIndex();
    for (auto [number, index] : llvm::enumerate(indices))
      if (index == inner) {
        access->eraseOperand(first + number);
        break;
      }
  }
  BlockArgument outerExtent = kernel.getExtent(dim),
                innerExtent = kernel.getExtent(dim + 1);
  OpBuilder inside = OpBuilder::atBlockBegin(&body);
  for (auto [argument, extent] : {std::pair{outerExtent, domain[dim]},
                                  std::pair{innerExtent, domain[dim + 1]}}) {
    auto alone = [&](OpOperand &use) {
      return !llvm::is_contained(extentProducts, use.getOwner());
    };
    if (llvm::none_of(argument.getUses(), alone))
      continue;
    Value constant = arith::ConstantIndexOp::create(inside, loc, extent);
    argument.replaceUsesWithIf(constant, alone);
  }
  for (Operation *multiply : extentProducts) {
    multiply->getResult(0).replaceAllUsesWith(outerExtent);
    multiply->erase();
  }
  body.eraseArgument(rank + dim + 1);
  body.eraseArgument(dim + 1);

  domain[dim] = product(domain[dim], domain[dim + 1]);
  domain.erase(domain.begin() + dim + 1);
  SmallVector<int64_t> reduce;
  for (int64_t reduced : kernel.getReduce())
    if (reduced != static_cast<int64_t>(dim + 1))
      reduce.push_back(reduced > static_cast<int64_t>(dim) ? reduced - 1
                                                           : reduced);
  kernel.setStaticDomain(domain);
  kernel.setReduce(reduce);
}

struct BrazeCollapseDimsPass
    : braze::impl::BrazeCollapseDimsBase<BrazeCollapseDimsPass> {
  using BrazeCollapseDimsBase::BrazeCollapseDimsBase;

  void runOnOperation() override {
    SmallVector<ReshapeOp> reshapes;
    getOperation().walk([&](KernelOp kernel) {
      Collapser collapser(kernel, shortExtent, minPoints, reshapes);
      numCollapsed += collapser.run();
      numSqueezed += collapser.squeezed;
    });
    shortenReshapeChains(reshapes); // (merging twice reshapes twice)
  }
};
} // namespace
