//===- EpilogueFusion.cpp - the braze-epilogue-fusion pass ----------------===//
//
// A GEMM and the bias, pointwise chain and row statistics that follow it
// become one braze.fused_gemm whose epilogue runs on each product element.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeDialect.h"
#include "Dialect/BrazeOps.h"
#include "Transforms/IterationDomain.h"
#include "Transforms/Passes.h"
#include "Transforms/ScalarLowering.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "braze-epilogue-fusion"

namespace braze {
#define GEN_PASS_DEF_BRAZEEPILOGUEFUSION
#include "braze/Passes.h.inc"
} // namespace braze

using namespace mlir;
using namespace braze;

namespace {
RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Whether two dims are the same size as far as types tell (a dynamic dim
/// is taken to equal another dynamic one: a dynamic size-1 dim never
/// broadcasts, see docs/dynamic.md).
bool sameDim(int64_t a, int64_t b) { return a == b; }

bool sameShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  return a.size() == b.size() &&
         llvm::all_of(llvm::zip(a, b), [](auto dims) {
           return sameDim(std::get<0>(dims), std::get<1>(dims));
         });
}

int64_t dynamicDims(ArrayRef<int64_t> shape) {
  return llvm::count_if(shape, ShapedType::isDynamic);
}

bool isSplatConstant(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  return constant && isa<SplatElementsAttr>(constant.getValue());
}

/// Whether `permute` swaps the last two dims and keeps the others.
bool swapsLastTwo(PermuteOp permute) {
  ArrayRef<int64_t> order = permute.getPermutation();
  int64_t rank = order.size();
  for (int64_t d = 0; d < rank - 2; ++d)
    if (order[d] != d)
      return false;
  return order[rank - 2] == rank - 1 && order[rank - 1] == rank - 2;
}

/// `operand` of a GEMM, read through a transpose of its last two dims
/// (then `transposed` is set).
Value untransposed(Value operand, bool &transposed) {
  auto permute = operand.getDefiningOp<PermuteOp>();
  transposed = permute && swapsLastTwo(permute);
  return transposed ? permute.getInput() : operand;
}

/// Whether `value` is an int8 tensor cast to another type (through
/// transposes).
bool castsInt8(Value value) {
  while (auto permute = value.getDefiningOp<PermuteOp>())
    value = permute.getInput();
  auto cast = value.getDefiningOp<CastOp>();
  return cast &&
         tensorType(cast.getInput()).getElementType().isSignlessInteger(8);
}

/// An int8 weight dequantised for one GEMM only: its rhs is the weight
/// cast to the activations' type, perhaps times a scale per output column
/// (per row of a [N, K] weight), perhaps transposed, in any order.
struct Int8Weight {
  Value weight;                    // i8, [K, N] (or [N, K]: transposed)
  bool transposed = false;
  Value scale;                     // null, or one per column of the product
  SmallVector<Operation *> chain;  // the dequantising ops, users first
};

/// The int8 weight `gemm`'s rhs dequantises, with the product's N = `n`;
/// none when its rhs is no such chain (or a step of it has other users:
/// then the dequantised weight is made anyway). `why` says why a chain
/// that starts from an int8 weight is not taken.
std::optional<Int8Weight> findInt8Weight(Operation *gemm, int64_t n,
                                         std::string &why) {
  if (!isa<MatmulOp, AddmmOp>(gemm))
    return std::nullopt;
  Int8Weight found;
  Value value = gemm->getOperand(isa<AddmmOp>(gemm) ? 2 : 1);
  while (value.hasOneUse()) {
    Operation *def = value.getDefiningOp();
    if (auto permute = dyn_cast_or_null<PermuteOp>(def);
        permute && swapsLastTwo(permute)) {
      found.transposed = !found.transposed;
      found.chain.push_back(def);
      value = permute.getInput();
      continue;
    }
    if (auto cast = dyn_cast_or_null<CastOp>(def)) {
      if (!tensorType(cast.getInput()).getElementType().isSignlessInteger(8))
        return std::nullopt;
      found.chain.push_back(def);
      found.weight = cast.getInput();
      return found;
    }
    auto mul = dyn_cast_or_null<MulOp>(def);
    if (!mul || found.scale)
      return std::nullopt;
    // The weight side has the product's shape; the other is the scale, one
    // per column of the product: [1, N] of a [K, N] weight, [N, 1] of a
    // [N, K] one.
    int weightSide =
        tensorType(mul.getLhs()) == tensorType(mul.getResult()) ? 0 : 1;
    Value scale = mul->getOperand(1 - weightSide);
    found.chain.push_back(mul);
    if (auto expand = scale.getDefiningOp<ExpandOp>()) {
      if (expand->hasOneUse())
        found.chain.push_back(expand);
      scale = expand.getInput();
    }
    RankedTensorType scaleType = tensorType(scale);
    SmallVector<int64_t> aligned(
        std::max<int64_t>(0, 2 - scaleType.getRank()), 1);
    llvm::append_range(aligned, scaleType.getShape());
    int64_t column = found.transposed ? 0 : 1;
    Type element = scaleType.getElementType();
    if (tensorType(mul->getOperand(weightSide)) !=
            tensorType(mul.getResult()) ||
        aligned.size() != 2 || aligned[1 - column] != 1 ||
        !sameDim(aligned[column], n) ||
        !(element.isF32() || element.isBF16() || element.isF16())) {
      if (castsInt8(mul->getOperand(weightSide)))
        why = "the weight is multiplied by something other than an f32, "
              "bf16 or f16 scale per output column (the dequantised weight "
              "is made before the product)";
      return std::nullopt;
    }
    found.scale = scale;
    value = mul->getOperand(weightSide);
  }
  return std::nullopt;
}

/// An operand of the epilogue read from outside it: the value to pass (in
/// its canonical shape once built) and how the epilogue indexes it.
struct Extra {
  Value source;            // the operand as the consumer reads it (no expand)
  RankedTensorType type;   // the shape the fused GEMM takes it in
  StringRef indexing;      // "mn", "n", "m" or "scalar"
};

/// What one GEMM's epilogue takes over, gathered in program order.
class EpiloguePlan {
public:
  EpiloguePlan(Operation *gemm, const BrazeEpilogueFusionOptions &options)
      : gemm(gemm), options(options) {
    product = gemm->getResult(0);
    frame = tensorType(product);
    values.insert(product);
  }

  /// Follows the product's users through the block; false when nothing
  /// could be fused (with the reason in `why`).
  bool gather();
  /// Replaces the GEMM and the ops taken by one braze.fused_gemm.
  FusedGemmOp build(OpBuilder &builder, int64_t &extraOutputs);

  std::string why;
  SmallVector<Operation *> taken; // pointwise ops, views and statistics
  std::optional<Int8Weight> int8Weight; // the rhs, read as int8 in place
  bool decodeOnly = false; // fused for its decode shape alone (no epilogue)

private:
  void consider(Operation *op);
  void refuse(Operation *op, const Twine &reason);
  /// The rows of a value of the epilogue as the frame sees them: its own
  /// shape without the last dim (for a view of a 2-D product, the dims the
  /// product's M was split into).
  bool isRowView(ReshapeOp reshape);
  std::optional<Extra> classify(Value operand, ArrayRef<int64_t> shape,
                                std::string &reason);
  bool dependsOnProduct(Value value);
  bool dependsOnStatistic(Value value);
  Value operandOf(Value value, OpBuilder &builder, Location loc);

  Operation *gemm;
  const BrazeEpilogueFusionOptions &options;
  Value product;
  RankedTensorType frame;        // [B..., M, N]
  llvm::SetVector<Value> values; // tensors of the epilogue, frame-shaped
  SmallVector<Operation *> statistics;
  SmallVector<Extra> extras;
  DenseSet<Operation *> slice;   // ops reading the product, transitively
  bool sliceComputed = false;
};

void EpiloguePlan::refuse(Operation *op, const Twine &reason) {
  LLVM_DEBUG(llvm::dbgs() << "not in the epilogue (" << reason << "): " << *op
                          << "\n");
  if (options.remarks)
    op->emitRemark() << "'" << op->getName()
                     << "' not fused into the epilogue of '"
                     << gemm->getName() << "': " << reason << " (the GEMM at "
                     << gemm->getLoc() << ")";
}

bool EpiloguePlan::dependsOnProduct(Value value) {
  if (!sliceComputed) {
    SetVector<Operation *> forward;
    getForwardSlice(gemm, &forward);
    slice.insert(forward.begin(), forward.end());
    sliceComputed = true;
  }
  Operation *def = value.getDefiningOp();
  return def && (def == gemm || slice.contains(def));
}

/// Whether `value` is computed from a reduction of an epilogue value: an op
/// reading it needs a whole row of the product first.
bool EpiloguePlan::dependsOnStatistic(Value value) {
  SmallVector<Value> stack{value};
  DenseSet<Value> seen;
  while (!stack.empty()) {
    Value next = stack.pop_back_val();
    if (!seen.insert(next).second || !dependsOnProduct(next))
      continue;
    Operation *def = next.getDefiningOp();
    if (isReduction(def) && values.contains(def->getOperand(0)))
      return true;
    llvm::append_range(stack, def->getOperands());
  }
  return false;
}

/// A reshape of a 2-D product that keeps N and splits M into leading dims
/// (at most one of them dynamic, so reshaping back needs no sizes).
bool EpiloguePlan::isRowView(ReshapeOp reshape) {
  if (frame.getRank() != 2)
    return false;
  ArrayRef<int64_t> shape = reshape.getType().getShape();
  int64_t n = frame.getDimSize(1);
  if (shape.size() < 2 || ShapedType::isDynamic(n) || shape.back() != n ||
      dynamicDims(shape) > 1)
    return false;
  int64_t m = frame.getDimSize(0);
  if (ShapedType::isDynamic(m))
    return dynamicDims(shape) == 1;
  int64_t rows = 1;
  for (int64_t size : shape.drop_back())
    rows *= size;
  return rows == m;
}

/// How the epilogue reads `operand` of a consumer whose result has
/// `shape` (the frame's, or a row view's): right-aligned broadcasting.
std::optional<Extra> EpiloguePlan::classify(Value operand,
                                            ArrayRef<int64_t> shape,
                                            std::string &reason) {
  if (auto expand = operand.getDefiningOp<ExpandOp>())
    operand = expand.getInput();
  RankedTensorType type = tensorType(operand);
  Type element = type.getElementType();
  SmallVector<int64_t> aligned(shape.size() - type.getRank(), 1);
  llvm::append_range(aligned, type.getShape());
  auto ones = [](ArrayRef<int64_t> dims) {
    return llvm::all_of(dims, [](int64_t d) { return d == 1; });
  };
  ArrayRef<int64_t> rows = ArrayRef<int64_t>(aligned).drop_back();
  ArrayRef<int64_t> ownRows = shape.drop_back();
  int64_t n = frame.getShape().back();
  int64_t m = frame.getShape()[frame.getRank() - 2];
  bool view = frame.getRank() == 2 && shape.size() != 2;
  if (ones(aligned))
    return Extra{operand, RankedTensorType::get({}, element), "scalar"};
  if (ones(rows) && sameDim(aligned.back(), n))
    return Extra{operand, RankedTensorType::get({n}, element), "n"};
  if (sameShape(aligned, shape))
    return Extra{operand, frame.clone(element), "mn"};
  // Shared by the batch of a batched product: [M, N] or [M].
  int64_t batch = frame.getRank() - 2;
  if (!view && batch > 0 && ones(rows.take_front(batch))) {
    ArrayRef<int64_t> matrix = ArrayRef<int64_t>(aligned).drop_front(batch);
    if (sameDim(matrix[0], m) && sameDim(matrix[1], n))
      return Extra{operand, RankedTensorType::get({m, n}, element), "mn"};
    if (sameDim(matrix[0], m) && matrix[1] == 1 && n != 1)
      return Extra{operand, RankedTensorType::get({m}, element), "m"};
  }
  if (batch == 0 && aligned.back() == 1 && n != 1 && sameShape(rows, ownRows))
    return Extra{operand, RankedTensorType::get({m}, element), "m"};
  reason = "an operand of shape [" +
           llvm::join(llvm::map_range(type.getShape(),
                                      [](int64_t d) {
                                        return ShapedType::isDynamic(d)
                                                   ? std::string("?")
                                                   : std::to_string(d);
                                      }),
                      ", ") +
           "] broadcasts in a way the epilogue cannot index (by (m, n), n, "
           "m or a scalar)";
  return std::nullopt;
}

void EpiloguePlan::consider(Operation *op) {
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    if (isRowView(reshape)) {
      values.insert(reshape.getResult());
      taken.push_back(op);
    }
    return;
  }
  if (op->hasTrait<PointwiseTrait>()) {
    if (!options.pointwise)
      return refuse(op, "pointwise fusion is off");
    ArrayRef<int64_t> shape = tensorType(op->getResult(0)).getShape();
    SmallVector<Extra> found;
    for (Value operand : op->getOperands()) {
      if (values.contains(operand)) {
        if (!sameShape(tensorType(operand).getShape(), shape))
          return refuse(op, "it broadcasts the product to a larger shape");
        continue;
      }
      if (isSplatConstant(operand))
        continue;
      if (dependsOnStatistic(operand))
        return refuse(op, "it needs a row statistic of the product first "
                          "(the normalisation stays a kernel; the statistic "
                          "is fused)");
      if (dependsOnProduct(operand))
        return refuse(op, "another operand depends on the product through "
                          "an op outside the epilogue");
      std::string reason;
      std::optional<Extra> extra = classify(operand, shape, reason);
      if (!extra)
        return refuse(op, reason);
      found.push_back(*extra);
    }
    llvm::append_range(extras, found);
    values.insert(op->getResult(0));
    taken.push_back(op);
    return;
  }
  if (!isReduction(op))
    return; // an outside user: the value becomes an output
  if (!options.reductions)
    return refuse(op, "reduction fusion is off");
  if (!isa<SumOp, MeanOp, MaxOp>(op))
    return refuse(op, "only sum, mean and max are row statistics of the "
                      "epilogue");
  int64_t last = tensorType(op->getOperand(0)).getRank() - 1;
  if (reducedDims(op) != SmallVector<int64_t>{last})
    return refuse(op, "it reduces other dims than the product's rows (N)");
  Type element = tensorType(op->getResult(0)).getElementType();
  if (isa<MeanOp>(op) && isHalf(element))
    return refuse(op, "the mean of an f16/bf16 value would change eager's "
                      "rounding (eager divides the f32 sum and rounds once)");
  if (isa<MeanOp>(op) && ShapedType::isDynamic(frame.getShape().back()))
    return refuse(op, "a mean over a dynamic N");
  statistics.push_back(op);
  taken.push_back(op);
}

bool EpiloguePlan::gather() {
  Type element = frame.getElementType();
  if (isFloat8(element)) {
    why = "its result is an 8-bit float, rounded by torch._scaled_mm (the "
          "CPU's fused GEMMs store no 8-bit floats)";
    return false;
  }
  if (!isa<FloatType>(element)) {
    why = "integer products stay library calls (exact in integers)";
    return false;
  }
  Value bias = isa<AddmmOp>(gemm) ? gemm->getOperand(0)
               : isa<ScaledMmOp>(gemm) ? cast<ScaledMmOp>(gemm).getBias()
                                       : Value();
  if (bias && !options.bias) {
    why = "bias fusion is off";
    return false;
  }
  if (bias) {
    std::string reason;
    if (!classify(bias, frame.getShape(), reason)) {
      why = "its bias: " + reason;
      return false;
    }
  }
  std::string int8Why;
  int8Weight = findInt8Weight(gemm, frame.getShape().back(), int8Why);
  if (!int8Why.empty()) {
    LLVM_DEBUG(llvm::dbgs() << "int8 weight not read in place (" << int8Why
                            << "): " << *gemm << "\n");
    if (options.remarks)
      gemm->emitRemark() << "'" << gemm->getName()
                         << "' does not read its int8 weight in place: "
                         << int8Why;
  }
  // The scales of a scaled_mm, or an int8 weight's dequantisation, are
  // an epilogue of their own; a decode shape (a static M of at most
  // decode-rows) takes the fused GEMM for its one read of the weight.
  int64_t m = frame.getShape()[frame.getRank() - 2];
  bool decode = !ShapedType::isDynamic(m) && m <= options.decodeRows;
  bool needsFusedGemm = isa<ScaledMmOp>(gemm) || int8Weight.has_value();
  // Why a static M is not a decode shape, between `open` and `close`.
  auto aboveDecodeRows = [&](StringRef open, StringRef close) -> std::string {
    if (ShapedType::isDynamic(m) || options.decodeRows <= 0)
      return "";
    return (open + "M = " + Twine(m) + " is above decode-rows = " +
            Twine(options.decodeRows) + close).str();
  };
  if (!options.halfProducts && isa<Float16Type, BFloat16Type>(element) &&
      !needsFusedGemm && !decode) {
    why = "a product of " + std::string(isa<BFloat16Type>(element) ? "bf16" : "f16") +
          " operands stays the library's (half-products is off)" + aboveDecodeRows("; ", "");
    return false;
  }
  Block *block = gemm->getBlock();
  for (Operation *op = gemm->getNextNode(); op; op = op->getNextNode())
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return values.contains(v); }))
      consider(op);
  bool computes = llvm::any_of(taken, [](Operation *op) {
    return !isa<ReshapeOp>(op);
  });
  if (!computes && !needsFusedGemm) {
    if (!decode) {
      why = "nothing after it fits an epilogue" + aboveDecodeRows(" (", ")");
      return false;
    }
    decodeOnly = true;
  }
  DenseSet<Operation *> inside(taken.begin(), taken.end());
  int64_t read = llvm::count_if(values, [&](Value value) {
    return llvm::any_of(value.getUsers(), [&](Operation *user) {
      return !inside.contains(block->findAncestorOpInBlock(*user));
    });
  });
  if (read > 1 && !options.extraOutputs) {
    why = "more than one epilogue value is read after it and extra outputs "
          "are off";
    return false;
  }
  if (read == 0) {
    why = "only row statistics of its epilogue are read (a fused GEMM has "
          "an output)";
    return false;
  }
  return true;
}

/// `value` (outside the fused GEMM) in the shape `type`: a reshape where the
/// shapes differ, through the expand it was read through.
Value reshaped(Value value, RankedTensorType type, OpBuilder &builder,
               Location loc) {
  if (tensorType(value) == type)
    return value;
  return ReshapeOp::create(builder, loc, type, value, ValueRange{});
}

FusedGemmOp EpiloguePlan::build(OpBuilder &builder, int64_t &extraOutputs) {
  Location loc = gemm->getLoc();
  // Nothing taken: a scaled_mm or an int8 weight's product, fused alone.
  Operation *last = taken.empty() ? gemm : taken.back();
  builder.setInsertionPoint(last);
  DenseSet<Operation *> inside(taken.begin(), taken.end());
  inside.insert(gemm);
  Block *block = gemm->getBlock();

  // Operands: the matrices (a transpose of the last two dims read by flag),
  // the scales, the bias, then the consumers' extras, each once.
  bool transposeLhs, transposeRhs;
  Value lhs, rhs, lhsScale, rhsScale, biasOperand;
  if (auto addmm = dyn_cast<AddmmOp>(gemm)) {
    biasOperand = addmm.getBias();
    lhs = untransposed(addmm.getLhs(), transposeLhs);
    rhs = untransposed(addmm.getRhs(), transposeRhs);
  } else {
    lhs = untransposed(gemm->getOperand(0), transposeLhs);
    rhs = untransposed(gemm->getOperand(1), transposeRhs);
  }
  int64_t m = frame.getShape()[frame.getRank() - 2];
  int64_t n = frame.getShape().back();
  // A scale in the fused GEMM's form: rank 0 when per tensor, else [size].
  auto scaleVector = [&](Value scale, int64_t size) {
    RankedTensorType type = tensorType(scale);
    bool single = llvm::all_of(type.getShape(), [](int64_t d) { return d == 1; });
    Type element = type.getElementType();
    return reshaped(scale,
                    single ? RankedTensorType::get({}, element)
                           : RankedTensorType::get({size}, element),
                    builder, loc);
  };
  if (auto scaledMm = dyn_cast<ScaledMmOp>(gemm)) {
    biasOperand = scaledMm.getBias();
    lhsScale = scaleVector(scaledMm.getLhsScale(), m);
    rhsScale = scaleVector(scaledMm.getRhsScale(), n);
  }
  if (int8Weight) {
    rhs = int8Weight->weight;
    transposeRhs = int8Weight->transposed;
    if (int8Weight->scale)
      rhsScale = scaleVector(int8Weight->scale, n);
  }
  std::optional<Extra> bias;
  if (biasOperand) {
    std::string reason;
    bias = classify(biasOperand, frame.getShape(), reason);
  }
  SmallVector<Extra> operands;
  if (bias)
    operands.push_back(*bias);
  DenseMap<std::pair<Value, StringRef>, unsigned> extraNumbers;
  for (const Extra &extra : operands)
    extraNumbers[{extra.source, extra.indexing}] = 0;
  for (const Extra &extra : extras)
    if (extraNumbers.try_emplace({extra.source, extra.indexing},
                                 operands.size())
            .second)
      operands.push_back(extra);
  SmallVector<Value> extraValues;
  SmallVector<Attribute> indexing;
  for (const Extra &extra : operands) {
    extraValues.push_back(reshaped(extra.source, extra.type, builder, loc));
    indexing.push_back(builder.getStringAttr(extra.indexing));
  }

  // Results: the epilogue values read outside it, then the statistics.
  SmallVector<Value> outputs;
  for (Value value : values)
    if (llvm::any_of(value.getUsers(), [&](Operation *user) {
          return !inside.contains(block->findAncestorOpInBlock(*user));
        }))
      outputs.push_back(value);
  SmallVector<Type> resultTypes;
  for (Value output : outputs)
    resultTypes.push_back(frame.clone(tensorType(output).getElementType()));
  SmallVector<int64_t> rows(frame.getShape().drop_back());
  SmallVector<Attribute> kinds;
  for (Operation *statistic : statistics) {
    resultTypes.push_back(RankedTensorType::get(
        rows, tensorType(statistic->getResult(0)).getElementType()));
    kinds.push_back(builder.getStringAttr(isa<MaxOp>(statistic) ? "max"
                                                                : "add"));
  }
  Type element = frame.getElementType();
  Type accumulator = element.isF64() ? element : builder.getF32Type();
  auto fused = FusedGemmOp::create(
      builder, builder.getFusedLoc({loc, last->getLoc()}), resultTypes, lhs,
      rhs, lhsScale, rhsScale, extraValues,
      builder.getArrayAttr(indexing),
      transposeLhs ? builder.getUnitAttr() : UnitAttr(),
      transposeRhs ? builder.getUnitAttr() : UnitAttr(),
      TypeAttr::get(accumulator), builder.getArrayAttr(kinds));

  // The epilogue: the product element (the bias added in the accumulator
  // and rounded to the element type, as the library's result), then each
  // op taken, in program order.
  OpBuilder body(builder.getContext());
  Block *entry = body.createBlock(&fused.getEpilogue());
  entry->addArgument(accumulator, loc);
  for (const Extra &extra : operands)
    entry->addArgument(extra.type.getElementType(), loc);
  ScalarLowering scalar(body, loc);
  auto extraArgument = [&](const Extra &extra) {
    return entry->getArgument(1 + extraNumbers.lookup(
                                      {extra.source, extra.indexing}));
  };
  Value element0 = entry->getArgument(0);
  if (bias) {
    auto addmm = dyn_cast<AddmmOp>(gemm);
    double alpha = addmm ? addmm.getAlpha().convertToDouble() : 1.0;
    double beta = addmm ? addmm.getBeta().convertToDouble() : 1.0;
    if (alpha != 1.0)
      element0 = arith::MulFOp::create(
          body, loc, element0, scalar.floatConstant(accumulator, alpha));
    Value added = scalar.convert(extraArgument(*bias), accumulator);
    if (beta != 1.0)
      added = arith::MulFOp::create(body, loc, added,
                                    scalar.floatConstant(accumulator, beta));
    element0 = arith::AddFOp::create(body, loc, element0, added);
  }
  element0 = scalar.convert(element0, element);
  DenseMap<Value, Value> scalars{{product, element0}};
  SmallVector<Value> reduced;
  for (Operation *op : taken) {
    if (isa<ReshapeOp>(op)) {
      scalars[op->getResult(0)] = scalars.lookup(op->getOperand(0));
      continue;
    }
    if (isReduction(op)) {
      reduced.push_back(scalars.lookup(op->getOperand(0)));
      continue;
    }
    SmallVector<Value> args;
    ArrayRef<int64_t> shape = tensorType(op->getResult(0)).getShape();
    for (Value operand : op->getOperands()) {
      if (Value known = scalars.lookup(operand)) {
        args.push_back(known);
      } else if (isSplatConstant(operand)) {
        auto splat = cast<SplatElementsAttr>(
            operand.getDefiningOp<ConstantOp>().getValue());
        args.push_back(arith::ConstantOp::create(
            body, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>())));
      } else {
        std::string reason;
        args.push_back(extraArgument(*classify(operand, shape, reason)));
      }
    }
    FailureOr<Value> result = scalar.lowerPointwise(op, args);
    if (failed(result))
      return {};
    scalars[op->getResult(0)] = *result;
  }
  SmallVector<Value> yielded;
  for (Value output : outputs)
    yielded.push_back(scalars.lookup(output));
  llvm::append_range(yielded, reduced);
  GemmYieldOp::create(body, loc, yielded);
  unsigned outputCount = outputs.size();
  computeHalvesInF32(*entry, [&](OpOperand &use) -> Type {
    if (!isa<GemmYieldOp>(use.getOwner()))
      return {};
    unsigned number = use.getOperandNumber();
    Type stored = cast<RankedTensorType>(resultTypes[number]).getElementType();
    // A half statistic accumulates in f32.
    return number >= outputCount && isHalf(stored) ? builder.getF32Type()
                                                   : stored;
  });

  // Outside users read the outputs (reshaped back to their views) and the
  // statistics (a mean divides the sum by N); then the ops taken go.
  for (auto [output, result] : llvm::zip(outputs, fused.getResults())) {
    Value replacement = reshaped(result, tensorType(output), builder, loc);
    output.replaceUsesWithIf(replacement, [&](OpOperand &use) {
      return !inside.contains(block->findAncestorOpInBlock(*use.getOwner()));
    });
  }
  extraOutputs += outputs.size() - 1;
  for (auto [statistic, result] :
       llvm::zip(statistics, fused.getResults().drop_front(outputCount))) {
    RankedTensorType type = tensorType(statistic->getResult(0));
    Value replacement = reshaped(result, type, builder, loc);
    if (isa<MeanOp>(statistic)) {
      int64_t count = tensorType(statistic->getOperand(0)).getShape().back();
      auto divisor = ConstantOp::create(
          builder, loc,
          DenseElementsAttr::get(
              RankedTensorType::get({}, type.getElementType()),
              builder.getFloatAttr(type.getElementType(),
                                   static_cast<double>(count))));
      replacement = DivOp::create(builder, loc, type, replacement, divisor);
    }
    statistic->getResult(0).replaceAllUsesWith(replacement);
  }
  if (options.remarks)
    gemm->emitRemark() << "'" << gemm->getName() << "' fused with "
                       << llvm::count_if(taken, [](Operation *op) {
                            return !isa<ReshapeOp>(op);
                          })
                       << " op(s) into braze.fused_gemm (" << outputCount
                       << " output(s), " << statistics.size()
                       << " row statistic(s), " << operands.size()
                       << " extra(s)"
                       << (lhsScale || rhsScale ? ", scaled" : "")
                       << (int8Weight ? ", its int8 weight read in place" : "")
                       << (decodeOnly ? ", a decode shape: M <= decode-rows" : "")
                       << ")";
  for (Operation *op : llvm::reverse(taken))
    op->erase();
  // What only the GEMM read goes with it: the transposes of its operands,
  // the ops dequantising an int8 weight (users first).
  llvm::SetVector<Operation *> inputs;
  unsigned lhsNumber = isa<AddmmOp>(gemm) ? 1 : 0;
  for (unsigned number : {lhsNumber, lhsNumber + 1})
    if (auto permute = gemm->getOperand(number).getDefiningOp<PermuteOp>())
      inputs.insert(permute);
  if (int8Weight)
    inputs.insert(int8Weight->chain.begin(), int8Weight->chain.end());
  gemm->erase();
  for (Operation *input : inputs)
    if (input->use_empty())
      input->erase();
  return fused;
}

struct BrazeEpilogueFusionPass
    : braze::impl::BrazeEpilogueFusionBase<BrazeEpilogueFusionPass> {
  using BrazeEpilogueFusionBase::BrazeEpilogueFusionBase;

  // 1. Take the GEMMs of each block (the function's and its control-flow
  //    regions') in program order.
  // 2. Per GEMM, follow its product's users and gather what the epilogue
  //    takes (refusing, with a remark, what it cannot).
  // 3. Replace the GEMM and those ops by one braze.fused_gemm, then restore
  //    def-before-use order (an extra output may have had users above it).
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) {
      if (isa<func::FuncOp, SwitchOp, WhileOp>(block->getParentOp()))
        blocks.push_back(block);
    });
    OpBuilder builder(&getContext());
    BrazeEpilogueFusionOptions options;
    options.bias = bias;
    options.pointwise = pointwise;
    options.reductions = reductions;
    options.extraOutputs = extraOutputs;
    options.remarks = remarks;
    options.decodeRows = decodeRows;
    options.halfProducts = halfProducts;
    for (Block *block : blocks) {
      SmallVector<Operation *> gemms;
      for (Operation &op : *block)
        if (isa<MatmulOp, AddmmOp, BmmOp, ScaledMmOp>(op))
          gemms.push_back(&op);
      for (Operation *gemm : gemms) {
        EpiloguePlan plan(gemm, options);
        if (!plan.gather()) {
          LLVM_DEBUG(llvm::dbgs() << "not fused (" << plan.why << "): "
                                  << *gemm << "\n");
          if (remarks)
            gemm->emitRemark() << "'" << gemm->getName()
                               << "' not fused with an epilogue: " << plan.why;
          continue;
        }
        int64_t taken = llvm::count_if(plan.taken, [](Operation *op) {
          return !isa<ReshapeOp>(op);
        });
        int64_t statistics = llvm::count_if(plan.taken, isReduction);
        int64_t extraOutputs = 0;
        if (!plan.build(builder, extraOutputs))
          return signalPassFailure();
        ++numFused;
        numEpilogueOps += taken - statistics;
        numStatistics += statistics;
        numExtraOutputs += extraOutputs;
      }
      if (!sortTopologically(block)) {
        getOperation()->emitError("braze-epilogue-fusion created a cycle");
        return signalPassFailure();
      }
    }
  }
};
} // namespace
