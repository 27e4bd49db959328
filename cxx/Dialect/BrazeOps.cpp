//===- BrazeOps.cpp - shape inference and verifiers of braze ops ----------===//
//
// Every shape rule lives here once: the inferred result type of an op is also
// its verifier (InferTypeOpInterface compares it with the declared type), so
// each message names the operand, the dim and what was expected.
//
//===----------------------------------------------------------------------===//

#include "Dialect/BrazeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace braze;

std::string braze::formatDim(int64_t size) {
  return ShapedType::isDynamic(size) ? "?" : std::to_string(size);
}

bool braze::dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

bool braze::isFloat8(Type type) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(type);
}

static RankedTensorType tensorTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

bool braze::isRefinementOf(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != actual.size())
    return false;
  for (auto [want, have] : llvm::zip_equal(inferred, actual)) {
    auto wantTensor = dyn_cast<RankedTensorType>(want);
    auto haveTensor = dyn_cast<RankedTensorType>(have);
    if (!wantTensor || !haveTensor) {
      if (want != have)
        return false;
      continue;
    }
    if (wantTensor.getElementType() != haveTensor.getElementType() ||
        wantTensor.getRank() != haveTensor.getRank())
      return false;
    for (auto [w, h] : llvm::zip_equal(wantTensor.getShape(),
                                       haveTensor.getShape()))
      if (!ShapedType::isDynamic(w) && w != h)
        return false;
  }
  return true;
}

namespace {
/// Emits "'<op>' op <message>" at the op's location, the same prefix a
/// verifier's emitOpError gives, so inference errors read like verifier ones.
class OpDiagnostic {
public:
  OpDiagnostic(std::optional<Location> loc, StringRef opName)
      : loc(loc), opName(opName) {}

  LogicalResult fail(const Twine &message) const {
    return emitOptionalError(loc, "'", opName, "' op ", message);
  }

private:
  std::optional<Location> loc;
  StringRef opName;
};
} // namespace

/// Inference runs on unverified operands (builders may pass anything), so
/// check the types before any shape rule looks at them.
static LogicalResult requireRankedTensors(const OpDiagnostic &diag,
                                          ValueRange operands) {
  for (auto [number, value] : llvm::enumerate(operands))
    if (!isa<RankedTensorType>(value.getType())) {
      std::string message;
      llvm::raw_string_ostream os(message);
      os << "operand #" << number << " must be a ranked tensor, got "
         << value.getType();
      return diag.fail(message);
    }
  return success();
}

/// NumPy broadcasting of `operands` (named by their position in the op).
static FailureOr<SmallVector<int64_t>>
broadcastShapes(const OpDiagnostic &diag, ArrayRef<Value> operands,
                ArrayRef<unsigned> operandNumbers) {
  int64_t rank = 0;
  for (Value v : operands)
    rank = std::max(rank, tensorTypeOf(v).getRank());
  SmallVector<int64_t> shape(rank, 1);
  for (int64_t i = 0; i < rank; ++i) {
    // The first operand that fixed a static size other than 1 in this dim.
    std::optional<std::pair<unsigned, int64_t>> fixedBy;
    bool sawDynamic = false;
    for (auto [v, number] : llvm::zip_equal(operands, operandNumbers)) {
      ArrayRef<int64_t> dims = tensorTypeOf(v).getShape();
      int64_t offset = rank - static_cast<int64_t>(dims.size());
      if (i < offset)
        continue;
      int64_t size = dims[i - offset];
      if (ShapedType::isDynamic(size)) {
        sawDynamic = true;
        continue;
      }
      if (size == 1)
        continue;
      if (fixedBy && fixedBy->second != size)
        return diag.fail("operand #" + Twine(number) + " dim " +
                         Twine(i - offset) + " has size " + Twine(size) +
                         ", which does not broadcast with size " +
                         Twine(fixedBy->second) + " of operand #" +
                         Twine(fixedBy->first));
      fixedBy = {number, size};
    }
    if (fixedBy)
      shape[i] = fixedBy->second;
    else if (sawDynamic)
      shape[i] = ShapedType::kDynamic;
  }
  return shape;
}

static LogicalResult requireSameElementType(const OpDiagnostic &diag,
                                            Value first, unsigned firstNumber,
                                            Value other, unsigned otherNumber) {
  Type want = tensorTypeOf(first).getElementType();
  Type have = tensorTypeOf(other).getElementType();
  if (want == have)
    return success();
  std::string message;
  llvm::raw_string_ostream os(message);
  os << "operand #" << otherNumber << " has element type " << have
     << " but operand #" << firstNumber << " has " << want
     << " (convert one with braze.cast)";
  return diag.fail(message);
}

//===----------------------------------------------------------------------===//
// Pointwise
//===----------------------------------------------------------------------===//

template <typename AdaptorT>
static LogicalResult inferBinary(std::optional<Location> loc, StringRef opName,
                                 AdaptorT adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, opName);
  if (failed(requireRankedTensors(diag, adaptor.getOperands())))
    return failure();
  Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
  if (failed(requireSameElementType(diag, lhs, 0, rhs, 1)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(diag, {lhs, rhs}, {0, 1});
  if (failed(shape))
    return failure();
  inferred.push_back(
      RankedTensorType::get(*shape, tensorTypeOf(lhs).getElementType()));
  return success();
}

#define BRAZE_BINARY_INFERENCE(OP)                                             \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferBinary(loc, getOperationName(), adaptor, inferred);           \
  }
BRAZE_BINARY_INFERENCE(AddOp)
BRAZE_BINARY_INFERENCE(SubOp)
BRAZE_BINARY_INFERENCE(MulOp)
BRAZE_BINARY_INFERENCE(DivOp)
BRAZE_BINARY_INFERENCE(PowOp)
BRAZE_BINARY_INFERENCE(MaximumOp)
BRAZE_BINARY_INFERENCE(MinimumOp)
BRAZE_BINARY_INFERENCE(Atan2Op)
BRAZE_BINARY_INFERENCE(RemainderOp)
BRAZE_BINARY_INFERENCE(FmodOp)
BRAZE_BINARY_INFERENCE(AndOp)
BRAZE_BINARY_INFERENCE(OrOp)
BRAZE_BINARY_INFERENCE(XorOp)
#undef BRAZE_BINARY_INFERENCE

/// Comparisons broadcast like arithmetic but always produce i1.
template <typename AdaptorT>
static LogicalResult inferCompare(MLIRContext *context,
                                  std::optional<Location> loc,
                                  StringRef opName, AdaptorT adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  if (failed(inferBinary(loc, opName, adaptor, inferred)))
    return failure();
  auto shape = cast<RankedTensorType>(inferred.back()).getShape();
  inferred.back() = RankedTensorType::get(shape, IntegerType::get(context, 1));
  return success();
}

#define BRAZE_COMPARE_INFERENCE(OP)                                            \
  LogicalResult OP::inferReturnTypes(MLIRContext *context,                     \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferCompare(context, loc, getOperationName(), adaptor, inferred); \
  }
BRAZE_COMPARE_INFERENCE(EqOp)
BRAZE_COMPARE_INFERENCE(NeOp)
BRAZE_COMPARE_INFERENCE(LtOp)
BRAZE_COMPARE_INFERENCE(LeOp)
BRAZE_COMPARE_INFERENCE(GtOp)
BRAZE_COMPARE_INFERENCE(GeOp)
#undef BRAZE_COMPARE_INFERENCE

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, getOperationName());
  if (failed(requireRankedTensors(diag, adaptor.getOperands())))
    return failure();
  Value trueValue = adaptor.getTrueValue();
  Value falseValue = adaptor.getFalseValue();
  if (failed(requireSameElementType(diag, trueValue, 1, falseValue, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes(
      diag, {adaptor.getCondition(), trueValue, falseValue}, {0, 1, 2});
  if (failed(shape))
    return failure();
  inferred.push_back(
      RankedTensorType::get(*shape, tensorTypeOf(trueValue).getElementType()));
  return success();
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return success();
}

LogicalResult CastOp::verify() {
  ArrayRef<int64_t> from = getInput().getType().getShape();
  ArrayRef<int64_t> to = getResult().getType().getShape();
  if (from == to)
    return success();
  std::string message;
  llvm::raw_string_ostream os(message);
  os << "changes the shape from [";
  llvm::interleaveComma(from, os, [&](int64_t d) { os << formatDim(d); });
  os << "] to [";
  llvm::interleaveComma(to, os, [&](int64_t d) { os << formatDim(d); });
  os << "]; a cast converts element types only";
  return emitOpError(message);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Checks that `dims` are strictly increasing and within [0, rank).
static LogicalResult verifyDimList(const OpDiagnostic &diag,
                                   ArrayRef<int64_t> dims, int64_t rank,
                                   StringRef what) {
  for (auto [i, dim] : llvm::enumerate(dims)) {
    if (dim < 0 || dim >= rank)
      return diag.fail(what + " " + Twine(dim) + " is out of range for rank " +
                       Twine(rank) + " (valid: 0 to " + Twine(rank - 1) + ")");
    if (i > 0 && dims[i - 1] >= dim)
      return diag.fail(what + "s must be strictly increasing, but " +
                       Twine(dim) + " follows " + Twine(dims[i - 1]));
  }
  return success();
}

template <typename AdaptorT>
static LogicalResult inferReduction(std::optional<Location> loc,
                                    StringRef opName, AdaptorT adaptor,
                                    Type resultElementType,
                                    SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, opName);
  if (failed(requireRankedTensors(diag, adaptor.getOperands())))
    return failure();
  RankedTensorType input = tensorTypeOf(adaptor.getInput());
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (dims.empty())
    return diag.fail("needs at least one dim to reduce");
  if (failed(verifyDimList(diag, dims, input.getRank(), "reduced dim")))
    return failure();
  llvm::SmallBitVector reduced(input.getRank());
  for (int64_t d : dims)
    reduced.set(d);
  SmallVector<int64_t> shape;
  for (auto [i, size] : llvm::enumerate(input.getShape())) {
    if (!reduced.test(i))
      shape.push_back(size);
    else if (adaptor.getKeepdim())
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(
      shape, resultElementType ? resultElementType : input.getElementType()));
  return success();
}

#define BRAZE_REDUCTION_INFERENCE(OP, ELEMENT_TYPE)                            \
  LogicalResult OP::inferReturnTypes(MLIRContext *context,                     \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    (void)context;                                                             \
    return inferReduction(loc, getOperationName(), adaptor, ELEMENT_TYPE,      \
                          inferred);                                           \
  }
BRAZE_REDUCTION_INFERENCE(SumOp, Type())
BRAZE_REDUCTION_INFERENCE(MeanOp, Type())
BRAZE_REDUCTION_INFERENCE(MaxOp, Type())
BRAZE_REDUCTION_INFERENCE(MinOp, Type())
BRAZE_REDUCTION_INFERENCE(AnyOp, Type())
BRAZE_REDUCTION_INFERENCE(AllOp, Type())
BRAZE_REDUCTION_INFERENCE(ArgmaxOp, IntegerType::get(context, 64))
#undef BRAZE_REDUCTION_INFERENCE

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// Merges two sizes of one logical dim; fails when both are static and differ.
static FailureOr<int64_t> mergeDim(int64_t a, int64_t b) {
  if (ShapedType::isDynamic(a))
    return b;
  if (ShapedType::isDynamic(b) || a == b)
    return a;
  return failure();
}

/// Infers [..batch, M, N] from lhs [..batch, M, K] and rhs [..batch, K, N].
static FailureOr<SmallVector<int64_t>>
inferMatmulShape(const OpDiagnostic &diag, Value lhs, Value rhs,
                 int64_t rank, unsigned lhsNumber) {
  if (failed(requireRankedTensors(diag, {lhs, rhs})))
    return failure();
  RankedTensorType lhsType = tensorTypeOf(lhs), rhsType = tensorTypeOf(rhs);
  unsigned rhsNumber = lhsNumber + 1;
  for (auto [type, number] :
       {std::pair{lhsType, lhsNumber}, std::pair{rhsType, rhsNumber}})
    if (type.getRank() != rank)
      return diag.fail("operand #" + Twine(number) + " must have rank " +
                       Twine(rank) + ", got rank " + Twine(type.getRank()));
  if (failed(requireSameElementType(diag, lhs, lhsNumber, rhs, rhsNumber)))
    return failure();
  ArrayRef<int64_t> l = lhsType.getShape(), r = rhsType.getShape();
  SmallVector<int64_t> shape;
  for (int64_t b = 0; b < rank - 2; ++b) {
    FailureOr<int64_t> batch = mergeDim(l[b], r[b]);
    if (failed(batch))
      return diag.fail("batch dim " + Twine(b) + " is " + formatDim(l[b]) +
                       " in operand #" + Twine(lhsNumber) + " but " +
                       formatDim(r[b]) + " in operand #" + Twine(rhsNumber));
    shape.push_back(*batch);
  }
  if (failed(mergeDim(l[rank - 1], r[rank - 2])))
    return diag.fail("contraction dim mismatch: operand #" + Twine(lhsNumber) +
                     " has K = " + formatDim(l[rank - 1]) + " (dim " +
                     Twine(rank - 1) + ") but operand #" + Twine(rhsNumber) +
                     " has K = " + formatDim(r[rank - 2]) + " (dim " +
                     Twine(rank - 2) + ")");
  shape.push_back(l[rank - 2]);
  shape.push_back(r[rank - 1]);
  return shape;
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, getOperationName());
  FailureOr<SmallVector<int64_t>> shape =
      inferMatmulShape(diag, adaptor.getLhs(), adaptor.getRhs(), 2, 0);
  if (failed(shape))
    return failure();
  inferred.push_back(RankedTensorType::get(
      *shape, tensorTypeOf(adaptor.getLhs()).getElementType()));
  return success();
}

LogicalResult BmmOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, getOperationName());
  // Several batch dims: braze-fold-layouts keeps a head dim apart from the
  // batch where no stride merges them.
  auto lhsType = dyn_cast<RankedTensorType>(adaptor.getLhs().getType());
  int64_t rank = std::max<int64_t>(3, lhsType ? lhsType.getRank() : 3);
  FailureOr<SmallVector<int64_t>> shape =
      inferMatmulShape(diag, adaptor.getLhs(), adaptor.getRhs(), rank, 0);
  if (failed(shape))
    return failure();
  inferred.push_back(RankedTensorType::get(
      *shape, tensorTypeOf(adaptor.getLhs()).getElementType()));
  return success();
}

LogicalResult AddmmOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, getOperationName());
  FailureOr<SmallVector<int64_t>> shape =
      inferMatmulShape(diag, adaptor.getLhs(), adaptor.getRhs(), 2, 1);
  if (failed(shape))
    return failure();
  Value bias = adaptor.getBias();
  if (failed(requireRankedTensors(diag, bias)))
    return failure();
  if (failed(requireSameElementType(diag, adaptor.getLhs(), 1, bias, 0)))
    return failure();
  // The bias broadcasts *to* the product's shape: it may not widen it.
  ArrayRef<int64_t> biasShape = tensorTypeOf(bias).getShape();
  if (biasShape.size() > 2)
    return diag.fail("bias (operand #0) must have rank 0, 1 or 2, got rank " +
                     Twine(biasShape.size()));
  int64_t offset = 2 - static_cast<int64_t>(biasShape.size());
  for (auto [i, size] : llvm::enumerate(biasShape)) {
    int64_t target = (*shape)[i + offset];
    if (ShapedType::isDynamic(size) || size == 1)
      continue;
    if (ShapedType::isDynamic(target)) {
      (*shape)[i + offset] = size;
      continue;
    }
    if (size != target)
      return diag.fail("bias (operand #0) dim " + Twine(i) + " has size " +
                       Twine(size) + ", which does not broadcast to size " +
                       Twine(target) + " of the product");
  }
  inferred.push_back(RankedTensorType::get(
      *shape, tensorTypeOf(adaptor.getLhs()).getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

static int64_t countDynamic(ArrayRef<int64_t> shape) {
  return llvm::count_if(shape, ShapedType::isDynamic);
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getResult().getType();
  int64_t dynamicDims = countDynamic(result.getShape());
  int64_t sizes = getSizes().size();
  if (sizes != 0 && sizes != dynamicDims)
    return emitOpError("has ") << sizes << " size operand(s) but the result has "
                               << dynamicDims << " dynamic dim(s)";
  if (sizes == 0 && dynamicDims > 1)
    return emitOpError("result has ")
           << dynamicDims
           << " dynamic dims; give one index size per dynamic dim, in order "
              "(only a single dynamic dim is inferred from the element count)";
  if (!input.hasStaticShape())
    return success();
  int64_t inputCount = input.getNumElements();
  if (result.hasStaticShape()) {
    if (result.getNumElements() != inputCount)
      return emitOpError("changes the element count from ")
             << inputCount << " to " << result.getNumElements();
    return success();
  }
  if (sizes != 0)
    return success();
  int64_t knownProduct = 1;
  for (int64_t size : result.getShape())
    if (!ShapedType::isDynamic(size))
      knownProduct *= size;
  if (knownProduct == 0 ? inputCount != 0 : inputCount % knownProduct != 0)
    return emitOpError("cannot infer the dynamic dim: ")
           << inputCount << " elements are not a multiple of " << knownProduct;
  return success();
}

LogicalResult PermuteOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, getOperationName());
  if (failed(requireRankedTensors(diag, adaptor.getOperands())))
    return failure();
  RankedTensorType input = tensorTypeOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return diag.fail("permutation has " + Twine(perm.size()) +
                     " entries but the input has rank " +
                     Twine(input.getRank()));
  llvm::SmallBitVector seen(input.getRank());
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank())
      return diag.fail("permutation entry " + Twine(p) +
                       " is out of range for rank " + Twine(input.getRank()));
    if (seen.test(p))
      return diag.fail("permutation names dim " + Twine(p) + " twice");
    seen.set(p);
    shape.push_back(input.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

/// Whether result dim `i` of an expand needs an explicit size operand: it is
/// dynamic and no dynamic input dim sits under it to give the size.
static bool expandDimNeedsSize(RankedTensorType input, RankedTensorType result,
                               int64_t i) {
  if (!result.isDynamicDim(i))
    return false;
  int64_t j = i - (result.getRank() - input.getRank());
  return j < 0 || !input.isDynamicDim(j);
}

LogicalResult ExpandOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getResult().getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError("changes the element type from ")
           << input.getElementType() << " to " << result.getElementType();
  int64_t offset = result.getRank() - input.getRank();
  if (offset < 0)
    return emitOpError("cannot expand rank ")
           << input.getRank() << " to the smaller rank " << result.getRank();
  for (int64_t j = 0; j < input.getRank(); ++j) {
    int64_t from = input.getDimSize(j), to = result.getDimSize(j + offset);
    if (ShapedType::isDynamic(from) || from == 1 || from == to)
      continue;
    return emitOpError("input dim ")
           << j << " has size " << from << ", which cannot expand to "
           << formatDim(to) << " (result dim " << j + offset
           << "); only size-1 dims expand";
  }
  int64_t needed = 0;
  for (int64_t i = 0; i < result.getRank(); ++i)
    needed += expandDimNeedsSize(input, result, i);
  if (static_cast<int64_t>(getSizes().size()) != needed)
    return emitOpError("needs ")
           << needed
           << " size operand(s), one per dynamic result dim not over a "
              "dynamic input dim, but has "
           << getSizes().size();
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, getOperationName());
  if (failed(requireRankedTensors(diag, adaptor.getInput())))
    return failure();
  RankedTensorType input = tensorTypeOf(adaptor.getInput());
  int64_t dim = adaptor.getDim();
  ArrayRef<int64_t> bounds = adaptor.getStaticBounds();
  if (bounds.size() != 3)
    return diag.fail("needs 3 bounds (start, end, step), got " +
                     Twine(bounds.size()));
  int64_t operands = llvm::count_if(bounds, ShapedType::isDynamic);
  if (operands != static_cast<int64_t>(adaptor.getDynamicBounds().size()))
    return diag.fail("has " + Twine(adaptor.getDynamicBounds().size()) +
                     " bound operand(s) for " + Twine(operands) +
                     " symbolic bound(s)");
  if (dim < 0 || dim >= input.getRank())
    return diag.fail("dim " + Twine(dim) + " is out of range for rank " +
                     Twine(input.getRank()));
  auto known = [](int64_t bound) { return !ShapedType::isDynamic(bound); };
  int64_t start = bounds[0], end = bounds[1], step = bounds[2];
  if (known(step) && step < 1)
    return diag.fail("step must be at least 1, got " + Twine(step));
  if ((known(start) && start < 0) ||
      (known(start) && known(end) && end < start))
    return diag.fail("needs 0 <= start <= end, got start " +
                     formatDim(start) + " and end " + formatDim(end));
  SmallVector<int64_t> shape(input.getShape());
  int64_t size = shape[dim];
  if (known(start) && known(end) && end == start) {
    shape[dim] = 0;
  } else if (operands > 0) {
    shape[dim] = ShapedType::kDynamic;
  } else if (!ShapedType::isDynamic(size)) {
    int64_t stop = std::min(end, size);
    shape[dim] = stop <= start ? 0 : (stop - start + step - 1) / step;
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, getOperationName());
  ValueRange inputs = adaptor.getInputs();
  if (failed(requireRankedTensors(diag, inputs)))
    return failure();
  if (inputs.empty())
    return diag.fail("needs at least one input");
  RankedTensorType first = tensorTypeOf(inputs[0]);
  int64_t rank = first.getRank(), dim = adaptor.getDim();
  if (dim < 0 || dim >= rank)
    return diag.fail("dim " + Twine(dim) + " is out of range for rank " +
                     Twine(rank));
  SmallVector<int64_t> shape(first.getShape());
  for (auto [number, value] : llvm::enumerate(inputs)) {
    if (number == 0)
      continue;
    RankedTensorType type = tensorTypeOf(value);
    if (type.getRank() != rank)
      return diag.fail("operand #" + Twine(number) + " has rank " +
                       Twine(type.getRank()) + " but operand #0 has rank " +
                       Twine(rank));
    if (failed(requireSameElementType(diag, inputs[0], 0, value, number)))
      return failure();
    for (int64_t i = 0; i < rank; ++i) {
      int64_t size = type.getDimSize(i);
      if (i == dim) {
        shape[i] = ShapedType::isDynamic(shape[i]) || ShapedType::isDynamic(size)
                       ? ShapedType::kDynamic
                       : shape[i] + size;
        continue;
      }
      FailureOr<int64_t> merged = mergeDim(shape[i], size);
      if (failed(merged))
        return diag.fail("operand #" + Twine(number) + " dim " + Twine(i) +
                         " has size " + Twine(size) + " but earlier operands have " +
                         Twine(shape[i]) + " (only dim " + Twine(dim) +
                         " may differ)");
      shape[i] = *merged;
    }
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult TakeOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  OpDiagnostic diag(loc, getOperationName());
  if (failed(requireRankedTensors(diag, adaptor.getOperands())))
    return failure();
  RankedTensorType table = tensorTypeOf(adaptor.getTable());
  RankedTensorType indices = tensorTypeOf(adaptor.getIndices());
  int64_t dim = adaptor.getDim();
  if (dim < 0 || dim >= table.getRank())
    return diag.fail("dim " + Twine(dim) + " is out of range for rank " +
                     Twine(table.getRank()));
  SmallVector<int64_t> shape(table.getShape().take_front(dim));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, table.getShape().drop_front(dim + 1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Constants and parameters
//===----------------------------------------------------------------------===//

LogicalResult IotaOp::verify() {
  RankedTensorType type = getResult().getType();
  if (type.getRank() != 1)
    return emitOpError("result must be 1-D, got rank ") << type.getRank();
  bool dynamic = type.isDynamicDim(0);
  if (dynamic && !getSize())
    return emitOpError("has a dynamic length but no size operand");
  if (!dynamic && getSize())
    return emitOpError("has a static length ")
           << type.getDimSize(0) << " and a size operand; give one of them";
  // An operand replaces the constant; both would be ambiguous.
  if (getDynamicStart() && getStart().convertToDouble() != 0.0)
    return emitOpError("has a start operand and a nonzero start constant");
  if (getDynamicStep() && getStep().convertToDouble() != 1.0)
    return emitOpError("has a step operand and a step constant other than 1");
  return success();
}

LogicalResult ParameterOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty parameter name");
  return success();
}

//===----------------------------------------------------------------------===//
// Fusion groups
//===----------------------------------------------------------------------===//

LogicalResult GroupOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("has ")
           << getInputs().size() << " input(s) but its body takes "
           << body.getNumArguments() << " argument(s)";
  for (auto [number, pair] :
       llvm::enumerate(llvm::zip_equal(getInputs(), body.getArguments()))) {
    auto [input, argument] = pair;
    if (input.getType() != argument.getType())
      return emitOpError("input #")
             << number << " has type " << input.getType()
             << " but body argument #" << number << " has type "
             << argument.getType();
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().getTypes() << " but its results are "
           << getResultTypes();
  return success();
}

//===----------------------------------------------------------------------===//
// Refinement: every inferred op accepts a result that is more static than
// what inference gives.
//===----------------------------------------------------------------------===//

#define BRAZE_ACCEPT_REFINED_RESULTS(OP)                                       \
  bool OP::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {     \
    return isRefinementOf(inferred, actual);                                   \
  }
BRAZE_ACCEPT_REFINED_RESULTS(AddOp)
BRAZE_ACCEPT_REFINED_RESULTS(SubOp)
BRAZE_ACCEPT_REFINED_RESULTS(MulOp)
BRAZE_ACCEPT_REFINED_RESULTS(DivOp)
BRAZE_ACCEPT_REFINED_RESULTS(PowOp)
BRAZE_ACCEPT_REFINED_RESULTS(MaximumOp)
BRAZE_ACCEPT_REFINED_RESULTS(MinimumOp)
BRAZE_ACCEPT_REFINED_RESULTS(Atan2Op)
BRAZE_ACCEPT_REFINED_RESULTS(RemainderOp)
BRAZE_ACCEPT_REFINED_RESULTS(FmodOp)
BRAZE_ACCEPT_REFINED_RESULTS(AndOp)
BRAZE_ACCEPT_REFINED_RESULTS(OrOp)
BRAZE_ACCEPT_REFINED_RESULTS(XorOp)
BRAZE_ACCEPT_REFINED_RESULTS(EqOp)
BRAZE_ACCEPT_REFINED_RESULTS(NeOp)
BRAZE_ACCEPT_REFINED_RESULTS(LtOp)
BRAZE_ACCEPT_REFINED_RESULTS(LeOp)
BRAZE_ACCEPT_REFINED_RESULTS(GtOp)
BRAZE_ACCEPT_REFINED_RESULTS(GeOp)
BRAZE_ACCEPT_REFINED_RESULTS(AnyOp)
BRAZE_ACCEPT_REFINED_RESULTS(AllOp)
BRAZE_ACCEPT_REFINED_RESULTS(TakeOp)
BRAZE_ACCEPT_REFINED_RESULTS(WhereOp)
BRAZE_ACCEPT_REFINED_RESULTS(SumOp)
BRAZE_ACCEPT_REFINED_RESULTS(MeanOp)
BRAZE_ACCEPT_REFINED_RESULTS(MaxOp)
BRAZE_ACCEPT_REFINED_RESULTS(MinOp)
BRAZE_ACCEPT_REFINED_RESULTS(ArgmaxOp)
BRAZE_ACCEPT_REFINED_RESULTS(MatmulOp)
BRAZE_ACCEPT_REFINED_RESULTS(BmmOp)
BRAZE_ACCEPT_REFINED_RESULTS(AddmmOp)
BRAZE_ACCEPT_REFINED_RESULTS(PermuteOp)
BRAZE_ACCEPT_REFINED_RESULTS(SliceOp)
BRAZE_ACCEPT_REFINED_RESULTS(ConcatOp)
#undef BRAZE_ACCEPT_REFINED_RESULTS

#define GET_OP_CLASSES
#include "braze/BrazeOps.cpp.inc"
