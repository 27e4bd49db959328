//===- ScalarLowering.cpp - braze's tensor ops as scalar arith/math -------===//

#include "Transforms/ScalarLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace braze;

static Type elementOf(Value tensor) {
  return cast<RankedTensorType>(tensor.getType()).getElementType();
}

Value ScalarLowering::floatConstant(Type type, double value) {
  return arith::ConstantOp::create(builder, loc, type,
                                   builder.getFloatAttr(type, value));
}

Value ScalarLowering::intConstant(Type type, int64_t value) {
  return arith::ConstantOp::create(builder, loc, type,
                                   builder.getIntegerAttr(type, value));
}

/// Element conversion with PyTorch's rules (see braze.cast).
Value ScalarLowering::convert(Value value, Type to) {
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

FailureOr<Value> ScalarLowering::lowerPointwise(Operation *op,
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

/// Points the uses of half value `half` at its f32 widening, except the
/// widening itself and the writes that store the half value as it is.
static void widenUses(Value half, Value widened,
                      function_ref<Type(OpOperand &)> storedAs) {
  half.replaceUsesWithIf(widened, [&](OpOperand &use) {
    if (use.getOwner() == widened.getDefiningOp())
      return false;
    Type stored = storedAs(use);
    return !stored || !isHalf(stored);
  });
}

void braze::computeHalvesInF32(Block &body,
                               function_ref<Type(OpOperand &)> storedAs) {
  OpBuilder builder(body.getParentOp()->getContext());
  Type f32 = builder.getF32Type();
  builder.setInsertionPointToStart(&body);
  for (BlockArgument argument : body.getArguments()) {
    if (!isHalf(argument.getType()))
      continue;
    auto widened =
        arith::ExtFOp::create(builder, argument.getLoc(), f32, argument);
    widenUses(argument, widened, storedAs);
  }
  for (Operation &op : llvm::make_early_inc_range(body)) {
    Location loc = op.getLoc();
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      if (!isHalf(extract.getType()))
        continue;
      builder.setInsertionPointAfter(extract);
      auto widened =
          arith::ExtFOp::create(builder, loc, f32, extract.getResult());
      widenUses(extract, widened, storedAs);
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
    bool writes = false;
    for (OpOperand &use : op.getOpOperands()) {
      Type stored = storedAs(use);
      if (!stored)
        continue;
      writes = true;
      if (!isHalf(stored) || use.get().getType() == stored)
        continue;
      builder.setInsertionPoint(&op);
      use.set(arith::TruncFOp::create(builder, loc, stored, use.get()));
    }
    if (writes)
      continue;
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
    widenUses(result, widened, storedAs);
  }
  // Widenings only stores would have read.
  for (Operation &op : llvm::make_early_inc_range(body))
    if (isa<arith::ExtFOp>(op) && op.use_empty())
      op.erase();
}

namespace {
/// Whether `value` (a float) is exactly a value of `narrow`.
bool holdsExactly(Value value, Type narrow, unsigned depth = 0) {
  if (depth > 16)
    return false;
  if (auto extend = value.getDefiningOp<arith::ExtFOp>())
    return extend.getIn().getType() == narrow;
  FloatAttr constant;
  if (matchPattern(value, m_Constant(&constant))) {
    bool lost = false;
    APFloat converted = constant.getValue();
    converted.convert(cast<FloatType>(narrow).getFloatSemantics(),
                      APFloat::rmNearestTiesToEven, &lost);
    return !lost;
  }
  Operation *op = value.getDefiningOp();
  if (!op)
    return false;
  if (isa<arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
          arith::MinNumFOp, arith::NegFOp, math::AbsFOp>(op))
    return llvm::all_of(op->getOperands(), [&](Value operand) {
      return holdsExactly(operand, narrow, depth + 1);
    });
  if (auto select = dyn_cast<arith::SelectOp>(op))
    return holdsExactly(select.getTrueValue(), narrow, depth + 1) &&
           holdsExactly(select.getFalseValue(), narrow, depth + 1);
  return false;
}
} // namespace

void braze::dropExactRoundings(Block &body) {
  SmallVector<arith::ExtFOp> exact;
  body.walk([&](arith::ExtFOp extend) {
    auto round = extend.getIn().getDefiningOp<arith::TruncFOp>();
    if (round && round.getIn().getType() == extend.getType() &&
        holdsExactly(round.getIn(), round.getType()))
      exact.push_back(extend);
  });
  for (arith::ExtFOp extend : exact) {
    auto round = extend.getIn().getDefiningOp<arith::TruncFOp>();
    extend.replaceAllUsesWith(round.getIn());
    extend.erase();
    if (round.use_empty())
      round.erase();
  }
}
