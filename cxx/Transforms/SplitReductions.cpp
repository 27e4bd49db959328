//===- SplitReductions.cpp - braze-split-reductions -----------------------===//
//
// Splits a reduction with few outputs and a long reduced extent into two
// kernels: partial reductions over chunks of the reduced points, then one
// that combines the partials and does the original kernel's stores.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "braze-split-reductions"

namespace braze {
#define GEN_PASS_DEF_BRAZESPLITREDUCTIONS
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// The ops of `body` that `roots` need (in block order), found by walking
/// operands back; a `braze.reduce` result is where the walk stops (the
/// reduce itself is included, its operand is not followed).
SmallVector<Operation *> sliceOf(Block &body, ArrayRef<Value> roots) {
  llvm::SmallPtrSet<Operation *, 32> needed;
  SmallVector<Value> work(roots);
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || op->getBlock() != &body || !needed.insert(op).second)
      continue;
    if (!isa<ReduceOp>(op))
      llvm::append_range(work, op->getOperands());
  }
  SmallVector<Operation *> ordered;
  for (Operation &op : body)
    if (needed.contains(&op))
      ordered.push_back(&op);
  return ordered;
}

/// The numbers of the kernel inputs that `ops` read.
SmallVector<unsigned> inputsRead(KernelOp kernel, ArrayRef<Operation *> ops) {
  SmallVector<unsigned> numbers;
  for (unsigned number = 0; number < kernel.getInputs().size(); ++number)
    if (llvm::any_of(ops, [&](Operation *op) {
          return llvm::is_contained(op->getOperands(),
                                    kernel.getInputArgument(number));
        }))
      numbers.push_back(number);
  return numbers;
}

/// Erases the constants nothing in `body` uses (the reduced extents a new
/// kernel was given but does not read).
void eraseUnusedConstants(Block *body) {
  for (arith::ConstantOp op :
       llvm::make_early_inc_range(body->getOps<arith::ConstantOp>()))
    if (op.use_empty())
      op.erase();
}

/// The value a reduction of `kind` starts from (and that a masked point
/// contributes): 0 for add and or, the lowest value for max and argmax, the
/// highest for min, all ones for and. i1 counts as unsigned (max is or).
TypedAttr identity(Builder &builder, StringRef kind, Type type) {
  if (auto floatType = dyn_cast<FloatType>(type)) {
    const llvm::fltSemantics &semantics = floatType.getFloatSemantics();
    if (kind == "add")
      return builder.getFloatAttr(type, APFloat::getZero(semantics));
    bool negative = kind != "min";
    return builder.getFloatAttr(type, APFloat::getInf(semantics, negative));
  }
  unsigned width = type.getIntOrFloatBitWidth();
  APInt value = APInt::getZero(width);
  if (width == 1)
    value = (kind == "min" || kind == "and") ? APInt::getAllOnes(1) : value;
  else if (kind == "max" || kind == "argmax")
    value = APInt::getSignedMinValue(width);
  else if (kind == "min")
    value = APInt::getSignedMaxValue(width);
  return builder.getIntegerAttr(type, value);
}

struct SplitReductionsPass
    : braze::impl::BrazeSplitReductionsBase<SplitReductionsPass> {
  using BrazeSplitReductionsBase::BrazeSplitReductionsBase;

  void runOnOperation() override {
    // 1. Pick the kernels with few static outputs and many static reduction
    // points. 2. Refuse those whose form a chunked pass cannot compute
    // (remark). 3. Build the partial kernel and the combining kernel; the
    // second replaces the original.
    if (minPoints < 2 || maxOutputs < 1 || targetRows < 1 || minChunk < 1) {
      emitError(getOperation().getLoc())
          << "braze-split-reductions: min-points must be at least 2 and "
             "max-outputs, target-rows, min-chunk at least 1";
      return signalPassFailure();
    }
    SmallVector<KernelOp> kernels;
    getOperation().walk([&](KernelOp kernel) {
      if (!kernel.getReduce().empty())
        kernels.push_back(kernel);
    });
    for (KernelOp kernel : kernels)
      splitIfWorthIt(kernel);
  }

  void splitIfWorthIt(KernelOp kernel) {
    ArrayRef<int64_t> domain = kernel.getStaticDomain();
    int64_t outputs = 1, points = 1;
    bool staticOutputs = true, staticPoints = true;
    for (auto [dim, extent] : llvm::enumerate(domain)) {
      bool reduced = llvm::is_contained(kernel.getReduce(),
                                        static_cast<int64_t>(dim));
      bool known = !ShapedType::isDynamic(extent);
      (reduced ? staticPoints : staticOutputs) &= known;
      if (known)
        (reduced ? points : outputs) *= extent;
    }
    if (!staticOutputs || outputs > maxOutputs)
      return;
    if (!staticPoints) {
      // The chunked kernel would need the extent inside its body to mask
      // the last chunk, and the kernel form carries extents only as domain
      // dims.
      remark(kernel, "the reduced extent is dynamic");
      return;
    }
    if (points < minPoints)
      return;
    int64_t chunks = std::min<int64_t>(
        llvm::PowerOf2Ceil(llvm::divideCeil(targetRows, outputs)),
        points / minChunk);
    if (chunks < 2)
      return;
    if (std::string why = whyNotSplittable(kernel); !why.empty()) {
      remark(kernel, why);
      return;
    }
    // Every chunk but the last is full; none is empty.
    int64_t chunkPoints = llvm::divideCeil(points, chunks);
    chunks = llvm::divideCeil(points, chunkPoints);
    split(kernel, points, chunks, chunkPoints);
    ++numSplit;
  }

  void remark(KernelOp kernel, const Twine &why) {
    if (remarks)
      kernel.emitRemark() << "not split: " << why
                          << "; left as one kernel (a block tree)";
  }

  /// Why the kernel's reductions cannot be computed in chunks then
  /// combined (empty: they can).
  static std::string whyNotSplittable(KernelOp kernel) {
    Block &body = kernel.getBody().front();
    if (body.getOps<ReduceOp>().empty())
      return "it has no braze.reduce (nothing to compute in parts)";
    // Values that vary over the reduction points.
    llvm::SmallPtrSet<Value, 32> full;
    for (int64_t dim : kernel.getReduce())
      full.insert(kernel.getIndex(dim));
    for (Operation &op : body) {
      if (auto reduce = dyn_cast<ReduceOp>(op)) {
        for (Operation *needed : sliceOf(body, {reduce.getValue()}))
          if (isa<ReduceOp>(needed))
            return "a reduction reads another one's result (as softmax's "
                   "sum of exp(x - max) does)";
        continue;
      }
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return full.contains(v); })) {
        if (isa<StoreOp>(op))
          return "it stores a value per reduction point";
        full.insert(op.getResult(0));
      }
    }
    return "";
  }

  void split(KernelOp kernel, int64_t points, int64_t chunks,
             int64_t chunkPoints) {
    Location loc = kernel.getLoc();
    Block &body = kernel.getBody().front();
    ArrayRef<int64_t> domain = kernel.getStaticDomain();
    SmallVector<int64_t> parallel;
    SmallVector<int64_t> outputShape;
    for (auto [dim, extent] : llvm::enumerate(domain))
      if (!llvm::is_contained(kernel.getReduce(), static_cast<int64_t>(dim))) {
        parallel.push_back(dim);
        outputShape.push_back(extent);
      }
    unsigned rank = parallel.size();
    SmallVector<ReduceOp> reduces(body.getOps<ReduceOp>());
    OpBuilder builder(kernel);
    IndexType indexType = builder.getIndexType();
    Type i64 = builder.getI64Type();

    // The partials: per reduction, [outputs..., chunks] of its result; an
    // argmax keeps the chunk's maximum beside the index of its first one.
    SmallVector<int64_t> partialShape(outputShape);
    partialShape.push_back(chunks);
    SmallVector<Type> partialTypes;
    for (ReduceOp reduce : reduces) {
      if (reduce.getKind() == "argmax")
        partialTypes.push_back(
            RankedTensorType::get(partialShape, reduce.getValue().getType()));
      partialTypes.push_back(
          RankedTensorType::get(partialShape, reduce.getType()));
    }

    // Maps the original body's block arguments into a new kernel's body
    // whose first `rank` dims are the original parallel dims; the reduced
    // extents become constants.
    auto mapArguments = [&](Block *newBody, IRMapping &mapping,
                            unsigned newRank, unsigned firstInput,
                            ArrayRef<unsigned> inputs) {
      for (auto [number, dim] : llvm::enumerate(parallel)) {
        mapping.map(kernel.getIndex(dim), newBody->getArgument(number));
        mapping.map(kernel.getExtent(dim),
                    newBody->getArgument(newRank + number));
      }
      for (int64_t dim : kernel.getReduce())
        mapping.map(kernel.getExtent(dim),
                    arith::ConstantIndexOp::create(builder, loc, domain[dim]));
      for (auto [position, number] : llvm::enumerate(inputs))
        mapping.map(kernel.getInputArgument(number),
                    newBody->getArgument(2 * newRank + firstInput + position));
    };
    auto createBody = [&](KernelOp newKernel, unsigned newRank) {
      Block *newBody = builder.createBlock(&newKernel.getBody());
      for (unsigned i = 0; i < 2 * newRank; ++i)
        newBody->addArgument(indexType, loc);
      for (Value input : newKernel.getInputs())
        newBody->addArgument(input.getType(), loc);
      return newBody;
    };
    auto outputIndices = [&](Block *newBody, Value last) {
      SmallVector<Value> indices(newBody->getArguments().take_front(rank));
      indices.push_back(last);
      return indices;
    };

    // The partial kernel: domain [outputs..., chunks, chunkPoints], each
    // point the reduced point chunk * chunkPoints + offset (clamped, and
    // masked with the reduction's identity past the end).
    SmallVector<int64_t> partialDomain(outputShape);
    partialDomain.append({chunks, chunkPoints});
    SmallVector<Value> operands;
    for (ReduceOp reduce : reduces)
      operands.push_back(reduce.getValue());
    SmallVector<Operation *> partialOps;
    for (Operation *op : sliceOf(body, operands))
      if (!isa<ReduceOp>(op))
        partialOps.push_back(op);
    SmallVector<unsigned> partialInputs = inputsRead(kernel, partialOps);
    SmallVector<Value> inputValues;
    for (unsigned number : partialInputs)
      inputValues.push_back(kernel.getInputs()[number]);
    auto partial = KernelOp::create(
        builder, loc, partialTypes, inputValues, ValueRange{},
        partialDomain, ArrayRef<int64_t>{static_cast<int64_t>(rank) + 1});
    {
      OpBuilder::InsertionGuard guard(builder);
      Block *newBody = createBody(partial, rank + 2);
      IRMapping mapping;
      mapArguments(newBody, mapping, rank + 2, 0, partialInputs);
      Value chunk = newBody->getArgument(rank);
      Value offset = newBody->getArgument(rank + 1);
      Value chunkStart = arith::MulIOp::create(
          builder, loc, chunk,
          arith::ConstantIndexOp::create(builder, loc, chunkPoints));
      Value point = arith::AddIOp::create(builder, loc, chunkStart, offset);
      bool masked = chunks * chunkPoints != points;
      Value valid;
      if (masked) {
        Value end = arith::ConstantIndexOp::create(builder, loc, points);
        valid = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::slt,
                                      point, end);
        point = arith::MinSIOp::create(
            builder, loc, point,
            arith::ConstantIndexOp::create(builder, loc, points - 1));
      }
      // Row-major over the reduced dims (divisions by positive constants).
      ArrayRef<int64_t> reduced = kernel.getReduce();
      for (int64_t position = reduced.size() - 1; position >= 0; --position) {
        int64_t dim = reduced[position];
        if (position == 0) {
          mapping.map(kernel.getIndex(dim), point);
          break;
        }
        Value extent = arith::ConstantIndexOp::create(builder, loc, domain[dim]);
        mapping.map(kernel.getIndex(dim),
                    arith::RemSIOp::create(builder, loc, point, extent));
        point = arith::DivSIOp::create(builder, loc, point, extent);
      }
      for (Operation *op : partialOps)
        builder.clone(*op, mapping);
      SmallVector<Value> indices = outputIndices(newBody, chunk);
      int64_t result = 0;
      // (value, identity) -> the value masked past the end, made once.
      DenseMap<std::pair<Value, Attribute>, Value> maskedValues;
      for (ReduceOp reduce : reduces) {
        StringRef kind = reduce.getKind();
        Value value = mapping.lookup(reduce.getValue());
        if (masked) {
          TypedAttr start = identity(builder, kind, value.getType());
          Value &maskedValue = maskedValues[{value, start}];
          if (!maskedValue)
            maskedValue = arith::SelectOp::create(
                builder, loc, valid, value,
                arith::ConstantOp::create(builder, loc, start));
          value = maskedValue;
        }
        if (kind != "argmax") {
          Value reducedValue = ReduceOp::create(builder, loc, value.getType(),
                                                value, kind);
          StoreOp::create(builder, loc, reducedValue, result++, indices);
          continue;
        }
        Value best = ReduceOp::create(builder, loc, value.getType(), value,
                                      "max");
        Value at = ReduceOp::create(builder, loc, i64, value, "argmax");
        Value start = arith::IndexCastOp::create(builder, loc, i64, chunkStart);
        StoreOp::create(builder, loc, best, result++, indices);
        StoreOp::create(builder, loc,
                        arith::AddIOp::create(builder, loc, start, at),
                        result++, indices);
      }
      eraseUnusedConstants(newBody);
    }

    // The combining kernel: domain [outputs..., chunks] reducing the
    // chunks, then the original kernel's stores with their reductions'
    // results replaced by the combined ones. (An argmax takes the first
    // chunk holding the maximum and reads that chunk's index.)
    SmallVector<Value> stored;
    for (StoreOp store : body.getOps<StoreOp>())
      llvm::append_range(stored, store->getOperands());
    SmallVector<Operation *> finalOps;
    for (Operation *op : sliceOf(body, stored))
      if (!isa<ReduceOp>(op))
        finalOps.push_back(op);
    SmallVector<unsigned> finalInputs = inputsRead(kernel, finalOps);
    SmallVector<Value> combineInputs(partial.getResults());
    for (unsigned number : finalInputs)
      combineInputs.push_back(kernel.getInputs()[number]);
    SmallVector<int64_t> combineDomain(outputShape);
    combineDomain.push_back(chunks);
    auto combine = KernelOp::create(
        builder, loc, kernel.getResultTypes(), combineInputs, ValueRange{},
        combineDomain, ArrayRef<int64_t>{static_cast<int64_t>(rank)});
    {
      OpBuilder::InsertionGuard guard(builder);
      Block *newBody = createBody(combine, rank + 1);
      IRMapping mapping;
      mapArguments(newBody, mapping, rank + 1, partial.getNumResults(),
                   finalInputs);
      SmallVector<Value> indices =
          outputIndices(newBody, newBody->getArgument(rank));
      unsigned input = 2 * (rank + 1);
      for (ReduceOp reduce : reduces) {
        StringRef kind = reduce.getKind();
        Value value = tensor::ExtractOp::create(
            builder, loc, newBody->getArgument(input++), indices);
        if (kind != "argmax") {
          mapping.map(reduce.getResult(),
                      ReduceOp::create(builder, loc, reduce.getType(), value,
                                       kind));
          continue;
        }
        Value chunk = ReduceOp::create(builder, loc, i64, value, "argmax");
        SmallVector<Value> at = outputIndices(
            newBody, arith::IndexCastOp::create(builder, loc, indexType, chunk));
        mapping.map(reduce.getResult(),
                    tensor::ExtractOp::create(
                        builder, loc, newBody->getArgument(input++), at));
      }
      for (Operation *op : finalOps)
        builder.clone(*op, mapping);
      for (StoreOp store : body.getOps<StoreOp>())
        builder.clone(*store, mapping);
      eraseUnusedConstants(newBody);
    }
    kernel->replaceAllUsesWith(combine);
    kernel->erase();
  }
};
} // namespace
