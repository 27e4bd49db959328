//===- SplitDims.cpp - the braze-split-dims pass --------------------------===//
//
// Splits an iteration dim that a kernel's body takes apart with `/ C` and
// `% C` into two dims, so that a reshape's merged dim (attention's heads and
// features, read back through a permutation) is two loops again and the
// reads through the quotient and the remainder are strided, not gathered.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/KernelEdits.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"

namespace braze {
#define GEN_PASS_DEF_BRAZESPLITDIMS
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// How an op takes a domain index apart.
enum class Part { None, Quotient, Remainder };

/// Whether `op` is `index / C` or `index % C` (an index is never negative,
/// so signed, unsigned and floor division agree), with C in `divisor`.
Part partOf(Operation *op, Value index, int64_t &divisor) {
  Part part = Part::None;
  if (isa<arith::DivSIOp, arith::DivUIOp, arith::FloorDivSIOp>(op))
    part = Part::Quotient;
  else if (isa<arith::RemSIOp, arith::RemUIOp>(op))
    part = Part::Remainder;
  APInt constant;
  if (part == Part::None || op->getOperand(0) != index ||
      !matchPattern(op->getOperand(1), m_ConstantInt(&constant)))
    return Part::None;
  divisor = constant.getSExtValue();
  return part;
}

/// `type` with dim `position` as two, the inner one of extent `inner`.
RankedTensorType split(RankedTensorType type, int64_t position,
                       int64_t inner) {
  SmallVector<int64_t> shape(type.getShape());
  shape[position] /= inner;
  shape.insert(shape.begin() + position + 1, inner);
  return type.clone(shape);
}

/// The one position of `index` among `indices`, or -1 when it is not there
/// or there more than once.
int64_t positionOf(OperandRange indices, Value index) {
  int64_t found = -1;
  for (auto [position, candidate] : llvm::enumerate(indices))
    if (candidate == index) {
      if (found >= 0)
        return -1;
      found = position;
    }
  return found;
}

class Splitter {
public:
  Splitter(KernelOp kernel, int64_t minInner,
           SmallVectorImpl<ReshapeOp> &reshapes)
      : kernel(kernel), minInner(minInner), reshapes(reshapes) {}

  /// Splits every dim the body takes apart, innermost first (a split adds a
  /// dim behind the one split, so the outer dims keep their numbers).
  /// Returns the number of splits.
  int64_t run() {
    int64_t splits = 0;
    for (int64_t dim = static_cast<int64_t>(kernel.getRank()) - 1; dim >= 0; --dim)
      if (std::optional<int64_t> inner = divisorOf(dim)) {
        splitDim(dim, *inner);
        ++splits;
      }
    return splits;
  }

private:
  std::optional<int64_t> divisorOf(unsigned dim);
  void splitDim(unsigned dim, int64_t inner);
  DenseSet<OpOperand *> splitInputs(unsigned dim, int64_t inner,
                                    int64_t extent);
  DenseSet<OpOperand *> splitResults(unsigned dim, int64_t inner,
                                     int64_t extent);

  KernelOp kernel;
  int64_t minInner;
  SmallVectorImpl<ReshapeOp> &reshapes; // every reshape made
};

/// The C of a parallel dim of static extent E whose index the body divides
/// by or takes modulo one constant C, with E a multiple of C and C at least
/// `minInner` (a shorter inner loop would cost more than the arithmetic).
std::optional<int64_t> Splitter::divisorOf(unsigned dim) {
  int64_t extent = kernel.getStaticDomain()[dim];
  if (ShapedType::isDynamic(extent) ||
      llvm::is_contained(kernel.getReduce(), static_cast<int64_t>(dim)))
    return std::nullopt;
  std::optional<int64_t> found;
  for (Operation *user : kernel.getIndex(dim).getUsers()) {
    int64_t divisor;
    if (partOf(user, kernel.getIndex(dim), divisor) == Part::None)
      continue;
    if (found && *found != divisor)
      return std::nullopt; // taken apart two ways: neither split is whole
    found = divisor;
  }
  if (!found || *found < minInner || *found >= extent || extent % *found)
    return std::nullopt;
  return found;
}

/// Inputs whose every read holds the index at one position are read through
/// a reshape that splits that position (a view of any strided tensor).
/// Returns the index operands that now hold the outer index of a pair.
DenseSet<OpOperand *> Splitter::splitInputs(unsigned dim, int64_t inner,
                                            int64_t extent) {
  Value outer = kernel.getIndex(dim), innerIndex = kernel.getIndex(dim + 1);
  OpBuilder builder(kernel);
  Location loc = kernel.getLoc();
  SmallVector<Value> inputs(kernel.getInputs());
  DenseSet<OpOperand *> held;
  for (auto [number, input] : llvm::enumerate(inputs)) {
    BlockArgument argument = kernel.getInputArgument(number);
    auto type = cast<RankedTensorType>(input.getType());
    SmallVector<tensor::ExtractOp> reads;
    int64_t position = -1;
    bool consistent = true;
    for (Operation *user : argument.getUsers()) {
      auto read = dyn_cast<tensor::ExtractOp>(user);
      int64_t at = read ? positionOf(read.getIndices(), outer) : -1;
      consistent &= at >= 0 && (position < 0 || at == position);
      position = at;
      reads.push_back(read);
    }
    if (reads.empty() || !consistent || type.getDimSize(position) != extent)
      continue;
    auto splitType = split(type, position, inner);
    SmallVector<Value> sizes = reshapeSizes(splitType, [&](int64_t target) {
      return sizeBefore(input, target <= position ? target : target - 1,
                        builder, loc);
    });
    auto reshape = ReshapeOp::create(builder, loc, splitType, input, sizes);
    reshapes.push_back(reshape);
    inputs[number] = reshape;
    argument.setType(splitType);
    for (tensor::ExtractOp read : reads) {
      SmallVector<Value> indices(read.getIndices());
      indices.insert(indices.begin() + position + 1, innerIndex);
      read.getIndicesMutable().assign(indices);
      held.insert(&read.getIndicesMutable()[position]);
    }
  }
  kernel.getInputsMutable().assign(inputs);
  return held;
}

/// Results whose every store holds the index at one position are written
/// split there and reshaped back (a view of a contiguous tensor). Returns
/// the index operands that now hold the outer index of a pair.
DenseSet<OpOperand *> Splitter::splitResults(unsigned dim, int64_t inner,
                                             int64_t extent) {
  Block &body = kernel.getBody().front();
  Value outer = kernel.getIndex(dim), innerIndex = kernel.getIndex(dim + 1);
  OpBuilder builder(kernel);
  builder.setInsertionPointAfter(kernel);
  DenseSet<OpOperand *> held;
  for (OpResult result : kernel->getResults()) {
    auto original = cast<RankedTensorType>(result.getType());
    SmallVector<StoreOp> stores;
    int64_t position = -1;
    bool consistent = true;
    for (StoreOp store : body.getOps<StoreOp>()) {
      if (store.getResult() != result.getResultNumber())
        continue;
      int64_t at = positionOf(store.getIndices(), outer);
      consistent &= at >= 0 && (position < 0 || at == position);
      position = at;
      stores.push_back(store);
    }
    if (stores.empty() || !consistent ||
        original.getDimSize(position) != extent)
      continue;
    // Reshaping back needs the original's dynamic sizes: the extent of the
    // domain dim its store indexes each by.
    bool sized = true;
    SmallVector<Value> sizes = reshapeSizes(original, [&](int64_t target) {
      auto index = dyn_cast<BlockArgument>(stores.front().getIndices()[target]);
      if (!index || index.getOwner() != &body ||
          index.getArgNumber() >= kernel.getRank()) {
        sized = false;
        return Value();
      }
      return extentBefore(kernel, index.getArgNumber(), builder);
    });
    if (!sized)
      continue;
    result.setType(split(original, position, inner));
    auto back =
        ReshapeOp::create(builder, kernel.getLoc(), original, result, sizes);
    reshapes.push_back(back);
    result.replaceAllUsesExcept(back.getResult(), back);
    for (StoreOp store : stores) {
      SmallVector<Value> indices(store.getIndices());
      indices.insert(indices.begin() + position + 1, innerIndex);
      store.getIndicesMutable().assign(indices);
      held.insert(&store.getIndicesMutable()[position]);
    }
  }
  return held;
}

void Splitter::splitDim(unsigned dim, int64_t inner) {
  Block &body = kernel.getBody().front();
  unsigned rank = kernel.getRank();
  Location loc = kernel.getLoc();
  SmallVector<int64_t> domain(kernel.getStaticDomain());
  int64_t extent = domain[dim];
  Type indexType = IndexType::get(kernel.getContext());

  // The new dim: its index behind the split one's, its extent likewise.
  BlockArgument outer = kernel.getIndex(dim), wholeExtent = kernel.getExtent(dim);
  BlockArgument innerIndex = body.insertArgument(dim + 1, indexType, loc);
  body.insertArgument(rank + 1 + dim + 1, indexType, loc);
  domain[dim] = extent / inner;
  domain.insert(domain.begin() + dim + 1, inner);
  SmallVector<int64_t> reduce;
  for (int64_t reduced : kernel.getReduce())
    reduce.push_back(reduced > static_cast<int64_t>(dim) ? reduced + 1
                                                         : reduced);
  kernel.setStaticDomain(domain);
  kernel.setReduce(reduce);

  OpBuilder inside = OpBuilder::atBlockBegin(&body);
  if (!wholeExtent.use_empty())
    wholeExtent.replaceAllUsesWith(
        arith::ConstantIndexOp::create(inside, loc, extent));
  // Reads and stores at the whole index first: the quotient, once it is the
  // outer index, must not pass for it.
  SmallVector<std::pair<Operation *, Part>> parts;
  for (Operation *user : outer.getUsers()) {
    int64_t divisor;
    if (Part part = partOf(user, outer, divisor); part != Part::None)
      parts.push_back({user, part});
  }
  DenseSet<OpOperand *> held = splitInputs(dim, inner, extent);
  held.insert_range(splitResults(dim, inner, extent));
  // Any other use reads the whole index: outer * C + inner.
  auto wholeUse = [&](OpOperand &use) {
    return !held.contains(&use) &&
           !llvm::is_contained(llvm::make_first_range(parts), use.getOwner());
  };
  if (llvm::any_of(outer.getUses(), wholeUse)) {
    Value constant = arith::ConstantIndexOp::create(inside, loc, inner);
    auto scaled = arith::MulIOp::create(inside, loc, outer, constant);
    auto whole = arith::AddIOp::create(inside, loc, scaled, innerIndex);
    outer.replaceUsesWithIf(whole, [&](OpOperand &use) {
      return use.getOwner() != scaled && wholeUse(use);
    });
  }
  // The quotient is the outer index, the remainder the inner one.
  for (auto [op, part] : parts) {
    op->getResult(0).replaceAllUsesWith(
        part == Part::Quotient ? Value(outer) : Value(innerIndex));
    op->erase();
  }
}

struct BrazeSplitDimsPass
    : braze::impl::BrazeSplitDimsBase<BrazeSplitDimsPass> {
  using BrazeSplitDimsBase::BrazeSplitDimsBase;

  void runOnOperation() override {
    SmallVector<ReshapeOp> reshapes;
    getOperation().walk([&](KernelOp kernel) {
      numSplit += Splitter(kernel, minInner, reshapes).run();
    });
    shortenReshapeChains(reshapes); // (splitting twice reshapes twice)
  }
};
} // namespace
