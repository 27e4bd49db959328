//===- LowerKernels.cpp - the braze-lower-kernels pass --------------------===//
//
// Turns each fusion group (and each lone pointwise op or reduction) into a
// braze.kernel: an iteration domain and a scalar body in arith/math.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/IterationDomain.h"
#include "Transforms/Passes.h"
#include "Transforms/ScalarLowering.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace braze {
#define GEN_PASS_DEF_BRAZELOWERKERNELS
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
/// The ops that become one kernel, as seen from inside (a group's body, or
/// one lone op in its function).
struct KernelSource {
  Operation *anchor;                // replaced by the kernel
  SmallVector<Operation *> ops;     // in program order
  SmallVector<Value> inputs;        // values the ops read but do not define
  SmallVector<Value> outerInputs;   // the same values outside the anchor
  SmallVector<Value> outputs;       // values the kernel's results replace
};

Type elementOf(Value tensor) {
  return cast<RankedTensorType>(tensor.getType()).getElementType();
}

ArrayRef<int64_t> shapeOf(Value tensor) {
  return cast<RankedTensorType>(tensor.getType()).getShape();
}

/// Builds the body of one kernel by mapping every tensor value of the source
/// to the scalar it holds at the current point of the domain.
class KernelBuilder {
public:
  KernelBuilder(KernelSource &source, OpBuilder &builder)
      : source(source), builder(builder), scalar(builder, loc) {}

  FailureOr<KernelOp> build();

private:
  LogicalResult computeDomain();
  FailureOr<Value> extentOperand(int64_t dim);
  FailureOr<Value> scalarOf(Value tensor);
  LogicalResult lower(Operation *op);
  FailureOr<Value> lowerReduction(Operation *op, Value arg);
  LogicalResult store(Value output, int64_t number);

  Value indexConstant(int64_t value) {
    return arith::ConstantIndexOp::create(builder, loc, value);
  }

  KernelSource &source;
  OpBuilder &builder;
  Location loc = source.anchor->getLoc();
  ScalarLowering scalar;
  SmallVector<int64_t> domain;
  SmallVector<int64_t> reduce;
  KernelOp kernel;
  DenseMap<Value, Value> scalars;
  DenseMap<Value, unsigned> inputNumbers;
};

LogicalResult KernelBuilder::computeDomain() {
  std::optional<SmallVector<int64_t>> merged;
  for (Operation *op : source.ops) {
    if (isa<ConstantOp>(op))
      continue;
    ArrayRef<int64_t> own = domainOf(op);
    merged = merged ? mergeDomains(*merged, own) : SmallVector<int64_t>(own);
    if (!merged)
      return op->emitOpError("does not share its kernel's iteration domain "
                             "(the ops of a group must have one rank and "
                             "broadcast together)");
    SmallVector<int64_t> dims = reducedDims(op);
    if (dims.empty())
      continue;
    if (!reduce.empty() && reduce != dims)
      return op->emitOpError("reduces dims [")
             << llvm::make_range(dims.begin(), dims.end())
             << "] but its kernel already reduces ["
             << llvm::make_range(reduce.begin(), reduce.end())
             << "] (a kernel has one set of reduction dims)";
    reduce = dims;
  }
  if (!merged)
    return source.anchor->emitOpError("has no op to lower to a kernel");
  domain = std::move(*merged);
  return success();
}

/// An `index` value outside the kernel holding the extent of domain dim
/// `dim`: a `tensor.dim` of an input that has the dim, or an expand's size.
FailureOr<Value> KernelBuilder::extentOperand(int64_t dim) {
  int64_t rank = domain.size();
  for (Value outer : source.outerInputs) {
    auto type = dyn_cast<RankedTensorType>(outer.getType());
    if (!type)
      continue;
    int64_t aligned = dim - (rank - type.getRank());
    if (aligned >= 0 && type.isDynamicDim(aligned))
      return tensor::DimOp::create(builder, loc, outer, aligned).getResult();
  }
  for (Operation *op : source.ops) {
    auto expand = dyn_cast<ExpandOp>(op);
    if (!expand || !expand.getType().isDynamicDim(dim))
      continue;
    unsigned position = 0;
    for (int64_t d = 0; d < dim; ++d)
      position += expand.getType().isDynamicDim(d);
    Value size = expand.getSizes()[position];
    auto found = llvm::find(source.inputs, size);
    if (found != source.inputs.end())
      return source.outerInputs[found - source.inputs.begin()];
    if (size.getParentBlock() == source.anchor->getBlock())
      return size;
  }
  return source.anchor->emitOpError("cannot find the extent of dynamic dim ")
         << dim << " of its iteration domain in any input";
}


FailureOr<KernelOp> KernelBuilder::build() {
  if (failed(computeDomain()))
    return failure();
  builder.setInsertionPoint(source.anchor);
  SmallVector<Value> dynamicExtents;
  for (auto [dim, extent] : llvm::enumerate(domain)) {
    if (!ShapedType::isDynamic(extent))
      continue;
    FailureOr<Value> operand = extentOperand(dim);
    if (failed(operand))
      return failure();
    dynamicExtents.push_back(*operand);
  }
  // Only tensors are read inside; `index` inputs only size expands, whose
  // broadcast the load indices already express. Splat constants become
  // scalar constants.
  SmallVector<Value> kernelInputs;
  for (auto [inner, outer] :
       llvm::zip_equal(source.inputs, source.outerInputs)) {
    auto constant = outer.getDefiningOp<ConstantOp>();
    if (!isa<RankedTensorType>(inner.getType()) ||
        (constant && isa<SplatElementsAttr>(constant.getValue())))
      continue;
    inputNumbers[inner] = kernelInputs.size();
    kernelInputs.push_back(outer);
  }
  SmallVector<Type> resultTypes(ValueRange(source.outputs).getTypes());
  kernel = KernelOp::create(builder, loc, resultTypes, kernelInputs,
                            dynamicExtents, domain, reduce);
  Block *body = builder.createBlock(&kernel.getBody());
  for (unsigned i = 0; i < 2 * domain.size(); ++i)
    body->addArgument(builder.getIndexType(), loc);
  for (Value input : kernelInputs)
    body->addArgument(input.getType(), loc);

  for (Operation *op : source.ops)
    if (failed(lower(op)))
      return failure();
  for (auto [number, output] : llvm::enumerate(source.outputs))
    if (failed(store(output, number)))
      return failure();
  computeHalvesInF32(kernel.getBody().front(), [&](OpOperand &use) -> Type {
    auto store = dyn_cast<StoreOp>(use.getOwner());
    if (!store || use.getOperandNumber() != 0)
      return {};
    return elementOf(kernel.getResult(store.getResult()));
  });
  return kernel;
}

/// The scalar of `tensor` at the current point; inputs are loaded on first
/// use, at broadcast indices aligned to the domain's last dims.
FailureOr<Value> KernelBuilder::scalarOf(Value tensor) {
  auto known = scalars.find(tensor);
  if (known != scalars.end())
    return known->second;
  auto input = llvm::find(source.inputs, tensor);
  if (input == source.inputs.end())
    return source.anchor->emitOpError("kernel body reads a value it does not "
                                      "define: ")
           << tensor;
  Value outer = source.outerInputs[input - source.inputs.begin()];
  Value scalar;
  if (auto constant = outer.getDefiningOp<ConstantOp>();
      constant && isa<SplatElementsAttr>(constant.getValue())) {
    auto splat = cast<SplatElementsAttr>(constant.getValue());
    scalar = arith::ConstantOp::create(
        builder, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()));
  } else if (auto number = inputNumbers.find(tensor);
             number != inputNumbers.end()) {
    ArrayRef<int64_t> shape = shapeOf(tensor);
    int64_t offset = domain.size() - shape.size();
    SmallVector<Value> indices;
    for (auto [k, size] : llvm::enumerate(shape)) {
      int64_t dim = k + offset;
      bool broadcast = size == 1 && domain[dim] != 1;
      indices.push_back(broadcast ? indexConstant(0) : kernel.getIndex(dim));
    }
    scalar = tensor::ExtractOp::create(
        builder, loc, kernel.getInputArgument(number->second), indices);
  } else {
    return source.anchor->emitOpError("kernel body reads the non-tensor "
                                      "input ")
           << tensor << " as data";
  }
  scalars[tensor] = scalar;
  return scalar;
}

LogicalResult KernelBuilder::lower(Operation *op) {
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    if (!splat)
      return op->emitOpError("only splat constants can be part of a kernel");
    scalars[constant.getResult()] = arith::ConstantOp::create(
        builder, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()));
    return success();
  }
  if (auto expand = dyn_cast<ExpandOp>(op)) {
    // Broadcasting is in the load indices: the scalar does not change.
    FailureOr<Value> scalar = scalarOf(expand.getInput());
    if (failed(scalar))
      return failure();
    scalars[expand.getResult()] = *scalar;
    return success();
  }
  if (isReduction(op)) {
    FailureOr<Value> arg = scalarOf(op->getOperand(0));
    if (failed(arg))
      return failure();
    FailureOr<Value> result = lowerReduction(op, *arg);
    if (failed(result))
      return failure();
    scalars[op->getResult(0)] = *result;
    return success();
  }
  if (!op->hasTrait<PointwiseTrait>())
    return op->emitOpError("cannot be part of a kernel (only pointwise ops, "
                           "reductions, expand and splat constants can)");
  SmallVector<Value> args;
  for (Value operand : op->getOperands()) {
    FailureOr<Value> scalar = scalarOf(operand);
    if (failed(scalar))
      return failure();
    args.push_back(*scalar);
  }
  FailureOr<Value> result = scalar.lowerPointwise(op, args);
  if (failed(result))
    return failure();
  scalars[op->getResult(0)] = *result;
  return success();
}

FailureOr<Value> KernelBuilder::lowerReduction(Operation *op, Value arg) {
  Value input = op->getOperand(0);
  ArrayRef<int64_t> shape = shapeOf(input);
  // A reduction over dims its input only broadcasts along (size 1) is the
  // identity; reducing some but not all of the kernel's dims is not
  // expressible.
  int64_t broadcastDims = llvm::count_if(reduce, [&](int64_t dim) {
    return shape[dim] == 1 && domain[dim] != 1;
  });
  bool isArgmax = isa<ArgmaxOp>(op);
  if (broadcastDims == static_cast<int64_t>(reduce.size()))
    return isArgmax ? scalar.intConstant(builder.getI64Type(), 0) : arg;
  if (broadcastDims != 0)
    return op->emitOpError("reduces dims of size 1 together with wider dims "
                           "of its kernel's domain");
  if (!op->hasAttr("keepdim") &&
      llvm::any_of(op->getResult(0).getUsers(), [&](Operation *user) {
        return llvm::is_contained(source.ops, user);
      }))
    return op->emitOpError("drops its reduced dims but is read inside its "
                           "kernel (only keepdim results broadcast back)");
  StringRef kind = TypeSwitch<Operation *, StringRef>(op)
                       .Case([](SumOp) { return "add"; })
                       .Case([](MeanOp) { return "add"; })
                       .Case([](MaxOp) { return "max"; })
                       .Case([](MinOp) { return "min"; })
                       .Case([](AnyOp) { return "or"; })
                       .Case([](AllOp) { return "and"; })
                       .Case([](ArgmaxOp) { return "argmax"; })
                       .Default([](Operation *) { return ""; });
  Type resultType = isArgmax ? builder.getI64Type() : arg.getType();
  Value reduced = ReduceOp::create(builder, loc, resultType, arg,
                                   builder.getStringAttr(kind));
  if (!isa<MeanOp>(op))
    return reduced;
  Value count = kernel.getExtent(reduce.front());
  for (int64_t dim : ArrayRef<int64_t>(reduce).drop_front())
    count = arith::MulIOp::create(builder, loc, count, kernel.getExtent(dim));
  Value asInt =
      arith::IndexCastOp::create(builder, loc, builder.getI64Type(), count);
  Value asFloat =
      arith::SIToFPOp::create(builder, loc, arg.getType(), asInt);
  return arith::DivFOp::create(builder, loc, reduced, asFloat).getResult();
}

/// Stores `output` into result `number`: at the point's indices, at 0 in
/// dims the result has size 1 (a keepdim reduction, or a broadcast value),
/// and without the reduced dims a rank-dropping reduction removed. A reduced
/// dim kept with size 1 is stored at 0 even when its extent is 1 too: a
/// reduction's value exists once per parallel point, outside any loop over
/// the reduction indices.
LogicalResult KernelBuilder::store(Value output, int64_t number) {
  FailureOr<Value> scalar = scalarOf(output);
  if (failed(scalar))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(output);
  int64_t rank = domain.size();
  SmallVector<Value> indices;
  if (static_cast<int64_t>(shape.size()) == rank) {
    for (int64_t dim = 0; dim < rank; ++dim) {
      bool single = shape[dim] == 1 &&
                    (domain[dim] != 1 || llvm::is_contained(reduce, dim));
      indices.push_back(single ? indexConstant(0) : kernel.getIndex(dim));
    }
  } else if (static_cast<int64_t>(shape.size() + reduce.size()) == rank) {
    for (int64_t dim = 0; dim < rank; ++dim)
      if (!llvm::is_contained(reduce, dim))
        indices.push_back(kernel.getIndex(dim));
  } else {
    return source.anchor->emitOpError("result #")
           << number << " has rank " << shape.size()
           << ", which does not fit the kernel's domain of rank " << rank;
  }
  StoreOp::create(builder, loc, *scalar, number, indices);
  return success();
}

/// The source of a group: its body.
KernelSource sourceOf(GroupOp group) {
  KernelSource source{group, {}, {}, {}, {}};
  Block &body = group.getBody().front();
  for (Operation &op : body.without_terminator())
    source.ops.push_back(&op);
  llvm::append_range(source.inputs, body.getArguments());
  llvm::append_range(source.outerInputs, group.getInputs());
  llvm::append_range(source.outputs, body.getTerminator()->getOperands());
  return source;
}

/// The source of one op outside any group.
KernelSource sourceOf(Operation *op) {
  KernelSource source{op, {op}, {}, {}, {}};
  for (Value operand : op->getOperands())
    if (!llvm::is_contained(source.inputs, operand))
      source.inputs.push_back(operand);
  source.outerInputs = source.inputs;
  llvm::append_range(source.outputs, op->getResults());
  return source;
}

struct BrazeLowerKernelsPass
    : braze::impl::BrazeLowerKernelsBase<BrazeLowerKernelsPass> {
  using BrazeLowerKernelsBase::BrazeLowerKernelsBase;

  void runOnOperation() override {
    // Sources are taken one at a time: lowering an op replaces the values
    // that later sources read.
    SmallVector<Operation *> anchors;
    getOperation().walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<GroupOp>(op)) {
        anchors.push_back(op);
        return WalkResult::skip();
      }
      if (op->hasTrait<PointwiseTrait>() || isReduction(op))
        anchors.push_back(op);
      return WalkResult::advance();
    });
    OpBuilder builder(&getContext());
    for (Operation *anchor : anchors) {
      auto group = dyn_cast<GroupOp>(anchor);
      KernelSource source = group ? sourceOf(group) : sourceOf(anchor);
      FailureOr<KernelOp> kernel = KernelBuilder(source, builder).build();
      if (failed(kernel))
        return signalPassFailure();
      anchor->replaceAllUsesWith(kernel->getResults());
      anchor->erase();
      ++numKernels;
    }
  }
};
} // namespace
