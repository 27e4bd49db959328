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

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

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
      : source(source), builder(builder) {}

  FailureOr<KernelOp> build();

private:
  LogicalResult computeDomain();
  FailureOr<Value> extentOperand(int64_t dim);
  FailureOr<Value> scalarOf(Value tensor);
  LogicalResult lower(Operation *op);
  FailureOr<Value> lowerPointwise(Operation *op, ArrayRef<Value> args);
  FailureOr<Value> lowerReduction(Operation *op, Value arg);
  LogicalResult store(Value output, int64_t number);

  Value indexConstant(int64_t value) {
    return arith::ConstantIndexOp::create(builder, loc, value);
  }
  Value floatConstant(Type type, double value) {
    return arith::ConstantOp::create(builder, loc, type,
                                     builder.getFloatAttr(type, value));
  }
  Value intConstant(Type type, int64_t value) {
    return arith::ConstantOp::create(builder, loc, type,
                                     builder.getIntegerAttr(type, value));
  }
  Value convert(Value value, Type to);

  KernelSource &source;
  OpBuilder &builder;
  Location loc = source.anchor->getLoc();
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


static bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

/// Makes half-precision arithmetic explicit, so every target rounds alike:
/// f16/bf16 values are widened to f32 where they are loaded
/// (`arith.extf` after `tensor.extract`), every op computes in f32, a
/// conversion to a half type rounds explicitly (`arith.truncf` to it, then
/// `arith.extf` back), and a half result is narrowed where it is stored
/// (`arith.truncf` before `braze.store`). Half constants become the same
/// value in f32. The kernel's results are what they were: PyTorch's rules
/// round at the same places.
/// Points the uses of half value `half` at its f32 widening, except the
/// widening itself and stores (which store the half value as it is).
static void widenUses(Value half, Value widened) {
  half.replaceUsesWithIf(widened, [&](OpOperand &use) {
    return use.getOwner() != widened.getDefiningOp() &&
           !isa<StoreOp>(use.getOwner());
  });
}

static void computeHalvesInF32(KernelOp kernel) {
  Block &body = kernel.getBody().front();
  OpBuilder builder(kernel.getContext());
  Type f32 = builder.getF32Type();
  for (Operation &op : llvm::make_early_inc_range(body)) {
    Location loc = op.getLoc();
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      if (!isHalf(extract.getType()))
        continue;
      builder.setInsertionPointAfter(extract);
      auto widened =
          arith::ExtFOp::create(builder, loc, f32, extract.getResult());
      widenUses(extract, widened);
      continue;
    }
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto value = dyn_cast<FloatAttr>(constant.getValue());
      if (!value || !isHalf(value.getType()))
        continue;
      builder.setInsertionPoint(constant);
      auto wide = arith::ConstantOp::create(
          builder, loc, builder.getF32FloatAttr(value.getValueAsDouble()));
      constant.replaceAllUsesWith(wide.getResult());
      constant.erase();
      continue;
    }
    if (auto store = dyn_cast<StoreOp>(op)) {
      Type element = cast<RankedTensorType>(
                         kernel.getResult(store.getResult()).getType())
                         .getElementType();
      if (!isHalf(element) || store.getValue().getType() == element)
        continue;
      builder.setInsertionPoint(store);
      store->setOperand(0, arith::TruncFOp::create(builder, loc, element,
                                                   store.getValue()));
      continue;
    }
    if (auto extend = dyn_cast<arith::ExtFOp>(op)) {
      // From a half type: its operand is f32 now.
      Value operand = extend.getIn();
      if (operand.getType() == extend.getType()) {
        extend.replaceAllUsesWith(operand);
        extend.erase();
      }
      continue;
    }
    if (op.getNumResults() != 1 || !isHalf(op.getResult(0).getType()))
      continue;
    // A conversion to a half type (truncf, sitofp, uitofp) rounds to it,
    // then continues in f32; any other op computes in f32.
    Value result = op.getResult(0);
    bool converts = isa<arith::TruncFOp, arith::SIToFPOp, arith::UIToFPOp>(op);
    if (!converts) {
      result.setType(f32);
      continue;
    }
    builder.setInsertionPointAfter(&op);
    auto widened = arith::ExtFOp::create(builder, loc, f32, result);
    widenUses(result, widened);
  }
  // Widenings only stores would have read.
  for (Operation &op : llvm::make_early_inc_range(body))
    if (isa<arith::ExtFOp>(op) && op.use_empty())
      op.erase();
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
  computeHalvesInF32(kernel);
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
  FailureOr<Value> result = lowerPointwise(op, args);
  if (failed(result))
    return failure();
  scalars[op->getResult(0)] = *result;
  return success();
}

/// Element conversion with PyTorch's rules (see braze.cast).
Value KernelBuilder::convert(Value value, Type to) {
  Type from = value.getType();
  if (from == to)
    return value;
  auto fromFloat = dyn_cast<FloatType>(from);
  auto toFloat = dyn_cast<FloatType>(to);
  if (fromFloat && toFloat) {
    if (fromFloat.getWidth() == toFloat.getWidth()) // bf16 <-> f16
      value = arith::ExtFOp::create(builder, loc, builder.getF32Type(), value);
    if (cast<FloatType>(value.getType()).getWidth() < toFloat.getWidth())
      return arith::ExtFOp::create(builder, loc, to, value);
    return arith::TruncFOp::create(builder, loc, to, value);
  }
  if (toFloat) {
    if (from.isInteger(1))
      return arith::UIToFPOp::create(builder, loc, to, value);
    return arith::SIToFPOp::create(builder, loc, to, value);
  }
  if (to.isInteger(1)) {
    if (fromFloat)
      return arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::UNE,
                                   value, floatConstant(from, 0.0));
    return arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne, value,
                                 intConstant(from, 0));
  }
  if (fromFloat)
    return arith::FPToSIOp::create(builder, loc, to, value);
  if (from.isInteger(1))
    return arith::ExtUIOp::create(builder, loc, to, value);
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return arith::ExtSIOp::create(builder, loc, to, value);
  return arith::TruncIOp::create(builder, loc, to, value);
}

FailureOr<Value> KernelBuilder::lowerPointwise(Operation *op,
                                               ArrayRef<Value> args) {
  Type type = args.front().getType();
  bool isFloat = isa<FloatType>(type);
  auto binary = [&](auto floatOp, auto intOp) -> Value {
    using FloatOp = decltype(floatOp);
    using IntOp = decltype(intOp);
    if (isFloat)
      return FloatOp::create(builder, loc, args[0], args[1]);
    return IntOp::create(builder, loc, args[0], args[1]);
  };
  auto unary = [&](auto mathOp) -> Value {
    return decltype(mathOp)::create(builder, loc, args[0]);
  };
  auto constant = [&](double value) -> Value {
    return isFloat ? floatConstant(type, value)
                   : intConstant(type, static_cast<int64_t>(value));
  };
  using P = arith::CmpFPredicate;
  using I = arith::CmpIPredicate;
  auto compareValues = [&](Value lhs, Value rhs, P floatPredicate,
                           I signedPredicate, I boolPredicate) -> Value {
    if (isFloat)
      return arith::CmpFOp::create(builder, loc, floatPredicate, lhs, rhs);
    // i1 is unsigned here: true (1) > false (0).
    return arith::CmpIOp::create(
        builder, loc, type.isInteger(1) ? boolPredicate : signedPredicate,
        lhs, rhs);
  };
  auto compare = [&](P floatPredicate, I signedPredicate, I boolPredicate) {
    return compareValues(args[0], args[1], floatPredicate, signedPredicate,
                         boolPredicate);
  };
  // 1 / (1 + exp(-x)): exp overflows to inf for very negative x, giving 0.
  auto sigmoid = [&](Value x) -> Value {
    Value negated = arith::NegFOp::create(builder, loc, x);
    Value exp = math::ExpOp::create(builder, loc, negated);
    Value one = floatConstant(type, 1.0);
    Value denominator = arith::AddFOp::create(builder, loc, one, exp);
    return arith::DivFOp::create(builder, loc, one, denominator);
  };
  // PyTorch's remainder takes the divisor's sign: the C remainder (the
  // dividend's sign) plus the divisor where it is non-zero and the two signs
  // differ. (A NaN remainder stays NaN whatever is added.)
  auto remainder = [&]() -> Value {
    Value divisor = args[1];
    Value mod = binary(arith::RemFOp(), arith::RemSIOp());
    Value zero = constant(0);
    Value modNegative = compareValues(mod, zero, P::OLT, I::slt, I::ult);
    Value divisorNegative =
        compareValues(divisor, zero, P::OLT, I::slt, I::ult);
    Value signsDiffer =
        arith::XOrIOp::create(builder, loc, modNegative, divisorNegative);
    Value nonZero = compareValues(mod, zero, P::UNE, I::ne, I::ne);
    Value adjust = arith::AndIOp::create(builder, loc, nonZero, signsDiffer);
    Value adjusted =
        isFloat ? Value(arith::AddFOp::create(builder, loc, mod, divisor))
                : Value(arith::AddIOp::create(builder, loc, mod, divisor));
    return arith::SelectOp::create(builder, loc, adjust, adjusted, mod);
  };
  // (x > 0) - (x < 0) as selects: 0 for NaN and both zeros, as PyTorch.
  auto sign = [&]() -> Value {
    Value x = args[0], zero = constant(0);
    Value isNegative = compareValues(x, zero, P::OLT, I::slt, I::ult);
    Value minusOne = constant(-1);
    Value negative =
        arith::SelectOp::create(builder, loc, isNegative, minusOne, zero);
    Value isPositive = compareValues(x, zero, P::OGT, I::sgt, I::ugt);
    Value one = constant(1);
    return arith::SelectOp::create(builder, loc, isPositive, one, negative);
  };
  return TypeSwitch<Operation *, FailureOr<Value>>(op)
      .Case([&](AddOp) { return binary(arith::AddFOp(), arith::AddIOp()); })
      .Case([&](SubOp) { return binary(arith::SubFOp(), arith::SubIOp()); })
      .Case([&](MulOp) { return binary(arith::MulFOp(), arith::MulIOp()); })
      .Case([&](DivOp) { return binary(arith::DivFOp(), arith::DivSIOp()); })
      .Case([&](MaximumOp) {
        return binary(arith::MaximumFOp(), arith::MaxSIOp());
      })
      .Case([&](MinimumOp) {
        return binary(arith::MinimumFOp(), arith::MinSIOp());
      })
      .Case([&](PowOp) -> Value {
        return math::PowFOp::create(builder, loc, args[0], args[1]);
      })
      .Case([&](Atan2Op) -> Value {
        return math::Atan2Op::create(builder, loc, args[0], args[1]);
      })
      .Case([&](RemainderOp) { return remainder(); })
      .Case([&](FmodOp) { return binary(arith::RemFOp(), arith::RemSIOp()); })
      .Case([&](AndOp) -> Value {
        return arith::AndIOp::create(builder, loc, args[0], args[1]);
      })
      .Case([&](OrOp) -> Value {
        return arith::OrIOp::create(builder, loc, args[0], args[1]);
      })
      .Case([&](XorOp) -> Value {
        return arith::XOrIOp::create(builder, loc, args[0], args[1]);
      })
      .Case([&](NotOp) -> Value {
        return arith::XOrIOp::create(builder, loc, args[0],
                                     intConstant(type, 1));
      })
      .Case([&](EqOp) { return compare(P::OEQ, I::eq, I::eq); })
      .Case([&](NeOp) { return compare(P::UNE, I::ne, I::ne); })
      .Case([&](LtOp) { return compare(P::OLT, I::slt, I::ult); })
      .Case([&](LeOp) { return compare(P::OLE, I::sle, I::ule); })
      .Case([&](GtOp) { return compare(P::OGT, I::sgt, I::ugt); })
      .Case([&](GeOp) { return compare(P::OGE, I::sge, I::uge); })
      .Case([&](WhereOp) -> Value {
        return arith::SelectOp::create(builder, loc, args[0], args[1],
                                       args[2]);
      })
      .Case([&](CastOp cast) {
        return convert(args[0], elementOf(cast.getResult()));
      })
      .Case([&](NegOp) -> Value {
        if (isFloat)
          return arith::NegFOp::create(builder, loc, args[0]);
        return arith::SubIOp::create(builder, loc, intConstant(type, 0),
                                     args[0]);
      })
      .Case([&](AbsOp) -> Value {
        if (isFloat)
          return math::AbsFOp::create(builder, loc, args[0]);
        return math::AbsIOp::create(builder, loc, args[0]);
      })
      .Case([&](ReluOp) -> Value {
        if (isFloat) // maximumf keeps NaN, as torch.relu does
          return arith::MaximumFOp::create(builder, loc, args[0],
                                           floatConstant(type, 0.0));
        return arith::MaxSIOp::create(builder, loc, args[0],
                                      intConstant(type, 0));
      })
      .Case([&](ExpOp) { return unary(math::ExpOp()); })
      .Case([&](Expm1Op) { return unary(math::ExpM1Op()); })
      .Case([&](Exp2Op) { return unary(math::Exp2Op()); })
      .Case([&](LogOp) { return unary(math::LogOp()); })
      .Case([&](Log1pOp) { return unary(math::Log1pOp()); })
      .Case([&](Log2Op) { return unary(math::Log2Op()); })
      .Case([&](TanhOp) { return unary(math::TanhOp()); })
      .Case([&](SqrtOp) { return unary(math::SqrtOp()); })
      .Case([&](RsqrtOp) { return unary(math::RsqrtOp()); })
      .Case([&](ErfOp) { return unary(math::ErfOp()); })
      .Case([&](SinOp) { return unary(math::SinOp()); })
      .Case([&](CosOp) { return unary(math::CosOp()); })
      .Case([&](TanOp) { return unary(math::TanOp()); })
      .Case([&](AsinOp) { return unary(math::AsinOp()); })
      .Case([&](AcosOp) { return unary(math::AcosOp()); })
      .Case([&](AtanOp) { return unary(math::AtanOp()); })
      .Case([&](SinhOp) { return unary(math::SinhOp()); })
      .Case([&](CoshOp) { return unary(math::CoshOp()); })
      .Case([&](FloorOp) { return unary(math::FloorOp()); })
      .Case([&](CeilOp) { return unary(math::CeilOp()); })
      .Case([&](TruncOp) { return unary(math::TruncOp()); })
      .Case([&](RoundOp) { return unary(math::RoundEvenOp()); })
      .Case([&](SignOp) { return sign(); })
      .Case([&](SigmoidOp) { return sigmoid(args[0]); })
      .Case([&](SiluOp) -> Value {
        return arith::MulFOp::create(builder, loc, args[0], sigmoid(args[0]));
      })
      .Case([&](GeluOp gelu) -> Value {
        Value x = args[0];
        Value half = floatConstant(type, 0.5);
        Value one = floatConstant(type, 1.0);
        Value inner;
        if (gelu.getApproximate() == "tanh") {
          // sqrt(2 / pi) * (x + 0.044715 x^3)
          Value cube = arith::MulFOp::create(
              builder, loc, x, arith::MulFOp::create(builder, loc, x, x));
          Value sum = arith::AddFOp::create(
              builder, loc, x,
              arith::MulFOp::create(builder, loc,
                                    floatConstant(type, 0.044715), cube));
          inner = math::TanhOp::create(
              builder, loc,
              arith::MulFOp::create(builder, loc,
                                    floatConstant(type, std::sqrt(2.0 / M_PI)),
                                    sum));
        } else {
          inner = math::ErfOp::create(
              builder, loc,
              arith::MulFOp::create(builder, loc, x,
                                    floatConstant(type, M_SQRT1_2)));
        }
        Value scaled = arith::MulFOp::create(builder, loc, half, x);
        return arith::MulFOp::create(
            builder, loc, scaled,
            arith::AddFOp::create(builder, loc, one, inner));
      })
      .Default([&](Operation *other) -> FailureOr<Value> {
        return other->emitOpError("has no scalar lowering in the kernel form");
      });
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
    return isArgmax ? intConstant(builder.getI64Type(), 0) : arg;
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
